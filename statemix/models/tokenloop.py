"""The ssm model's token coding loop: the network's softmax, mixed with count models, to the coder.

Per token i of a block (the same loop for ENCODE, DECODE and LEARN, see :mod:`.modes`)::

    t = begin_position(net)                      position in the chunk; its input is the last token
    forward_position(...)                        the SSM's logits and softmax (skipped without SSM)
    z = mix_logits(SSM logits, H, prior, counts)  :mod:`.tokenmix`, in nats; H = entropy of the SSM
    freqs = quantize_logits(z)                   :func:`statemix.quantize.quantize_logits`, sum 2**30,
                                                 each at least sz[S_LEAST]
    code / decode token i with freqs             :mod:`statemix.coder` (ENCODE/DECODE only)
    tokenmix.learn, tokenmix.update              the mixer learns the coded softmax; counts grow
    counts[sym] += 1, lc[sym] = log(1 + count)   the frequency prior (float32, own log)
    end_position(net, ..., sym)                  the token is the target (run_range trains chunks)

With a training delay (``Config.delay`` = 1) a chunk's end hands the chunk to the trainer instead,
and :func:`run_range` trains it beside the coding of the next chunk (:mod:`.nn.train`).
Without the SSM (``use_ssm`` = 0) its logits are 0 and H = log V.  LEARN updates the counts and the
SSM but not the mixer (the mixer learns from the probabilities a block was coded with).  Every state
lives in arrays, so :func:`run_range` runs any range of a block and a block run in several steps
gives the same bits as in one.
"""

from __future__ import annotations

import functools

import numpy as np

from .._fmath import F1, LANES, log32, sum_lanes
from .._jit import beside, kernel, variant
from ..coder import dec_symbol, enc_encode
from ..quantize import quantize_logits
from . import tokenmix
from .modes import DECODE, LEARN
from .nn.forward import forward_position
from .nn.layout import (H_PRIOR, ST_PENDING, ST_POS, S_CALIBRATE, S_DELAY, S_MATCH, S_MIXING, S_T,
                        S_LEAST, S_TABLE_BITS, S_TB, S_USE_SSM, S_V)
from .nn.train import (begin_position, coding_weights, end_position, end_position_serial, hand_over, train_chunk,
                       train_pending)


#: a token's stage trace (see record_stages): the SSM's softmax, the mixed softmax, the quantized one
STAGE_SSM, STAGE_MIXED, STAGE_QUANTIZED = range(3)


@kernel(inline=True)
def record_stages(row, probs, use_ssm, ex, freqs, V, total):
    """Copy a token's distributions into ``row`` (float32, at least 3 x V): the SSM's softmax
    ``probs`` (only with the SSM), the mixed softmax ``ex``, and ``freqs`` over their ``total``.
    Shared by this loop and cm's byte-distribution source."""
    if use_ssm:
        row[STAGE_SSM, :V] = probs[:V]
    row[STAGE_MIXED, :V] = ex[:V]
    for v in range(V):
        row[STAGE_QUANTIZED, v] = np.float32(freqs[v] / total)


@kernel
def _code_distribution(sz, hy, acts, t, lc, ts, ex, freqs, lanes):
    """Mix the SSM softmax with the count models (:mod:`.tokenmix`) and quantize for the coder.

    On return ``freqs`` (summing to 2**tb) codes the token and ``ex`` holds the coded softmax
    (float32), which the mixer learns from.
    """
    V = sz[S_V]
    use_ssm = sz[S_USE_SSM]
    lg = acts.logits[t]
    h = log32(np.float32(V))  # without the SSM its logits are 0: a uniform softmax
    if use_ssm:
        # entropy of the SSM softmax (nats): H = lse - sum p z
        pr = acts.probs[t]
        for v in range(V):
            ex[v] = pr[v] * lg[v]
        h = acts.lse[t] - sum_lanes(ex, V, lanes)
    tokenmix.gather(ts, sz[S_TABLE_BITS])
    tokenmix.mix_logits(sz[S_MIXING], use_ssm, sz[S_MATCH], sz[S_CALIBRATE], hy[H_PRIOR], lg, h, lc,
                        V, ts, ex)
    quantize_logits(ex, V, np.int64(1) << sz[S_TB], freqs, lanes, sz[S_LEAST])


