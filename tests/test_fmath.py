"""Accuracy of statemix._fmath against float64 NumPy, and its exactness properties."""

from __future__ import annotations

import hashlib
import os
import platform
import subprocess
import sys
from pathlib import Path

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


def _every_float32(step):
    """Every ``step``-th float32 bit pattern (NaNs, infinities, denormals and both zeros among them)."""
    bits = np.arange(0, 2**32, step, dtype=np.uint64).astype(np.uint32)
    specials = np.array([np.nan, np.inf, -np.inf, 0.0, -0.0, 20.0, -15.0, -87.0, 88.0], dtype=np.float32)
    return np.concatenate([bits.view(np.float32), specials, np.nextafter(specials, np.float32(0))])


def test_softplus_selects_exactly_what_its_cases_give():
    """softplus32 computes every case and selects one (so its loops vectorize): bit for bit the
    value of the case taken alone, over a sample of every float32 bit pattern."""
    x = _every_float32(1021)
    got, ref = np.empty_like(x), np.empty_like(x)
    fa.softplus32_array(x, got)
    fa.softplus32_cases_array(x, ref)
    assert np.array_equal(got.view(np.uint32), ref.view(np.uint32))


VECTOR_SCAN = """
import re, sys
sys.path.insert(0, sys.argv[1])
import numpy as np
import fmath_arrays as fa
for name in sys.argv[2:]:
    kernel = getattr(fa, name)
    x = np.linspace(-3, 3, 64, dtype=np.float32)
    kernel(x, np.empty_like(x))
    if not re.search(r"\\bv?divps\\b", "".join(kernel.inspect_asm().values())):
        print("scalar:", name)
print("checked")
"""


@pytest.mark.skipif(platform.machine() not in ("x86_64", "AMD64"), reason="reads x86 assembly")
def test_loops_over_the_functions_vectorize(tmp_path):
    """A loop calling sigmoid32, silu32 or softplus32 divides in packed float32 (divps): no branch and
    no division-by-zero check (the kernels' IEEE error model) stops LLVM from vectorizing it.  With
    Python's error model these loops ran 6-9 times slower.  (A fresh kernel cache: numba cannot show
    the assembly of cached code.)"""
    env = {k: v for k, v in os.environ.items() if not k.startswith("NUMBA_")}
    env["STATEMIX_CACHE_DIR"] = str(tmp_path / "cache")
    names = ["sigmoid32_array", "silu32_array", "softplus32_array"]
    done = subprocess.run([sys.executable, "-c", VECTOR_SCAN, str(Path(__file__).parent), *names], env=env,
                          capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip().splitlines() == ["checked"], done.stdout


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
