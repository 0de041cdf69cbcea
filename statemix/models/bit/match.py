"""The match model: the byte that followed the most recent earlier occurrence of the last bytes.

The last ``2**hist_bits`` bytes are kept in a ring buffer ``hist``; a table ``mtable`` of
``2**(hist_bits - 2)`` int32 entries maps the order-6 context hash (bits 20 and up) to the position
after its most recent occurrence (positions modulo 2**31; 0 = none).  After each byte
(:func:`match_update`) a running match is extended if the byte was the predicted one (length capped
at 65535), else dropped; without a match, the table's candidate is verified backwards (up to 32 bytes)
and taken when at least ``MIN_MATCH`` bytes agree.  Per bit (:func:`match_predict`), while the
predicted byte agrees with the partial byte ``c0``, its next bit selects one of ``N_COUNTERS``
counters by (length bucket: 0..15, then 16 + length / 16 up to 31; predicted bit); the mixer input is
that counter's stretched probability (else 0).  From model revision 2 (``STRENGTH_REVISION``) a
second input, :func:`match_strength`, says the same with the length alone: ``+-min(length, 32) *
64`` (stretch units) for a predicted 1 or 0, else 0 (alone at ``* 32``: -0.02% on enwik8_1M; revision 2
against 1, with the APMs' training: -0.09%; bench/RESULTS.md).

State ``m`` (int64): ``st[m0 + PTR]`` the history position of the predicted byte, ``st[m0 + LEN]`` the match
length in bytes (0: none), ``st[m0 + SLOT]`` the counter used this bit (-1: none).
"""

from __future__ import annotations

import numpy as np

from ..._jit import kernel
from .tables import train

PTR, LEN, SLOT = range(3)
STATE_SIZE = 3
MIN_MATCH = 6  # bytes of context that start a match
N_COUNTERS = 64  # (32 length buckets) x (predicted bit)
LIMIT = 1023  # counter confidence cap
STRENGTH_REVISION = 2  # the first model revision with the length input (:func:`match_strength`)
STRENGTH_CAP, STRENGTH_STEP = 32, 64  # that input: +-min(length, STRENGTH_CAP) * STRENGTH_STEP


@kernel(inline=True)
def match_predict(st, m0, hist, hist_bits, counters, base, lut, c0, bit):
    """The match model's input for the next bit (stretch units, 0 without a prediction)."""
    st[m0 + SLOT] = -1
    match_len = st[m0 + LEN]
    if match_len > 0:
        hist_mask = (np.int64(1) << hist_bits) - 1
        expected = np.int64(hist[st[m0 + PTR] & hist_mask]) | 256
        if (expected >> (8 - bit)) == c0:
            ebit = (expected >> (7 - bit)) & 1
            length_bucket = match_len if match_len < 16 else 16 + min(match_len >> 4, 15)
            slot = base + length_bucket * 2 + ebit
            st[m0 + SLOT] = slot
            return lut[np.int64(counters[slot]) >> 20]
    return np.int64(0)


@kernel(inline=True)
def match_state(st, m0):
    """0: no prediction this bit, 1: a match shorter than 16 bytes, 2: a longer one (selects weights)."""
    if st[m0 + SLOT] < 0:
        return 0
    return 1 if st[m0 + LEN] < 16 else 2


@kernel(inline=True)
def match_strength(st, m0, base):
    """The length input for the bit :func:`match_predict` just predicted (``base``: its counters'
    first index, as passed to it): +-min(length, STRENGTH_CAP) * STRENGTH_STEP, signed by the
    predicted bit; 0 without a prediction."""
    slot = st[m0 + SLOT]
    if slot < 0:
        return np.int64(0)
    sign = 2 * ((slot - base) & 1) - 1  # the slot's low bit is the predicted bit
    return sign * min(st[m0 + LEN], STRENGTH_CAP) * STRENGTH_STEP


@kernel(inline=True)
def match_expected(st, m0, hist, hist_bits):
    """The byte the match model expects next (meaningful while it predicts: see match_state)."""
    return np.int64(hist[st[m0 + PTR] & ((np.int64(1) << hist_bits) - 1)])


@kernel(inline=True)
def match_train(st, m0, counters, bit, lut):
    if st[m0 + SLOT] >= 0:
        train(counters, st[m0 + SLOT], bit, LIMIT, lut)


@kernel  # once per byte: a call (inlined, cm's loop took longer to compile)
def match_update(st, m0, hist, mtable, hist_bits, pos, byte, key):
    """After ``byte`` was written at history position ``pos - 1``: extend, drop or find a match."""
    hist_mask = (np.int64(1) << hist_bits) - 1
    match_bits = hist_bits - 2
    if st[m0 + LEN] > 0:
        if hist[st[m0 + PTR] & hist_mask] == byte:
            st[m0 + LEN] = min(st[m0 + LEN] + 1, 65535)
            st[m0 + PTR] += 1
        else:
            st[m0 + LEN] = 0
    entry = (key >> 20) & ((np.int64(1) << match_bits) - 1)
    if st[m0 + LEN] == 0 and pos >= MIN_MATCH:
        stored = np.int64(mtable[entry])
        distance = (pos - stored) & 0x7FFFFFFF  # positions are kept modulo 2**31
        candidate = pos - distance
        if stored != 0 and 0 < distance < hist_mask - 64:
            length = 0
            while length < 32 and hist[(candidate - 1 - length) & hist_mask] == hist[(pos - 1 - length) & hist_mask]:
                length += 1
            if length >= MIN_MATCH:
                st[m0 + LEN] = length
                st[m0 + PTR] = candidate
    mtable[entry] = pos & 0x7FFFFFFF