@kernel
def predict_token(net, acts, lc, ts, ex, freqs, lanes):
    """The coded distribution of the next token (the first four steps above); return its position t.

    On return ``freqs`` (int32, summing to 2**sz[S_TB]) codes the token and ``ex`` holds the coded
    softmax for :func:`learn_token`.  Shared by this loop and cm's byte-distribution input.
    """
    t = begin_position(net)
    if net.sz[S_USE_SSM]:
        P, Aneg = coding_weights(net)
        forward_position(P, Aneg, net.off, net.sz, acts, net.tin, t, lanes)
    _code_distribution(net.sz, net.hy, acts, t, lc, ts, ex, freqs, lanes)
    return t


@kernel
def learn_token(net, acts, grads, acts_t, counts, lc, ts, ex, t, sym, coded, train):
    """Learn the token ``sym`` at position ``t`` (the last three steps above; the mixer only if the
    token was ``coded`` with the distribution in ``ex``; the SSM finishes a chunk only if ``train``:
    see :func:`.nn.train.end_position`)."""
    sz = net.sz
    use_ssm = sz[S_USE_SSM]
    if coded:
        tokenmix.learn(sz[S_MIXING], use_ssm, sz[S_MATCH], sz[S_CALIBRATE], acts.logits[t], lc, sz[S_V], ex, sym,
                       ts)
    tokenmix.update(sym, sz[S_TABLE_BITS], ts)
    counts[sym] += 1
    lc[sym] = log32(F1 + np.float32(counts[sym]))
    end_position(net, acts, grads, acts_t, t, sym, train and use_ssm != 0)


@kernel
def _split_bits(weights, V, sym, nbits, cum, out, row, col):
    """Split P(sym) under ``weights`` (V non-negative, unnormalised) into ``nbits`` binary decisions.

    Decision j is bit ``nbits - 1 - j`` of the token id given the bits before it:
    ``out[row + j, col]`` = the mass of the tokens with the coded prefix extended by the coded bit,
    over the mass of the prefix (float64 prefix sums in ``cum``; ids >= V weigh 0).  The product
    over j is P(sym) = weights[sym] / sum(weights).
    """
    c = 0.0
    for v in range(V):
        cum[v] = c
        c += np.float64(weights[v])
    cum[V] = c
    lo = np.int64(0)
    width = np.int64(1) << nbits
    for j in range(nbits):
        half = width >> 1
        a = cum[min(lo, V)]
        m = cum[min(lo + half, V)]
        b = cum[min(lo + width, V)]
        p1 = (b - m) / (b - a) if b > a else 0.5  # the upper half of the prefix: the next bit is 1
        if (sym >> (nbits - 1 - j)) & 1:
            out[row + j, col] = p1
            lo += half
        else:
            out[row + j, col] = 1.0 - p1
        width = half


def run_range(mode, data, coded, rc, net, acts, grads, acts_t, counts, lc, ts, trace, bit_trace, stages, start, end):
    """Encode, decode or only learn tokens ``start`` to ``end`` of ``data`` (one step of a block).

    ``data`` holds token ids (int64 < V).  The coder ``rc`` is started by the caller
    (:func:`statemix.coder.enc_init` / ``dec_init``).  ``net``, ``acts``, ``grads``: the network
    (:mod:`.nn.layout`), ``acts_t`` the delayed trainer's activations (``acts`` without a delay);
    ``counts`` (int64, V) and ``lc`` (float32 log(1 + count)) the frequency
    prior; ``ts`` the count models' state (:meth:`.tokenmix.State.arrays`).  If ``trace`` has rows,
    ``trace[i, 0]`` gets the coded probability of token i and ``trace[i, 1]`` the SSM's own
    probability of it (1/V without the SSM).  If ``bit_trace`` has rows (``nbits`` per token), the
    same two distributions split into binary decisions over the bits of the token id
    (:func:`_split_bits`): ``bit_trace[nbits * i + j, 0]`` coded, ``[..., 1]`` the SSM's.  If
    ``stages`` (float32, rows x 3 x V) has rows, row ``i - start`` receives token i's distributions:
    the SSM's softmax (without the SSM: left as it is), the mixed softmax, the quantized one.

    A loop in Python over the chunks of the range: the kernel :func:`code_tokens` codes a chunk's
    tokens, and at its end the chunk is trained (:func:`.nn.train.train_chunk`) or, with a training
    delay, handed over (:func:`.nn.train.hand_over`; :func:`.nn.train.finish_chunk`'s two cases, the
    chunk pending being trained beside the coding of the next one, on a second thread:
    :func:`statemix._jit.beside`).  Run in turn the two give the same bits.  Each training pass is
    thus a kernel asked for from Python: compiled once, not again inside every loop that trains,
    and loaded from the kernel cache by later processes (:class:`statemix._jit._CacheForTopLevel`).
    """
    arrays = (mode, data, coded, rc, net, acts, grads, acts_t, counts, lc, ts, trace, bit_trace, stages, start)
    sz, st = net.sz, net.st
    if not sz[S_USE_SSM]:
        code_tokens(*arrays, start, end)
        return
    i = start
    while i < end:
        stop = int(min(end, i + sz[S_T] - st[ST_POS]))  # the end of this chunk, or of the range
        if st[ST_PENDING]:
            beside(functools.partial(code_tokens, *arrays, i, stop),
                   functools.partial(train_pending, net, acts_t, grads))
        else:
            code_tokens(*arrays, i, stop)
        if st[ST_POS] == 0:  # the chunk ended
            if sz[S_DELAY]:
                hand_over(net, acts, acts_t)
            else:
                train_chunk(net, acts, grads)
        i = stop


