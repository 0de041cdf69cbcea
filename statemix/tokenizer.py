"""Byte-level BPE: training, encoding, decoding and a compact vocabulary format.

Everything here is integer arithmetic, so every result is the same on every machine and at every
thread count.

Vocabulary
----------
Token ids ``0..255`` are the 256 byte values, so every byte string has an encoding.  A vocabulary adds
an ordered list of ``m`` merges; merge ``r`` (its *rank*, ``0 <= r < m``) joins the adjacent tokens
``(left[r], right[r])`` into the new token ``256 + r``, with ``left[r], right[r] < 256 + r``.  No pair
appears twice, and no token is longer than :data:`MAX_TOKEN_BYTES` bytes.

Encoding ("merge lowest rank first")
------------------------------------
Start from one token per byte.  While some adjacent pair of tokens has a merge, apply the merge of
lowest rank; when that pair occurs more than once, the leftmost occurrence first.  Because a merge
only creates pairs of higher rank (they contain the new, larger id), this equals: for ``r = 0..m-1``,
replace every occurrence of ``(left[r], right[r])`` from left to right.  The kernel runs exactly that
with a bucket queue: one bucket of positions per rank, filled for byte pairs by a counting sort over
the input and, for pairs containing a merged token, as merges create them.  A bucket entry is checked
when its rank comes up (the pair at a position never returns once it changed, so a stale entry is
simply skipped); positions of a same-token pair ``(a, a)`` are sorted first, since there overlapping
occurrences make the order matter.  Cost: ``O(n + m)`` plus that sorting; working memory about
16-24 bytes per input byte (``stats`` of :func:`encode` reports it).  ``block_size`` (default
:data:`BLOCK_SIZE`, 1 MiB) encodes the input in independent blocks (no token crosses a block
boundary), which bounds memory for any input length and lets a caller stream.

Decoding concatenates the tokens' bytes (a flat table built once per vocabulary).

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

Serialized vocabulary (:meth:`Vocabulary.to_bytes`), byte by byte
-----------------------------------------------------------------
::

    format          1 byte    1
    base merges     varint    merges of the base vocabulary this one extends (0: none)
    new merges      varint    m - base merges
    code length     varint    bytes of the code word below
    code word       bytes     the new merges, coded with statemix.coder's range coder (below)
    CRC32           4 bytes   zlib CRC32 of the vocabulary's merge list (all m merges, as int32
                              little-endian left, right pairs), little-endian

varint is unsigned LEB128 (7 bits per byte, least significant group first, at most 5 bytes).  The
base vocabulary itself is not stored: the reader passes it (e.g. the shipped general vocabulary).

The code word holds the new merges as a sequence of *groups*.  A group is a run of merges whose
``(left, right)`` pairs strictly increase (compared left first) and whose ids are all below
``256 + s``, where ``s`` is the rank of the group's first merge (so a group uses only tokens made
before it).  The writer cuts the list greedily into the longest such runs; :func:`train` puts its
merges in :func:`canonical_order`, which makes the groups long (one per half-octave of pair counts).
Coding a sorted group needs only small differences, which is where the saving comes from.  Per group:

- its size ``k >= 1``: gamma (below), context "group size";
- for each merge, ``left - previous left`` (``previous left`` = 0 at a group's start) plus 1: gamma,
  context "first of its group" or "later";
- ``right``: if ``left`` equals the previous merge's left (not for a group's first merge),
  ``right - previous right`` (>= 1): gamma, context "step"; otherwise 1 adaptive decision "merged
  token?" (context: is ``left`` a merged token), then either the byte in a binary tree of 255
  adaptive nodes, most significant bit first (one tree per byte class of the left token's last byte:
  letter or byte >= 128, digit, space, other), or ``right - 255`` as a gamma, context "token".

*gamma* codes ``v >= 1`` with bit length ``k`` (1..20) as ``k - 1`` ones and a zero, each an adaptive
decision (one model per position), then the ``k - 1`` bits of ``v`` below its leading 1, most
significant first: the first two adaptive (one model per ``k`` and bits so far), the rest at
probability exactly 1/2.  Every adaptive decision is a probability ``p`` (P(1) in units of 2**-16,
starting at 1/2, clamped to [1, 65535] when coding) and a count ``n``; after coding bit ``y``:
``p += (y * 2**16 - p) * DT[n] >> 16`` with ``DT[n] = floor(2**16 / (n + 1.5))`` and ``n`` capped at
60 (a running average, then a fixed rate).

The reader decodes, checks the merge list (ids in range, no repeated pair, tokens at most
:data:`MAX_TOKEN_BYTES` bytes), the CRC32, and that serializing the result gives back exactly the
input (so every accepted input is canonical); anything else raises ValueError.  Measured on
enwik8_1M with ``split=SPLIT_WORDS``: 1.45 bytes per merge at 256 merges, 1.46 at 1,024, 1.54 at
4,096, 1.63 at 16,384 (plain BPE order: 1.94-2.09); an empty list takes 8 bytes.

Units: sizes in bytes, speeds in MB/s = 10**6 bytes per second, memory in bytes per input byte.
"""

