"""ssm: an online selective state-space model (Mamba-style) over a token alphabet, trained while coding.

Model id 2.  The model predicts a softmax over ``V`` tokens; :mod:`.tokenmix` mixes it in logit space
with a frequency prior and, unless ``mixing`` is 0, with token n-gram counts and a match model (fixed
weights or learned online), and the result is coded with :mod:`statemix.coder`.  Every ``T`` tokens
(a *chunk*) the SSM trains on the chunk just coded with a few Adam iterations.  The decoder replays the
identical computation.

Tokens (``Config.tokenizer``): ``TOK_IDS`` codes the bytes themselves (V = ``vocab`` = 256; the token
interface takes any ids below ``vocab``); ``TOK_BPE`` trains a byte-level BPE vocabulary
(:mod:`statemix.tokenizer`, word pre-split, ``merges`` merges or ``default_merges(len(block))``) on the
first non-empty block, stores it in that block's code word, and codes every block as BPE tokens of
it (V = 256 + merges; the model is allocated at exactly that V when the vocabulary is known; see
:class:`Model`).  Presets: ``reference`` (bytes, the reference's one-step gradient), ``default``
(bytes, gradient through the chunk), ``bpe`` (12,288 merges, 16-token chunks, one Adam step per chunk
after the start-up schedule), all with the frequency prior only; ``mix`` (``default`` with learned
mixing of the count models and the match model: ``--model ssm``, levels 2 and 3) and ``counts`` (the
same without the SSM: level 1).

Speed notes: loops index slices from 0 (a view per row) so LLVM can drop numba's negative-index
wrap-around and vectorize; the head products of a chunk run in blocks of ``HEAD_BLOCK`` tokens so the
block's weights stay in cache; rows and positions are unrolled by 8 with the additions kept in
one fixed order (``((g + a0 w0) + a1 w1) + ...``, the same bits as one row at a time).

Glossary (code name -> symbol, shape)::

    V vocabulary, D d_model, E = expand * D inner width, N d_state, K conv width, L layers,
    T chunk length, R = 2N + 1 outputs of the x-projection (B, C, dt input)

    res[l, t]   u_l        residual stream entering layer l at chunk position t      (D)
    an[l, t]    LN(u_l)    LayerNorm output (gain, bias learned)                     (D)
    xh[l]       x          in-projection x part, with the K-1 inputs before the chunk (T+K-1, E)
    z[l, t]     z          in-projection gate part                                   (E)
    xs[l, t]    x'         SiLU(causal depthwise conv of x)                          (E)
    pj[l, t]    B, C, dt_in  x-projection of x'                                      (R)
    dt[l, t]    Delta      softplus(dt_in * dt_w + dt_b), per channel                (E)
    hs[l, t]    h          state before position t (hs[l, 0] = state at chunk start) (N, E)
    dA[l, t]    exp(Delta A)  with A = -exp(A_log)                                   (N, E)
    y[l, t]     y          C . h + D_skip * x'                                       (E)
    yg[l, t]    y * SiLU(z)                                                           (E)
    logits[t]   head(LN_f(u_L))                                                       (V)

One layer, per token:  h = exp(Delta A) h + Delta B x';  y = C.h + D x';  u += W_out (y * SiLU(z)).

Training (per chunk; each iteration restarts from the state at chunk start): loss = mean over the
chunk of the cross entropy against the label-smoothed target; gradients either one step deep (the
reference: no flow through h or the conv inputs of earlier positions) or through the recurrence and
the conv within the chunk (``bptt``); global-norm clipping; Adam with bias corrections kept as running
products.  The first iteration reuses the activations of the coding pass (same weights, same state).

Determinism: float32 throughout, typed constants, summation orders written in the source, own
exp/log (:mod:`statemix._fmath`), no BLAS.  Parallel loops (``prange``) run only over independent
outputs (positions, channel blocks, parameter rows, fixed parameter blocks); the one reduction over a
partition (the gradient norm) uses a fixed block size and sums the block results in index order.  The
thread count therefore changes speed only.

Parameters live in one flat float32 array; ``layout(config)`` gives the offset of every tensor.
Matrices are stored transposed (input index outside, output index inside) so forward loops run
across independent outputs.
"""

from __future__ import annotations

import contextlib
import struct
from dataclasses import dataclass, replace

import numpy as np

from .._errors import StatemixError
from .._fmath import exp32, log32, sigmoid32, silu32, softplus32
from .._jit import kernel, prange, threads_at_most
from .._varint import Truncated, decode_varint, encode_varint
from ..coder import dec_symbol, enc_encode, enc_finish, enc_init, dec_init, new_state
from ..quantize import assign_frequencies
from ..tokenizer import SPLIT_WORDS, Vocabulary, default_merges
from ..tokenizer import decode as bpe_decode
from ..tokenizer import encode as bpe_encode
from ..tokenizer import train as bpe_train
from . import presets, tokenmix
from ._snapshot import put_back, take

MODEL_ID = 2
ENCODE, DECODE, LEARN = 0, 1, 2

# ---- parameter tensors ------------------------------------------------------------------------
# per layer, at off[l * NT + k]
LN_G, LN_B, WIN, CONV_W, CONV_B, WX, DT_W, DT_B, A_LOG, DSKIP, WOUT = range(11)
NT = 11
# global, at off[L * NT + k]
EMB, LNF_G, LNF_B, HEAD = range(4)

# ---- size table (int64 array ``sz``) ------------------------------------------------------------
S_V, S_D, S_E, S_N, S_K, S_L, S_T, S_R, S_EB, S_BPTT = range(10)
S_IT_A, S_N_A, S_IT_B, S_N_B, S_IT_C, S_TB = range(10, 16)
S_MIXING, S_USE_SSM, S_MATCH, S_CALIBRATE, S_TABLE_BITS = range(16, 21)  # tokenmix options
SZ_SIZE = 21

# ---- float hyper-parameters (float32 array ``hy``) ------------------------------------------------
H_LR, H_B1, H_B2, H_EPS, H_CLIP, H_SMOOTH, H_PRIOR, H_LR_MIN, H_LR_HALF = range(9)
HY_SIZE = 9

# ---- int64 run state ``st`` ----------------------------------------------------------------------
ST_POS, ST_PREV, ST_CHUNK, ST_STEPS = range(4)
ST_SIZE = 4
# float32 run state ``sf``: running products beta1**t, beta2**t
SF_B1T, SF_B2T = range(2)

F0 = np.float32(0.0)
F1 = np.float32(1.0)
LN_EPS = np.float32(1e-5)
LANES = 64  # lanes of long sums (then a fixed pairwise tree)
ADAM_BLOCK = 4096  # fixed parameter block of the parallel Adam step and gradient norm
HEAD_BLOCK = 1024  # tokens per block of the chunk's head products (a multiple of LANES)
T_GROUP = 8  # chunk positions per task of the head's input gradient
TOTAL_BITS = 30  # frequency resolution handed to the coder
BLOCK_SIZE_MAX = 1 << 24  # largest block the container hands a model
PARALLEL_MIN_VOCAB = 4096  # smaller vocabularies run on one thread (output is the same at any count)
# Tokens per kernel step (Model.step_tokens): STEP_COST // (V + STEP_COST_TOKEN) with the SSM (256 over
# bytes: at most 0.08 s at the start of a stream, 0.02 s later, on this machine),
# STEP_COUNTS with the count models alone; measured so a step stays under about 0.1 s here.
STEP_COST = 1 << 17
STEP_COST_TOKEN = 256
STEP_COUNTS = 1 << 13
#: attributes that are configuration, not state (see Model.snapshot)
_CONSTANT = frozenset({"config"})

PRESETS = {}  # name -> Config, filled below


# ================================================================================================
# small helpers with a fixed summation order
# ================================================================================================

