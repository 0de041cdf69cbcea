"""The one step where a model's probabilities become the coder's integer frequencies.

Encoder and decoder both call these functions on bit-identical inputs, so their outputs agree exactly.
Every symbol gets a frequency of at least 1, so any symbol can be coded whatever the model believed;
a floor above 1 also bounds what a code word can hold (statemix.container, "What a payload can hold").

- :func:`binary_frequency`: a binary model's P(bit = 1) in units of 2**-16 becomes the frequency of the
  bit 1 out of 2**16, clamped to ``[floor, 2**16 - floor]``: :data:`FINE_FLOOR` (1) in cm's first
  model revisions, :data:`COARSE_FLOOR` (16, P(1) within [2**-12, 1 - 2**-12]) from its revision
  ``bit.sse.FLOOR_REVISION``.  Every bit then costs at least -log2(1 - floor / 2**16) bits, which bounds
  what a code word can hold (statemix.container, "What a payload can hold").
- :func:`quantize_distribution`: a float distribution over ``n`` symbols becomes ``n`` frequencies
  summing to exactly ``2**total_bits``: ``f_i = 1 + floor(p_i * (2**total_bits - n) / sum(p))``, and
  the rounding remainder goes to the most probable symbol (the first one on ties).  The sum is taken
  left to right, so the result is a fixed function of the float inputs.
- :func:`quantize_logits`: float32 logits ``z`` over ``n`` symbols become ``n`` frequencies summing to
  ``total``, each at least ``least``: ``q_i = exp32(z_i - max z)``, ``scale = float32((total - n least)
  / sum(q))`` (the sum in the lane order of :func:`statemix._fmath.sum_lanes`, the division in
  float64), ``f_i = least + floor(q_i * scale)`` in float32, the remainder to the first most probable
  symbol; ``z`` is left holding the coded softmax ``q / sum(q)`` (float32), which a model can learn
  from.  The ssm model codes with it, ``least`` from :func:`least_frequency`: 1 in its first records;
  from its coarse floor (``Config.floor``) enough that the symbols other than the most probable hold
  at least ``2**-COARSE_SHARE_BITS`` (2**-9) of the total, so every token costs more than
  2**-9 / ln 2 bits, as a byte of cm's revision 8 does.
- :func:`assign_frequencies` and :func:`fit_frequencies`: the shared last step, for unnormalised
  weights and a scale: should float rounding ever make the remainder push the most probable symbol
  below ``least``, the scale is halved (in the caller's float type) until it does not.

With ``total_bits = 30`` and ``n = 65,536`` the minimum frequencies take ``2**-14`` of the probability
mass (under 1e-4 bits per symbol).
"""

from __future__ import annotations

import numpy as np

from ._fmath import F1, exp32, sum_lanes
from ._jit import kernel


#: a binary frequency's least value, of 2**16 (see the module docstring)
FINE_FLOOR, COARSE_FLOOR = 1, 16
#: under a coarse floor, the symbols other than the most probable hold at least 2**-COARSE_SHARE_BITS
COARSE_SHARE_BITS = 9


def least_frequency(n: int, total_bits: int, coarse: bool) -> int:
    """The least frequency of each of ``n`` >= 2 symbols out of ``2**total_bits``: 1, or under a coarse
    floor ``ceil(2**(total_bits - COARSE_SHARE_BITS) / (n - 1))`` (see the module docstring)."""
    return -(-(1 << (total_bits - COARSE_SHARE_BITS)) // (n - 1)) if coarse else 1


@kernel
def binary_frequency(p1, floor):
    """Return the frequency of bit 1 out of 2**16 for P(1) = ``p1`` / 65536, clamped to
    ``[floor, 65536 - floor]``."""
    if p1 < floor:
        return np.int64(floor)
    if p1 > 65536 - floor:
        return np.int64(65536 - floor)
    return np.int64(p1)


@kernel
def assign_frequencies(weights, n, scale, best, total, freqs, least):
    """Set ``freqs[i] = least + floor(weights[i] * scale)`` for ``i < n`` and give the remainder up to
    exactly ``total`` to ``freqs[best]``; return False (freqs unusable) if that would leave it below
    ``least``.

    The product is taken in the dtype of ``weights`` and ``scale`` (float32 or float64), so a caller
    fixes the arithmetic by its choice of types; NaN or negative shares count as 0.
    """
    assigned = np.int64(0)
    for i in range(n):
        share = weights[i] * scale
        if not share >= 0:
            share = 0
        f = least + np.int64(share)
        freqs[i] = f
        assigned += f
    rest = total - assigned
    if np.int64(freqs[best]) + rest < least:
        return False
    freqs[best] += rest
    return True


@kernel
def quantize_distribution(probs, total_bits, freqs):
    """Fill ``freqs`` (int64, len n) from ``probs`` (float64, len n, non-negative, not all zero)."""
    n = probs.shape[0]
    total = np.int64(1) << np.int64(total_bits)
    mass = 0.0
    best = 0
    for i in range(n):
        mass += probs[i]
        if probs[i] > probs[best]:
            best = i
    scale = 0.0  # no usable distribution: every symbol gets 1, the rest goes to `best`
    if mass > 0.0 and mass < np.inf:
        scale = float(total - n) / mass
    fit_frequencies(probs, n, scale, 0.5, best, total, freqs, np.int64(1))


@kernel
def fit_frequencies(weights, n, scale, half, best, total, freqs, least):
    """:func:`assign_frequencies`, halving ``scale`` (times ``half``, 0.5 in the scale's type) until
    the most probable symbol keeps a frequency of at least ``least``."""
    while not assign_frequencies(weights, n, scale, best, total, freqs, least):
        scale = scale * half


@kernel
def quantize_logits(z, n, total, freqs, lanes, least):
    """Fill ``freqs[:n]`` (summing to ``total``, each at least ``least``) from float32 logits ``z[:n]``;
    leave the softmax in ``z``.

    ``lanes`` is float32 scratch of :data:`statemix._fmath.LANES` entries.
    """
    m = z[0]
    best = 0
    for v in range(n):
        if z[v] > m:
            m = z[v]
            best = v
    for v in range(n):
        z[v] = exp32(z[v] - m)
    mass = sum_lanes(z, n, lanes)
    scale = np.float32(np.float64(total - n * least) / np.float64(mass))
    fit_frequencies(z, n, scale, np.float32(0.5), best, total, freqs, least)
    inv = F1 / mass
    for v in range(n):
        z[v] = z[v] * inv