from __future__ import annotations

import struct
import zlib
from dataclasses import dataclass, field

import numpy as np

from ._jit import kernel
from ._counter import counter_step, dt_table
from ._varint import encode_varint, read_varint
from .coder import dec_bit, dec_init, enc_bit, enc_finish, enc_init, new_state

__all__ = [
    "BLOCK_SIZE", "MAX_MERGES", "MAX_TOKEN_BYTES", "SPLIT_NONE", "SPLIT_WORDS", "Vocabulary",
    "canonical_order", "decode", "default_merges", "encode", "train",
]

#: byte tokens: ids 0..255
BYTE_TOKENS = 256
#: ids are below 2**ID_BITS (pair keys pack two ids in 2 * ID_BITS bits)
ID_BITS = 18
#: largest number of merges a vocabulary may hold
MAX_MERGES = (1 << ID_BITS) - BYTE_TOKENS
#: longest token, in bytes (bounds the decode table at 64 MiB for the largest vocabulary)
MAX_TOKEN_BYTES = 256
#: largest training input, in bytes (heap keys keep counts in 64 - 2 * ID_BITS - 1 bits)
MAX_TRAIN_BYTES = 1 << 26
#: default block of :func:`encode`, in bytes: tokens never cross a multiple of it
BLOCK_SIZE = 1 << 20
FORMAT = 1

#: pre-split rules for :func:`train`: 0 none; 1 words (see :func:`_split_table`)
SPLIT_NONE, SPLIT_WORDS = 0, 1


def _byte_classes() -> np.ndarray:
    """Return the class of each byte: 0 letter (ASCII letters, bytes >= 128), 1 digit, 2 space,
    3 other (punctuation, controls, newline)."""
    classes = np.full(256, 3, dtype=np.int32)
    for b in range(256):
        c = chr(b)
        if b >= 128 or c.isascii() and c.isalpha():
            classes[b] = 0
        elif c.isdigit():
            classes[b] = 1
        elif c == " ":
            classes[b] = 2
    return classes


_BYTE_CLASS = _byte_classes()


def _split_table(rule: int) -> np.ndarray:
    """Return allowed[last class of left * 4 + first class of right] (1: may merge across)."""
    allowed = np.ones(16, dtype=np.int32)
    if rule == SPLIT_WORDS:
        # Like GPT-2's pre-split: letters join letters, digits digits, a space joins a following
        # letter or digit (" word"), punctuation joins punctuation; nothing else.
        allowed[:] = 0
        for c in range(4):
            allowed[c * 4 + c] = 1
        allowed[2 * 4 + 0] = 1
        allowed[2 * 4 + 1] = 1
    elif rule != SPLIT_NONE:
        raise ValueError(f"unknown split rule {rule}")
    return allowed