@kernel
def _sum_lanes(a, n, lanes):
    """Sum a[0:n]: 64 interleaved lanes, then a pairwise tree over the lanes."""
    for j in range(LANES):
        lanes[j] = F0
    full = n - n % LANES
    for i in range(0, full, LANES):
        blk = a[i:i + LANES]
        for j in range(LANES):
            lanes[j] += blk[j]
    for i in range(full, n):
        lanes[i - full] += a[i]
    w = LANES // 2
    while w >= 1:
        for j in range(w):
            lanes[j] += lanes[j + w]
        w //= 2
    return lanes[0]


@kernel
def _dot_lanes(a, b, n, lanes):
    """Dot product of a[0:n] and b[0:n] with the lane order of :func:`_sum_lanes`."""
    for j in range(LANES):
        lanes[j] = F0
    full = n - n % LANES
    for i in range(0, full, LANES):
        ba = a[i:i + LANES]
        bb = b[i:i + LANES]
        for j in range(LANES):
            lanes[j] += ba[j] * bb[j]
    for i in range(full, n):
        lanes[i - full] += a[i] * b[i]
    w = LANES // 2
    while w >= 1:
        for j in range(w):
            lanes[j] += lanes[j + w]
        w //= 2
    return lanes[0]


@kernel
def _dot8(a, b, n):
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


@kernel
def _sum8(a, n):
    """Sum of a short vector in the lane order of :func:`_dot8`."""
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
        s0 += a[i]
        s1 += a[i + 1]
        s2 += a[i + 2]
        s3 += a[i + 3]
        s4 += a[i + 4]
        s5 += a[i + 5]
        s6 += a[i + 6]
        s7 += a[i + 7]
    r = n - full
    if r > 0:
        s0 += a[full]
    if r > 1:
        s1 += a[full + 1]
    if r > 2:
        s2 += a[full + 2]
    if r > 3:
        s3 += a[full + 3]
    if r > 4:
        s4 += a[full + 4]
    if r > 5:
        s5 += a[full + 5]
    if r > 6:
        s6 += a[full + 6]
    return ((s0 + s4) + (s2 + s6)) + ((s1 + s5) + (s3 + s7))


@kernel
def _layernorm(src, g, b, nrm, out, n):
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
def _layernorm_backward(dout, nrm, rs, g, n, dsrc):
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


# ================================================================================================
# forward, one position at a time (shared by the coding pass and the chunk forward)
# ================================================================================================

@kernel
def _fwd_in(P, off, sz, acts, l, t):
    """LayerNorm and in-projection of position t: xh[l, t+K-1], z[l, t]."""
    (res, nrm, rstd, an, xh, z, cpre, xs, pj, dtpre, dt, hs, dA, y, yg, logits, probs, lse) = acts
    D = sz[S_D]
    E = sz[S_E]
    K = sz[S_K]
    base = l * NT
    og = off[base + LN_G]
    ob = off[base + LN_B]
    rstd[l, t] = _layernorm(res[l, t], P[og:og + D], P[ob:ob + D], nrm[l, t], an[l, t], D)
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


@kernel
def _fwd_conv(P, off, sz, acts, l, t):
    """Causal depthwise conv + SiLU of position t: cpre[l, t], xs[l, t]."""
    (res, nrm, rstd, an, xh, z, cpre, xs, pj, dtpre, dt, hs, dA, y, yg, logits, probs, lse) = acts
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


@kernel
def _fwd_xproj(P, off, sz, acts, l, t):
    """x-projection (B, C, dt input) and the per-channel step size dt of position t."""
    (res, nrm, rstd, an, xh, z, cpre, xs, pj, dtpre, dt, hs, dA, y, yg, logits, probs, lse) = acts
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


@kernel
def _fwd_scan(P, Aneg, off, sz, acts, l, t, e0, e1):
    """State update and readout of position t for channels e0..e1-1: hs[l, t+1], dA, y."""
    (res, nrm, rstd, an, xh, z, cpre, xs, pj, dtpre, dt, hs, dA, y, yg, logits, probs, lse) = acts
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


@kernel
def _fwd_out(P, off, sz, acts, l, t):
    """Gate, out-projection and residual of position t: res[l+1, t]."""
    (res, nrm, rstd, an, xh, z, cpre, xs, pj, dtpre, dt, hs, dA, y, yg, logits, probs, lse) = acts
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


@kernel
def _fwd_head(P, off, sz, acts, t, v0, v1, lanes):
    """Final LayerNorm (if v0 == 0) and logits[t, v0:v1]."""
    (res, nrm, rstd, an, xh, z, cpre, xs, pj, dtpre, dt, hs, dA, y, yg, logits, probs, lse) = acts
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


@kernel
def _final_ln(P, off, sz, acts, t):
    (res, nrm, rstd, an, xh, z, cpre, xs, pj, dtpre, dt, hs, dA, y, yg, logits, probs, lse) = acts
    D = sz[S_D]
    L = sz[S_L]
    og = off[L * NT + LNF_G]
    ob = off[L * NT + LNF_B]
    rstd[L, t] = _layernorm(res[L, t], P[og:og + D], P[ob:ob + D], nrm[L, t], an[L, t], D)


@kernel
def _softmax(sz, acts, t, lanes):
    """probs[t] = softmax(logits[t]); lse[t] = log-sum-exp of logits[t]."""
    (res, nrm, rstd, an, xh, z, cpre, xs, pj, dtpre, dt, hs, dA, y, yg, logits, probs, lse) = acts
    V = sz[S_V]
    lg = logits[t]
    pr = probs[t]
    m = lg[0]
    for v in range(1, V):
        if lg[v] > m:
            m = lg[v]
    for v in range(V):
        pr[v] = exp32(lg[v] - m)
    s = _sum_lanes(pr, V, lanes)
    inv = F1 / s
    for v in range(V):
        pr[v] = pr[v] * inv
    lse[t] = m + log32(s)


@kernel
def _embed(P, off, sz, acts, tin, t):
    (res, nrm, rstd, an, xh, z, cpre, xs, pj, dtpre, dt, hs, dA, y, yg, logits, probs, lse) = acts
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
def forward_chunk(P, Aneg, off, sz, acts, tin):
    """Forward pass over the whole chunk from the state at chunk start, parallel where independent.

    Every output element is computed by the same per-position code as :func:`forward_position`, so
    the results are bit-identical to the coding pass whatever the partition.
    """
    L = sz[S_L]
    E = sz[S_E]
    T = sz[S_T]
    EB = sz[S_EB]
    nb = E // EB
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
                _fwd_scan(P, Aneg, off, sz, acts, l, t, b * EB, (b + 1) * EB)
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


# ================================================================================================
# backward over a chunk
# ================================================================================================

@kernel
def _bwd_head(P, off, sz, hy, acts, grads, tout, t, lanes):
    (res, nrm, rstd, an, xh, z, cpre, xs, pj, dtpre, dt, hs, dA, y, yg, logits, probs, lse) = acts
    (glog, gres, gan, gxz, gy, gxs, gp, gdtpre, gc, qb) = grads
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


@kernel
def _bwd_head_input(P, off, sz, grads, t0, t1, lanes):
    """gan[L, t] = head^T glog[t] for t0 <= t < t1: per token block of HEAD_BLOCK a lane sum
    (:func:`_dot_lanes`), the blocks added in order (the block's weights serve every position)."""
    (glog, gres, gan, gxz, gy, gxs, gp, gdtpre, gc, qb) = grads
    V = sz[S_V]
    D = sz[S_D]
    L = sz[S_L]
    oh = off[L * NT + HEAD]
    for t in range(t0, t1):
        for d in range(D):
            gan[L, t, d] = F0
    for v0 in range(0, V, HEAD_BLOCK):
        v1 = min(V, v0 + HEAD_BLOCK)
        for t in range(t0, t1):
            gl = glog[t, v0:v1]
            ga = gan[L, t]
            for d in range(D):
                ga[d] += _dot_lanes(P[oh + d * V + v0:oh + d * V + v1], gl, v1 - v0, lanes)


