"""The SSM network's forward pass, one position at a time (Mamba-style selective scan).

One layer at chunk position t (shapes in the glossary of :mod:`statemix.models.nn`)::

    an = LN(res[l, t])                                  _fwd_in: LayerNorm, gain and bias learned
    x, z = W_in an                                      _fwd_in: in-projection (2E outputs)
    x' = SiLU(conv_K(x) + conv_b)                       _fwd_conv: causal depthwise conv over K inputs
    B, C, dt_in = W_x x'                                _fwd_xproj: R = 2N + 1 outputs
    Delta = softplus(dt_in * dt_w + dt_b)               per channel e
    h = exp(Delta A) h + Delta B x';  y = C.h + D x'    _fwd_scan, A = -exp(A_log)
    res[l + 1, t] = res[l, t] + W_out (y * SiLU(z))     _fwd_out

then ``logits = head(LN_f(res[L, t]))`` (:func:`_fwd_head`) and ``probs = softmax(logits)`` with
its log-sum-exp (:func:`_softmax`).  :func:`forward_position` runs one position (the coding pass,
once per token); :func:`forward_chunk` reruns a whole chunk from the state at its start for
training, parallel over independent outputs only (positions, channel blocks of ``EB``, head blocks
of ``HEAD_BLOCK`` tokens), every element computed by the same per-position code, so both give the
same bits at any thread count.  Matrices are stored transposed (input index outside, output inside)
so the inner loops run across independent outputs; float32, own exp/log (:mod:`statemix._fmath`).
"""

from __future__ import annotations

import numpy as np

from ..._fmath import exp32, log32, silu32, softplus32
from ..._jit import kernel, prange
from .numerics import layernorm, sum_lanes
from .layout import (
    CONV_B, CONV_W, DSKIP, DT_B, DT_W, EMB, F0, F1, HEAD, HEAD_BLOCK, LANES, LNF_B, LNF_G, LN_B, LN_G, NT,
    S_D, S_E, S_K, S_L, S_N, S_R, S_T, S_V, WIN, WOUT, WX)


@kernel(inline=True)
def _fwd_in(P, off, sz, acts, l, t):
    """LayerNorm and in-projection of position t: xh[l, t+K-1], z[l, t]."""
    res, nrm, rstd, an, xh, z = acts.res, acts.nrm, acts.rstd, acts.an, acts.xh, acts.z
    D = sz[S_D]
    E = sz[S_E]
    K = sz[S_K]
    base = l * NT
    og = off[base + LN_G]
    ob = off[base + LN_B]
    rstd[l, t] = layernorm(res[l, t], P[og:og + D], P[ob:ob + D], nrm[l, t], an[l, t], D)
    xrow = xh[l, t + K - 1]
    zrow = z[l, t]
    a = an[l, t]
    ow = off[base + WIN]
    for e in range(E):
        xrow[e] = F0
        zrow[e] = F0
    for d in range(D):
        ad = a[d]
        wx = P[ow + d * 2 * E:ow + d * 2 * E + E]
        wz = P[ow + d * 2 * E + E:ow + (d + 1) * 2 * E]
        for e in range(E):
            xrow[e] += wx[e] * ad
        for e in range(E):
            zrow[e] += wz[e] * ad


@kernel(inline=True)
def _fwd_conv(P, off, sz, acts, l, t):
    """Causal depthwise conv + SiLU of position t: cpre[l, t], xs[l, t]."""
    xh, cpre, xs = acts.xh, acts.cpre, acts.xs
    E = sz[S_E]
    K = sz[S_K]
    ow = off[l * NT + CONV_W]
    ob = off[l * NT + CONV_B]
    c = cpre[l, t]
    cb = P[ob:ob + E]
    for e in range(E):
        c[e] = cb[e]
    for k in range(K):
        src = xh[l, t + k]
        w = P[ow + k * E:ow + (k + 1) * E]
        for e in range(E):
            c[e] += w[e] * src[e]
    out = xs[l, t]
    for e in range(E):
        out[e] = silu32(c[e])