# ----------------------------------------------------------------------------------------------------
# Shared helpers


@kernel
def _hash(key, mask):
    """Slot of a 36-bit pair key in an open-addressing table of ``mask + 1`` slots."""
    # unsigned arithmetic: wraps modulo 2**64 by definition (signed overflow would be undefined)
    h = (np.uint64(key) * np.uint64(0x9E3779B97F4A7C15)) >> np.uint64(29)
    return np.int64(h & np.uint64(mask))


@kernel
def _grow(arr, size):
    """A copy of ``arr`` enlarged to ``size`` entries (the new ones 0)."""
    out = np.zeros(size, dtype=arr.dtype)
    out[: arr.shape[0]] = arr
    return out


@kernel
def _rank_table(left, right):
    """Return (keys, ranks, byte_rank): a hash table pair key -> rank and a dense byte-pair table."""
    m = left.shape[0]
    size = 16
    while size < 2 * m + 2:
        size *= 2
    mask = np.int64(size - 1)
    keys = np.full(size, -1, dtype=np.int64)
    ranks = np.full(size, -1, dtype=np.int32)
    byte_rank = np.full(65536, -1, dtype=np.int32)
    for r in range(m):
        a = np.int64(left[r])
        b = np.int64(right[r])
        key = (a << np.int64(ID_BITS)) | b
        s = _hash(key, mask)
        while keys[s] != -1:
            s = (s + 1) & mask
        keys[s] = key
        ranks[s] = r
        if a < 256 and b < 256:
            byte_rank[a * 256 + b] = r
    return keys, ranks, byte_rank


@kernel
def _lookup(keys, ranks, a, b):
    """Rank of the merge (a, b), or -1."""
    mask = np.int64(keys.shape[0] - 1)
    key = (np.int64(a) << np.int64(ID_BITS)) | np.int64(b)
    s = _hash(key, mask)
    while True:
        k = keys[s]
        if k == key:
            return ranks[s]
        if k == -1:
            return np.int32(-1)
        s = (s + 1) & mask


@kernel
def _token_table(left, right):
    """Return (lengths int32[V], offsets int64[V + 1], bytes uint8[...]) of every token."""
    m = left.shape[0]
    v = 256 + m
    lengths = np.empty(v, dtype=np.int32)
    offsets = np.empty(v + 1, dtype=np.int64)
    for i in range(256):
        lengths[i] = 1
        offsets[i] = i
    offsets[256] = 256
    for r in range(m):
        lengths[256 + r] = lengths[left[r]] + lengths[right[r]]
        offsets[257 + r] = offsets[256 + r] + lengths[256 + r]
    table = np.empty(offsets[v], dtype=np.uint8)
    for i in range(256):
        table[i] = i
    for r in range(m):
        o = offsets[256 + r]
        a = left[r]
        b = right[r]
        la = offsets[a + 1] - offsets[a]
        table[o : o + la] = table[offsets[a] : offsets[a + 1]]
        table[o + la : o + la + offsets[b + 1] - offsets[b]] = table[offsets[b] : offsets[b + 1]]
    return lengths, offsets, table


@kernel
def _check_merges(left, right, max_len):
    """Return -1 if the merge list is valid, else the rank of the first bad merge."""
    m = left.shape[0]
    lengths = np.ones(256 + m, dtype=np.int64)
    size = 16
    while size < 2 * m + 2:
        size *= 2
    keys = np.full(size, -1, dtype=np.int64)
    mask = np.int64(size - 1)
    for r in range(m):
        a = left[r]
        b = right[r]
        if a < 0 or b < 0 or a >= 256 + r or b >= 256 + r:
            return r
        lengths[256 + r] = lengths[a] + lengths[b]
        if lengths[256 + r] > max_len:
            return r
        key = (np.int64(a) << np.int64(ID_BITS)) | np.int64(b)
        s = _hash(key, mask)
        while keys[s] != -1:
            if keys[s] == key:
                return r
            s = (s + 1) & mask
        keys[s] = key
    return -1


