"""Training the SSM network: Adam, the iteration and learning-rate schedule, and one chunk's update.

- :func:`adam_step`: clip the gradient ``G`` to global norm ``hy[H_CLIP]`` (norm summed over fixed
  blocks of ``ADAM_BLOCK`` parameters, the block sums added in index order: exact at any thread
  count), then ``m = b1 m + (1 - b1) g``, ``w = b2 w + (1 - b2) g^2``,
  ``P -= lr / (1 - b1^t) * m / (sqrt(w) / sqrt(1 - b2^t) + eps)`` with the bias corrections kept as
  running products ``sf`` (no pow).
- Schedule: ``iters_a`` iterations for the first ``chunks_a`` chunks, ``iters_b`` for the next
  ``chunks_b``, then ``iters_c``; the learning rate at chunk c is
  ``lr_min + (lr - lr_min) * half / (half + c)`` (constant when ``half`` = 0).
- :func:`train_chunk`: each iteration restarts from the state at chunk start; the first reuses the
  activations of the coding pass (same weights, same state); afterwards the state is the one the
  coding pass reached, so coding continues exactly where it was.
- A delay of one chunk (``S_DELAY`` = 1): at a chunk's end the chunk is handed over
  (:func:`hand_over`) and trained on (:func:`train_pending`) while the next chunk is coded with the
  weights as they were, so chunk k is coded with the weights trained through chunk k - 2.  Every
  iteration then runs its own forward pass (the trainer's weights are not the coding pass's), in
  its own activations; trainer and coder write no common array, so a caller may run the two on two
  threads (:func:`statemix.models.tokenloop.run_range` does) and get the bits of running them in turn.
- :func:`begin_position` / :func:`end_position`: the position bookkeeping a caller wraps around
  :func:`.forward.forward_position` to run the network token by token (inputs ``tin``, targets
  ``tout``, training at the end of each chunk) without any coding loop.
"""

from __future__ import annotations

import numpy as np

from ..._fmath import exp32
from ..._jit import kernel, prange, serial_twin, variant
from .numerics import dot_lanes
from .layout import (
    ADAM_BLOCK, A_LOG, F0, F1, H_B1, H_B2, H_CLIP, H_EPS, H_LR, H_LR_HALF, H_LR_MIN, LANES, NT, SF_B1T,
    SF_B2T, ST_CHUNK, ST_PENDING, ST_POS, ST_PREV, ST_STEPS, S_DELAY, S_E, S_EB, S_IT_A, S_IT_B, S_IT_C, S_K,
    S_L, S_N, S_N_A, S_N_B, S_T)
from .forward import forward_chunk
from .backward import backward_chunk


@kernel(parallel=True)
def adam_step(P, G, M, W, hy, sf, lr, partial):
    """Clip G to global norm hy[H_CLIP] and take one Adam step on P (moments M, W)."""
    n = P.shape[0]
    nblk = (n + ADAM_BLOCK - 1) // ADAM_BLOCK
    for b in prange(nblk):
        lanes = np.empty(LANES, dtype=np.float32)
        lo = b * ADAM_BLOCK
        hi = min(n, lo + ADAM_BLOCK)
        partial[b] = dot_lanes(G[lo:hi], G[lo:hi], hi - lo, lanes)
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


#: channels per task of the scans of :func:`_iterate`: ``sz[S_EB]`` for the parallel passes
_TASK_CHANNELS = S_EB


@kernel
def _iterate(net, acts, grads, tin, tout, coded_first):
    """The Adam iterations on one chunk (``tin`` inputs, ``tout`` targets, from the start state in
    ``acts``); the activations already in ``acts`` serve the first one if ``coded_first``.  The
    passes run on every thread; :data:`_iterate_serial` runs them without parallel regions."""
    P, G, M, W, Aneg, off, sz, hy, st, sf = net.P, net.G, net.M, net.W, net.Aneg, net.off, net.sz, net.hy, net.st, net.sf
    chunk = st[ST_CHUNK]
    iters = _iterations(sz, chunk)
    lr = _learning_rate(hy, chunk)
    for it in range(iters):
        if it > 0 or not coded_first:
            forward_chunk(P, Aneg, off, sz, acts, tin, sz[_TASK_CHANNELS])
        backward_chunk(P, Aneg, off, sz, hy, acts, grads, tin, tout, G, sz[_TASK_CHANNELS])
        adam_step(P, G, M, W, hy, sf, lr, net.partial)
        refresh_a(P, off, sz, Aneg)
        st[ST_STEPS] += 1
    st[ST_CHUNK] = chunk + 1


