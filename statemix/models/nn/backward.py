"""The SSM network's backward pass over one chunk: gradients of the mean label-smoothed cross entropy.

``loss = mean_t CE(softmax(logits[t]), (1 - s) onehot(tout[t]) + s / V)`` with ``s`` =
``hy[H_SMOOTH]``.  The gradient flows back through the head and the final LayerNorm, then layer by
layer through the out-projection, the selective scan, the x-projection, the conv and the
in-projection.  With ``bptt`` (``sz[S_BPTT]`` = 1) it flows through the recurrence h and the conv
inputs of earlier positions within the chunk; with 0 it is one step deep (the reference).  The
state at chunk start is a constant (no flow into earlier chunks).

Parameter gradients accumulate into the flat ``G`` (same layout as ``P``); per-row weight gradients
(:func:`_wgrad_rows_d`, :func:`_wgrad_rows_e`) are independent outputs, so :func:`backward_chunk`
runs them in parallel, and sums over positions keep the position order.  float32, fixed orders.
"""

from __future__ import annotations

import numpy as np

from ..._fmath import sigmoid32
from ..._jit import kernel, prange
from .numerics import dot8, layernorm_backward, matvec8, matvec_lanes, transpose
from .layout import (
    ADAM_BLOCK, A_LOG, CONV_B, CONV_W, DSKIP, DT_B, DT_W, EMB, F0, F1, HEAD, HEAD_BLOCK, H_SMOOTH, LANES,
    LNF_B, LNF_G, LN_B, LN_G, NT, S_BPTT, S_D, S_E, S_K, S_L, S_N, S_R, S_T, S_V, T_GROUP, WIN, WOUT,
    WX)


@kernel  # not inlined: see tests/test_ssm.py::test_compiled_passes_compute_what_their_source_says
def _bwd_head(P, off, sz, hy, acts, grads, tout, t, lanes):
    probs = acts.probs
    glog = grads.glog
    V = sz[S_V]
    T = sz[S_T]
    inv_t = F1 / np.float32(T)
    eps = hy[H_SMOOTH]
    q0 = eps / np.float32(V)
    gl = glog[t]
    pr = probs[t]
    for v in range(V):
        gl[v] = (pr[v] - q0) * inv_t
    target = tout[t]
    gl[target] = (pr[target] - (q0 + (F1 - eps))) * inv_t


@kernel(inline=True)
def _bwd_head_input(sz, grads, t0, t1, acc, part):
    """gan[L, t] = head^T glog[t] for t0 <= t < t1: per block of HEAD_BLOCK tokens a lane sum
    (:func:`matvec_lanes` over the transposed head, every element as :func:`dot_lanes` gives it),
    the blocks added in order.  ``acc`` (LANES x D) and ``part`` (D) are scratch."""
    glog, gan, ht = grads.glog, grads.gan, grads.head_t
    V = sz[S_V]
    D = sz[S_D]
    L = sz[S_L]
    for t in range(t0, t1):
        ga = gan[L, t]
        for d in range(D):
            ga[d] = F0
        for v0 in range(0, V, HEAD_BLOCK):
            v1 = min(V, v0 + HEAD_BLOCK)
            matvec_lanes(ht[v0 * D:v1 * D], glog[t, v0:v1], v1 - v0, D, acc, part)
            for d in range(D):
                ga[d] += part[d]


@kernel
def _bwd_final_ln(P, off, sz, acts, grads, t):
    nrm, rstd = acts.nrm, acts.rstd
    gres, gan = grads.gres, grads.gan
    D = sz[S_D]
    L = sz[S_L]
    ga = gan[L, t]
    gr = gres[L, t]
    for d in range(D):
        gr[d] = F0
    og = off[L * NT + LNF_G]
    layernorm_backward(ga, nrm[L, t], rstd[L, t], P[og:og + D], D, gr)


@kernel(inline=True)
def _bwd_out(P, off, sz, acts, grads, l, t, acc, dyg):
    """Out-projection, gate and readout backward of position t: gy, gz (in gxz), gxs, dC.

    ``acc`` (8 x max(D, E)) and ``dyg`` (E) are scratch."""
    z, hs, y = acts.z, acts.hs, acts.y
    gres, gxz, gy, gxs, gp = grads.gres, grads.gxz, grads.gy, grads.gxs, grads.gp
    D = sz[S_D]
    E = sz[S_E]
    N = sz[S_N]
    od = off[l * NT + DSKIP]
    matvec8(grads.wout_t[l], gres[l + 1, t], D, E, acc, dyg)  # dyg[e] = W_out[e] . dout
    zr = z[l, t]
    yr = y[l, t]
    gyr = gy[l, t]
    gzr = gxz[l, t, E:2 * E]
    gsr = gxs[l, t]
    ds = P[od:od + E]
    for e in range(E):
        zz = zr[e]
        s = sigmoid32(zz)
        dy = dyg[e] * (zz * s)
        gyr[e] = dy
        gzr[e] = (dyg[e] * yr[e]) * (s * (F1 + zz * (F1 - s)))
        gsr[e] = dy * ds[e]
    for n in range(N):
        gp[l, t, N + n] = dot8(gyr, hs[l, t + 1, n], E)