# ----------------------------------------------------------------------------------------------------
# Encoding


@kernel
def _encode_block(data, left, right, lengths, keys, ranks, byte_rank, out, stats):
    """Encode ``data`` (uint8) into ``out`` (int32, len >= len(data)); return the token count.

    ``stats[0]`` receives the peak bytes of working memory this call allocated (max with its value).
    """
    n = data.shape[0]
    m = left.shape[0]
    if n == 0:
        return 0
    tok = np.empty(n, dtype=np.int32)
    prv = np.empty(n, dtype=np.int32)
    for i in range(n):
        tok[i] = data[i]
        prv[i] = i - 1
    # Byte-pair buckets by counting sort: positions of rank r are init_pos[start[r]:start[r + 1]],
    # ascending.
    start = np.zeros(m + 1, dtype=np.int32)
    for i in range(n - 1):
        r = byte_rank[np.int64(data[i]) * 256 + np.int64(data[i + 1])]
        if r >= 0:
            start[r + 1] += 1
    for r in range(m):
        start[r + 1] += start[r]
    total_init = start[m]
    init_pos = np.empty(max(total_init, 1), dtype=np.int32)
    fill = start[:m].copy()
    for i in range(n - 1):
        r = byte_rank[np.int64(data[i]) * 256 + np.int64(data[i + 1])]
        if r >= 0:
            init_pos[fill[r]] = i
            fill[r] += 1
    # Buckets of pairs that contain a merged token: linked lists in a growable pool.
    head = np.full(m, -1, dtype=np.int32)
    capacity = n // 4 + 64
    pool_pos = np.empty(capacity, dtype=np.int32)
    pool_next = np.empty(capacity, dtype=np.int32)
    used = 0
    scratch = np.empty(64, dtype=np.int32)
    peak = 8 * n + 8 * (m + 1) + 4 * total_init + 4 * m
    for r in range(m):
        a = left[r]
        b = right[r]
        c = 256 + r
        la = lengths[a]
        if a < 256 and b < 256:
            lo = start[r]
            hi = start[r + 1]
            count = hi - lo
        else:
            # gather this rank's dynamic positions into scratch
            count = 0
            e = head[r]
            while e != -1:
                if count == scratch.shape[0]:
                    scratch = _grow(scratch, 2 * count)
                scratch[count] = pool_pos[e]
                count += 1
                e = pool_next[e]
            if a == b and count > 1:
                scratch[:count] = np.sort(scratch[:count])
            lo = 0
            hi = count
        for j in range(lo, hi):
            if a < 256 and b < 256:
                p = init_pos[j]
            else:
                p = scratch[j]
            if tok[p] != a:
                continue
            q = p + la
            if q >= n or tok[q] != b:
                continue
            # merge (a, b) at p
            tok[p] = c
            tok[q] = -1
            y = q + lengths[b]
            x = prv[p]
            if y < n:
                prv[y] = p
                r2 = _lookup(keys, ranks, c, tok[y])
                if r2 >= 0:
                    if used == capacity:
                        capacity = capacity + capacity // 2 + 64
                        pool_pos = _grow(pool_pos, capacity)
                        pool_next = _grow(pool_next, capacity)
                    pool_pos[used] = p
                    pool_next[used] = head[r2]
                    head[r2] = used
                    used += 1
            if x >= 0:
                r1 = _lookup(keys, ranks, tok[x], c)
                if r1 >= 0:
                    if used == capacity:
                        capacity = capacity + capacity // 2 + 64
                        pool_pos = _grow(pool_pos, capacity)
                        pool_next = _grow(pool_next, capacity)
                    pool_pos[used] = x
                    pool_next[used] = head[r1]
                    head[r1] = used
                    used += 1
    peak += 8 * capacity + 4 * scratch.shape[0]
    if peak > stats[0]:
        stats[0] = peak
    k = 0
    p = 0
    while p < n:
        t = tok[p]
        out[k] = t
        k += 1
        p += lengths[t]
    return k