@kernel(allocates=True)
def code_tokens(mode, data, coded, rc, net, acts, grads, acts_t, counts, lc, ts, trace, bit_trace, stages,
                 start, i0, i1):
    """Tokens ``i0`` to ``i1`` of :func:`run_range` (whose range begins at ``start``), one by one; with
    the SSM at most to the end of their chunk, which the caller finishes (no training is compiled
    here)."""
    sz = net.sz
    V = sz[S_V]
    tb = sz[S_TB]
    lanes = np.empty(LANES, dtype=np.float32)
    ex = np.empty(V, dtype=np.float32)
    freqs = np.empty(V, dtype=np.int32)
    cum = np.empty(V + 1, dtype=np.int64)
    tracing = trace.shape[0] > 0
    total = np.float64(1 << tb)
    use_ssm = sz[S_USE_SSM]
    nbits = bit_trace.shape[0] // max(data.shape[0], 1)
    cumf = np.empty(V + 1, dtype=np.float64)
    for i in range(i0, i1):
        if mode != LEARN:
            t = predict_token(net, acts, lc, ts, ex, freqs, lanes)
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
                trace[i, 1] = np.float64(acts.probs[t, sym]) if use_ssm else 1.0 / V
            if stages.shape[0] > 0:
                record_stages(stages[i - start], acts.probs[t], use_ssm, ex, freqs, V, total)
            if nbits > 0:
                _split_bits(freqs, V, sym, nbits, cumf, bit_trace, nbits * i, 0)
                if use_ssm:
                    _split_bits(acts.probs[t], V, sym, nbits, cumf, bit_trace, nbits * i, 1)
            learn_token_untrained(net, acts, grads, acts_t, counts, lc, ts, ex, t, sym, True, False)
        else:
            t = begin_position(net)
            if use_ssm:
                P, Aneg = coding_weights(net)
                forward_position(P, Aneg, net.off, sz, acts, net.tin, t, lanes)
            sym = np.int64(data[i])
            tokenmix.gather(ts, sz[S_TABLE_BITS])
            learn_token_untrained(net, acts, grads, acts_t, counts, lc, ts, ex, t, sym, False, False)


# numba compiles every call it finds, also those a runtime flag never takes: cm's loop without the
# SSM compiled the SSM's whole training (about half of its 380 s of compiling) for the count models
# alone, and the ssm model's coding loop compiled it again though its chunks are trained from Python
# (run_range).  These variants have the calls that are never taken replaced by stubs that stop
# with an error if they are.


@kernel(inline=True)
def _no_forward(P, Aneg, off, sz, acts, tin, t, lanes):
    raise RuntimeError("statemix: an SSM pass in a kernel compiled without the SSM")


@kernel(inline=True)
def _no_training(net, acts, grads, acts_t):
    raise RuntimeError("statemix: SSM training in a kernel compiled without it")


#: :func:`predict_token` compiled without the SSM (for ``use_ssm`` = 0 only)
predict_token_no_ssm = variant(predict_token, "no_ssm", forward_position=_no_forward)
#: :func:`learn_token` compiled without the training at a chunk's end, for callers that never ask
#: for it (``train`` false: :func:`code_tokens`) or have no SSM (cm's count models' source)
learn_token_untrained = variant(learn_token, "untrained",
                                end_position=variant(end_position, "untrained", finish_chunk=_no_training))
#: :func:`learn_token` training on this thread alone (:data:`.nn.train.end_position_serial`): cm's
#: byte-distribution source, inside cm's loop
learn_token_serial = variant(learn_token, "serial", end_position=end_position_serial)
