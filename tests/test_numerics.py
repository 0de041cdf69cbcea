"""The ordered-sum products of the SSM network against their one-output references.

``matvec8`` and ``matvec_lanes`` compute every output of a matrix-vector product as ``dot8`` and
``dot_lanes`` compute one: the same additions in the same order, so bit for bit the same.
"""

from __future__ import annotations

import numpy as np
import pytest

from statemix._jit import kernel
from statemix.models.nn.numerics import LANES, dot8, dot_lanes, matvec8, matvec_lanes, transpose


@kernel(allocates=True)
def _rows_by_matvec(W, x, lanes_kind):
    n_out, n_in = W.shape
    wt = np.empty(n_in * n_out, dtype=np.float32)
    transpose(W.ravel(), n_out, n_in, wt)
    out = np.empty(n_out, dtype=np.float32)
    if lanes_kind == 8:
        matvec8(wt, x, n_in, n_out, np.empty((8, n_out), dtype=np.float32), out)
    else:
        matvec_lanes(wt, x, n_in, n_out, np.empty((LANES, n_out), dtype=np.float32), out)
    return out


@kernel(allocates=True)
def _rows_by_dot(W, x, lanes_kind):
    n_out, n_in = W.shape
    out = np.empty(n_out, dtype=np.float32)
    lanes = np.empty(LANES, dtype=np.float32)
    for o in range(n_out):
        out[o] = dot8(W[o], x, n_in) if lanes_kind == 8 else dot_lanes(W[o], x, n_in, lanes)
    return out


@pytest.mark.parametrize("lanes_kind", [8, LANES])
@pytest.mark.parametrize("n_in, n_out", [(1, 3), (37, 5), (256, 32), (1000, 33)])
def test_matrix_products_are_their_rows_dot_products_bit_for_bit(lanes_kind, n_in, n_out):
    rng = np.random.default_rng(n_in * 7 + n_out)
    # wide exponents, so that another order of the additions would round differently
    W = (rng.standard_normal((n_out, n_in)) * np.exp2(rng.integers(-20, 20, (n_out, n_in)))).astype(np.float32)
    x = (rng.standard_normal(n_in) * np.exp2(rng.integers(-20, 20, n_in))).astype(np.float32)
    got = _rows_by_matvec(W, x, lanes_kind)
    want = _rows_by_dot(W, x, lanes_kind)
    assert np.array_equal(got.view(np.uint32), want.view(np.uint32))