# ----------------------------------------------------------------------------------------------------
# Decoding


@kernel
def _decode(ids, offsets, table):
    total = np.int64(0)
    for i in range(ids.shape[0]):
        t = ids[i]
        total += offsets[t + 1] - offsets[t]
    out = np.empty(total, dtype=np.uint8)
    pos = np.int64(0)
    for i in range(ids.shape[0]):
        t = ids[i]
        o = offsets[t]
        length = offsets[t + 1] - o
        if length == 1:
            out[pos] = table[o]
        else:
            for j in range(length):
                out[pos + j] = table[o + j]
        pos += length
    return out


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


@kernel
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


@kernel
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


# ----------------------------------------------------------------------------------------------------
# Python layer


@dataclass(eq=False)
class Vocabulary:
    """The 256 byte tokens plus ``merges`` (int32, m x 2): merge ``r`` makes token ``256 + r``.

    ``base`` is the number of leading merges that come from a base vocabulary (they are not
    serialized by :meth:`to_bytes`).  Build one with :func:`train` or :meth:`from_bytes`; a merge list
    given directly is checked (ValueError if invalid).
    """

    merges: np.ndarray
    base: int = 0
    _tables: tuple | None = field(default=None, repr=False)

    def __post_init__(self):
        merges = np.ascontiguousarray(np.asarray(self.merges, dtype=np.int64).reshape(-1, 2))
        if merges.shape[0] > MAX_MERGES:
            raise ValueError(f"too many merges: {merges.shape[0]} > {MAX_MERGES}")
        if merges.size and (merges.min() < 0 or merges.max() >= 256 + merges.shape[0]):
            raise ValueError("merge id out of range")
        merges = merges.astype(np.int32)
        bad = _check_merges(merges[:, 0].copy(), merges[:, 1].copy(), MAX_TOKEN_BYTES)
        if bad >= 0:
            raise ValueError(f"invalid merge at rank {bad} (id out of range, repeated pair or token "
                             f"longer than {MAX_TOKEN_BYTES} bytes)")
        if not 0 <= self.base <= merges.shape[0]:
            raise ValueError("base out of range")
        merges.setflags(write=False)
        self.merges = merges

    @property
    def n_merges(self) -> int:
        return int(self.merges.shape[0])

    @property
    def size(self) -> int:
        """Number of token ids: 256 + merges."""
        return BYTE_TOKENS + self.n_merges

    def __len__(self) -> int:
        return self.size

    def __eq__(self, other) -> bool:
        return (isinstance(other, Vocabulary) and self.base == other.base
                and np.array_equal(self.merges, other.merges))

    def _get_tables(self):
        if self._tables is None:
            left = np.ascontiguousarray(self.merges[:, 0])
            right = np.ascontiguousarray(self.merges[:, 1])
            keys, ranks, byte_rank = _rank_table(left, right)
            lengths, offsets, table = _token_table(left, right)
            self._tables = (left, right, keys, ranks, byte_rank, lengths, offsets, table)
        return self._tables

    def token_lengths(self) -> np.ndarray:
        """Byte length of every token (int32, ``size`` entries)."""
        return self._get_tables()[5]

    def token_bytes(self, token: int) -> bytes:
        """The bytes of one token."""
        offsets, table = self._get_tables()[6:8]
        if not 0 <= token < self.size:
            raise ValueError(f"token id {token} out of range")
        return table[offsets[token] : offsets[token + 1]].tobytes()

    def prefix(self, n_merges: int) -> "Vocabulary":
        """The vocabulary made of the first ``n_merges`` merges (a valid vocabulary by construction)."""
        n_merges = min(n_merges, self.n_merges)
        return Vocabulary(self.merges[:n_merges], base=min(self.base, n_merges))

    def crc(self) -> int:
        """CRC32 of the merge list (int32 little-endian pairs in rank order)."""
        return zlib.crc32(self.merges.astype("<i4").tobytes())

    def to_bytes(self) -> bytes:
        """Serialize the merges after ``base`` (format in the module docstring)."""
        return _serialize(self)

    @classmethod
    def from_bytes(cls, raw, base: "Vocabulary | None" = None) -> "Vocabulary":
        """Read a serialized vocabulary; ``base`` must be the vocabulary it extends, if any.

        Raises ValueError on anything malformed (never another exception for bad input).
        """
        return _deserialize(bytes(raw), base)