@kernel(allocates=True, inline=True)  # inlined, but numba types it with its own setting: it needs both
def _bwd_scan(Aneg, off, sz, acts, grads, G, l, e0, e1):
    """Backward through the state update for channels e0..e1-1, positions T-1 down to 0."""
    xs, pj, dtpre, dt, hs, dA = acts.xs, acts.pj, acts.dtpre, acts.dt, acts.hs, acts.dA
    gy, gxs, gdtpre, qb = grads.gy, grads.gxs, grads.gdtpre, grads.qb
    N = sz[S_N]
    E = sz[S_E]
    T = sz[S_T]
    bptt = sz[S_BPTT] != 0
    w = e1 - e0
    carry = np.zeros((N, w), dtype=np.float32)
    ddt = np.empty(w, dtype=np.float32)
    gx = np.empty(w, dtype=np.float32)
    oa = off[l * NT + A_LOG]
    keep = F1 if bptt else F0
    for t in range(T - 1, -1, -1):
        for i in range(w):
            ddt[i] = F0
            gx[i] = F0
        p = pj[l, t]
        x = xs[l, t, e0:e1]
        d = dt[l, t, e0:e1]
        dy = gy[l, t, e0:e1]
        for n in range(N):
            bn = p[n]
            cn = p[N + n]
            hp = hs[l, t, n, e0:e1]
            da = dA[l, t, n, e0:e1]
            an_ = Aneg[l, n, e0:e1]
            q = qb[l, t, n, e0:e1]
            cr = carry[n]
            ga = G[oa + n * E + e0:oa + n * E + e1]
            for i in range(w):
                dh = dy[i] * cn + cr[i]
                a = da[i]
                dda = dh * hp[i]
                ddt[i] += (dda * a) * an_[i] + (dh * bn) * x[i]
                ga[i] += ((dda * a) * d[i]) * an_[i]
                gx[i] += (dh * d[i]) * bn
                q[i] = (dh * d[i]) * x[i]
                cr[i] = (dh * a) * keep
        gs = gxs[l, t, e0:e1]
        gd = gdtpre[l, t, e0:e1]
        dp = dtpre[l, t, e0:e1]
        for i in range(w):
            gs[i] += gx[i]
            gd[i] = ddt[i] * sigmoid32(dp[i])


@kernel(inline=True)
def _bwd_xproj(P, off, sz, acts, grads, l, t, acc, ones, gxp):
    """dB, d dt_in, x-projection backward and the conv's SiLU of position t: gp, gxs, gc.

    ``acc`` (8 x max(D, E)) and ``gxp`` (E) are scratch; ``ones`` is E ones (x * 1 is exact: dot8
    against ones is the lane-order sum)."""
    cpre = acts.cpre
    gxs, gp, gdtpre, gc, qb = grads.gxs, grads.gp, grads.gdtpre, grads.gc, grads.qb
    E = sz[S_E]
    N = sz[S_N]
    R = sz[S_R]
    g = gp[l, t]
    for n in range(N):
        g[n] = dot8(qb[l, t, n], ones, E)
    odw = off[l * NT + DT_W]
    g[2 * N] = dot8(gdtpre[l, t], P[odw:odw + E], E)
    matvec8(grads.wx_t[l], g, R, E, acc, gxp)  # gxp[e] = W_x[e] . g
    gs = gxs[l, t]
    cp = cpre[l, t]
    gcr = gc[l, t]
    for e in range(E):
        v = gs[e] + gxp[e]
        gs[e] = v
        c = cp[e]
        s = sigmoid32(c)
        gcr[e] = v * (s * (F1 + c * (F1 - s)))


@kernel(inline=True)
def _bwd_in(P, off, sz, acts, grads, l, t, acc):
    """Conv input gradient, in-projection and LayerNorm backward of position t: gres[l, t].

    ``acc`` (8 x max(D, E)) is scratch."""
    nrm, rstd = acts.nrm, acts.rstd
    gres, gan, gxz, gc = grads.gres, grads.gan, grads.gxz, grads.gc
    D = sz[S_D]
    E = sz[S_E]
    K = sz[S_K]
    T = sz[S_T]
    bptt = sz[S_BPTT] != 0
    ocw = off[l * NT + CONV_W]
    gz = gxz[l, t]
    for e in range(E):
        v = gc[l, t, e] * P[ocw + (K - 1) * E + e]
        if bptt:
            for j in range(1, K):
                if t + j < T:
                    v += gc[l, t + j, e] * P[ocw + (K - 1 - j) * E + e]
        gz[e] = v
    ga = gan[l, t]
    matvec8(grads.win_t[l], gz, 2 * E, D, acc, ga)  # ga[d] = W_in[d] . gz
    gr = gres[l, t]
    up = gres[l + 1, t]
    for d in range(D):
        gr[d] = up[d]
    og = off[l * NT + LN_G]
    layernorm_backward(ga, nrm[l, t], rstd[l, t], P[og:og + D], D, gr)