#: :func:`_iterate` on this thread alone: the passes' serial twins, the scans in one task of all E
#: channels (the same bits: see :func:`.serial_twin`)
_forward_chunk_serial = serial_twin(forward_chunk)
_backward_chunk_serial = serial_twin(backward_chunk)
_adam_step_serial = serial_twin(adam_step)
_iterate_serial = variant(_iterate, "serial", forward_chunk=_forward_chunk_serial, backward_chunk=_backward_chunk_serial,
                          adam_step=_adam_step_serial, _TASK_CHANNELS=S_E)


@kernel(allocates=True)  # copies rows (numba's slice copies need its runtime); once per chunk
def train_chunk(net, acts, grads):
    """Train on the chunk just seen (``net.tin`` inputs, ``net.tout`` targets); the activations of
    the position-by-position pass serve the first iteration."""
    hs, xh = acts.hs, acts.xh
    L = net.sz[S_L]
    T = net.sz[S_T]
    K = net.sz[S_K]
    for l in range(L):
        net.saved_h[l] = hs[l, T]
        net.saved_x[l] = xh[l, T:T + K - 1]
    _iterate(net, acts, grads, net.tin, net.tout, True)
    for l in range(L):
        hs[l, 0] = net.saved_h[l]
        xh[l, 0:K - 1] = net.saved_x[l]


@kernel
def train_pending(net, acts_t, grads):
    """Train on the chunk handed over by :func:`hand_over` (delay 1), in ``acts_t``, on this thread
    alone: the caller may run it beside the coding of the next chunk, which reads only the coding
    weights ``net.Pc``/``net.Ac`` and its own arrays."""
    _iterate_serial(net, acts_t, grads, net.tin_t, net.tout_t, False)
    net.st[ST_PENDING] = 0


@kernel(allocates=True)  # copies arrays (numba's slice copies need its runtime); once per chunk
def hand_over(net, acts, acts_t):
    """At the end of a chunk with delay 1 (the chunk before trained): the coding weights become the
    trained ones, the chunk and its start state go to the trainer, and the coding pass carries on
    from the state it reached."""
    sz = net.sz
    L = sz[S_L]
    T = sz[S_T]
    K = sz[S_K]
    net.Pc[:] = net.P
    net.Ac[:] = net.Aneg
    net.tin_t[:] = net.tin
    net.tout_t[:] = net.tout
    for l in range(L):
        acts_t.hs[l, 0] = acts.hs[l, 0]
        acts.hs[l, 0] = acts.hs[l, T]
        for j in range(K - 1):  # upward: a source row is never written before it is read
            acts_t.xh[l, j] = acts.xh[l, j]
            acts.xh[l, j] = acts.xh[l, T + j]
    net.st[ST_PENDING] = 1


@kernel(inline=True)
def finish_chunk(net, acts, grads, acts_t):
    """What follows the last position of a chunk: train on it (no delay), or train on the chunk
    still pending and hand this one over (delay 1)."""
    if net.sz[S_DELAY]:
        if net.st[ST_PENDING]:
            train_pending(net, acts_t, grads)
        hand_over(net, acts, acts_t)
    else:
        train_chunk(net, acts, grads)


@kernel(inline=True)
def coding_weights(net):
    """(P, Aneg) as the coding pass reads them: the delayed copies with a delay, else the trained ones."""
    if net.sz[S_DELAY]:
        return net.Pc, net.Ac
    return net.P, net.Aneg


@kernel
def begin_position(net):
    """Start the next position: its input is the previous token; return its index t in the chunk.

    Then :func:`.forward.forward_position` (``net``'s arrays, ``t``) leaves P(next token) in
    ``acts.probs[t]`` (and the logits in ``acts.logits[t]``).
    """
    t = net.st[ST_POS]
    net.tin[t] = net.st[ST_PREV]
    return t


@kernel(inline=True)
def end_position(net, acts, grads, acts_t, t, token, train):
    """Record ``token`` as the target of position ``t``; at the end of a chunk, :func:`finish_chunk`
    if ``train`` (else only start the next chunk: a caller that trains beside the coding finishes
    the chunk itself).  ``acts_t``: the delayed trainer's activations (``acts`` without a delay)."""
    net.tout[t] = token
    net.st[ST_PREV] = token
    following = t + 1
    if following == net.sz[S_T]:
        if train:
            finish_chunk(net, acts, grads, acts_t)
        following = 0
    net.st[ST_POS] = following


#: :func:`end_position` with every training pass on this thread alone, no parallel region under it:
#: for a network run inside another kernel's loop (cm's byte-distribution source), which can then
#: load it from the kernel cache instead of compiling it again (:class:`statemix._jit._CacheForTopLevel`)
end_position_serial = variant(end_position, "serial", finish_chunk=variant(
    finish_chunk, "serial", train_chunk=variant(train_chunk, "serial", _iterate=_iterate_serial)))
