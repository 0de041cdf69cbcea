"""The vocabulary: its merges, its token tables, and its compact serialized format.

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

from .._counter import counter_step, dt_table
from .._jit import kernel
from .._varint import encode_varint, read_varint
from ..coder import dec_bit, dec_init, enc_bit, enc_finish, enc_init, new_state
from .tables import (_BYTE_CLASS, BYTE_TOKENS, FORMAT, MAX_MERGES, MAX_TOKEN_BYTES, _check_merges, _rank_table,
                     _token_table)


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


@kernel(allocates=True)
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
