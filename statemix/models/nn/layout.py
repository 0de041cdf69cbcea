"""Configuration, parameter layout and initialisation of the SSM network.

The network's arrays (a :data:`Net`): ``P`` the flat float32 parameters, ``G`` their gradient, ``M``
and ``W`` the Adam moments, ``Aneg`` = -exp(A_log) per layer (N x E, refreshed after every update),
``off`` the offset of every tensor in ``P`` (:func:`layout`), ``sz`` the int64 size table (``S_*``),
``hy`` the float32 hyper-parameters (``H_*``), ``st`` the int64 run state (``ST_*``: position in
the chunk, previous token, chunks trained, Adam steps, whether a handed-over chunk waits for
training), ``sf`` the running products beta1**t, beta2**t, ``partial`` the per-block gradient norms,
``saved_h``/``saved_x`` the state at chunk start, ``tin``/``tout`` the chunk's input and target
tokens.  Activations and their gradients are the
named tuples :data:`Acts` and :data:`Grads` (one chunk each).

With a training delay (``S_DELAY`` = 1, see :mod:`.train`) the coding pass reads its own copy of the
weights, ``Pc`` and ``Ac`` (P and Aneg as the last hand-over found them: trained through the chunk
before the last one), while the trainer works on the chunk handed over to it: its tokens
``tin_t``/``tout_t`` and its start state in an :data:`Acts` of its own.  Without a delay these four
arrays have length 0.

Parameters: per layer ``l`` at ``off[l * NT + k]`` (LN gain/bias, W_in D x 2E, conv K x E and bias,
W_x E x R, dt_w, dt_b, A_log N x E, D_skip, W_out E x D), then the globals at ``off[L * NT + k]``
(embedding V x D, final LN gain/bias, head D x V).  Matrices are stored transposed: input index
outside, output index inside.  Initialisation (:func:`init_params`): LayerNorm gains 1, D_skip 1,
``A_log[n][e] = log(n + 1)``, dt_b ~ N(0, 0.1), every other matrix ~ N(0, 0.02), from Irwin-Hall
normals of splitmix64 uniforms (integer arithmetic: identical everywhere); the seed and the shapes
fix every value.  The functions take any config object with the fields of
``statemix.models.ssm_config.Config`` (vocab, d_model, expand, d_state, conv, layers, chunk, ...).
"""

from __future__ import annotations

import functools
from collections import namedtuple

import numpy as np

from ..._fmath import LANES, log32  # noqa: F401  (LANES: re-exported)
from ..._jit import kernel
from ...quantize import least_frequency


# ---- parameter tensors ------------------------------------------------------------------------
# per layer, at off[l * NT + k]
LN_G, LN_B, WIN, CONV_W, CONV_B, WX, DT_W, DT_B, A_LOG, DSKIP, WOUT, NT = range(12)  # NT: tensors per layer
# global, at off[L * NT + k]
EMB, LNF_G, LNF_B, HEAD = range(4)

# ---- size table (int64 array ``sz``) ------------------------------------------------------------
# the network's sizes, the training schedule's, the token coding loop's options, S_DELAY: the
# chunks between coding a chunk and training on it (0 or 1), S_LEAST: each token's least frequency
# of 2**sz[S_TB] (statemix.quantize.least_frequency); SZ_SIZE: the table's length
(S_V, S_D, S_E, S_N, S_K, S_L, S_T, S_R, S_EB, S_BPTT,
 S_IT_A, S_N_A, S_IT_B, S_N_B, S_IT_C, S_TB,
 S_MIXING, S_USE_SSM, S_MATCH, S_CALIBRATE, S_TABLE_BITS,
 S_DELAY, S_LEAST, SZ_SIZE) = range(24)

# ---- float hyper-parameters (float32 array ``hy``) ------------------------------------------------
H_LR, H_B1, H_B2, H_EPS, H_CLIP, H_SMOOTH, H_PRIOR, H_LR_MIN, H_LR_HALF, HY_SIZE = range(10)

# ---- int64 run state ``st`` ----------------------------------------------------------------------
# ST_PENDING: a chunk handed over, not trained yet
ST_POS, ST_PREV, ST_CHUNK, ST_STEPS, ST_PENDING, ST_SIZE = range(6)
# float32 run state ``sf``: running products beta1**t, beta2**t
SF_B1T, SF_B2T = range(2)

F0 = np.float32(0.0)
F1 = np.float32(1.0)
LN_EPS = np.float32(1e-5)
ADAM_BLOCK = 4096  # fixed parameter block of the parallel Adam step and gradient norm
HEAD_BLOCK = 1024  # tokens per block of the chunk's head products (a multiple of LANES)
T_GROUP = 8  # chunk positions per parallel task of the backward pass's per-position steps (one scratch each)
TOTAL_BITS = 30  # frequency resolution handed to the coder

