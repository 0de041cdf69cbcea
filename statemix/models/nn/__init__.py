"""nn: the SSM network (Mamba-style selective state space model), trained online, apart from any coder.

The network maps the tokens seen so far to a softmax over ``V`` tokens.  It runs position by position
(:class:`.network.Network`: ``predict()`` then ``observe(token)``; or the kernels from another
kernel) and, every ``T`` tokens (a *chunk*), trains on the chunk just seen with a few Adam
iterations.  Nothing here codes: the ssm model's token loop (:mod:`statemix.models.tokenloop`)
mixes its softmax with count models and codes the result, and any other model can take the
network's probabilities as an input the same way.

Modules, in data-flow order: :mod:`.layout` (arrays, parameter layout, initialisation),
:mod:`.numerics` (sums in a fixed order, LayerNorm), :mod:`.forward`, :mod:`.backward`,
:mod:`.train` (Adam, schedule, ``train_chunk``, position bookkeeping), :mod:`.network` (the object).

Speed notes: loops index slices from 0 (a view per row) so LLVM can drop numba's negative-index
wrap-around and vectorize; the head products of a chunk run in blocks of ``HEAD_BLOCK`` tokens so the
block's weights stay in cache; rows and positions are unrolled by 8 with the additions kept in
one fixed order (``((g + a0 w0) + a1 w1) + ...``, the same bits as one row at a time).  The
backward pass's input-gradient products run as :func:`.numerics.matvec8` over weights transposed
once per pass (dot8's lanes kept as vectors across the outputs: the same sums).  The per-position
steps are inlined into the passes, except three whose closing element store numba 0.68 drops when
inlined into a ``prange`` body (tests/test_ssm.py::test_compiled_passes_compute_what_their_source_says).

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
chunk of the cross entropy against the target, label-smoothed by ``smoothing`` (0 in the ssm model's
levels 2 and 3, 0.12 in cm's source 2, 0 in its source 3, level 3's); gradients either one step deep (the
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

from .layout import Acts, Grads, Net
from .network import Network

__all__ = ["Acts", "Grads", "Net", "Network"]