@kernel(inline=True)
def _wgrad_rows_d(off, sz, acts, grads, G, l, d):
    """Weight gradients owned by model row d of layer l (in-projection row, LN gain and bias)."""
    nrm, an = acts.nrm, acts.an
    gan, gxz = grads.gan, grads.gxz
    E = sz[S_E]
    T = sz[S_T]
    row = off[l * NT + WIN] + d * 2 * E
    gw = G[row:row + 2 * E]
    for t in range(T):
        a = an[l, t, d]
        g = gxz[l, t]
        for j in range(2 * E):
            gw[j] += a * g[j]
    gs = F0
    bs = F0
    for t in range(T):
        gs += gan[l, t, d] * nrm[l, t, d]
        bs += gan[l, t, d]
    G[off[l * NT + LN_G] + d] = gs
    G[off[l * NT + LN_B] + d] = bs


@kernel(inline=True)
def _wgrad_rows_e(off, sz, acts, grads, G, l, e):
    """Weight gradients owned by channel e of layer l."""
    xh, xs, pj, yg = acts.xh, acts.xs, acts.pj, acts.yg
    gres, gy, gp, gdtpre, gc = grads.gres, grads.gy, grads.gp, grads.gdtpre, grads.gc
    D = sz[S_D]
    E = sz[S_E]
    K = sz[S_K]
    T = sz[S_T]
    R = sz[S_R]
    N = sz[S_N]
    base = l * NT
    for k in range(K):
        s = F0
        for t in range(T):
            s += gc[l, t, e] * xh[l, t + k, e]
        G[off[base + CONV_W] + k * E + e] = s
    cb = F0
    dw = F0
    db = F0
    ds = F0
    for t in range(T):
        cb += gc[l, t, e]
        dw += gdtpre[l, t, e] * pj[l, t, 2 * N]
        db += gdtpre[l, t, e]
        ds += gy[l, t, e] * xs[l, t, e]
    G[off[base + CONV_B] + e] = cb
    G[off[base + DT_W] + e] = dw
    G[off[base + DT_B] + e] = db
    G[off[base + DSKIP] + e] = ds
    row = off[base + WX] + e * R
    gw = G[row:row + R]
    for t in range(T):
        xe = xs[l, t, e]
        g = gp[l, t]
        for r in range(R):
            gw[r] += xe * g[r]
    row = off[base + WOUT] + e * D
    gw = G[row:row + D]
    for t in range(T):
        v = yg[l, t, e]
        g = gres[l + 1, t]
        for d in range(D):
            gw[d] += v * g[d]


@kernel
def _transpose_head(P, off, sz, grads):
    """The transposed copy of the head (D x V) in grads.head_t (V x D)."""
    D = sz[S_D]
    V = sz[S_V]
    oh = off[sz[S_L] * NT + HEAD]
    transpose(P[oh:oh + D * V], D, V, grads.head_t)


@kernel
def _transpose_layer(P, off, sz, grads, l):
    """The transposed copies of layer l's W_out (E x D), W_x (E x R) and W_in (D x 2E) in grads."""
    D = sz[S_D]
    E = sz[S_E]
    R = sz[S_R]
    base = l * NT
    ow = off[base + WOUT]
    transpose(P[ow:ow + E * D], E, D, grads.wout_t[l])
    ox = off[base + WX]
    transpose(P[ox:ox + E * R], E, R, grads.wx_t[l])
    oi = off[base + WIN]
    transpose(P[oi:oi + D * 2 * E], D, 2 * E, grads.win_t[l])


