"""The context hashes wrap modulo 2**64 in every compiled context (no signed overflow for LLVM to fold)."""

from __future__ import annotations

import numpy as np

from statemix._jit import kernel
from statemix.models.bit.hashing import mix_hash, wrapping_add, wrapping_mul


def reference_mix_hash(x: int, salt: int) -> int:
    """mix_hash in Python integers: three multiply-xorshift rounds modulo 2**64, arithmetic shifts."""

    def signed(v: int) -> int:
        v &= (1 << 64) - 1
        return v - (1 << 64) if v >> 63 else v

    h = signed((x + salt) * -7046029254386353131)
    h = signed((h ^ (h >> 29)) * -4658895280553007687)
    h = signed((h ^ (h >> 32)) * -7723592293110705685)
    return h ^ (h >> 29)


@kernel
def _low_bits_hash(x):
    # a salt LLVM knows and an input it knows the range of: with int64 arithmetic (numba marks it
    # nsw, overflow undefined) LLVM folded this whole hash to 0
    return mix_hash(x & 0x1FF, np.int64(41 << 40))


@kernel
def _hashes(xs, salt, out):
    for i in range(xs.shape[0]):
        out[i, 0] = mix_hash(xs[i], salt)
        out[i, 1] = mix_hash(xs[i] & 0xFFFF, 7 << 40)
        out[i, 2] = wrapping_add(xs[i], np.int64(1) << 62)
        out[i, 3] = wrapping_mul(xs[i], np.int64(-7046029254386353131))


def test_a_hash_of_a_few_bits_under_a_known_salt_is_not_folded():
    for x in (0, 57, 12345, -1):
        assert _low_bits_hash(x) == reference_mix_hash(x & 0x1FF, 41 << 40)


def test_compiled_hashes_equal_the_wrapping_reference():
    xs = np.random.default_rng(3).integers(-(1 << 63), (1 << 63) - 1, 300, dtype=np.int64)
    out = np.zeros((300, 4), dtype=np.int64)
    _hashes(xs, np.int64(5 << 40), out)
    wrap = lambda v: ((v + (1 << 63)) % (1 << 64)) - (1 << 63)  # noqa: E731
    for x, row in zip(xs.tolist(), out.tolist()):
        assert row == [reference_mix_hash(x, 5 << 40), reference_mix_hash(x & 0xFFFF, 7 << 40),
                       wrap(x + (1 << 62)), wrap(x * -7046029254386353131)]
