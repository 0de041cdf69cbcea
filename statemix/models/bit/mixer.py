"""The mixers: weighted sums of the inputs in the logit domain, trained on their own code length.

Inputs ``x_i`` are stretched probabilities (units of 1/256, range +-2047) plus a bias of 256; the
vector's width ``n_in`` follows from the model's component list (see cm's input layout).  The first
``n_mix`` of these mixers (the record's count) each pick a weight set (a row of ``n_in`` int32
weights in units of 2**-16) by a small context::

    0  match state (0..2) and c0                                     3 x 256 rows
    1  c1 and the top 2 bits of c2                                   1024
    2  number of hashed contexts with history, bit position          (contexts + 1) x 8
    3  the match model's expected byte and length bucket while it
       predicts (4 x 256), else c0 (256); from model revision 6,
       in a model with a byte-distribution source, without a match
       the source's most likely byte consistent with c0 and the bit
       position instead (8 x 256, after the others; -0.04% on
       enwik8_1M, bench/RESULTS.md)                                   3328
    4  markup state (4 bits), class of c1 (3 bits), bit position     1024
       or, while a record is found (models with record contexts):
       the 3 pixels above the current one, the one left of it, and
       the bit position (see ``window``)                               128 more, after 6's
    5  a 16-bit hash of (c2, c1, bit position)                       65536
    6  the longest order with history (0..8, see .contexts.ORDERS),
       bit position, match state                                     9 x 8 x 4
    7  the character classes of c2 and c1 (.text), c0                64 x 256 (after 4's record rows)
    8  the word position (letters so far, or the class of c1 between   16 x 16 x 256
       words: see ``word_position``), markup state (4 bits), c0

and give ``dot_m = clamp(sum w_i x_i >> 16, +-2047)`` and ``p_m = squash(dot_m)``.  A final mixer,
after the rows above, combines them: ``p_mix = squash(sum v_m dot_m >> 16)`` (P(1) in units of
2**-16; with one mixer, ``p_mix = p_0``), with one weight set of ``N_MIXERS`` (the first ``n_mix``
used, each initially ``1 / n_mix``) per ``c0`` and, from model revision 4, per half word position
(``word_position // 2``, 8 x 256 sets; with the rest of revision 4, :mod:`.sse`, -0.02% on
enwik8_1M, and -0.08% with the fifth APM, bench/RESULTS.md); the revision's ``final_groups`` says how
many groups of 256.

Weights: one flat int32 array, the weight sets of the table above (``n_in`` each, :func:`sets`
of them), then the final mixer's (``final_groups`` x 256 x ``N_MIXERS``), then each weight set's
uses (how many times its mixer trained it, up to ``USES_LIMIT``; from ``st[x0 + USES]``).

State: ``STATE_SIZE`` int64 words of the model's state array ``st`` from ``x0``: each mixer's weight
row (as the index of its first weight), then each mixer's p, then each mixer's dot, then each
mixer's weight set (its number), then the revision's learning rates and final groups (set by
:func:`set_rates`), then the index of the final mixer's weights for this bit and that of the first
weight set's uses (set by :func:`mixer_select`).

Training, after the bit ``y``: the final mixer ``v_m += dot_m * err * final_rate >> 22`` with ``err
= y * 2**16 - p_mix`` and ``final_rate = final + final_boost * 2**16 / (bytes seen + 2**16)``
(units of 2**-4); each mixer ``w_i += x_i * err_m * rate >> rate_shift`` with ``err_m = y * 2**16 -
p_m``, skipped when ``|err_m| < MIXER_SKIP``, and ``rate = mixer_rate + max(stream_boost * 2**16 /
(bytes seen + 2**16), set_boost * USES_SCALE / (uses + USES_SCALE))``: faster while the stream is
young (revisions 0-2) or while the weight set is (revision 3, whose ``mixer_rate`` is half of
revision 2's: -0.41% on enwik8_1M, bench/RESULTS.md); ``uses`` counts the set's trainings before
this one.  The rates, ``rate_shift`` and the weights a new weight set starts from are the model
revision's (:data:`REVISIONS`).  Weights stay within +-2**24.  Integer arithmetic: a sum's order
does not matter, so an input that is always 0 may as well be absent.
"""

