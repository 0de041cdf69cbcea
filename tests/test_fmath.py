"""Accuracy of statemix._fmath against float64 NumPy, and its exactness properties."""

from __future__ import annotations

import hashlib

import numpy as np
import pytest


import fmath_arrays as fa


def run(kernel, x):
    x = np.ascontiguousarray(x, dtype=np.float32)
    out = np.empty_like(x)
    kernel(x, out)
    return out, x.astype(np.float64)


def test_exp_relative_error():
    got, x = run(fa.exp32_array, np.linspace(-87, 88, 400_001))
    ref = np.exp(x)
    assert np.max(np.abs(got - ref) / ref) <= 4e-7


def test_exp_clamps_instead_of_overflowing():
    got, _ = run(fa.exp32_array, [-1e30, -200, 200, 1e30, 0.0])
    assert np.all(np.isfinite(got)) and np.all(got > 0)
    assert got[-1] == 1.0


def test_log_error():
    got, x = run(fa.log32_array, np.exp(np.linspace(-87, 88, 400_001)))
    ref = np.log(x)
    err = np.abs(got - ref)
    assert np.all((err <= 2e-7) | (err <= 4e-7 * np.abs(ref)))
    near, xn = run(fa.log32_array, np.linspace(0.5, 2.0, 100_001))
    refn = np.log(xn)
    mask = refn != 0
    assert np.max(np.abs(near - refn)[mask] / np.abs(refn[mask])) <= 4e-7
    exact, _ = run(fa.log32_array, [1.0, 2.0, 0.5])
    assert exact[0] == 0.0


def test_softplus_relative_error():
    got, x = run(fa.softplus32_array, np.linspace(-87, 100, 400_001))
    ref = np.logaddexp(0.0, x)
    assert np.max(np.abs(got - ref) / ref) <= 1e-6
    tail, _ = run(fa.softplus32_array, [-1000.0, -88.0])
    assert np.all(tail == 0.0)


@pytest.mark.parametrize("lo,hi", [(-80, 80), (-5, 5)])
def test_sigmoid_and_silu_relative_error(lo, hi):
    got, x = run(fa.sigmoid32_array, np.linspace(lo, hi, 200_001))
    ref = 1.0 / (1.0 + np.exp(-x))
    assert np.max(np.abs(got - ref) / ref) <= 1e-6
    got, x = run(fa.silu32_array, np.linspace(lo, hi, 200_001))
    ref = x / (1.0 + np.exp(-x))
    mask = np.abs(ref) > 1e-30
    rel = np.abs(got - ref)[mask] / np.abs(ref[mask])
    assert np.max(rel) <= 1e-6


def test_golden_bits():
    """A few exact float32 results, pinned: any change of arithmetic shows up here."""
    x = np.array([-3.5, -0.1, 0.0, 0.3, 1.0, 7.25, 42.0], dtype=np.float32)
    e, _ = run(fa.exp32_array, x)
    s, _ = run(fa.softplus32_array, x)
    np.testing.assert_allclose(e, np.exp(x.astype(np.float64)), rtol=4e-7)
    np.testing.assert_allclose(s, np.logaddexp(0.0, x.astype(np.float64)), rtol=1e-6)
    lg, _ = run(fa.log32_array, np.abs(x) + np.float32(0.5))
    digest = hashlib.sha256(e.tobytes() + s.tobytes() + lg.tobytes()).hexdigest()
    assert digest == "d096df9998c4823ffb07786320f0f8c3c266874128bfae63b475ea7de81f2166"
