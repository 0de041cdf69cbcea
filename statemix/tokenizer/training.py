"""Training a byte-level BPE vocabulary.

Training
--------
:func:`train` is classic BPE with incremental pair counting: a hash table of pair counts, a list of
occurrence positions per pair, and a max-heap of ``(count, pair)`` entries refreshed lazily (an entry
whose count went down is pushed again with the current count when it surfaces; increases push a new
entry once per merge step).  Each step merges the most frequent pair, ties broken by the smallest
``(left, right)``, applying it to all its occurrences from left to right (so ``encode`` of the
training data gives exactly the training's final token sequence).  Training stops after ``n_merges``
merges or when no pair occurs ``min_count`` times.  Training can start from a ``base`` vocabulary (it
then extends it) and can be restricted by ``split`` (a pre-split rule: some byte-class boundaries are
never merged across; encoding needs no pre-split, since such merges simply do not exist).

Units: sizes in bytes, speeds in MB/s = 10**6 bytes per second, memory in bytes per input byte.
"""
from __future__ import annotations

import numpy as np

from .._jit import kernel
from .tables import (BYTE_TOKENS, ID_BITS, MAX_MERGES, MAX_TOKEN_BYTES, MAX_TRAIN_BYTES, SPLIT_NONE,
                     _BYTE_CLASS, _grow, _hash, _split_table)
from .vocab import Vocabulary
from .bpe import _as_uint8, encode


# ----------------------------------------------------------------------------------------------------
# Training


@kernel
def _heap_push(heap, size, key):
    """Push ``key`` on the max-heap ``heap[:size]`` (capacity checked by the caller)."""
    i = size
    heap[i] = key
    while i > 0:
        parent = (i - 1) >> 1
        if heap[parent] >= heap[i]:
            break
        tmp = heap[parent]
        heap[parent] = heap[i]
        heap[i] = tmp
        i = parent
    return size + 1


@kernel
def _heap_pop(heap, size):
    """Remove the top of ``heap[:size]``; return it (the new size is ``size - 1``)."""
    top = heap[0]
    size -= 1
    heap[0] = heap[size]
    i = 0
    while True:
        l = 2 * i + 1
        if l >= size:
            break
        big = l
        if l + 1 < size and heap[l + 1] > heap[l]:
            big = l + 1
        if heap[i] >= heap[big]:
            break
        tmp = heap[big]
        heap[big] = heap[i]
        heap[i] = tmp
        i = big
    return top


PAIR_BITS = 2 * ID_BITS
PAIR_MASK = (1 << PAIR_BITS) - 1


# growable state of _train's pair table: counters in the int64 vector ``sz``
Z_NPAIRS, Z_PCAP, Z_HMASK, Z_NOCC, Z_OCAP, Z_NTOUCHED = range(6)


@kernel(allocates=True)
def _count_occurrence(key, at, pairs, occ, sz):
    """Count one occurrence of the pair ``key`` at position ``at``; return the (grown) arrays.

    ``pairs`` = (hkeys, hidx, pkey, pcount, phead, ptouched): the open-addressing table key -> pair
    index and, per pair, its count, the head of its occurrence list and whether it is queued in
    ``touched``.  ``occ`` = (opos, onext, touched): occurrence list nodes and the queue of pairs whose
    count rose in this step.  Arrays that fill up are replaced by larger copies.
    """
    hkeys, hidx, pkey, pcount, phead, ptouched = pairs
    opos, onext, touched = occ
    hmask = sz[Z_HMASK]
    npairs = sz[Z_NPAIRS]
    s = _hash(key, hmask)
    while hkeys[s] != -1 and hkeys[s] != key:
        s = (s + 1) & hmask
    if hkeys[s] == -1:
        if npairs == sz[Z_PCAP]:  # grow the pair arrays and the table
            pcap = 2 * sz[Z_PCAP]
            sz[Z_PCAP] = pcap
            pkey = _grow(pkey, pcap)
            pcount = _grow(pcount, pcap)
            phead = _grow(phead, pcap)
            ptouched = _grow(ptouched, pcap)
            hmask = 2 * hmask + 1
            sz[Z_HMASK] = hmask
            hkeys = np.full(hmask + 1, -1, dtype=np.int64)
            hidx = np.empty(hmask + 1, dtype=np.int32)
            for j in range(npairs):
                t = _hash(pkey[j], hmask)
                while hkeys[t] != -1:
                    t = (t + 1) & hmask
                hkeys[t] = pkey[j]
                hidx[t] = j
            s = _hash(key, hmask)
            while hkeys[s] != -1:
                s = (s + 1) & hmask
        hkeys[s] = key
        hidx[s] = npairs
        pkey[npairs] = key
        pcount[npairs] = 0
        phead[npairs] = -1
        sz[Z_NPAIRS] = npairs + 1
    pi = hidx[s]
    pcount[pi] += 1
    nocc = sz[Z_NOCC]
    if nocc == sz[Z_OCAP]:
        ocap = sz[Z_OCAP] + sz[Z_OCAP] // 2 + 64
        sz[Z_OCAP] = ocap
        opos = _grow(opos, ocap)
        onext = _grow(onext, ocap)
    opos[nocc] = at
    onext[nocc] = phead[pi]
    phead[pi] = nocc
    sz[Z_NOCC] = nocc + 1
    if ptouched[pi] == 0:
        ptouched[pi] = 1
        ntouched = sz[Z_NTOUCHED]
        if ntouched == touched.shape[0]:
            touched = _grow(touched, 2 * ntouched)
        touched[ntouched] = pi
        sz[Z_NTOUCHED] = ntouched + 1
    return (hkeys, hidx, pkey, pcount, phead, ptouched), (opos, onext, touched)


