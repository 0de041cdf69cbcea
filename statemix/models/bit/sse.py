"""APMs (secondary estimation): adaptive tables that refine the mixer's probability.

Up to five APMs (the first ``n_apm``), keyed by (``c1``, ``c0``); by a 16-bit hash of (``c2``,
``c1``, ``c0``); by (the match model's expected byte, ``c0``) while it predicts, else ``c0`` alone; by
a 16-bit hash of (``c3``, ``c2``, ``c1``, ``c0``); and by 16 bits of the word pair (the text state's
WORD1 and WORD0, :mod:`.text`) and ``c0``.  In a model with record contexts, while a record
is found, the first is keyed instead by a 16-bit hash of the bits one record back around the current
byte (``window``, :mod:`.record`) and ``c0``, in 65,536 rows of its own after the others.  Each selects a row of 33 buckets (P(1) in units of 2**-16, initially squash of the bucket centre) over
``stretch(p_mix)``; a prediction interpolates the two buckets around ``stretch(p_mix)`` (weights
``1 - w`` and ``w``, in units of 2**-12) and the bucket nearer to it learns: ``a += (y * 2**16 - a)
>> APM_RATE``; from model revision 2 (``two_buckets``) both learn, each by its weight: ``a += (y *
2**16 - a) * w_a >> (APM_RATE - 1)`` (-0.06% on enwik8_1M, bench/RESULTS.md).  The coded
probability is ``(2 p_mix + 14 mean(p_apm)) / 16``, from model revision 4 ``(p_mix + 15
mean(p_apm)) / 16`` (:func:`coded_probability`).  The fifth APM alone gained 0.03% on enwik8_1M, the rest
of revision 4 (this and the final mixer's sets by word position, :mod:`.mixer`) 0.02%, both 0.08%
(0.13% on enwik8_3M, bench/RESULTS.md).

The table holds each bucket's departure from its initial value (``a - squash(centre)``), so a new
table is all zeros: the system hands out zero pages lazily, and a model for a small input touches
only the rows it uses (a level-2 model is built in about 1/10 of the time a filled table took).
"""

from __future__ import annotations

import numpy as np

from ..._jit import kernel
from ...quantize import COARSE_FLOOR, FINE_FLOOR
from .hashing import wrapping_mul
from .tables import stretch

APM_RATE = 6  # APM update: moves 2**-APM_RATE of the way to the target
TWO_BUCKETS_REVISION = 2  # the first model revision whose APMs train both buckets
WORD_APM_REVISION = 4  # the first model revision with the fifth APM and the APMs' 15/16 of the coded probability
#: the first model revision whose coded P(1) is kept within [2**-12, 1 - 2**-12] (statemix.quantize's
#: COARSE_FLOOR), not [2**-16, 1 - 2**-16]: a code word then holds under 2,840 bytes per byte, not
#: 45,427: a decoder's work per payload byte is bounded 16 times lower (statemix.container)
FLOOR_REVISION = 8
BUCKETS = 33
N_APMS = 5
STATE_SIZE = 2 * N_APMS  # per APM: the bucket it trains this bit, then per APM the upper bucket's weight


def max_apms(revision: int) -> int:
    """How many APMs a model of revision ``revision`` may have: the fifth came with revision 4."""
    return N_APMS if revision >= WORD_APM_REVISION else N_APMS - 1


def rows(n_apm: int, records: bool = False) -> int:
    """Rows of ``n_apm`` APMs: 65,536 each, and 256 more for the match APM's rows without a match
    (before the fourth APM's),
    and with ``records`` (a model with record contexts) 65,536 for the record rows."""
    return n_apm * 65536 + (256 if n_apm >= 3 else 0) + (65536 if records else 0)


def initial_apm(n_apm: int, records: bool = False) -> np.ndarray:
    """A new table: every bucket at its initial value (stored as departures from it: zeros)."""
    return np.zeros(rows(n_apm, records) * BUCKETS, dtype=np.int32)


#: the APM keys' multiplier (2**32 / golden ratio)
_GOLDEN32 = np.int64(0x9E3779B1)
#: the word-pair key's multipliers: of the older word's hash, and of c0 (odd: distinct c0, distinct rows)
_WORD1_FACTOR, _C0_FACTOR = np.int64(0x2F0F3), np.int64(0x9E37)