@kernel
def _bwd_final_ln(P, off, sz, acts, grads, t):
    (res, nrm, rstd, an, xh, z, cpre, xs, pj, dtpre, dt, hs, dA, y, yg, logits, probs, lse) = acts
    (glog, gres, gan, gxz, gy, gxs, gp, gdtpre, gc, qb) = grads
    D = sz[S_D]
    L = sz[S_L]
    ga = gan[L, t]
    gr = gres[L, t]
    for d in range(D):
        gr[d] = F0
    og = off[L * NT + LNF_G]
    _layernorm_backward(ga, nrm[L, t], rstd[L, t], P[og:og + D], D, gr)


@kernel
def _bwd_out(P, off, sz, acts, grads, l, t):
    """Out-projection, gate and readout backward of position t: gy, gz (in gxz), gxs, dC."""
    (res, nrm, rstd, an, xh, z, cpre, xs, pj, dtpre, dt, hs, dA, y, yg, logits, probs, lse) = acts
    (glog, gres, gan, gxz, gy, gxs, gp, gdtpre, gc, qb) = grads
    D = sz[S_D]
    E = sz[S_E]
    N = sz[S_N]
    ow = off[l * NT + WOUT]
    od = off[l * NT + DSKIP]
    dout = gres[l + 1, t]
    for e in range(E):
        dyg = _dot8(P[ow + e * D:ow + (e + 1) * D], dout, D)
        zz = z[l, t, e]
        s = sigmoid32(zz)
        dy = dyg * (zz * s)
        gy[l, t, e] = dy
        gxz[l, t, E + e] = (dyg * y[l, t, e]) * (s * (F1 + zz * (F1 - s)))
        gxs[l, t, e] = dy * P[od + e]
    for n in range(N):
        gp[l, t, N + n] = _dot8(gy[l, t], hs[l, t + 1, n], E)


@kernel
def _bwd_scan(Aneg, off, sz, acts, grads, G, l, e0, e1):
    """Backward through the state update for channels e0..e1-1, positions T-1 down to 0."""
    (res, nrm, rstd, an, xh, z, cpre, xs, pj, dtpre, dt, hs, dA, y, yg, logits, probs, lse) = acts
    (glog, gres, gan, gxz, gy, gxs, gp, gdtpre, gc, qb) = grads
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


@kernel
def _bwd_xproj(P, off, sz, acts, grads, l, t):
    """dB, d dt_in, x-projection backward and the conv's SiLU of position t: gp, gxs, gc."""
    (res, nrm, rstd, an, xh, z, cpre, xs, pj, dtpre, dt, hs, dA, y, yg, logits, probs, lse) = acts
    (glog, gres, gan, gxz, gy, gxs, gp, gdtpre, gc, qb) = grads
    E = sz[S_E]
    N = sz[S_N]
    R = sz[S_R]
    g = gp[l, t]
    for n in range(N):
        g[n] = _sum8(qb[l, t, n], E)
    odw = off[l * NT + DT_W]
    g[2 * N] = _dot8(gdtpre[l, t], P[odw:odw + E], E)
    ow = off[l * NT + WX]
    for e in range(E):
        v = gxs[l, t, e] + _dot8(P[ow + e * R:ow + (e + 1) * R], g, R)
        gxs[l, t, e] = v
        c = cpre[l, t, e]
        s = sigmoid32(c)
        gc[l, t, e] = v * (s * (F1 + c * (F1 - s)))


@kernel
def _bwd_in(P, off, sz, acts, grads, l, t):
    """Conv input gradient, in-projection and LayerNorm backward of position t: gres[l, t]."""
    (res, nrm, rstd, an, xh, z, cpre, xs, pj, dtpre, dt, hs, dA, y, yg, logits, probs, lse) = acts
    (glog, gres, gan, gxz, gy, gxs, gp, gdtpre, gc, qb) = grads
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
    ow = off[l * NT + WIN]
    ga = gan[l, t]
    for d in range(D):
        ga[d] = _dot8(P[ow + d * 2 * E:ow + (d + 1) * 2 * E], gz, 2 * E)
    gr = gres[l, t]
    up = gres[l + 1, t]
    for d in range(D):
        gr[d] = up[d]
    og = off[l * NT + LN_G]
    _layernorm_backward(ga, nrm[l, t], rstd[l, t], P[og:og + D], D, gr)


@kernel
def _wgrad_rows_d(off, sz, acts, grads, G, l, d):
    """Weight gradients owned by model row d of layer l (in-projection row, LN gain and bias)."""
    (res, nrm, rstd, an, xh, z, cpre, xs, pj, dtpre, dt, hs, dA, y, yg, logits, probs, lse) = acts
    (glog, gres, gan, gxz, gy, gxs, gp, gdtpre, gc, qb) = grads
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


@kernel
def _wgrad_rows_e(off, sz, acts, grads, G, l, e):
    """Weight gradients owned by channel e of layer l."""
    (res, nrm, rstd, an, xh, z, cpre, xs, pj, dtpre, dt, hs, dA, y, yg, logits, probs, lse) = acts
    (glog, gres, gan, gxz, gy, gxs, gp, gdtpre, gc, qb) = grads
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