def _as_uint8(data) -> np.ndarray:
    if isinstance(data, np.ndarray):
        return np.ascontiguousarray(data, dtype=np.uint8).reshape(-1)
    return np.frombuffer(memoryview(data).cast("B"), dtype=np.uint8)


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


def encode(vocab: Vocabulary, data, *, block_size: int | None = BLOCK_SIZE,
           stats: dict | None = None) -> np.ndarray:
    """Return the token ids of ``data`` (int32): BPE, lowest rank first, leftmost first.

    With ``block_size`` the input is encoded in independent blocks of that many bytes (tokens never
    cross a block boundary; working memory stays bounded); ``None`` encodes it as one sequence.
    ``stats``, if given, receives ``peak_bytes`` (largest working memory of one block, in bytes).
    """
    raw = _as_uint8(data)
    n = raw.shape[0]
    left, right, keys, ranks, byte_rank, lengths, _, _ = vocab._get_tables()
    if block_size is None or block_size >= n:
        block_size = max(n, 1)
    if block_size < 1:
        raise ValueError("block_size must be positive")
    out = np.empty(n, dtype=np.int32)
    peak = np.zeros(1, dtype=np.int64)
    k = 0
    for start in range(0, n, block_size):
        block = raw[start : start + block_size]
        k += _encode_block(block, left, right, lengths, keys, ranks, byte_rank, out[k:], peak)
    if stats is not None:
        stats["peak_bytes"] = int(peak[0]) + 4 * min(block_size, n)
    return out[:k].copy()


def decode(vocab: Vocabulary, ids) -> bytes:
    """Return the bytes of the token ids ``ids`` (ValueError on an id outside the vocabulary)."""
    arr = np.ascontiguousarray(ids, dtype=np.int32).reshape(-1)
    if arr.size and (int(arr.min()) < 0 or int(arr.max()) >= vocab.size):
        raise ValueError("token id out of range")
    offsets, table = vocab._get_tables()[6:8]
    return _decode(arr, offsets, table).tobytes()


# ----------------------------------------------------------------------------------------------------
# Serialization: adaptive binary models over the range coder

# counter contexts (each a pair p (P(1) in units of 2**-16), n (updates so far, capped))
_GAMMA_MAX = 20  # largest bit length of a gamma-coded value (values < 2**19 occur)
_GAMMA_SIZE = _GAMMA_MAX + 1 + (_GAMMA_MAX + 1) * 4  # unary positions, then 4 nodes per length
_GROUP = 0  # gamma: group sizes
_LEFT = _GROUP + _GAMMA_SIZE  # 2 gammas: left - previous left, first merge of a group / others
_STEP = _LEFT + 2 * _GAMMA_SIZE  # gamma: right - previous right - 1 (same left as before)
_TOKEN = _STEP + _GAMMA_SIZE  # gamma: right id - 255 (a merged token)
_KIND = _TOKEN + _GAMMA_SIZE  # 2: right is a byte or a merged token, after a byte / merged left
_TREE = _KIND + 2  # 4 trees of 256 nodes: right byte, by the left token's last byte class
_N_CONTEXTS = _TREE + 4 * 256
_COUNTER_LIMIT = 60
_ADAPTIVE_LOW = 2  # adaptive bits below a gamma code's leading 1


_RATE = dt_table(_COUNTER_LIMIT)  # the counter rule of statemix._counter, 16-bit p


