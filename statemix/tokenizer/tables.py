"""Tokenizer tables and checks shared by training, encoding and the vocabulary format.

Vocabulary
----------
Token ids ``0..255`` are the 256 byte values, so every byte string has an encoding.  A vocabulary adds
an ordered list of ``m`` merges; merge ``r`` (its *rank*, ``0 <= r < m``) joins the adjacent tokens
``(left[r], right[r])`` into the new token ``256 + r``, with ``left[r], right[r] < 256 + r``.  No pair
appears twice, and no token is longer than :data:`MAX_TOKEN_BYTES` bytes.

Limits (below) bound every table: ids stay below 2**ID_BITS, tokens at most MAX_TOKEN_BYTES bytes.
"""

from __future__ import annotations

import numpy as np

from .._jit import kernel

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


@kernel(allocates=True)
def _grow(arr, size):
    """A copy of ``arr`` enlarged to ``size`` entries (the new ones 0)."""
    out = np.zeros(size, dtype=arr.dtype)
    out[: arr.shape[0]] = arr
    return out


@kernel(allocates=True)
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


@kernel(allocates=True)
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


@kernel(allocates=True)
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