from __future__ import annotations

from collections import namedtuple

import numpy as np

from ..._jit import kernel
from .tables import squash
from .text import char_class, word_position

N_MIXERS = 9
MIXER1_SETS = 3 * 256  # first weight set of mixer 1; mixer 0 has (3 match states x c0)
MIXER2_SETS = MIXER1_SETS + 1024  # mixer 1 has (c1, top 2 bits of c2); mixer 2 (known contexts x bit)
# Mixer 2's rows depend on the record ((max_contexts + 1) * 8), so the rows of mixers 3 on are counted
# from mixer 3's first row, each mixer's after the one before (mixer 4's record rows after mixer 6's,
# so 5 to 7 mixers have the same rows):
MIXER3_MATCH = 0  # mixer 3: (4 length buckets x expected byte) while the match model predicts,
MIXER3_C0 = MIXER3_MATCH + 4 * 256  # else c0,
MIXER3_SOURCE = MIXER3_C0 + 256  # or (bit position x the source's byte) when a source names one
SOURCE_SELECTOR_REVISION = 6  # the first model revision whose mixer 3 reads the source's byte (mixer_select)
MIXER4_AT = MIXER3_SOURCE + 8 * 256  # mixer 4: (markup state, class of c1, bit position)
MIXER5_AT = MIXER4_AT + 1024  # mixer 5: hash of (c2, c1, bit position)
MIXER6_AT = MIXER5_AT + 65536  # mixer 6: (longest order, bit position, match state)
MIXER4_RECORD_AT = MIXER6_AT + 9 * 8 * 4  # mixer 4 while a record is found: (3 pixels above, 1 left, bit position)
MIXER7_AT = MIXER4_RECORD_AT + 16 * 8  # mixer 7: (classes of c2 and c1, c0)
MIXER8_AT = MIXER7_AT + 64 * 256  # mixer 8: (word position, markup state, c0)
MIXERS_END = MIXER8_AT + 16 * 16 * 256
#: rows from mixer 3's first that the first n mixers use (index n; mixers 0-2's rows come before)
ROWS_AFTER_MIXER2 = (0, 0, 0, 0, MIXER4_AT, MIXER7_AT, MIXER7_AT, MIXER7_AT, MIXER8_AT, MIXERS_END)
#: The mixers' constants of each model revision (cm's Config.revision; scales: see the module
#: docstring): the mixers' ``mixer_rate``, ``stream_boost`` and ``set_boost`` (units of
#: 2**-``rate_shift``), the final mixer's ``final`` and ``final_boost`` rates, the weight ``1 /
#: initial`` every input but the bias starts with in every weight set, and how many groups of 256
#: weight sets the final mixer has (``final_groups``: 1, by c0; 8, by half the word position and c0).
Revision = namedtuple("Revision", "mixer_rate stream_boost set_boost rate_shift final final_boost initial final_groups")
#: ``REVISIONS[r]``: model revision r's constants (what each revision changed: cm.configuration.REVISIONS).
REVISIONS = ((Revision(4, 24, 0, 18, 32, 0, 4, 1),) + (Revision(3, 24, 0, 18, 16, 16, 24, 1),) * 2
             + (Revision(3, 0, 48, 19, 16, 16, 24, 1),) + (Revision(3, 0, 48, 19, 16, 16, 24, 8),) * 5)
MIXER_SKIP = 1024  # mixers skip training when |bit - p| < MIXER_SKIP / 2**16
USES_SCALE = 256  # a weight set's rate boost halves after USES_SCALE trainings
USES_LIMIT = 65535  # uses counted up to this (the boost is 0 from there on)
WEIGHT_LIMIT = 1 << 24
SETS = 3 * N_MIXERS  # each mixer's weight set, then the revision's words, then the final mixer's and the uses' index:
MIXER_RATE, FINAL_RATE, FINAL_BOOST, STREAM_BOOST, SET_BOOST, RATE_SHIFT, FINAL_GROUPS, FINAL, USES = range(
    4 * N_MIXERS, 4 * N_MIXERS + 9)
STATE_SIZE = 4 * N_MIXERS + 9