@kernel(parallel=True)
def backward_chunk(P, Aneg, off, sz, hy, acts, grads, tin, tout, G, channel_block):
    """Fill G with the gradient of the chunk's mean smoothed cross entropy.

    ``channel_block``: channels per task of the backward scan, a divisor of E.  Channels are
    independent, so every divisor gives the same bits: the parallel kernel takes the configured
    ``sz[S_EB]`` (tasks for threads), its serial twin E (one task: the scan in about half the time
    of four tasks of 16 channels, bench/RESULTS.md)."""
    nrm, an = acts.nrm, acts.an
    glog, gres, gan = grads.glog, grads.gres, grads.gan
    L = sz[S_L]
    D = sz[S_D]
    E = sz[S_E]
    T = sz[S_T]
    V = sz[S_V]
    nb = E // channel_block
    n = G.shape[0]
    nblk = (n + ADAM_BLOCK - 1) // ADAM_BLOCK
    for b in prange(nblk):
        gb = G[b * ADAM_BLOCK:min(n, (b + 1) * ADAM_BLOCK)]
        for i in range(gb.shape[0]):
            gb[i] = F0
    for t in prange(T):
        lanes = np.empty(LANES, dtype=np.float32)
        _bwd_head(P, off, sz, hy, acts, grads, tout, t, lanes)
    _transpose_head(P, off, sz, grads)
    for l in range(L):
        _transpose_layer(P, off, sz, grads, l)
    for tg in prange((T + T_GROUP - 1) // T_GROUP):
        acc = np.empty((LANES, D), dtype=np.float32)
        part = np.empty(D, dtype=np.float32)
        _bwd_head_input(sz, grads, tg * T_GROUP, min(T, (tg + 1) * T_GROUP), acc, part)
    for t in prange(T):
        _bwd_final_ln(P, off, sz, acts, grads, t)
    ng = (T + T_GROUP - 1) // T_GROUP
    width = max(D, E)
    for l in range(L - 1, -1, -1):
        for tg in prange(ng):
            acc = np.empty((8, width), dtype=np.float32)
            dyg = np.empty(E, dtype=np.float32)
            for t in range(tg * T_GROUP, min(T, (tg + 1) * T_GROUP)):
                _bwd_out(P, off, sz, acts, grads, l, t, acc, dyg)
        for b in prange(nb):
            _bwd_scan(Aneg, off, sz, acts, grads, G, l, b * channel_block, (b + 1) * channel_block)
        for tg in prange(ng):
            acc = np.empty((8, width), dtype=np.float32)
            ones = np.ones(E, dtype=np.float32)
            gxp = np.empty(E, dtype=np.float32)
            for t in range(tg * T_GROUP, min(T, (tg + 1) * T_GROUP)):
                _bwd_xproj(P, off, sz, acts, grads, l, t, acc, ones, gxp)
        for tg in prange(ng):
            acc = np.empty((8, width), dtype=np.float32)
            for t in range(tg * T_GROUP, min(T, (tg + 1) * T_GROUP)):
                _bwd_in(P, off, sz, acts, grads, l, t, acc)
    for l in range(L):
        for j in prange(D + E):
            if j < D:
                _wgrad_rows_d(off, sz, acts, grads, G, l, j)
            else:
                _wgrad_rows_e(off, sz, acts, grads, G, l, j - D)
    g = L * NT
    oh = off[g + HEAD]
    for vb in prange((V + HEAD_BLOCK - 1) // HEAD_BLOCK):
        v0 = vb * HEAD_BLOCK
        v1 = min(V, v0 + HEAD_BLOCK)
        nv = v1 - v0
        for d in range(D):
            gw = G[oh + d * V + v0:oh + d * V + v1]
            # eight positions per pass (the rest one at a time): the same additions in the same order
            t = 0
            while t + 8 <= T:
                a0 = an[L, t, d]
                a1 = an[L, t + 1, d]
                a2 = an[L, t + 2, d]
                a3 = an[L, t + 3, d]
                a4 = an[L, t + 4, d]
                a5 = an[L, t + 5, d]
                a6 = an[L, t + 6, d]
                a7 = an[L, t + 7, d]
                g0 = glog[t, v0:v1]
                g1 = glog[t + 1, v0:v1]
                g2 = glog[t + 2, v0:v1]
                g3 = glog[t + 3, v0:v1]
                g4 = glog[t + 4, v0:v1]
                g5 = glog[t + 5, v0:v1]
                g6 = glog[t + 6, v0:v1]
                g7 = glog[t + 7, v0:v1]
                for v in range(nv):
                    gw[v] = (((((((gw[v] + a0 * g0[v]) + a1 * g1[v]) + a2 * g2[v]) + a3 * g3[v])
                               + a4 * g4[v]) + a5 * g5[v]) + a6 * g6[v]) + a7 * g7[v]
                t += 8
            while t < T:
                a = an[L, t, d]
                gl = glog[t, v0:v1]
                for v in range(nv):
                    gw[v] += a * gl[v]
                t += 1
    for d in prange(D):
        gs = F0
        bs = F0
        for t in range(T):
            gs += gan[L, t, d] * nrm[L, t, d]
            bs += gan[L, t, d]
        G[off[g + LNF_G] + d] = gs
        G[off[g + LNF_B] + d] = bs
    oe = off[g + EMB]
    for t in range(T):
        row = oe + tin[t] * D
        gw = G[row:row + D]
        gr = gres[0, t]
        for d in range(D):
            gw[d] += gr[d]