@kernel(inline=True)
def _fwd_xproj(P, off, sz, acts, l, t):
    """x-projection (B, C, dt input) and the per-channel step size dt of position t."""
    xs, pj, dtpre, dt = acts.xs, acts.pj, acts.dtpre, acts.dt
    E = sz[S_E]
    R = sz[S_R]
    N = sz[S_N]
    ow = off[l * NT + WX]
    p = pj[l, t]
    x = xs[l, t]
    for r in range(R):
        p[r] = F0
    for e in range(E):
        xe = x[e]
        w = P[ow + e * R:ow + (e + 1) * R]
        for r in range(R):
            p[r] += w[r] * xe
    dtin = p[2 * N]
    odw = off[l * NT + DT_W]
    odb = off[l * NT + DT_B]
    dw = P[odw:odw + E]
    db = P[odb:odb + E]
    pre = dtpre[l, t]
    d = dt[l, t]
    for e in range(E):
        v = dtin * dw[e] + db[e]
        pre[e] = v
        d[e] = softplus32(v)


@kernel(inline=True)
def _fwd_scan(P, Aneg, off, sz, acts, l, t, e0, e1):
    """State update and readout of position t for channels e0..e1-1: hs[l, t+1], dA, y."""
    xs, pj, dt, hs, dA, y = acts.xs, acts.pj, acts.dt, acts.hs, acts.dA, acts.y
    N = sz[S_N]
    od = off[l * NT + DSKIP]
    p = pj[l, t]
    w = e1 - e0
    x = xs[l, t, e0:e1]
    d = dt[l, t, e0:e1]
    yr = y[l, t, e0:e1]
    ds = P[od + e0:od + e1]
    for e in range(w):
        yr[e] = ds[e] * x[e]
    for n in range(N):
        bn = p[n]
        cn = p[N + n]
        hp = hs[l, t, n, e0:e1]
        hn = hs[l, t + 1, n, e0:e1]
        da = dA[l, t, n, e0:e1]
        an_ = Aneg[l, n, e0:e1]
        for e in range(w):
            a = exp32(d[e] * an_[e])
            da[e] = a
            h = a * hp[e] + (d[e] * bn) * x[e]
            hn[e] = h
            yr[e] += cn * h


@kernel(inline=True)
def _fwd_out(P, off, sz, acts, l, t):
    """Gate, out-projection and residual of position t: res[l+1, t]."""
    res, z, y, yg = acts.res, acts.z, acts.y, acts.yg
    D = sz[S_D]
    E = sz[S_E]
    g = yg[l, t]
    for e in range(E):
        g[e] = y[l, t, e] * silu32(z[l, t, e])
    out = res[l + 1, t]
    for d in range(D):
        out[d] = F0
    ow = off[l * NT + WOUT]
    for e in range(E):
        v = g[e]
        wr = P[ow + e * D:ow + (e + 1) * D]
        for d in range(D):
            out[d] += wr[d] * v
    src = res[l, t]
    for d in range(D):
        out[d] = src[d] + out[d]


@kernel(inline=True)
def _fwd_head(P, off, sz, acts, t, v0, v1, lanes):
    """Final LayerNorm (if v0 == 0) and logits[t, v0:v1]."""
    an, logits = acts.an, acts.logits
    D = sz[S_D]
    V = sz[S_V]
    L = sz[S_L]
    g = L * NT
    a = an[L, t]
    n = v1 - v0
    lg = logits[t, v0:v1]
    oh = off[g + HEAD]
    for v in range(n):
        lg[v] = F0
    # eight rows per pass (the rest one at a time): the same additions in the same order
    d = 0
    while d + 8 <= D:
        a0 = a[d]
        a1 = a[d + 1]
        a2 = a[d + 2]
        a3 = a[d + 3]
        a4 = a[d + 4]
        a5 = a[d + 5]
        a6 = a[d + 6]
        a7 = a[d + 7]
        b = oh + d * V
        w0 = P[b + v0:b + v1]
        w1 = P[b + V + v0:b + V + v1]
        w2 = P[b + 2 * V + v0:b + 2 * V + v1]
        w3 = P[b + 3 * V + v0:b + 3 * V + v1]
        w4 = P[b + 4 * V + v0:b + 4 * V + v1]
        w5 = P[b + 5 * V + v0:b + 5 * V + v1]
        w6 = P[b + 6 * V + v0:b + 6 * V + v1]
        w7 = P[b + 7 * V + v0:b + 7 * V + v1]
        for v in range(n):
            lg[v] = (((((((lg[v] + w0[v] * a0) + w1[v] * a1) + w2[v] * a2) + w3[v] * a3)
                       + w4[v] * a4) + w5[v] * a5) + w6[v] * a6) + w7[v] * a7
        d += 8
    while d < D:
        ad = a[d]
        w = P[oh + d * V + v0:oh + d * V + v1]
        for v in range(n):
            lg[v] += w[v] * ad
        d += 1