#: The network's arrays as the kernels take them (see :func:`new_network`).
Net = namedtuple("Net", "P G M W Aneg off sz hy st sf partial saved_h saved_x tin tout Pc Ac tin_t tout_t")
#: Activations of one chunk (shapes: see the glossary in statemix.models.nn).
Acts = namedtuple("Acts", "res nrm rstd an xh z cpre xs pj dtpre dt hs dA y yg logits probs lse")
#: Gradients with respect to the activations of one chunk, and the backward pass's transposed copies
#: of each layer's W_out, W_x and W_in (``wout_t[l, d * E + e]`` = W_out[e, d], and so on: see
#: :func:`.numerics.matvec8`) and of the head (``head_t[v * D + d]`` = head[d, v]), written at the
#: start of every backward pass.
Grads = namedtuple("Grads", "glog gres gan gxz gy gxs gp gdtpre gc qb wout_t wx_t win_t head_t")


def layout(config) -> tuple[np.ndarray, int]:
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


def init_params(config) -> np.ndarray:
    """The initial flat parameter vector (float32) of ``config`` from its seed (a fresh copy)."""
    return _initial_params(config).copy()


@functools.lru_cache(maxsize=8)
def _initial_params(config) -> np.ndarray:
    """:func:`init_params`, computed once per config (a stream's model is built again by every reader)."""
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


#: size-table entry -> the config field it holds (derived entries are set in :func:`sizes`)
_SIZE_FIELDS = {S_V: "vocab", S_D: "d_model", S_N: "d_state", S_K: "conv", S_L: "layers", S_T: "chunk",
                S_EB: "channel_block", S_BPTT: "bptt", S_IT_A: "iters_a", S_N_A: "chunks_a", S_IT_B: "iters_b",
                S_N_B: "chunks_b", S_IT_C: "iters_c", S_MIXING: "mixing", S_USE_SSM: "use_ssm",
                S_MATCH: "match", S_CALIBRATE: "calibrate", S_TABLE_BITS: "table_bits", S_DELAY: "delay"}
#: hyper-parameter entry -> config field
_HYPER_FIELDS = {H_LR: "lr", H_B1: "beta1", H_B2: "beta2", H_EPS: "adam_eps", H_CLIP: "clip",
                 H_SMOOTH: "smoothing", H_PRIOR: "prior", H_LR_MIN: "lr_min", H_LR_HALF: "lr_half"}


def sizes(config) -> np.ndarray:
    """The int64 size table ``sz`` of ``config`` (entries ``S_*``)."""
    sz = np.zeros(SZ_SIZE, dtype=np.int64)
    for index, name in _SIZE_FIELDS.items():
        sz[index] = getattr(config, name)
    sz[S_E] = config.d_model * config.expand
    sz[S_R] = 2 * config.d_state + 1
    sz[S_TB] = TOTAL_BITS if config.vocab <= (1 << 16) else 32
    sz[S_LEAST] = least_frequency(config.vocab, int(sz[S_TB]), bool(config.floor))
    return sz


def hyper(config) -> np.ndarray:
    """The float32 hyper-parameters ``hy`` of ``config`` (entries ``H_*``)."""
    hy = np.zeros(HY_SIZE, dtype=np.float32)
    for index, name in _HYPER_FIELDS.items():
        hy[index] = getattr(config, name)
    return hy


def new_activations(config):
    V, D, E, N, K, L, T = (config.vocab, config.d_model, config.d_model * config.expand,
                           config.d_state, config.conv, config.layers, config.chunk)
    R = 2 * N + 1
    f = np.float32
    return Acts(np.zeros((L + 1, T, D), f), np.zeros((L + 1, T, D), f), np.zeros((L + 1, T), f),
            np.zeros((L + 1, T, D), f), np.zeros((L, T + K - 1, E), f), np.zeros((L, T, E), f),
            np.zeros((L, T, E), f), np.zeros((L, T, E), f), np.zeros((L, T, R), f),
            np.zeros((L, T, E), f), np.zeros((L, T, E), f), np.zeros((L, T + 1, N, E), f),
            np.zeros((L, T, N, E), f), np.zeros((L, T, E), f), np.zeros((L, T, E), f),
            np.zeros((T, V), f), np.zeros((T, V), f), np.zeros(T, f))


def new_gradients(config):
    V, D, E, N, L, T = (config.vocab, config.d_model, config.d_model * config.expand,
                        config.d_state, config.layers, config.chunk)
    R = 2 * N + 1
    f = np.float32
    return Grads(np.zeros((T, V), f), np.zeros((L + 1, T, D), f), np.zeros((L + 1, T, D), f),
            np.zeros((L, T, 2 * E), f), np.zeros((L, T, E), f), np.zeros((L, T, E), f),
            np.zeros((L, T, R), f), np.zeros((L, T, E), f), np.zeros((L, T, E), f),
            np.zeros((L, T, N, E), f), np.zeros((L, D * E), f), np.zeros((L, R * E), f),
            np.zeros((L, 2 * E * D), f), np.zeros(V * D, f))