@kernel(allocates=True)
def _train(ids, lengths0, first0, last0, n_merges, min_count, allowed, max_len, merges, counts, stats):
    """Train up to ``n_merges`` merges on the token sequence ``ids`` (int32; modified in place).

    ``lengths0``, ``first0`` and ``last0`` give each existing token's byte length, first byte class
    and last byte class; new tokens get ids from ``len(lengths0)``.  ``merges`` (int32, n_merges x 2)
    receives the merges and ``counts`` (int64, n_merges) the pair count of each when it was chosen
    (non-increasing); returns how many were made.  ``stats[0]`` gets the peak working memory in bytes.
    """
    n = ids.shape[0]
    v0 = lengths0.shape[0]
    v = v0 + n_merges
    tlen = np.empty(v, dtype=np.int32)
    tfirst = np.empty(v, dtype=np.int32)
    tlast = np.empty(v, dtype=np.int32)
    tlen[:v0] = lengths0
    tfirst[:v0] = first0
    tlast[:v0] = last0
    nxt = np.empty(n, dtype=np.int32)
    prv = np.empty(n, dtype=np.int32)
    for i in range(n):
        nxt[i] = i + 1 if i + 1 < n else -1
        prv[i] = i - 1
    # pairs: open-addressing table key -> pair index; per pair: count, occurrence list head, touched
    hsize = 1 << 16
    while hsize < 2 * min(n, 1 << 22):
        hsize *= 2
    hkeys = np.full(hsize, -1, dtype=np.int64)
    hidx = np.empty(hsize, dtype=np.int32)
    pkey = np.empty(hsize // 2, dtype=np.int64)
    pcount = np.empty(hsize // 2, dtype=np.int32)
    phead = np.empty(hsize // 2, dtype=np.int32)
    ptouched = np.zeros(hsize // 2, dtype=np.int8)
    # occurrences: linked lists of positions
    opos = np.empty(n + 64, dtype=np.int32)
    onext = np.empty(n + 64, dtype=np.int32)
    # heap of count << PAIR_BITS | (PAIR_MASK - key)
    heap = np.empty(1024, dtype=np.int64)
    hn = 0
    touched = np.empty(1024, dtype=np.int32)
    sz = np.zeros(6, dtype=np.int64)
    sz[Z_PCAP] = hsize // 2
    sz[Z_HMASK] = hsize - 1
    sz[Z_OCAP] = n + 64
    pairs = (hkeys, hidx, pkey, pcount, phead, ptouched)
    occ = (opos, onext, touched)
    scratch = np.empty(64, dtype=np.int32)
    peak = np.int64(0)
    made = 0
    pair_mask = np.int64(PAIR_MASK)

    # initial counts: every allowed adjacent pair, occurrences in position order
    for step in range(n_merges + 1):
        if step == 0:
            # counting pass over the initial sequence; pairs enter `touched` and are pushed below
            lo_i = n - 2
        else:
            lo_i = -1
        # (the initial pass runs from right to left so that push-front lists end up ascending)
        for i in range(lo_i, -1, -1):
            a = ids[i]
            b = ids[i + 1]
            if allowed[tlast[a] * 4 + tfirst[b]] == 0 or tlen[a] + tlen[b] > max_len:
                continue
            key = (np.int64(a) << np.int64(ID_BITS)) | np.int64(b)
            pairs, occ = _count_occurrence(key, i, pairs, occ, sz)
            hkeys, hidx, pkey, pcount, phead, ptouched = pairs
            opos, onext, touched = occ
            hmask = sz[Z_HMASK]
        # push the pairs whose count rose in the last step (once each, with the current count)
        for j in range(sz[Z_NTOUCHED]):
            pi = touched[j]
            ptouched[pi] = 0
            if pcount[pi] >= min_count:
                if hn == heap.shape[0]:
                    h2 = np.empty(2 * hn, dtype=np.int64)
                    h2[:hn] = heap[:hn]
                    heap = h2
                hn = _heap_push(heap, hn, (np.int64(pcount[pi]) << np.int64(PAIR_BITS))
                                | (pair_mask - pkey[pi]))
        sz[Z_NTOUCHED] = 0
        hmask = sz[Z_HMASK]
        mem = (np.int64(12) * n + 8 * sz[Z_OCAP] + 12 * (hmask + 1) + 17 * sz[Z_PCAP] + 8 * heap.shape[0]
               + 4 * touched.shape[0] + 4 * scratch.shape[0] + 12 * v)
        if mem > peak:
            peak = mem
        if step == n_merges:
            break
        # best pair: lazily refreshed heap
        best = -1
        while hn > 0:
            top = _heap_pop(heap, hn)
            hn -= 1
            cnt = top >> np.int64(PAIR_BITS)
            key = pair_mask - (top & pair_mask)
            s = _hash(key, hmask)
            while hkeys[s] != key:
                s = (s + 1) & hmask
            pi = hidx[s]
            cur = np.int64(pcount[pi])
            if cur == cnt:
                best = pi
                break
            if cur < cnt and cur >= min_count:
                hn = _heap_push(heap, hn, (cur << np.int64(PAIR_BITS)) | (pair_mask - key))
        if best < 0:
            break
        key = pkey[best]
        a = np.int32(key >> np.int64(ID_BITS))
        b = np.int32(key & np.int64((1 << ID_BITS) - 1))
        c = np.int32(v0 + made)
        merges[made, 0] = a
        merges[made, 1] = b
        counts[made] = pcount[best]
        made += 1
        tlen[c] = tlen[a] + tlen[b]
        tfirst[c] = tfirst[a]
        tlast[c] = tlast[b]
        # gather valid occurrences (ascending when a == b, where the order matters)
        count = 0
        e = phead[best]
        while e != -1:
            p = opos[e]
            if ids[p] == a and nxt[p] != -1 and ids[nxt[p]] == b:
                if count == scratch.shape[0]:
                    scratch = _grow(scratch, 2 * count)
                scratch[count] = p
                count += 1
            e = onext[e]
        phead[best] = -1
        if a == b and count > 1:
            scratch[:count] = np.sort(scratch[:count])
        for j in range(count):
            p = scratch[j]
            q = nxt[p]
            if ids[p] != a or q == -1 or ids[q] != b:
                continue
            x = prv[p]
            y = nxt[q]
            pcount[best] -= 1
            # the pairs (x, a) and (b, y) disappear
            for side in range(2):
                if side == 0:
                    if x == -1:
                        continue
                    k2 = (np.int64(ids[x]) << np.int64(ID_BITS)) | np.int64(a)
                else:
                    if y == -1:
                        continue
                    k2 = (np.int64(b) << np.int64(ID_BITS)) | np.int64(ids[y])
                s = _hash(k2, hmask)
                while hkeys[s] != -1 and hkeys[s] != k2:
                    s = (s + 1) & hmask
                if hkeys[s] == k2:
                    pcount[hidx[s]] -= 1
            ids[p] = c
            ids[q] = -1
            nxt[p] = y
            if y != -1:
                prv[y] = p
            # the pairs (x, c) and (c, y) appear
            for side in range(2):
                if side == 0:
                    if x == -1:
                        continue
                    l2 = ids[x]
                    r2 = c
                    at = x
                else:
                    if y == -1:
                        continue
                    l2 = c
                    r2 = ids[y]
                    at = p
                if allowed[tlast[l2] * 4 + tfirst[r2]] == 0 or tlen[l2] + tlen[r2] > max_len:
                    continue
                k2 = (np.int64(l2) << np.int64(ID_BITS)) | np.int64(r2)
                pairs, occ = _count_occurrence(k2, at, pairs, occ, sz)
                hkeys, hidx, pkey, pcount, phead, ptouched = pairs
                opos, onext, touched = occ
                hmask = sz[Z_HMASK]
    stats[0] = peak
    return made


def canonical_order(merges: np.ndarray, counts: np.ndarray, first_id: int) -> np.ndarray:
    """Reorder freshly trained merges so that their list codes compactly; return the new list.

    ``merges`` (int, k x 2) are merges making tokens ``first_id..first_id + k - 1`` in training
    order, ``counts`` their (non-increasing) pair counts.  Merges are cut into groups of counts
    within a factor of sqrt(2) (the same ``bit_length(count**2)``); a merge that uses a token made in
    its own group moves to the next group; each group is then sorted by (left, right) with the new ids
    of its operands, and its tokens take their new ids in that order.  Priorities change only between
    merges of similar counts, which changed the tokens of enwik8_1M by under 0.2%.
    """
    k = merges.shape[0]
    new_id = np.arange(first_id + k, dtype=np.int64)  # old id -> new id (identity below first_id)
    out = np.empty((k, 2), dtype=np.int32)
    buckets = [int(c) * int(c) for c in counts]
    buckets = [b.bit_length() for b in buckets]
    placed = 0
    i = 0
    pending: list[int] = []
    while i < k or pending:
        candidates = pending
        pending = []
        if i < k:
            bucket = buckets[i]
            while i < k and buckets[i] == bucket:
                candidates.append(i)
                i += 1
        made_here: set[int] = set()
        members = []
        for r in sorted(candidates):
            a, b = int(merges[r, 0]), int(merges[r, 1])
            if a in made_here or b in made_here:
                pending.append(r)
            else:
                members.append((int(new_id[a]), int(new_id[b]), r))
            made_here.add(first_id + r)
        members.sort()
        for a, b, r in members:
            new_id[first_id + r] = first_id + placed
            out[placed] = (a, b)
            placed += 1
    return out


def train(data, n_merges: int, *, min_count: int = 2, base: Vocabulary | None = None,
          split: int = SPLIT_NONE, canonical: bool = True, stats: dict | None = None) -> Vocabulary:
    """Learn up to ``n_merges`` merges from ``data`` (bytes-like), extending ``base`` if given.

    Stops early when no pair of adjacent tokens occurs ``min_count`` times.  ``split`` restricts merges
    across byte-class boundaries (see :data:`SPLIT_WORDS`).  With ``canonical`` (the default) the new
    merges are put in :func:`canonical_order`, which serializes about 25% smaller; without it they stay
    in plain BPE order (most frequent first).  The result depends only on the arguments.
    ``stats``, if given, receives ``peak_bytes`` (working memory of the training kernel) and
    ``counts`` (int64: how often each new merge's pair occurred when it was chosen; non-increasing).
    """
    raw = _as_uint8(data)
    if raw.shape[0] > MAX_TRAIN_BYTES:
        raise ValueError(f"training input longer than {MAX_TRAIN_BYTES} bytes")
    if min_count < 2:
        raise ValueError("min_count must be at least 2")
    base_merges = base.merges if base is not None else np.zeros((0, 2), dtype=np.int32)
    v0 = BYTE_TOKENS + base_merges.shape[0]
    n_merges = max(0, min(int(n_merges), MAX_MERGES - base_merges.shape[0]))
    if base is not None:
        ids = encode(base, raw, block_size=None)
        lengths0 = base.token_lengths().copy()
        offsets, table = base._get_tables()[6:8]
        first0 = _BYTE_CLASS[table[offsets[:-1]]]
        last0 = _BYTE_CLASS[table[offsets[1:] - 1]]
    else:
        ids = raw.astype(np.int32)
        lengths0 = np.ones(256, dtype=np.int32)
        first0 = last0 = _BYTE_CLASS
    merges = np.zeros((n_merges, 2), dtype=np.int32)
    counts = np.zeros(n_merges, dtype=np.int64)
    peak = np.zeros(1, dtype=np.int64)
    made = _train(ids, lengths0, np.ascontiguousarray(first0, dtype=np.int32),
                  np.ascontiguousarray(last0, dtype=np.int32), n_merges, min_count,
                  _split_table(split), MAX_TOKEN_BYTES, merges, counts, peak)
    if stats is not None:
        stats["peak_bytes"] = int(peak[0])
        stats["counts"] = counts[:made].copy()
    new = merges[:made]
    if canonical:
        new = canonical_order(new, counts[:made], v0)
    return Vocabulary(np.concatenate([base_merges, new]), base=v0 - BYTE_TOKENS)


def default_merges(size: int) -> int:
    """The merge count the tokenizer study recommends for a per-input vocabulary of ``size`` bytes.

    About one merge per KiB of input, between 256 and 4,096 (with ``split=SPLIT_WORDS``); see
    bench/RESULTS.md for the measurements behind it.
    """
    return max(256, min(4096, size // 1024))