@kernel(parallel=True)
def backward_chunk(P, Aneg, off, sz, hy, acts, grads, tin, tout, G):
    """Fill G with the gradient of the chunk's mean smoothed cross entropy."""
    (res, nrm, rstd, an, xh, z, cpre, xs, pj, dtpre, dt, hs, dA, y, yg, logits, probs, lse) = acts
    (glog, gres, gan, gxz, gy, gxs, gp, gdtpre, gc, qb) = grads
    L = sz[S_L]
    D = sz[S_D]
    E = sz[S_E]
    T = sz[S_T]
    V = sz[S_V]
    EB = sz[S_EB]
    nb = E // EB
    n = G.shape[0]
    nblk = (n + ADAM_BLOCK - 1) // ADAM_BLOCK
    for b in prange(nblk):
        gb = G[b * ADAM_BLOCK:min(n, (b + 1) * ADAM_BLOCK)]
        for i in range(gb.shape[0]):
            gb[i] = F0
    for t in prange(T):
        lanes = np.empty(LANES, dtype=np.float32)
        _bwd_head(P, off, sz, hy, acts, grads, tout, t, lanes)
    for tg in prange((T + T_GROUP - 1) // T_GROUP):
        lanes = np.empty(LANES, dtype=np.float32)
        _bwd_head_input(P, off, sz, grads, tg * T_GROUP, min(T, (tg + 1) * T_GROUP), lanes)
    for t in prange(T):
        _bwd_final_ln(P, off, sz, acts, grads, t)
    for l in range(L - 1, -1, -1):
        for t in prange(T):
            _bwd_out(P, off, sz, acts, grads, l, t)
        for b in prange(nb):
            _bwd_scan(Aneg, off, sz, acts, grads, G, l, b * EB, (b + 1) * EB)
        for t in prange(T):
            _bwd_xproj(P, off, sz, acts, grads, l, t)
        for t in prange(T):
            _bwd_in(P, off, sz, acts, grads, l, t)
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


# ================================================================================================
# Adam
# ================================================================================================

@kernel(parallel=True)
def adam_step(P, G, M, W, hy, sf, lr, partial):
    """Clip G to global norm hy[H_CLIP] and take one Adam step on P (moments M, W)."""
    n = P.shape[0]
    nblk = (n + ADAM_BLOCK - 1) // ADAM_BLOCK
    for b in prange(nblk):
        lanes = np.empty(LANES, dtype=np.float32)
        lo = b * ADAM_BLOCK
        hi = min(n, lo + ADAM_BLOCK)
        partial[b] = _dot_lanes(G[lo:hi], G[lo:hi], hi - lo, lanes)
    total = F0
    for b in range(nblk):
        total += partial[b]
    norm = np.sqrt(total)
    clip = hy[H_CLIP]
    scale = F1
    if norm > clip:
        scale = clip / norm
    b1 = hy[H_B1]
    b2 = hy[H_B2]
    eps = hy[H_EPS]
    b1t = sf[SF_B1T] * b1
    b2t = sf[SF_B2T] * b2
    sf[SF_B1T] = b1t
    sf[SF_B2T] = b2t
    step = lr / (F1 - b1t)
    inv_sb2 = F1 / np.sqrt(F1 - b2t)
    c1 = F1 - b1
    c2 = F1 - b2
    for b in prange(nblk):
        lo = b * ADAM_BLOCK
        hi = min(n, lo + ADAM_BLOCK)
        Gb = G[lo:hi]
        Mb = M[lo:hi]
        Wb = W[lo:hi]
        Pb = P[lo:hi]
        for i in range(hi - lo):
            g = Gb[i] * scale
            m = b1 * Mb[i] + c1 * g
            w = b2 * Wb[i] + c2 * (g * g)
            Mb[i] = m
            Wb[i] = w
            Pb[i] = Pb[i] - step * m / (np.sqrt(w) * inv_sb2 + eps)
    return norm


@kernel
def refresh_a(P, off, sz, Aneg):
    """Aneg = -exp(A_log) for every layer (after each parameter update)."""
    L = sz[S_L]
    N = sz[S_N]
    E = sz[S_E]
    for l in range(L):
        oa = off[l * NT + A_LOG]
        for n in range(N):
            for e in range(E):
                Aneg[l, n, e] = -exp32(P[oa + n * E + e])


# ================================================================================================
# the single loop: coding pass + training
# ================================================================================================

@kernel
def _iterations(sz, chunk):
    if chunk < sz[S_N_A]:
        return sz[S_IT_A]
    if chunk < sz[S_N_A] + sz[S_N_B]:
        return sz[S_IT_B]
    return sz[S_IT_C]


@kernel
def _learning_rate(hy, chunk):
    """lr for chunk c: lr_min + (lr - lr_min) * half / (half + c) (constant when half == 0)."""
    lr = hy[H_LR]
    half = hy[H_LR_HALF]
    if half <= F0:
        return lr
    lo = hy[H_LR_MIN]
    return lo + (lr - lo) * (half / (half + np.float32(chunk)))


@kernel
def train_chunk(P, G, M, W, Aneg, off, sz, hy, st, sf, acts, grads, tin, tout, partial, saved_h, saved_x):
    """Train on the chunk just coded; the coding pass's activations serve the first iteration."""
    (res, nrm, rstd, an, xh, z, cpre, xs, pj, dtpre, dt, hs, dA, y, yg, logits, probs, lse) = acts
    L = sz[S_L]
    T = sz[S_T]
    K = sz[S_K]
    chunk = st[ST_CHUNK]
    iters = _iterations(sz, chunk)
    lr = _learning_rate(hy, chunk)
    for l in range(L):
        saved_h[l] = hs[l, T]
        saved_x[l] = xh[l, T:T + K - 1]
    for it in range(iters):
        if it > 0:
            forward_chunk(P, Aneg, off, sz, acts, tin)
        backward_chunk(P, Aneg, off, sz, hy, acts, grads, tin, tout, G)
        adam_step(P, G, M, W, hy, sf, lr, partial)
        refresh_a(P, off, sz, Aneg)
        st[ST_STEPS] += 1
    for l in range(L):
        hs[l, 0] = saved_h[l]
        xh[l, 0:K - 1] = saved_x[l]
    st[ST_CHUNK] = chunk + 1


@kernel
def _code_distribution(sz, hy, acts, t, lc, ts, ex, freqs, lanes):
    """Mix the SSM softmax with the count models (:mod:`.tokenmix`) and quantize for the coder.

    freqs[v] = 1 + floor(q[v] * scale) with q = exp(final logits - max) (float32) and
    scale = (2**tb - V) / sum(q) (the sum in the lane order of :func:`_sum_lanes`); the remainder up
    to exactly 2**tb goes to the most probable token (the first on ties).  Should float rounding
    ever make the remainder push that token below 1, the scale is halved until it does not.  On
    return ``ex`` holds the coded softmax q / sum(q) (float32), which the mixer learns from.
    """
    (res, nrm, rstd, an, xh, z, cpre, xs, pj, dtpre, dt, hs, dA, y, yg, logits, probs, lse) = acts
    V = sz[S_V]
    use_ssm = sz[S_USE_SSM]
    total = np.int64(1) << sz[S_TB]
    lg = logits[t]
    h = log32(np.float32(V))  # without the SSM its logits are 0: a uniform softmax
    if use_ssm:
        # entropy of the SSM softmax (nats): H = lse - sum p z
        pr = probs[t]
        for v in range(V):
            ex[v] = pr[v] * lg[v]
        h = lse[t] - _sum_lanes(ex, V, lanes)
    tokenmix.gather(ts, sz[S_TABLE_BITS])
    tokenmix.mix_logits(sz[S_MIXING], use_ssm, sz[S_MATCH], sz[S_CALIBRATE], hy[H_PRIOR], lg, h, lc,
                        V, ts, ex)
    m = ex[0]
    best = 0
    for v in range(V):
        if ex[v] > m:
            m = ex[v]
            best = v
    for v in range(V):
        ex[v] = exp32(ex[v] - m)
    mass = _sum_lanes(ex, V, lanes)
    scale = np.float32(np.float64(total - V) / np.float64(mass))
    while not assign_frequencies(ex, V, scale, best, total, freqs):
        scale = scale * np.float32(0.5)
    inv = F1 / mass
    for v in range(V):
        ex[v] = ex[v] * inv


@kernel
def run_range(mode, data, coded, rc, P, G, M, W, Aneg, off, sz, hy, st, sf, acts, grads, tin, tout,
              counts, lc, partial, saved_h, saved_x, ts, trace, start, end):
    """Encode, decode or only learn tokens ``start`` to ``end`` of ``data`` (one step of a block).

    ``data`` holds token ids (int64 < V).  The coder ``rc`` is started by the caller
    (:func:`statemix.coder.enc_init` / ``dec_init``) and every state lives in the arrays, so a block
    run in several steps gives the same bits as in one.  If ``trace`` has rows, ``trace[i, 0]`` gets
    the coded probability of token i and ``trace[i, 1]`` the SSM's own probability of it (1/V
    without the SSM).  ``ts``: the count models' state (:meth:`.tokenmix.State.arrays`).  LEARN
    updates the counts and the SSM but not the mixer.
    """
    V = sz[S_V]
    T = sz[S_T]
    tb = sz[S_TB]
    lanes = np.empty(LANES, dtype=np.float32)
    ex = np.empty(V, dtype=np.float32)
    freqs = np.empty(V, dtype=np.int32)
    cum = np.empty(V + 1, dtype=np.int64)
    probs = acts[16]
    tracing = trace.shape[0] > 0
    total = np.float64(1 << tb)
    use_ssm = sz[S_USE_SSM]
    for i in range(start, end):
        t = st[ST_POS]
        tin[t] = st[ST_PREV]
        if use_ssm:
            forward_position(P, Aneg, off, sz, acts, tin, t, lanes)
        if mode != LEARN:
            _code_distribution(sz, hy, acts, t, lc, ts, ex, freqs, lanes)
            if mode == DECODE:
                c = np.int64(0)
                for v in range(V):
                    cum[v] = c
                    c += freqs[v]
                cum[V] = c
                sym = np.int64(dec_symbol(rc, coded, cum, tb))
                data[i] = sym
            else:
                sym = np.int64(data[i])
                c = np.int64(0)
                for v in range(sym):
                    c += freqs[v]
                enc_encode(rc, coded, c, np.int64(freqs[sym]), tb)
            if tracing:
                trace[i, 0] = np.float64(freqs[sym]) / total
                trace[i, 1] = np.float64(probs[t, sym]) if use_ssm else 1.0 / V
            tokenmix.learn(sz[S_MIXING], use_ssm, sz[S_MATCH], sz[S_CALIBRATE], acts[15][t], lc, V,
                           ex, sym, ts)
        else:
            sym = np.int64(data[i])
            tokenmix.gather(ts, sz[S_TABLE_BITS])
        tokenmix.update(sym, sz[S_TABLE_BITS], ts)
        tout[t] = sym
        counts[sym] += 1
        lc[sym] = log32(F1 + np.float32(counts[sym]))
        st[ST_PREV] = sym
        t += 1
        if t == T:
            if use_ssm:
                train_chunk(P, G, M, W, Aneg, off, sz, hy, st, sf, acts, grads, tin, tout, partial,
                            saved_h, saved_x)
            t = 0
        st[ST_POS] = t


# ================================================================================================
# configuration, layout, initialisation
# ================================================================================================

_FMT = "<BHBBBBBBBBHBHBBffffffffI"
_FMT_ALL = _FMT + "fBHBBBBB"  # + lr_half, tokenizer, merges, tokenmix options
TOK_IDS, TOK_BPE = 0, 1  # Config.tokenizer
MAX_BPE_MERGES = 65536 - 256  # V = 256 + merges must stay <= 65536

@dataclass(frozen=True)
class Config:
    """Options of the ssm model; all change the output and are recorded in the stream header.

    ``preset``: which named preset this started from (1 reference, 2 default, 3 bpe, 4 mix,
    5 counts, 0 custom; informative).
    ``vocab``: V, the token alphabet (256 for bytes).  ``d_model``, ``expand`` (inner width E =
    expand * d_model), ``d_state`` (N), ``conv`` (K), ``layers`` (L): the architecture.
    ``chunk``: T, tokens per training chunk.  ``bptt``: 1 = gradients flow through the recurrence and
    the conv within the chunk, 0 = one step deep (the reference).  Schedule: ``iters_a`` Adam
    iterations for the first ``chunks_a`` chunks, ``iters_b`` for the next ``chunks_b``, then
    ``iters_c``.  ``channel_block``: channels per parallel task of the scan (a divisor of E; changes
    nothing but the partition, recorded so the work split never depends on the machine).
    ``lr``, ``beta1``, ``beta2``, ``adam_eps``: Adam.  ``lr_min`` and ``lr_half``: the learning rate
    at chunk c is lr_min + (lr - lr_min) * lr_half / (lr_half + c) when lr_half > 0 (encoded in
    ``lr_min``'s sign: see ``lr_half`` below).  ``clip``: global gradient norm.  ``smoothing``: label
    smoothing.  ``prior``: weight of the frequency prior log(1 + count) (times the entropy-adaptive
    scale).  ``seed``: initialisation.
    ``tokenizer``: ``TOK_IDS`` (0: the tokens are the bytes, or ids given to the token interface) or
    ``TOK_BPE`` (1: a BPE vocabulary trained on the first non-empty block and stored in its code word;
    ``vocab`` must then be 256).  ``merges``: with ``TOK_BPE``, the merges to train (0: the tokenizer's
    ``default_merges(len(first block))``; training may stop earlier on a small block); else 0.
    Count models and mixing (:mod:`.tokenmix`): ``mixing`` (0 SSM + frequency prior, 1 the reference's
    fixed-weight n-grams, 2 learned), ``use_ssm`` (0: no SSM, the count models alone), ``match``
    (the token match model, learned mixing only), ``calibrate`` (learned inverse temperature,
    learned mixing only), ``table_bits`` (log2 of the n-gram buckets; ``SLOTS`` pairs each).
    """

    preset: int = 2
    vocab: int = 256
    d_model: int = 32
    expand: int = 2
    d_state: int = 16
    conv: int = 4
    layers: int = 2
    chunk: int = 32
    bptt: int = 1
    iters_a: int = 8
    chunks_a: int = 10
    iters_b: int = 4
    chunks_b: int = 20
    iters_c: int = 2
    channel_block: int = 16
    lr: float = 0.002
    beta1: float = 0.9
    beta2: float = 0.999
    adam_eps: float = 1e-8
    clip: float = 5.0
    smoothing: float = 0.12
    prior: float = 0.3
    lr_min: float = 0.002
    lr_half: float = 0.0
    seed: int = 42
    tokenizer: int = 0
    merges: int = 0
    mixing: int = 0
    use_ssm: int = 1
    match: int = 0
    calibrate: int = 0
    table_bits: int = 12

    def to_bytes(self) -> bytes:
        return struct.pack(
            _FMT_ALL, self.preset, self.vocab - 1, self.d_model, self.expand, self.d_state,
            self.conv, self.layers, self.chunk, self.bptt, self.iters_a, self.chunks_a, self.iters_b,
            self.chunks_b, self.iters_c, self.channel_block, self.lr, self.beta1, self.beta2,
            self.adam_eps, self.clip, self.smoothing, self.prior, self.lr_min, self.seed, self.lr_half,
            self.tokenizer, self.merges, self.mixing, self.use_ssm, self.match, self.calibrate,
            self.table_bits)

    @classmethod
    def from_bytes(cls, raw: bytes) -> "Config":
        if len(raw) != struct.calcsize(_FMT_ALL):
            raise ValueError("ssm model configuration has the wrong length")
        v = struct.unpack(_FMT_ALL, raw)
        config = cls(v[0], v[1] + 1, *v[2:15], *(float(x) for x in v[15:23]), lr_half=float(v[24]),
                     seed=v[23], tokenizer=v[25], merges=v[26], mixing=v[27], use_ssm=v[28],
                     match=v[29], calibrate=v[30], table_bits=v[31])
        config.validate()
        too_big = [name for name, top in _RECORD_MAX.items() if getattr(config, name) > top]
        if too_big:
            raise ValueError(f"ssm model configuration larger than any preset's ({', '.join(too_big)})")
        return config

    def validate(self) -> None:
        E = self.d_model * self.expand
        ok = (self.preset <= 5 and 2 <= self.vocab <= 65536 and 1 <= self.d_model <= 256
              and 1 <= self.expand <= 8 and 1 <= self.d_state <= 64 and 1 <= self.conv <= 8
              and 1 <= self.layers <= 8 and 1 <= self.chunk <= 255 and self.bptt in (0, 1)
              and 1 <= self.iters_a <= 64 and 1 <= self.iters_b <= 64 and 1 <= self.iters_c <= 64
              and 1 <= self.channel_block <= E and E % self.channel_block == 0
              and self.tokenizer in (TOK_IDS, TOK_BPE) and 0 <= self.merges <= MAX_BPE_MERGES
              and (self.vocab == 256 if self.tokenizer == TOK_BPE else self.merges == 0)
              and self.mixing in (tokenmix.MIX_PRIOR, tokenmix.MIX_REFERENCE, tokenmix.MIX_LEARNED)
              and self.use_ssm in (0, 1) and self.match in (0, 1) and self.calibrate in (0, 1)
              and 10 <= self.table_bits <= 21)
        floats = (self.lr, self.beta1, self.beta2, self.adam_eps, self.clip, self.smoothing,
                  self.prior, self.lr_min, self.lr_half)
        ok = ok and all(np.isfinite(floats))
        ok = ok and (0 < self.lr <= 1 and 0 <= self.beta1 < 1 and 0 <= self.beta2 < 1
                     and 0 < self.adam_eps <= 1 and 0 < self.clip <= 1e6 and 0 <= self.smoothing < 1
                     and 0 <= self.prior <= 100 and 0 < self.lr_min <= 1 and 0 <= self.lr_half <= 1e9)
        if not ok:
            raise ValueError(f"ssm model configuration out of range: {self}")

    def describe(self) -> str:
        """In words, e.g. "ssm level 2 (SSM: 2 layers of width 32 over bytes, ...)"."""
        name = _preset_name(self)
        tokens = ("bytes" if self.tokenizer == TOK_IDS and self.vocab == 256 else
                  f"{self.vocab} token ids" if self.tokenizer == TOK_IDS else
                  f"BPE tokens ({self.merges or 'default'} merges trained on the first block)")
        if self.use_ssm:
            parts = [f"SSM of {self.layers} layers, width {self.d_model} (state {self.d_state}) over {tokens}"]
        else:
            parts = [f"count models only over {tokens}"]
        mixing = {tokenmix.MIX_PRIOR: "frequency prior", tokenmix.MIX_REFERENCE: "fixed-weight n-grams",
                  tokenmix.MIX_LEARNED: "learned mixing of n-gram counts"}[self.mixing]
        if self.mixing != tokenmix.MIX_PRIOR:
            mixing += f" in 2**{self.table_bits} buckets"
        parts.append(mixing + (" and a match model" if self.match else ""))
        mib = -(-self.memory_bytes() // (1 << 20))
        parts.append(f"at most {mib} MiB of memory")
        return f"ssm {name or 'custom'} ({', '.join(parts)})"

    def max_vocab(self) -> int:
        """The largest V this configuration can reach (V itself unless a BPE vocabulary is trained)."""
        if self.tokenizer == TOK_BPE:
            return 256 + (self.merges or default_merges(BLOCK_SIZE_MAX))
        return self.vocab

    def memory_bytes(self) -> int:
        """Upper bound of the model's memory, in bytes."""
        if self.tokenizer == TOK_BPE:
            # the model at its largest V, plus the tokenizer's working memory on a block
            return (replace(self, vocab=self.max_vocab(), tokenizer=TOK_IDS, merges=0).memory_bytes()
                    + 32 * BLOCK_SIZE_MAX)
        _, total = layout(self)
        V, D, E, N, K, L, T = (self.vocab, self.d_model, self.d_model * self.expand, self.d_state,
                               self.conv, self.layers, self.chunk)
        acts = (3 * (L + 1) * T * D + L * (T + K) * E + L * T * (8 * E + 2 * N + 1)
                + L * (T + 1) * N * E + 2 * L * T * N * E + 3 * T * V)
        return 4 * (4 * total + acts) + 64 * V + tokenmix.State.memory_bytes(V, self.table_bits)


PRESETS.update({name: Config(**fields) for name, fields in presets.SSM_PRESETS.items()})


def config_for_level(level: int, size_hint: int | None) -> Config:
    """The ssm configuration of ``--level`` ``level`` for an input of ``size_hint`` bytes (None: unknown)."""
    name, extra = presets.SSM_LEVELS[level]
    config = PRESETS[name]
    return replace(config, table_bits=presets.ssm_table_bits(config.table_bits + extra, size_hint))


def _preset_name(config: Config) -> str | None:
    """"level N" or "preset NAME" when ``config`` is what a preset writes (a full-size preset first,
    then one sized down to some input)."""
    hints = (None, *(1 << b for b in range(0, 40)))
    record = config.to_bytes()  # compare records: the floats of a parsed record are float32-rounded
    levels = [str(level) for level in presets.LEVELS if config_for_level(level, None).to_bytes() == record]
    levels = levels or [str(level) for level in presets.LEVELS
                        if any(config_for_level(level, hint).to_bytes() == record for hint in hints)]
    if levels:
        return "level " + " or ".join(levels)
    names = [name for name, preset in PRESETS.items() if preset.to_bytes() == record]
    return f"preset {names[0]}" if names else None


#: The largest value of each size field over every preset (levels included): a stream record
#: beyond these is refused as corrupt before anything is allocated.
_RECORD_MAX = {name: max(getattr(c, name) for c in (*PRESETS.values(),
                                                     *(config_for_level(level, None) for level in presets.LEVELS)))
               for name in ("vocab", "d_model", "expand", "d_state", "conv", "layers", "chunk", "merges",
                            "table_bits")}


def layout(config: Config) -> tuple[np.ndarray, int]:
    """Return (offsets, total): offsets[l * NT + k] of layer tensors, offsets[L * NT + k] of globals."""
    V, D, E, N, K, L = (config.vocab, config.d_model, config.d_model * config.expand,
                        config.d_state, config.conv, config.layers)
    R = 2 * N + 1
    layer_sizes = [D, D, D * 2 * E, K * E, E, E * R, E, E, N * E, E, E * D]
    global_sizes = [V * D, D, D, D * V]
    off = np.zeros(L * NT + 4, dtype=np.int64)
    pos = 0
    for l in range(L):
        for k, size in enumerate(layer_sizes):
            off[l * NT + k] = pos
            pos += size
    for k, size in enumerate(global_sizes):
        off[L * NT + k] = pos
        pos += size
    return off, pos


def _normals(seed: int, stream: int, n: int) -> np.ndarray:
    """n approximately standard normal float64 values: Irwin-Hall sums of 12 uniforms (exact, libm-free).

    The uniforms come from splitmix64 in integer arithmetic, so they are identical everywhere.
    """
    k = np.arange(n * 12, dtype=np.uint64)
    with np.errstate(over="ignore"):
        x = (np.uint64(seed) * np.uint64(0x9E3779B97F4A7C15) + np.uint64(stream) * np.uint64(0xD1B54A32D192ED03)
             + (k + np.uint64(1)) * np.uint64(0x9E3779B97F4A7C15))
        x = (x ^ (x >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
        x = (x ^ (x >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
        x = x ^ (x >> np.uint64(31))
    u = (x >> np.uint64(11)).astype(np.float64) * (1.0 / 9007199254740992.0)
    u = u.reshape(n, 12)
    total = np.zeros(n)
    for j in range(12):  # fixed order
        total += u[:, j]
    return total - 6.0


def init_params(config: Config) -> np.ndarray:
    """The initial flat parameter vector (float32) of ``config`` from its seed."""
    off, total = layout(config)
    P = np.zeros(total, dtype=np.float32)
    V, D, E, N, K, L = (config.vocab, config.d_model, config.d_model * config.expand,
                        config.d_state, config.conv, config.layers)
    R = 2 * N + 1
    stream = 0

    def normal(size, std):
        nonlocal stream
        stream += 1
        return (_normals(config.seed, stream, size) * std).astype(np.float32)

    for l in range(L):
        b = l * NT
        P[off[b + LN_G]:off[b + LN_G] + D] = 1.0
        P[off[b + WIN]:off[b + WIN] + D * 2 * E] = normal(D * 2 * E, 0.02)
        P[off[b + CONV_W]:off[b + CONV_W] + K * E] = normal(K * E, 0.02)
        P[off[b + WX]:off[b + WX] + E * R] = normal(E * R, 0.02)
        P[off[b + DT_W]:off[b + DT_W] + E] = normal(E, 0.02)
        P[off[b + DT_B]:off[b + DT_B] + E] = normal(E, 0.1)
        a_log = np.empty(N * E, dtype=np.float32)
        _log_table(np.arange(1, N + 1, dtype=np.float32), a_log, E)  # A_log[n][e] = log(n + 1)
        P[off[b + A_LOG]:off[b + A_LOG] + N * E] = a_log
        P[off[b + DSKIP]:off[b + DSKIP] + E] = 1.0
        P[off[b + WOUT]:off[b + WOUT] + E * D] = normal(E * D, 0.02)
    g = L * NT
    P[off[g + EMB]:off[g + EMB] + V * D] = normal(V * D, 0.02)
    P[off[g + LNF_G]:off[g + LNF_G] + D] = 1.0
    P[off[g + HEAD]:off[g + HEAD] + D * V] = normal(D * V, 0.02)
    return P


@kernel
def _log_table(values, out, repeat):
    for n in range(values.shape[0]):
        v = log32(values[n])
        for e in range(repeat):
            out[n * repeat + e] = v


def sizes(config: Config) -> np.ndarray:
    sz = np.zeros(SZ_SIZE, dtype=np.int64)
    sz[S_V] = config.vocab
    sz[S_D] = config.d_model
    sz[S_E] = config.d_model * config.expand
    sz[S_N] = config.d_state
    sz[S_K] = config.conv
    sz[S_L] = config.layers
    sz[S_T] = config.chunk
    sz[S_R] = 2 * config.d_state + 1
    sz[S_EB] = config.channel_block
    sz[S_BPTT] = config.bptt
    sz[S_IT_A] = config.iters_a
    sz[S_N_A] = config.chunks_a
    sz[S_IT_B] = config.iters_b
    sz[S_N_B] = config.chunks_b
    sz[S_IT_C] = config.iters_c
    sz[S_TB] = TOTAL_BITS if config.vocab <= (1 << 16) else 32
    sz[S_MIXING] = config.mixing
    sz[S_USE_SSM] = config.use_ssm
    sz[S_MATCH] = config.match
    sz[S_CALIBRATE] = config.calibrate
    sz[S_TABLE_BITS] = config.table_bits
    return sz


def hyper(config: Config) -> np.ndarray:
    hy = np.zeros(HY_SIZE, dtype=np.float32)
    hy[H_LR] = config.lr
    hy[H_B1] = config.beta1
    hy[H_B2] = config.beta2
    hy[H_EPS] = config.adam_eps
    hy[H_CLIP] = config.clip
    hy[H_SMOOTH] = config.smoothing
    hy[H_PRIOR] = config.prior
    hy[H_LR_MIN] = config.lr_min
    hy[H_LR_HALF] = config.lr_half
    return hy


def new_activations(config: Config):
    V, D, E, N, K, L, T = (config.vocab, config.d_model, config.d_model * config.expand,
                           config.d_state, config.conv, config.layers, config.chunk)
    R = 2 * N + 1
    f = np.float32
    return (np.zeros((L + 1, T, D), f), np.zeros((L + 1, T, D), f), np.zeros((L + 1, T), f),
            np.zeros((L + 1, T, D), f), np.zeros((L, T + K - 1, E), f), np.zeros((L, T, E), f),
            np.zeros((L, T, E), f), np.zeros((L, T, E), f), np.zeros((L, T, R), f),
            np.zeros((L, T, E), f), np.zeros((L, T, E), f), np.zeros((L, T + 1, N, E), f),
            np.zeros((L, T, N, E), f), np.zeros((L, T, E), f), np.zeros((L, T, E), f),
            np.zeros((T, V), f), np.zeros((T, V), f), np.zeros(T, f))


def new_gradients(config: Config):
    V, D, E, N, L, T = (config.vocab, config.d_model, config.d_model * config.expand,
                        config.d_state, config.layers, config.chunk)
    R = 2 * N + 1
    f = np.float32
    return (np.zeros((T, V), f), np.zeros((L + 1, T, D), f), np.zeros((L + 1, T, D), f),
            np.zeros((L, T, 2 * E), f), np.zeros((L, T, E), f), np.zeros((L, T, E), f),
            np.zeros((L, T, R), f), np.zeros((L, T, E), f), np.zeros((L, T, E), f),
            np.zeros((L, T, N, E), f))


class Model:
    """The ssm model's state: one object per stream, fed every block of the stream in order.

    With ``tokenizer == TOK_IDS`` the model codes token ids below ``vocab`` (the byte interface codes
    bytes when ``vocab == 256``).  With ``tokenizer == TOK_BPE`` the byte interface trains a BPE
    vocabulary (:func:`statemix.tokenizer.train`, word pre-split, ``merges`` or
    ``default_merges(len(block))`` merges) on the first non-empty block it sees, whether that block is
    coded (:meth:`encode`) or stored (:meth:`learn`), and tokenizes every block with it (tokens never
    span blocks).  V = 256 + merges is known only then, so the parameters and buffers are allocated at
    that moment, at exactly that V (the initial weights depend on V through their shapes only).

    Code word of a block (BPE)::

        [first non-empty block only] varint(len(vocabulary)) + Vocabulary.to_bytes()
        varint(token count) + range-coder code word of the tokens

    An empty block codes to nothing and changes nothing.
    """

    def __init__(self, config: Config):
        config.validate()
        self.config = config
        self.vocabulary = None
        self.allocated = False
        if config.tokenizer == TOK_IDS:
            self._allocate(config.vocab)

    def _allocate(self, V: int) -> None:
        config = replace(self.config, vocab=V, tokenizer=TOK_IDS, merges=0)
        self.model_config = config  # the architecture actually run (V known)
        self.off, total = layout(config)
        self.sz = sizes(config)
        self.hy = hyper(config)
        self.P = init_params(config)
        self.G = np.zeros(total, dtype=np.float32)
        self.M = np.zeros(total, dtype=np.float32)
        self.W = np.zeros(total, dtype=np.float32)
        E = config.d_model * config.expand
        self.Aneg = np.zeros((config.layers, config.d_state, E), dtype=np.float32)
        refresh_a(self.P, self.off, self.sz, self.Aneg)
        self.st = np.zeros(ST_SIZE, dtype=np.int64)
        self.sf = np.ones(2, dtype=np.float32)
        self.acts = new_activations(config)
        self.grads = new_gradients(config)
        self.tin = np.zeros(config.chunk, dtype=np.int64)
        self.tout = np.zeros(config.chunk, dtype=np.int64)
        self.counts = np.zeros(config.vocab, dtype=np.int64)
        self.lc = np.zeros(config.vocab, dtype=np.float32)
        self.partial = np.zeros((total + ADAM_BLOCK - 1) // ADAM_BLOCK, dtype=np.float32)
        self.saved_h = np.zeros((config.layers, config.d_state, E), dtype=np.float32)
        self.saved_x = np.zeros((config.layers, config.conv - 1, E), dtype=np.float32)
        self.rc = new_state()
        coding_bytes = self.config.tokenizer == TOK_IDS and self.config.vocab == 256
        orders = tokenmix.BYTE_ORDERS if coding_bytes else tokenmix.ORDERS
        self.mixstate = tokenmix.State(config.vocab, config.table_bits, orders)
        self.allocated = True

    @property
    def vocab_size(self) -> int | None:
        """V, once known."""
        return self.model_config.vocab if self.allocated else None

    def _run(self, mode: int, tokens: np.ndarray, coded: np.ndarray, trace: np.ndarray, progress=None) -> int:
        # below PARALLEL_MIN_VOCAB a chunk's parallel regions are too small to pay for a second
        # thread (enwik8 100 kB, preset mix: 7.4 KB/s at -T 1, 1.7 KB/s at -T 2 on 2 busy cores)
        small = self.model_config.vocab < PARALLEL_MIN_VOCAB
        with threads_at_most(1) if small else contextlib.nullcontext():
            return self._run_block(mode, tokens, coded, trace, progress)

    def step_tokens(self) -> int:
        """Tokens per kernel step: about 0.1 s of work or less (see :data:`STEP_COST`)."""
        config = self.model_config
        if not config.use_ssm:
            return STEP_COUNTS
        return max(8, STEP_COST // (config.vocab + STEP_COST_TOKEN))

    def _run_block(self, mode: int, tokens: np.ndarray, coded: np.ndarray, trace: np.ndarray, progress) -> int:
        """Code, decode or learn ``tokens`` in steps; ``progress(tokens done)`` after each step."""
        if mode == ENCODE:
            enc_init(self.rc)
        elif mode == DECODE:
            dec_init(self.rc, coded)
        n = tokens.shape[0]
        step = self.step_tokens()
        ts = self.mixstate.arrays()
        for start in range(0, n, step):
            end = min(n, start + step)
            run_range(mode, tokens, coded, self.rc, self.P, self.G, self.M, self.W, self.Aneg,
                      self.off, self.sz, self.hy, self.st, self.sf, self.acts, self.grads,
                      self.tin, self.tout, self.counts, self.lc, self.partial, self.saved_h,
                      self.saved_x, ts, trace, start, end)
            if progress is not None:
                progress(end)
        return enc_finish(self.rc, coded) if mode == ENCODE else 0

    # token-level interface (a tokenizer maps bytes to ids < vocab and back); ``progress`` gets tokens
    def _tokens_ok(self) -> None:
        if not self.allocated:
            raise ValueError("the vocabulary of this ssm model is not known yet")

    def encode_tokens(self, tokens: np.ndarray, limit: int, trace: np.ndarray | None = None,
                      progress=None) -> bytes | None:
        self._tokens_ok()
        tokens = np.ascontiguousarray(tokens, dtype=np.int64)
        if tokens.size and (tokens.min() < 0 or tokens.max() >= self.model_config.vocab):
            raise ValueError("token id out of range")
        out = np.empty(max(limit, 0), dtype=np.uint8)
        n = self._run(ENCODE, tokens, out, _NO_TRACE if trace is None else trace, progress)
        return None if n > limit else out[:n].tobytes()

    def decode_tokens(self, coded: bytes, count: int, progress=None) -> np.ndarray:
        self._tokens_ok()
        out = np.zeros(count, dtype=np.int64)
        self._run(DECODE, out, np.frombuffer(coded, dtype=np.uint8).copy(), _NO_TRACE, progress)
        return out

    def learn_tokens(self, tokens: np.ndarray, progress=None) -> None:
        self._tokens_ok()
        self._run(LEARN, np.ascontiguousarray(tokens, dtype=np.int64), _NO_CODED, _NO_TRACE, progress)

    def _byte_progress(self, progress, tokens: np.ndarray):
        """``progress`` in bytes for a step function counting ``tokens`` (decoded ones: filled in as they come)."""
        if progress is None or self.config.tokenizer == TOK_IDS:
            return progress
        lengths = self.vocabulary.token_lengths()
        done = [0, 0]  # tokens, bytes

        def report(end):
            done[1] += int(lengths[tokens[done[0]:end]].sum())
            done[0] = end
            progress(done[1])
        return report

    def snapshot(self, reuse=None):
        """A copy of the whole model state (into ``reuse``'s arrays, an earlier snapshot, if given)."""
        return take(self, _CONSTANT, reuse)

    def restore(self, snapshot) -> None:
        """Put ``snapshot`` back: the model behaves as if the blocks seen since had never been."""
        put_back(self, _CONSTANT, snapshot)

    # byte interface of statemix.models
    def _bytes_ok(self) -> None:
        if self.config.tokenizer == TOK_IDS and self.config.vocab != 256:
            raise ValueError("this ssm configuration codes tokens, not bytes")

    def _set_vocabulary(self, vocabulary) -> None:
        self.vocabulary = vocabulary
        self._allocate(vocabulary.size)

    def train_vocabulary(self, data: bytes):
        """The vocabulary the model trains on a first block ``data`` (a pure function of the data)."""
        n = self.config.merges or default_merges(len(data))
        return bpe_train(data, n, split=SPLIT_WORDS)

    def tokenize(self, data: bytes) -> np.ndarray:
        """Token ids of one block (int64): its bytes, or its BPE tokens once the vocabulary is known."""
        if self.config.tokenizer == TOK_IDS:
            return np.frombuffer(data, dtype=np.uint8).astype(np.int64)
        return bpe_encode(self.vocabulary, data, block_size=None).astype(np.int64)

    def encode(self, data: bytes, limit: int, trace: np.ndarray | None = None, *, progress=None) -> bytes | None:
        """Code ``data``; return the code word, or None if it would be longer than ``limit`` bytes.

        The model learns ``data`` either way.  ``trace`` (rows: one per token) receives the coded
        and the SSM-only probability of each token.
        """
        self._bytes_ok()
        if self.config.tokenizer == TOK_IDS:
            return self.encode_tokens(self.tokenize(data), limit, trace, progress)
        if not data:
            return b"" if limit >= 0 else None
        head = b""
        if self.vocabulary is None:
            self._set_vocabulary(self.train_vocabulary(data))
            raw = self.vocabulary.to_bytes()
            head = encode_varint(len(raw)) + raw
        tokens = self.tokenize(data)
        head += encode_varint(tokens.shape[0])
        body = self.encode_tokens(tokens, limit - len(head), trace, self._byte_progress(progress, tokens))
        return None if body is None else head + body

    def decode(self, coded: bytes, size: int, *, progress=None) -> bytes:
        """Decode ``size`` bytes from the code word ``coded``."""
        self._bytes_ok()
        if self.config.tokenizer == TOK_IDS:
            return self.decode_tokens(coded, size, progress).astype(np.uint8).tobytes()
        if size == 0:
            return b""
        pos = 0
        if self.vocabulary is None:
            n, pos = _read_varint(coded, pos)
            if pos + n > len(coded):
                raise StatemixError("corrupt stream: ssm vocabulary truncated")
            try:
                vocabulary = Vocabulary.from_bytes(coded[pos:pos + n])
            except ValueError as exc:
                raise StatemixError(f"corrupt stream: ssm vocabulary: {exc}") from None
            if vocabulary.size > self.config.max_vocab():
                raise StatemixError("corrupt stream: ssm vocabulary larger than its configuration")
            self._set_vocabulary(vocabulary)
            pos += n
        count, pos = _read_varint(coded, pos)
        if not 1 <= count <= size:
            raise StatemixError("corrupt stream: ssm token count out of range")
        tokens = np.zeros(count, dtype=np.int64)
        self._tokens_ok()
        self._run(DECODE, tokens, np.frombuffer(coded[pos:], dtype=np.uint8).copy(), _NO_TRACE,
                  self._byte_progress(progress, tokens))
        lengths = self.vocabulary.token_lengths()
        if int(lengths[tokens].sum()) != size:
            raise StatemixError("corrupt stream: ssm tokens do not add up to the block length")
        return bpe_decode(self.vocabulary, tokens)

    def learn(self, data: bytes, *, progress=None) -> None:
        """Update the model with ``data`` without coding it (a block stored by other means)."""
        self._bytes_ok()
        if self.config.tokenizer == TOK_BPE:
            if not data:
                return
            if self.vocabulary is None:
                self._set_vocabulary(self.train_vocabulary(data))
        tokens = self.tokenize(data)
        self.learn_tokens(tokens, self._byte_progress(progress, tokens))


def _read_varint(raw: bytes, pos: int) -> tuple[int, int]:
    try:
        return decode_varint(raw, pos, 5)
    except Truncated:
        raise StatemixError("corrupt stream: ssm block header truncated") from None
    except ValueError:
        raise StatemixError("corrupt stream: ssm varint too long") from None


_NO_TRACE = np.zeros((0, 2), dtype=np.float64)
_NO_CODED = np.zeros(0, dtype=np.uint8)


def config_with(**changes) -> Config:
    """The default preset with some fields changed (preset id 0 = custom)."""
    return replace(PRESETS["default"], preset=0, **changes)
