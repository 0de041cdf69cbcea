"""The one step where a model's probabilities become the coder's integer frequencies.

Encoder and decoder both call these functions on bit-identical inputs, so their outputs agree exactly.
Every symbol gets a frequency of at least 1, so any symbol can be coded whatever the model believed.

- :func:`binary_frequency`: a binary model's P(bit = 1) in units of 2**-16 becomes the frequency of the
  bit 1 out of 2**16 (clamped to ``[1, 65535]``).
- :func:`quantize_distribution`: a float distribution over ``n`` symbols becomes ``n`` frequencies
  summing to exactly ``2**total_bits``: ``f_i = 1 + floor(p_i * (2**total_bits - n) / sum(p))``, and
  the rounding remainder goes to the most probable symbol (the first one on ties).  The sum is taken
  left to right, so the result is a fixed function of the float inputs.
- :func:`assign_frequencies`: the last step of the above for unnormalised weights and a scale chosen by
  the caller (the ssm model uses it on its float32 softmax numerators).

With ``total_bits = 30`` and ``n = 65,536`` the minimum frequencies take ``2**-14`` of the probability
mass (under 1e-4 bits per symbol).
"""

from __future__ import annotations

import numpy as np

from ._jit import kernel


@kernel
def binary_frequency(p1):
    """Return the frequency of bit 1 out of 2**16 for P(1) = ``p1`` / 65536."""
    if p1 < 1:
        return np.int64(1)
    if p1 > 65535:
        return np.int64(65535)
    return np.int64(p1)


@kernel
def assign_frequencies(weights, n, scale, best, total, freqs):
    """Set ``freqs[i] = 1 + floor(weights[i] * scale)`` for ``i < n`` and give the remainder up to
    exactly ``total`` to ``freqs[best]``; return False (freqs unusable) if that would leave it below 1.

    The product is taken in the dtype of ``weights`` and ``scale`` (float32 or float64), so a caller
    fixes the arithmetic by its choice of types; NaN or negative shares count as 0.
    """
    assigned = np.int64(0)
    for i in range(n):
        share = weights[i] * scale
        if not share >= 0:
            share = 0
        f = np.int64(1) + np.int64(share)
        freqs[i] = f
        assigned += f
    rest = total - assigned
    if np.int64(freqs[best]) + rest < 1:
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
    while not assign_frequencies(probs, n, scale, best, total, freqs):
        scale *= 0.5