def set_rates(st: np.ndarray, x0: int, revision: int) -> None:
    """Put the learning rates and final groups of model revision ``revision`` in the mixers' state from ``x0``."""
    constants = REVISIONS[revision]
    st[x0 + FINAL_GROUPS] = constants.final_groups
    st[x0 + MIXER_RATE], st[x0 + FINAL_RATE], st[x0 + FINAL_BOOST] = (constants.mixer_rate, constants.final,
                                                                      constants.final_boost)
    st[x0 + STREAM_BOOST], st[x0 + SET_BOOST], st[x0 + RATE_SHIFT] = (constants.stream_boost, constants.set_boost,
                                                                      constants.rate_shift)


@kernel(inline=True)
def sets(max_contexts, n_mix):
    """Weight sets (rows) of the first ``n_mix`` mixers for up to ``max_contexts`` hashed contexts."""
    rows = MIXER2_SETS
    if n_mix > 2:
        rows += (max_contexts + 1) * 8
    return rows + ROWS_AFTER_MIXER2[n_mix]


def weight_words(n_sets: int, n_in: int, revision: int) -> int:
    """int32 words of the weights of ``n_sets`` weight sets of ``n_in`` in model revision
    ``revision``: the sets, the final mixer's, the sets' uses."""
    return n_sets * (n_in + 1) + REVISIONS[revision].final_groups * 256 * N_MIXERS


def initial_weights(n_sets: int, n_in: int, n_mix: int, revision: int, bias: int) -> np.ndarray:
    """Flat int32 weights: every input the revision's ``1 / initial`` but the bias (input ``bias``) 0;
    the final mixer 1/n_mix each; no uses."""
    flat = np.zeros(weight_words(n_sets, n_in, revision), dtype=np.int32)
    final, uses = n_sets * n_in, len(flat) - n_sets  # the final mixer's weights, then the sets' uses
    rows = flat[:final].reshape(n_sets, n_in)
    rows[:] = (1 << 16) // REVISIONS[revision].initial
    rows[:, bias] = 0
    flat[final:uses] = (1 << 16) // n_mix
    return flat


@kernel(inline=True)
def _choose(st, x0, m, n_in, chosen):
    """Mixer ``m`` uses weight set ``chosen``: its first weight's index and its number."""
    st[x0 + m] = chosen * n_in
    st[x0 + SETS + m] = chosen


@kernel(inline=True)
def mixer_select(st, x0, n_in, n_ctx, n_mix, match_state, expected, match_len, c0, c1, c2, known, order, bit, markup,
                 classes, window, source_byte):
    """Pick each mixer's weight set (stored as the index of its first weight, and as its number),
    the final mixer's (``st[x0 + FINAL]``, the index of its first weight) and where the uses start
    (``st[x0 + USES]``).

    ``expected``: the match model's expected byte while it predicts (``match_state`` > 0);
    ``source_byte``: the source's most likely byte consistent with ``c0`` (-1: none, or a model
    before revision 6);
    ``markup``, ``classes``: the text state's MARKUP and CLASSES words (:mod:`.text`); ``known``: how
    many hashed contexts have history, ``order``: the longest order among them; ``window``: -1, or while a record is
    found the 10 bits one record back around the current byte (:mod:`.record`), whose bits
    ``7 - bit .. 9 - bit`` are the pixels above-right, above and above-left of the current bit.
    """
    _choose(st, x0, 0, n_in, match_state * 256 + c0)
    final = sets(n_ctx, n_mix) * n_in
    groups = st[x0 + FINAL_GROUPS]
    position = word_position(classes, c1) if n_mix > 8 or groups > 1 else 0
    group = position >> 1 if groups > 1 else 0
    st[x0 + FINAL] = final + (group * 256 + c0) * N_MIXERS
    st[x0 + USES] = final + groups * 256 * N_MIXERS
    _choose(st, x0, 1, n_in, MIXER1_SETS + c1 + ((c2 << 2) & 0x300))
    mixer3 = MIXER2_SETS + (n_ctx + 1) * 8
    _choose(st, x0, 2, n_in, MIXER2_SETS + known * 8 + bit)
    if n_mix > 3:
        length = 0 if match_len < 16 else 1 if match_len < 32 else 2 if match_len < 64 else 3
        if match_state > 0:
            row = MIXER3_MATCH + length * 256 + expected
        else:
            row = MIXER3_SOURCE + bit * 256 + source_byte if source_byte >= 0 else MIXER3_C0 + c0
        _choose(st, x0, 3, n_in, mixer3 + row)
    if n_mix > 4:
        if window >= 0:
            left = c0 & 1 if bit > 0 else c1 & 1
            row = MIXER4_RECORD_AT + (((((window >> (7 - bit)) & 7) << 1) | left) << 3) + bit
        else:
            row = MIXER4_AT + ((markup & 15) << 6) + (char_class(c1) << 3) + bit
        _choose(st, x0, 4, n_in, mixer3 + row)
    if n_mix > 5:
        order2 = (((((c2 << 8) | c1) << 3) | bit) * np.int64(2654435761) >> 8) & 65535
        _choose(st, x0, 5, n_in, mixer3 + MIXER5_AT + order2)
    if n_mix > 6:
        row = (order * 8 + bit) * 4 + match_state
        _choose(st, x0, 6, n_in, mixer3 + MIXER6_AT + row)
    if n_mix > 7:
        _choose(st, x0, 7, n_in, mixer3 + MIXER7_AT + (((classes & 0x3F) << 8) | c0))
    if n_mix > 8:
        row = ((position << 4) + (markup & 15)) * 256 + c0
        _choose(st, x0, 8, n_in, mixer3 + MIXER8_AT + row)


