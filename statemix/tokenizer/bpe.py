"""Byte-level BPE: encoding bytes to tokens and decoding them back (training: :mod:`.training`).

Everything here is integer arithmetic, so every result is the same on every machine and at every
thread count.

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

Units: sizes in bytes, speeds in MB/s = 10**6 bytes per second, memory in bytes per input byte.
"""
from __future__ import annotations

import numpy as np

from .._jit import kernel
from .tables import (BLOCK_SIZE, _grow, _lookup)
from .vocab import Vocabulary


# ----------------------------------------------------------------------------------------------------
# Encoding


@kernel(allocates=True)  # returns arrays: its own or a grown copy
def _pool_push(pool_pos, pool_next, head, used, capacity, position, rank):
    """Put ``position`` at the front of rank ``rank``'s bucket as pool entry ``used`` (growing the pool
    by half when full); return the pool arrays and its capacity."""
    if used == capacity:
        capacity = capacity + capacity // 2 + 64
        pool_pos = _grow(pool_pos, capacity)
        pool_next = _grow(pool_next, capacity)
    pool_pos[used] = position
    pool_next[used] = head[rank]
    head[rank] = used
    return pool_pos, pool_next, capacity


@kernel(allocates=True)
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
                    pool_pos, pool_next, capacity = _pool_push(pool_pos, pool_next, head, used, capacity, p, r2)
                    used += 1
            if x >= 0:
                r1 = _lookup(keys, ranks, tok[x], c)
                if r1 >= 0:
                    pool_pos, pool_next, capacity = _pool_push(pool_pos, pool_next, head, used, capacity, x, r1)
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


@kernel(allocates=True)
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


def _as_uint8(data) -> np.ndarray:
    if isinstance(data, np.ndarray):
        return np.ascontiguousarray(data, dtype=np.uint8).reshape(-1)
    return np.frombuffer(memoryview(data).cast("B"), dtype=np.uint8)


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