@kernel
def _code_bit(mode, rc, buf, counters, rate, ctx, bit):
    """Code (mode 0) or decode (mode 1) one bit with the adaptive counter ``ctx``; return the bit."""
    p = counters[ctx, 0]
    p1 = p if p > 0 else np.int64(1)
    if p1 > 65535:
        p1 = np.int64(65535)
    if mode == 0:
        enc_bit(rc, buf, p1, bit)
    else:
        bit = dec_bit(rc, buf, p1)
    n = counters[ctx, 1]
    counters[ctx, 0] = counter_step(p, np.int64(bit) * 65536, rate[n])
    if n < rate.shape[0] - 1:
        counters[ctx, 1] = n + 1
    return bit


@kernel
def _code_gamma(mode, rc, buf, counters, rate, base, v):
    """Code (mode 0) or decode (mode 1) ``v >= 1`` in adaptive Elias-gamma form; return it, or -1
    if the decoded bit length exceeds _GAMMA_MAX."""
    k = 0
    if mode == 0:
        while (v >> k) > 0:
            k += 1
        for j in range(1, k + 1):
            _code_bit(mode, rc, buf, counters, rate, base + j, 1 if j < k else 0)
    else:
        k = 1
        while _code_bit(mode, rc, buf, counters, rate, base + k, 0) == 1:
            k += 1
            if k > _GAMMA_MAX:
                return np.int64(-1)
        v = np.int64(1)
    node = 1
    for i in range(k - 2, -1, -1):
        bit = (v >> i) & 1 if mode == 0 else np.int64(0)
        if k - 2 - i < _ADAPTIVE_LOW:
            bit = _code_bit(mode, rc, buf, counters, rate, base + _GAMMA_MAX + 1 + k * 4 + node, bit)
            node = 2 * node + bit
        elif mode == 0:
            enc_bit(rc, buf, np.int64(32768), bit)
        else:
            bit = dec_bit(rc, buf, np.int64(32768))
        if mode == 1:
            v = 2 * v + bit
    return v


@kernel
def _code_merges(mode, merges, first, tclass, rc, buf, rate):
    """Code merges[first:] (mode 0) or decode into them (mode 1); return -1, or the bad rank.

    ``tclass`` (int32, 256 + m) holds the byte class of each token's last byte; entries of decoded
    tokens are filled in here.  Groups: see the module docstring.
    """
    counters = np.zeros((_N_CONTEXTS, 2), dtype=np.int64)
    for i in range(_N_CONTEXTS):
        counters[i, 0] = 32768
    m = merges.shape[0]
    r = first
    while r < m:
        group_start = r
        limit = np.int64(256 + group_start)  # ids a merge of this group may use
        if mode == 0:  # the longest run with increasing (left, right) and ids below limit
            end = r + 1
            while (end < m and merges[end, 0] < limit and merges[end, 1] < limit
                   and (merges[end, 0] > merges[end - 1, 0] or (merges[end, 0] == merges[end - 1, 0]
                        and merges[end, 1] > merges[end - 1, 1]))):
                end += 1
            size = np.int64(end - r)
        else:
            size = np.int64(0)
        size = _code_gamma(mode, rc, buf, counters, rate, _GROUP, size)
        if size < 1 or r + size > m:
            return r
        prev_left = np.int64(0)
        prev_right = np.int64(-1)
        for j in range(size):
            left = np.int64(merges[r, 0]) if mode == 0 else np.int64(0)
            right = np.int64(merges[r, 1]) if mode == 0 else np.int64(0)
            d = _code_gamma(mode, rc, buf, counters, rate, _LEFT + (0 if j == 0 else _GAMMA_SIZE),
                            left - prev_left + 1)
            if d < 1:
                return r
            left = prev_left + d - 1
            if left >= limit:
                return r
            if j > 0 and left == prev_left:
                d = _code_gamma(mode, rc, buf, counters, rate, _STEP, right - prev_right)
                if d < 1:
                    return r
                right = prev_right + d
            else:
                is_token = _code_bit(mode, rc, buf, counters, rate,
                                     _KIND + (1 if left >= 256 else 0), 1 if right >= 256 else 0)
                if is_token == 0:
                    tree = _TREE + 256 * tclass[left]
                    node = 1
                    for i in range(7, -1, -1):
                        bit = _code_bit(mode, rc, buf, counters, rate, tree + node, (right >> i) & 1)
                        node = 2 * node + bit
                    right = np.int64(node - 256)
                else:
                    d = _code_gamma(mode, rc, buf, counters, rate, _TOKEN, right - 255)
                    if d < 1:
                        return r
                    right = d + 255
            if right >= limit:
                return r
            if mode == 1:
                merges[r, 0] = left
                merges[r, 1] = right
            tclass[256 + r] = tclass[right]
            prev_left = left
            prev_right = right
            r += 1
    return -1


