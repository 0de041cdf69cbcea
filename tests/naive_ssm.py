"""Slow, obviously correct float64 NumPy references for statemix.models.ssm (tests only).

Same parameter layout as the kernels (statemix.models.layout.layout), same formulas, plain NumPy with
float64 and library exp/log: the kernels must agree within float32 rounding.

- :func:`forward`: a chunk from a given start state, returning logits and the per-position states;
- :func:`loss`: the chunk's mean label-smoothed cross entropy.  With ``detached`` (the states and
  conv inputs of a base run), the state before each position and the conv inputs of earlier
  positions are those constants: the gradient of that function is the reference's one-step-deep
  gradient; without it, the gradient flows through the whole chunk (``bptt``);
- :func:`gradient`: the analytic gradient of :func:`loss` (both variants), written out by hand;
- :func:`numeric_gradient`: central finite differences of :func:`loss`;
- :func:`adam`: one clipped Adam step.
"""

from __future__ import annotations

import numpy as np

from statemix.models.nn import layout


def unpack(P, config):
    """Return (layers, globals) as dicts of float64 arrays in natural shapes."""
    off, _ = layout.layout(config)
    V, D, E, N, K, L = (config.vocab, config.d_model, config.d_model * config.expand,
                        config.d_state, config.conv, config.layers)
    R = 2 * N + 1
    P = np.asarray(P, dtype=np.float64)
    shapes = {layout.LN_G: (D,), layout.LN_B: (D,), layout.WIN: (D, 2 * E), layout.CONV_W: (K, E),
              layout.CONV_B: (E,), layout.WX: (E, R), layout.DT_W: (E,), layout.DT_B: (E,), layout.A_LOG: (N, E),
              layout.DSKIP: (E,), layout.WOUT: (E, D)}
    layers = []
    for l in range(L):
        layer = {}
        for k, shape in shapes.items():
            o = off[l * layout.NT + k]
            layer[k] = P[o:o + int(np.prod(shape))].reshape(shape)
        layers.append(layer)
    g = L * layout.NT
    glob = {
        layout.EMB: P[off[g + layout.EMB]:off[g + layout.EMB] + V * D].reshape(V, D),
        layout.LNF_G: P[off[g + layout.LNF_G]:off[g + layout.LNF_G] + D],
        layout.LNF_B: P[off[g + layout.LNF_B]:off[g + layout.LNF_B] + D],
        layout.HEAD: P[off[g + layout.HEAD]:off[g + layout.HEAD] + D * V].reshape(D, V),
    }
    return layers, glob


def _ln(u, g, b):
    mu = u.mean()
    var = ((u - mu) ** 2).mean()
    rs = 1.0 / np.sqrt(var + 1e-5)
    nrm = (u - mu) * rs
    return nrm * g + b, nrm, rs


def _sig(x):
    return 1.0 / (1.0 + np.exp(-x))


def _softplus(x):
    return np.logaddexp(0.0, x)