@kernel(inline=True)
def mixer_predict(weights, inputs, width, st, x0, n_mix, lut):
    """Return p_mix (units of 2**-16); keep each mixer's p and dot for training.  Only the first
    ``width`` inputs are read: the caller keeps the others 0 (cm: its idle contexts')."""
    total = np.int64(0)
    final_set = st[x0 + FINAL]
    for m in range(n_mix):
        row = st[x0 + m]
        dot = np.int64(0)
        for k in range(width):
            dot += np.int64(weights[row + k]) * inputs[k]
        dot = max(-2047, min(2047, dot >> 16))
        st[x0 + N_MIXERS + m] = squash(lut, dot)
        st[x0 + 2 * N_MIXERS + m] = dot
        total += np.int64(weights[final_set + m]) * dot
    return squash(lut, total >> 16) if n_mix > 1 else st[x0 + N_MIXERS + 0]


@kernel(inline=True)
def mixer_update(weights, inputs, width, st, x0, n_mix, p_mix, bit, pos):
    """Train the final mixer and every mixer on the coded bit (see the module docstring); the first
    ``width`` weights of each row (an input that is 0 moves no weight)."""
    final_set = st[x0 + FINAL]
    uses = st[x0 + USES]
    if n_mix > 1:
        final_rate = st[x0 + FINAL_RATE] + (st[x0 + FINAL_BOOST] << 16) // (pos + (1 << 16))  # units of 2**-4
        err = ((np.int64(bit) << 16) - p_mix) * final_rate
        for m in range(n_mix):
            w = np.int64(weights[final_set + m]) + ((st[x0 + 2 * N_MIXERS + m] * err) >> 22)
            weights[final_set + m] = max(-WEIGHT_LIMIT, min(WEIGHT_LIMIT, w))
    base = st[x0 + MIXER_RATE]
    stream_boost = (st[x0 + STREAM_BOOST] << 16) // (pos + (1 << 16))  # faster while the stream is young
    set_boost = st[x0 + SET_BOOST]
    shift = st[x0 + RATE_SHIFT]
    for m in range(n_mix):
        miss = (np.int64(bit) << 16) - st[x0 + N_MIXERS + m]
        if -MIXER_SKIP < miss < MIXER_SKIP:  # well predicted: the update would be negligible
            continue
        rate = base + stream_boost
        if set_boost:  # and while the weight set is
            used = uses + st[x0 + SETS + m]
            n = np.int64(weights[used])
            weights[used] = min(n + 1, USES_LIMIT)
            rate = base + max(stream_boost, set_boost * USES_SCALE // (n + USES_SCALE))
        err = miss * rate
        row = st[x0 + m]
        for k in range(width):
            w = np.int64(weights[row + k]) + ((inputs[k] * err) >> shift)
            weights[row + k] = max(-WEIGHT_LIMIT, min(WEIGHT_LIMIT, w))