def _read_varint(raw: bytes, pos: int) -> tuple[int, int]:
    return read_varint(raw, pos, 5, ValueError, "corrupt vocabulary")


def _last_classes(vocab_merges: np.ndarray, size: int) -> np.ndarray:
    tclass = np.empty(size, dtype=np.int32)
    tclass[:256] = _BYTE_CLASS
    for r in range(vocab_merges.shape[0]):
        tclass[256 + r] = tclass[vocab_merges[r, 1]]
    return tclass


def _serialize(vocab: Vocabulary) -> bytes:
    m = vocab.n_merges
    merges = vocab.merges.copy()
    tclass = _last_classes(merges, 256 + m)
    capacity = 4 * (m - vocab.base) + 64
    while True:
        rc = new_state()
        buf = np.zeros(capacity, dtype=np.uint8)
        enc_init(rc)
        _code_merges(0, merges, vocab.base, tclass.copy(), rc, buf, _RATE)
        length = enc_finish(rc, buf)
        if length <= capacity:
            break
        capacity = 2 * length + 64
    code = buf[:length].tobytes()
    return (bytes([FORMAT]) + encode_varint(vocab.base) + encode_varint(m - vocab.base) + encode_varint(len(code))
            + code + struct.pack("<I", vocab.crc()))


def _deserialize(raw: bytes, base: Vocabulary | None) -> Vocabulary:
    if not raw:
        raise ValueError("corrupt vocabulary: empty")
    if raw[0] != FORMAT:
        raise ValueError(f"unsupported vocabulary format {raw[0]}")
    n_base, pos = _read_varint(raw, 1)
    n_new, pos = _read_varint(raw, pos)
    length, pos = _read_varint(raw, pos)
    base_merges = base.merges if base is not None else np.zeros((0, 2), dtype=np.int32)
    if n_base != base_merges.shape[0]:
        raise ValueError(f"vocabulary extends a base of {n_base} merges, not the {base_merges.shape[0]} "
                         "given")
    if n_base + n_new > MAX_MERGES:
        raise ValueError("corrupt vocabulary: too many merges")
    if pos + length + 4 != len(raw):
        raise ValueError("corrupt vocabulary: wrong length")
    code = np.frombuffer(raw, dtype=np.uint8, count=length, offset=pos).copy()
    (crc,) = struct.unpack_from("<I", raw, pos + length)
    merges = np.zeros((n_base + n_new, 2), dtype=np.int32)
    merges[:n_base] = base_merges
    tclass = _last_classes(base_merges, n_base + n_new + 256)
    rc = new_state()
    dec_init(rc, code)
    if _code_merges(1, merges, n_base, tclass, rc, code, _RATE) >= 0:
        raise ValueError("corrupt vocabulary: merge id out of range")
    vocab = Vocabulary(merges, base=n_base)  # checks repeated pairs and token lengths
    if vocab.crc() != crc:
        raise ValueError("corrupt vocabulary: checksum mismatch")
    if _serialize(vocab) != raw:  # e.g. changed bits past what the decoder reads of the code word
        raise ValueError("corrupt vocabulary: not in canonical form")
    return vocab
