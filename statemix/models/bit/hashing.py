"""The hash every context of the bitwise model is built from (wrapping 64-bit integer arithmetic)."""

from __future__ import annotations

import numpy as np

from ..._jit import kernel


#: the three rounds' multipliers (odd 64-bit constants), as int64
_M1, _M2, _M3 = np.int64(-7046029254386353131), np.int64(-4658895280553007687), np.int64(-7723592293110705685)


@kernel(inline=True)
def wrapping_add(a, b):
    """``a + b`` modulo 2**64, as int64.

    numba compiles signed integer ``+``, ``-`` and ``*`` with LLVM's ``nsw`` flag: a signed overflow
    is undefined, and LLVM may fold it to anything.  It did: compiled with the salt an argument,
    ``mix_hash(x & 0x1FF, 41 << 40)`` became 0.  Unsigned arithmetic has no such flag and wraps; the
    conversions between int64 and uint64 keep the bits."""
    return np.int64(np.uint64(a) + np.uint64(b))


@kernel(inline=True)
def wrapping_mul(a, b):
    """``a * b`` modulo 2**64, as int64 (see :func:`wrapping_add`)."""
    return np.int64(np.uint64(a) * np.uint64(b))


@kernel
def mix_hash(x, salt):
    """A 64-bit mix of ``x + salt`` (three multiply-xorshift rounds, wrapping, arithmetic shifts)."""
    h = wrapping_mul(wrapping_add(x, salt), _M1)
    h = wrapping_mul(h ^ (h >> 29), _M2)
    h = wrapping_mul(h ^ (h >> 32), _M3)
    return h ^ (h >> 29)


@kernel
def order6_hash(c4, c8):
    """The order-6 context's hash (also the match model's key)."""
    return mix_hash(c4 | ((c8 & 0xFFFF) << 32), 6 << 40)