def forward(P, config, tin, h0, xbuf0, detached=None):
    """Run a chunk; return (logits [T, V], cache).  ``detached``: (hprev [L, T, N, E], xin [L, T+K-1, E])."""
    layers, glob = unpack(P, config)
    N, K, L = config.d_state, config.conv, config.layers
    T = len(tin)
    E = config.d_model * config.expand
    h = [np.array(h0[l], dtype=np.float64) for l in range(L)]
    xhist = [list(np.array(xbuf0[l], dtype=np.float64)) for l in range(L)]
    hs = np.zeros((L, T + 1, N, E))
    xin = np.zeros((L, T + K - 1, E))
    for l in range(L):
        hs[l, 0] = h[l]
        xin[l, :K - 1] = xbuf0[l]
    cache = []
    logits = np.zeros((T, config.vocab))
    for t in range(T):
        u = glob[layout.EMB][tin[t]].copy()
        pos = []
        for l in range(L):
            p = layers[l]
            a, nrm, rs = _ln(u, p[layout.LN_G], p[layout.LN_B])
            xz = a @ p[layout.WIN]
            x, zg = xz[:E], xz[E:]
            xin[l, t + K - 1] = x
            if detached is None:
                window = np.array(xhist[l][len(xhist[l]) - (K - 1):] + [x]) if K > 1 else x[None]
                hprev = h[l]
            else:
                window = np.concatenate([detached[1][l, t:t + K - 1], x[None]])
                hprev = detached[0][l, t]
            xhist[l].append(x)
            c = p[layout.CONV_B] + (p[layout.CONV_W] * window).sum(0)
            xs = c * _sig(c)
            pj = xs @ p[layout.WX]
            B, C, dtin = pj[:N], pj[N:2 * N], pj[2 * N]
            dtpre = dtin * p[layout.DT_W] + p[layout.DT_B]
            dt = _softplus(dtpre)
            A = -np.exp(p[layout.A_LOG])
            dA = np.exp(dt[None, :] * A)
            hn = dA * hprev + (dt[None, :] * B[:, None]) * xs[None, :]
            h[l] = hn
            hs[l, t + 1] = hn
            y = p[layout.DSKIP] * xs + (C[:, None] * hn).sum(0)
            yg = y * (zg * _sig(zg))
            out = yg @ p[layout.WOUT]
            pos.append(dict(u=u, a=a, nrm=nrm, rs=rs, x=x, z=zg, window=window, c=c, xs=xs, B=B, C=C,
                            dtin=dtin, dtpre=dtpre, dt=dt, A=A, dA=dA, hprev=hprev, hn=hn, y=y, yg=yg))
            u = u + out
        af, nf, rf = _ln(u, glob[layout.LNF_G], glob[layout.LNF_B])
        logits[t] = af @ glob[layout.HEAD]
        cache.append(dict(layers=pos, uf=u, af=af, nf=nf, rf=rf))
    return logits, dict(pos=cache, hs=hs, xin=xin)


def loss(P, config, tin, tout, h0, xbuf0, detached=None):
    logits, _ = forward(P, config, tin, h0, xbuf0, detached)
    m = logits.max(1, keepdims=True)
    logp = logits - m - np.log(np.exp(logits - m).sum(1, keepdims=True))
    V = config.vocab
    eps = np.float64(np.float32(config.smoothing))
    q = np.full(logits.shape, eps / V)
    q[np.arange(len(tout)), tout] += 1.0 - eps
    return -(q * logp).sum() / len(tout)


def numeric_gradient(P, config, tin, tout, h0, xbuf0, indices, detached=None, step=1e-5):
    P = np.asarray(P, dtype=np.float64)
    out = np.zeros(len(indices))
    for j, i in enumerate(indices):
        plus = P.copy()
        plus[i] += step
        minus = P.copy()
        minus[i] -= step
        out[j] = (loss(plus, config, tin, tout, h0, xbuf0, detached)
                  - loss(minus, config, tin, tout, h0, xbuf0, detached)) / (2 * step)
    return out


def _ln_back(da, nrm, rs, g):
    dn = da * g
    return rs * (dn - dn.mean() - nrm * (dn * nrm).mean())