@kernel  # not inlined: see tests/test_ssm.py::test_compiled_passes_compute_what_their_source_says
def _final_ln(P, off, sz, acts, t):
    res, nrm, rstd, an = acts.res, acts.nrm, acts.rstd, acts.an
    D = sz[S_D]
    L = sz[S_L]
    og = off[L * NT + LNF_G]
    ob = off[L * NT + LNF_B]
    rstd[L, t] = layernorm(res[L, t], P[og:og + D], P[ob:ob + D], nrm[L, t], an[L, t], D)


@kernel  # not inlined: see tests/test_ssm.py::test_compiled_passes_compute_what_their_source_says
def _softmax(sz, acts, t, lanes):
    """probs[t] = softmax(logits[t]); lse[t] = log-sum-exp of logits[t]."""
    logits, probs, lse = acts.logits, acts.probs, acts.lse
    V = sz[S_V]
    lg = logits[t]
    pr = probs[t]
    m = lg[0]
    for v in range(1, V):
        if lg[v] > m:
            m = lg[v]
    for v in range(V):
        pr[v] = exp32(lg[v] - m)
    s = sum_lanes(pr, V, lanes)
    inv = F1 / s
    for v in range(V):
        pr[v] = pr[v] * inv
    lse[t] = m + log32(s)


@kernel(inline=True)
def _embed(P, off, sz, acts, tin, t):
    res = acts.res
    D = sz[S_D]
    row = off[sz[S_L] * NT + EMB] + tin[t] * D
    r = res[0, t]
    w = P[row:row + D]
    for d in range(D):
        r[d] = w[d]


@kernel
def forward_position(P, Aneg, off, sz, acts, tin, t, lanes):
    """The whole forward pass of chunk position t (the coding pass calls this once per token)."""
    L = sz[S_L]
    E = sz[S_E]
    _embed(P, off, sz, acts, tin, t)
    for l in range(L):
        _fwd_in(P, off, sz, acts, l, t)
        _fwd_conv(P, off, sz, acts, l, t)
        _fwd_xproj(P, off, sz, acts, l, t)
        _fwd_scan(P, Aneg, off, sz, acts, l, t, 0, E)
        _fwd_out(P, off, sz, acts, l, t)
    _final_ln(P, off, sz, acts, t)
    _fwd_head(P, off, sz, acts, t, 0, sz[S_V], lanes)
    _softmax(sz, acts, t, lanes)


@kernel(parallel=True)
def forward_chunk(P, Aneg, off, sz, acts, tin, channel_block):
    """Forward pass over the whole chunk from the state at chunk start, parallel where independent.

    Every output element is computed by the same per-position code as :func:`forward_position`, so
    the results are bit-identical to the coding pass whatever the partition.  ``channel_block``:
    channels per task of the scan, a divisor of E (the parallel kernel takes ``sz[S_EB]``, its
    serial twin E: see :func:`.backward.backward_chunk`).
    """
    L = sz[S_L]
    E = sz[S_E]
    T = sz[S_T]
    nb = E // channel_block
    for t in prange(T):
        _embed(P, off, sz, acts, tin, t)
    for l in range(L):
        for t in prange(T):
            _fwd_in(P, off, sz, acts, l, t)
        for t in prange(T):
            _fwd_conv(P, off, sz, acts, l, t)
            _fwd_xproj(P, off, sz, acts, l, t)
        for b in prange(nb):
            for t in range(T):
                _fwd_scan(P, Aneg, off, sz, acts, l, t, b * channel_block, (b + 1) * channel_block)
        for t in prange(T):
            _fwd_out(P, off, sz, acts, l, t)
    V = sz[S_V]
    for t in prange(T):
        _final_ln(P, off, sz, acts, t)
    # the head in blocks of HEAD_BLOCK tokens, every position per block (the block's weights stay
    # in cache); each logit is the same sum as in forward_position
    for vb in prange((V + HEAD_BLOCK - 1) // HEAD_BLOCK):
        lanes = np.empty(LANES, dtype=np.float32)
        v0 = vb * HEAD_BLOCK
        v1 = min(V, v0 + HEAD_BLOCK)
        for t in range(T):
            _fwd_head(P, off, sz, acts, t, v0, v1, lanes)
    for t in prange(T):
        lanes = np.empty(LANES, dtype=np.float32)
        _softmax(sz, acts, t, lanes)
