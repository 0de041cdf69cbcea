"""Sums with the summation order written in the source, and LayerNorm on top of them.

Every float32 sum of the network goes through one of these, so its bits never depend on the CPU
target or on how LLVM would like to reorder (see the project's determinism notes):

- :func:`statemix._fmath.sum_lanes`, :func:`~statemix._fmath.dot_lanes` (re-exported here): long
  vectors (V, parameter blocks): ``LANES`` = 64 interleaved partial sums (lane = index mod 64),
  then a pairwise tree 0+32, 1+33, ..., 0+1.
- :func:`dot8`: short vectors (D, E, N): 8 scalar lanes (lane = index mod 8), then the tree
  (0+4, 1+5, 2+6, 3+7), (0+2, 1+3), 0+1; no allocation in the hot loops.  A plain sum in this order
  is a dot product with ones (``x * 1`` is exact).
- :func:`matvec8`: a matrix-vector product whose every output is the :func:`dot8` of its row, with
  the matrix stored transposed (:func:`transpose`) so that the lanes are vectors across the outputs:
  the same additions in the same order, as SIMD loops (a 64 x 32 product: 0.2 us against 2.7 us as
  64 calls of dot8).
- :func:`matvec_lanes`: the same for :func:`dot_lanes`: every output the lane sum of its row, the
  LANES lanes kept as rows of vectors across the outputs, then dot_lanes' tree over whole rows (the
  head's input gradient, D outputs over V inputs: about a third of the time of D dot_lanes calls).
- :func:`layernorm`: ``out = (x - mean) / sqrt(var + 1e-5) * g + b`` with mean and variance summed
  in index order; keeps the normalised ``nrm`` and returns 1/sqrt(var + eps) for the backward pass.
"""

from __future__ import annotations

import numpy as np

from ..._jit import kernel
from ..._fmath import LANES, dot_lanes, sum_lanes  # noqa: F401  (re-exported for the network)
from .layout import F0, F1, LN_EPS


@kernel(inline=True)
def dot8(a, b, n):
    """Dot product of short vectors: 8 lanes (lane = i mod 8), then the tree (0+4, 1+5, 2+6, 3+7),
    (0+2, 1+3), 0+1.  Scalar lanes: no allocation in the hot loops."""
    s0 = F0
    s1 = F0
    s2 = F0
    s3 = F0
    s4 = F0
    s5 = F0
    s6 = F0
    s7 = F0
    full = n - n % 8
    for i in range(0, full, 8):
        s0 += a[i] * b[i]
        s1 += a[i + 1] * b[i + 1]
        s2 += a[i + 2] * b[i + 2]
        s3 += a[i + 3] * b[i + 3]
        s4 += a[i + 4] * b[i + 4]
        s5 += a[i + 5] * b[i + 5]
        s6 += a[i + 6] * b[i + 6]
        s7 += a[i + 7] * b[i + 7]
    r = n - full
    if r > 0:
        s0 += a[full] * b[full]
    if r > 1:
        s1 += a[full + 1] * b[full + 1]
    if r > 2:
        s2 += a[full + 2] * b[full + 2]
    if r > 3:
        s3 += a[full + 3] * b[full + 3]
    if r > 4:
        s4 += a[full + 4] * b[full + 4]
    if r > 5:
        s5 += a[full + 5] * b[full + 5]
    if r > 6:
        s6 += a[full + 6] * b[full + 6]
    return ((s0 + s4) + (s2 + s6)) + ((s1 + s5) + (s3 + s7))


@kernel(inline=True)
def matvec8(wt, x, n_in, n_out, acc, out):
    """out[o] = dot8(W[o, 0:n_in], x, n_in) for o < n_out, bit for bit, with ``wt[i * n_out + o]`` =
    W[o, i] (see :func:`transpose`): lane k of every output (the inputs i = k mod 8, in order) is
    row k of ``acc`` (8 x n_out float32 scratch), then dot8's tree across the rows."""
    for k in range(8):
        a = acc[k]
        for o in range(n_out):
            a[o] = F0
    for i in range(n_in):
        xi = x[i]
        a = acc[i % 8]
        w = wt[i * n_out:(i + 1) * n_out]
        for o in range(n_out):
            a[o] += w[o] * xi
    a0 = acc[0]
    a1 = acc[1]
    a2 = acc[2]
    a3 = acc[3]
    a4 = acc[4]
    a5 = acc[5]
    a6 = acc[6]
    a7 = acc[7]
    for o in range(n_out):
        out[o] = ((a0[o] + a4[o]) + (a2[o] + a6[o])) + ((a1[o] + a5[o]) + (a3[o] + a7[o]))


@kernel(inline=True)
def matvec_lanes(wt, x, n_in, n_out, acc, out):
    """out[o] = dot_lanes(W[o, 0:n_in], x, n_in) for o < n_out, bit for bit, with ``wt[i * n_out + o]``
    = W[o, i] (see :func:`transpose`): lane k of every output (the inputs i = k mod LANES, in order)
    is row k of ``acc`` (LANES x n_out float32 scratch), then dot_lanes' tree across the rows."""
    for k in range(LANES):
        lane = acc[k]
        for o in range(n_out):
            lane[o] = F0
    for i in range(n_in):
        xi = x[i]
        lane = acc[i % LANES]
        w = wt[i * n_out:(i + 1) * n_out]
        for o in range(n_out):
            lane[o] += w[o] * xi
    width = LANES // 2
    while width >= 1:
        for j in range(width):
            lane = acc[j]
            other = acc[j + width]
            for o in range(n_out):
                lane[o] += other[o]
        width //= 2
    lane = acc[0]
    for o in range(n_out):
        out[o] = lane[o]


@kernel
def transpose(src, rows, cols, dst):
    """dst[c * rows + r] = src[r * cols + c]: a row-major rows x cols matrix stored column by column."""
    for r in range(rows):
        row = src[r * cols:(r + 1) * cols]
        for c in range(cols):
            dst[c * rows + r] = row[c]


@kernel
def layernorm(src, g, b, nrm, out, n):
    """out = LN(src) * g + b; nrm = the normalised values; return 1 / std."""
    mean = F0
    for d in range(n):
        mean += src[d]
    mean = mean / np.float32(n)
    var = F0
    for d in range(n):
        c = src[d] - mean
        var += c * c
    var = var / np.float32(n)
    rs = F1 / np.sqrt(var + LN_EPS)
    for d in range(n):
        v = (src[d] - mean) * rs
        nrm[d] = v
        out[d] = v * g[d] + b[d]
    return rs


@kernel
def layernorm_backward(dout, nrm, rs, g, n, dsrc):
    """dsrc += gradient of the LN input, given dout (gradient of the LN output)."""
    m1 = F0
    m2 = F0
    for d in range(n):
        dn = dout[d] * g[d]
        m1 += dn
        m2 += dn * nrm[d]
    m1 = m1 / np.float32(n)
    m2 = m2 / np.float32(n)
    for d in range(n):
        dsrc[d] += rs * ((dout[d] * g[d] - m1) - nrm[d] * m2)