def gradient(P, config, tin, tout, h0, xbuf0, bptt):
    """Analytic gradient of :func:`loss` (bptt: through the chunk; else one step deep), flat float64."""
    layers, glob = unpack(P, config)
    N, K, L, V = config.d_state, config.conv, config.layers, config.vocab
    E = config.d_model * config.expand
    T = len(tin)
    logits, cache = forward(P, config, tin, h0, xbuf0)
    grad = np.zeros(len(P))
    gl, gg = unpack(grad, config)  # views into grad
    eps = np.float64(np.float32(config.smoothing))
    m = logits.max(1, keepdims=True)
    p = np.exp(logits - m)
    p /= p.sum(1, keepdims=True)
    q = np.full(logits.shape, eps / V)
    q[np.arange(T), tout] += 1.0 - eps
    glog = (p - q) / T
    dres = np.zeros((T, config.d_model))
    for t in range(T):
        c = cache["pos"][t]
        gg[layout.HEAD] += np.outer(c["af"], glog[t])
        daf = glob[layout.HEAD] @ glog[t]
        gg[layout.LNF_G] += daf * c["nf"]
        gg[layout.LNF_B] += daf
        dres[t] = _ln_back(daf, c["nf"], c["rf"], glob[layout.LNF_G])
    for l in range(L - 1, -1, -1):
        p_ = layers[l]
        g_ = gl[l]
        dh_carry = np.zeros((N, E))
        below = dres.copy()
        # pass 1 (reverse time): everything up to dc_t, carrying dh through the recurrence
        dcs = np.zeros((T, E))
        for t in range(T - 1, -1, -1):
            c = cache["pos"][t]["layers"][l]
            dout = dres[t]
            g_[layout.WOUT] += np.outer(c["yg"], dout)
            dyg = p_[layout.WOUT] @ dout
            s = _sig(c["z"])
            dy = dyg * c["z"] * s
            dz = dyg * c["y"] * s * (1 + c["z"] * (1 - s))
            g_[layout.DSKIP] += dy * c["xs"]
            dxs = dy * p_[layout.DSKIP]
            dC = (dy[None, :] * c["hn"]).sum(1)
            dh = dy[None, :] * c["C"][:, None] + (dh_carry if bptt else 0.0)
            ddA = dh * c["hprev"]
            ddt = (ddA * c["dA"] * c["A"]).sum(0) + (dh * c["B"][:, None]).sum(0) * c["xs"]
            g_[layout.A_LOG] += ddA * c["dA"] * c["dt"][None, :] * c["A"]
            dxs = dxs + (dh * c["dt"][None, :] * c["B"][:, None]).sum(0)
            dB = (dh * (c["dt"] * c["xs"])[None, :]).sum(1)
            dh_carry = dh * c["dA"]
            ddtpre = ddt * _sig(c["dtpre"])
            g_[layout.DT_W] += ddtpre * c["dtin"]
            g_[layout.DT_B] += ddtpre
            ddtin = (ddtpre * p_[layout.DT_W]).sum()
            dp = np.concatenate([dB, dC, [ddtin]])
            g_[layout.WX] += np.outer(c["xs"], dp)
            dxs = dxs + p_[layout.WX] @ dp
            sc = _sig(c["c"])
            dc = dxs * sc * (1 + c["c"] * (1 - sc))
            dcs[t] = dc
            g_[layout.CONV_B] += dc
            g_[layout.CONV_W] += dc[None, :] * c["window"]
            c["dz"] = dz
        # pass 2: conv input gradient, in-projection, LayerNorm
        for t in range(T):
            c = cache["pos"][t]["layers"][l]
            dx = dcs[t] * p_[layout.CONV_W][K - 1]
            if bptt:
                for j in range(1, K):
                    if t + j < T:
                        dx = dx + dcs[t + j] * p_[layout.CONV_W][K - 1 - j]
            dxz = np.concatenate([dx, c["dz"]])
            g_[layout.WIN] += np.outer(c["a"], dxz)
            da = p_[layout.WIN] @ dxz
            g_[layout.LN_G] += da * c["nrm"]
            g_[layout.LN_B] += da
            below[t] = dres[t] + _ln_back(da, c["nrm"], c["rs"], p_[layout.LN_G])
        dres = below
    for t in range(T):
        gg[layout.EMB][tin[t]] += dres[t]
    return grad


def adam(P, G, M, W, lr, b1, b2, eps, clip, step):
    """One Adam step (float64) on copies; ``step`` counts from 1.  Returns (P, M, W, norm)."""
    P, G, M, W = (np.asarray(a, dtype=np.float64).copy() for a in (P, G, M, W))
    norm = np.sqrt((G * G).sum())
    if norm > clip:
        G = G * (clip / norm)
    M = b1 * M + (1 - b1) * G
    W = b2 * W + (1 - b2) * G * G
    mhat = M / (1 - b1 ** step)
    what = W / (1 - b2 ** step)
    P = P - lr * mhat / (np.sqrt(what) + eps)
    return P, M, W, norm