@kernel(inline=True)
def _initial(lut, bucket):
    """A bucket's initial P(1) (units of 2**-16): squash of its centre, ``(bucket - 16) * 128``."""
    return np.int64(lut[4096 + 2048 + min((bucket - 16) * 128, 2047)])


@kernel(inline=True)
def apm_predict(apm, st, a0, n_apm, p_mix, c0, c1, hist4, expected, window, word0, word1, lut):
    """Return the sum of the APMs' probabilities; remember the bucket each one trains.

    ``expected``: the match model's expected byte while it predicts, else -1; ``window``: the record
    window (:mod:`.record`) while a record is found in a model with record contexts, else -1;
    ``word0``, ``word1``: the text state's words of those names.
    """
    position = (stretch(lut, p_mix) + 2048) * 32
    low = position >> 12
    weight = position & 4095
    order2 = (wrapping_mul(((hist4 & 0xFFFF) << 8) | c0, _GOLDEN32) >> 20) & 0xFFFF
    p_apm = np.int64(0)
    for a in range(n_apm):
        if a == 0 and window >= 0:
            key = n_apm * 65536 + (256 if n_apm >= 3 else 0) + ((wrapping_mul((window << 8) | c0, _GOLDEN32) >> 20) & 0xFFFF)
        elif a == 0:
            key = (c1 << 8) + c0
        elif a == 1:
            key = 65536 + order2
        elif a == 2:
            key = 2 * 65536 + ((expected << 8) + c0 if expected >= 0 else 65536 + c0)
        elif a == 3:
            key = 3 * 65536 + 256 + ((wrapping_mul(((hist4 & 0xFFFFFF) << 8) | c0, _GOLDEN32) >> 20) & 0xFFFF)
        else:
            pair = wrapping_mul(word1, _WORD1_FACTOR) ^ word0
            key = 4 * 65536 + 256 + (((pair >> 40) ^ (c0 * _C0_FACTOR)) & 0xFFFF)
        row = key * BUCKETS + low
        below = np.int64(apm[row]) + _initial(lut, low)
        above = np.int64(apm[row + 1]) + _initial(lut, low + 1)
        p_apm += (below * (4096 - weight) + above * weight) >> 12
        st[a0 + a] = row + (weight >> 11)
        st[a0 + N_APMS + a] = weight
    return p_apm


@kernel(inline=True)
def coded_probability(p_mix, p_apm, n_apm, revision):
    """The coded P(1) (units of 2**-16) from the mixer's ``p_mix`` and the sum ``p_apm`` of the
    ``n_apm`` APMs' probabilities, in model revision ``revision`` (see the module docstring)."""
    mix_share = 1 if revision >= WORD_APM_REVISION else 2  # sixteenths
    return (mix_share * p_mix + ((16 - mix_share) * p_apm) // n_apm) >> 4


@kernel(inline=True)
def coded_floor(revision):
    """The least frequency (of 2**16) of either bit value in model revision ``revision``."""
    return COARSE_FLOOR if revision >= FLOOR_REVISION else FINE_FLOOR


@kernel(inline=True)
def apm_update(apm, st, a0, n_apm, bit, lut, two_buckets):
    """Train the buckets :func:`apm_predict` chose on the coded ``bit``: the nearer one, or with
    ``two_buckets`` both, each by its interpolation weight."""
    target = np.int64(bit) << 16
    for a in range(n_apm):
        slot = st[a0 + a]
        if two_buckets:
            weight = st[a0 + N_APMS + a]
            below = slot - (weight >> 11)
            for upper in range(2):
                share = weight if upper else 4096 - weight
                initial = _initial(lut, (below + upper) % BUCKETS)
                value = np.int64(apm[below + upper]) + initial
                apm[below + upper] = value + ((((target - value) * share) >> 12) >> (APM_RATE - 1)) - initial
        else:
            initial = _initial(lut, slot % BUCKETS)
            value = np.int64(apm[slot]) + initial
            apm[slot] = value + ((target - value) >> APM_RATE) - initial
