"""The hash every context of the bitwise model is built from (wrapping 64-bit integer arithmetic)."""

from __future__ import annotations

import numpy as np

from ..._jit import kernel


@kernel
def mix_hash(x, salt):
    """A 64-bit mix of ``x + salt`` (three multiply-xorshift rounds, wrapping int64)."""
    x = (x + salt) * np.int64(-7046029254386353131)
    x = (x ^ (x >> 29)) * np.int64(-4658895280553007687)
    x = (x ^ (x >> 32)) * np.int64(-7723592293110705685)
    return x ^ (x >> 29)


@kernel
def order6_hash(c4, c8):
    """The order-6 context's hash (also the match model's key)."""
    return mix_hash(c4 | ((c8 & 0xFFFF) << 32), 6 << 40)
