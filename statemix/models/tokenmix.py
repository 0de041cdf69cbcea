"""tokenmix: token n-gram counts, a token match model and logit-space mixing for the ssm model.

The ssm model (:mod:`statemix.models.ssm`) predicts a softmax over V tokens.  This module turns that,
plus count statistics of the tokens coded so far, into the distribution handed to the coder, and
learns from each coded token.  Everything here is sparse except one pass over V per token.

Statistics (updated after every token, identically by encoder and decoder):

- **n-gram contexts** of ``ORDERS`` = 1-7, 15 and 31 preceding tokens (the reference's orders).  One
  hash table of ``2**table_bits`` buckets holds all orders; a bucket is a 64-bit context check, the
  context's total count n and ``slots`` (token, count) pairs (``SLOTS``, 32, unless configured).
  A context probes two buckets; a new context takes the emptier one (replacement by smallest n).  A
  full bucket replaces its smallest count.  Counts age: when n reaches ``COUNT_LIMIT`` every count
  in the bucket is halved.
- **match model**: the last position of every hashed 3-token context; while the tokens after that
  position keep agreeing with the coded ones, the next one there is predicted, with a length (in
  tokens) that grows with each agreement.  History is a ring of ``2**HIST_BITS`` tokens.
- the **frequency prior** lc[v] = ln(1 + count of v) (kept by the ssm model).

Memory (:meth:`State.memory_bytes`): 12 + 4 ``slots`` bytes per bucket (140 bytes with 32 slots:
140 MiB at the presets' 2**20 buckets; tokens and counts are 16-bit, as V <= 2**16 and counts stay
under ``COUNT_LIMIT``), 16 MiB of history, 8 bytes per match-table entry (2**(table_bits - 2)); it
does not grow with the input.

Mixing (``Config.mixing``), with s the SSM's logits, H their entropy in nats and
e = clip(0.4 + 0.6 H / 5.5, 0.2, 2.5) the reference's entropy-adaptive scale:

- ``MIX_PRIOR`` (0): z = s + prior * e * lc.
- ``MIX_REFERENCE`` (1), the reference's fixed weights: z = s + e * (0.1 lc + sum over orders and seen
  continuations of lambda_o ln(1 + c / alpha_o)) + the "LZ" boost 1.5 e (1 - 1 / (1 + 0.3 c_top)) on
  the most frequent continuation of the order-2 context (our stand-in for its two-token table) + a
  recency bonus 0.05 e exp(-3 age / 64) on each of the last 64 tokens.
- ``MIX_LEARNED`` (2): z = a[m] s + b[m] lc + sum over orders and seen continuations of
  w[m, o] f[o, cell(c, n)] + match[len] on the match model's token; the coded logits are tau[k] z
  when ``calibrate`` (else z).  m (``N_MIX`` sets) = longest order with statistics x whether that
  context has seen one token only x SSM entropy bucket; k (``N_TAU`` sets) = margin of the top z over
  the second (a confidence bucket) x SSM entropy bucket; cell = count bucket x share c / n bucket
  (``N_CELL``).  f starts at the reference's lambda ln(1 + c / alpha) for the typical count c of
  its count bucket (1, 2, 3, 4, 5.5, 8, 12.5, 24), w, a and tau at 1, b at 0.1, match[len] at
  min(0.5 len, 4).  All are trained by plain gradient steps on the code length -ln p(token), with
  the rates (per token) 0.02 for w, 0.002 for f, 0.004 for a and b, 0.02 for match, 0.001 for tau
  (tau kept at 0.05 or more): with
  g_v = tau (p_v - [v = token]), dz/da = s, dz/db = lc, dL/dtau = sum_v (p_v - [v = token]) z_v, and
  each bias term's gradient is the sum of g over the tokens it touched, so the step costs one pass
  over V plus the seen continuations.

With ``use_ssm`` 0 the SSM is not run: s = 0 and H = ln V (its entropy when its logits are 0), and
the entropy bucket is 0.  All arithmetic is
float32 in a fixed order with :mod:`statemix._fmath`'s exp and log, so it is deterministic.
"""

from __future__ import annotations

import functools
from decimal import ROUND_HALF_EVEN, Context, Decimal

import numpy as np

from .._fmath import exp32, log32
from .._jit import kernel
from .bit.hashing import wrapping_add, wrapping_mul

MIX_PRIOR, MIX_REFERENCE, MIX_LEARNED = 0, 1, 2

ORDERS = np.array([1, 2, 3, 4, 5, 6, 7, 15, 31], dtype=np.int64)  # context lengths in tokens
BYTE_ORDERS = np.array([1, 2, 3, 4, 5, 6, 8, 12, 20], dtype=np.int64)  # when the tokens are bytes
N_ORDERS = 9
# the reference's fixed weights: order -> (lambda, alpha)
REF_LAMBDA = np.array([0.15, 0.10, 0.08, 0.06, 0.05, 0.04, 0.03, 0.50, 1.0], dtype=np.float32)
REF_ALPHA = np.array([0.10, 0.05, 0.03, 0.02, 0.015, 0.01, 0.008, 0.001, 0.001], dtype=np.float32)
SLOTS = 32  # (token, count) pairs per n-gram bucket, unless a configuration says otherwise
COUNT_LIMIT = 1023  # a bucket's counts are halved when its total reaches this
HIST_BITS = 22  # token history ring (match model): 4 Mi tokens
MATCH_MIN = 3  # tokens hashed to find a match
MATCH_CAP = 15  # match length buckets 0..15 (longer counts as 15)
RECENCY = 64  # reference recency window (tokens)

# learned mixing: parameter sets and their offsets in the float32 vector ``par``
ENTROPY_EDGES = np.array([1.0, 2.5, 4.0], dtype=np.float32)  # SSM entropy buckets (nats)
N_ENTROPY = ENTROPY_EDGES.size + 1
MARGIN_EDGES = np.array([0.5, 1.0, 2.0, 4.0], dtype=np.float32)  # top-logit margin buckets (nats)
N_MIX = 2 * (N_ORDERS + 1) * N_ENTROPY
N_COUNT, N_SHARE = 8, 9
N_CELL = N_COUNT * N_SHARE
N_TAU = (MARGIN_EDGES.size + 1) * N_ENTROPY
P_W = 0  # w[m, o]
P_F = P_W + N_MIX * N_ORDERS  # f[o, cell]
P_A = P_F + N_ORDERS * N_CELL  # a[m]
P_B = P_A + N_MIX  # b[m]
P_MATCH = P_B + N_MIX  # match[len]
P_TAU = P_MATCH + MATCH_CAP + 1  # tau[k]
N_PAR = P_TAU + N_TAU
# learning rates (per coded token), in the float32 vector ``rates``
R_W, R_F, R_AB, R_MATCH, R_TAU = range(5)
RATES = np.array([0.02, 0.002, 0.004, 0.02, 0.001], dtype=np.float32)

# int64 state ``ist``
I_POS, I_MPTR, I_MLEN, I_MTOK, I_NENT, I_MIX, I_TAU, I_LONGEST = range(8)
IST_SIZE = 8

F0 = np.float32(0.0)
F1 = np.float32(1.0)
HASH_MUL = np.int64(-7046029254386353131)  # 0x9E3779B97F4A7C15 as int64 (wrapping arithmetic)
ORDER_MUL = np.int64(0x2545F4914F6CDD1D)

# count bucket of a count c >= 1: 1, 2, 3, 4, 5-6, 7-9, 10-15, 16+
_COUNT_BUCKET = np.array([0, 0, 1, 2, 3, 4, 4, 5, 5, 5, 6, 6, 6, 6, 6, 6], dtype=np.int64)
_COUNT_TYPICAL = np.array([1, 2, 3, 4, 5.5, 8, 12.5, 24], dtype=np.float32)


def initial_parameters() -> np.ndarray:
    """The learned mixer's starting point (a fresh copy of :func:`_reference_parameters`)."""
    return _reference_parameters().copy()


@functools.cache
def _reference_parameters() -> np.ndarray:
    """The learned mixer's starting point: the reference's weights, plain SSM and prior.

    f[o, cell] = lambda_o * ln(1 + c / alpha_o) for a typical count c of the cell's count bucket, in
    float32, with the logarithm computed in ``decimal`` and rounded (no libm: its log1pf is not
    correctly rounded on every platform, and differed here in 3 of these 72 values).
    """
    context = Context(prec=40, rounding=ROUND_HALF_EVEN)
    par = np.zeros(N_PAR, dtype=np.float32)
    par[P_W:P_F] = 1.0
    for o in range(N_ORDERS):
        for qc in range(N_COUNT):
            x = _COUNT_TYPICAL[qc] / REF_ALPHA[o]  # float32 division
            ln = np.float32(float(context.ln(context.add(Decimal(1), Decimal(float(x))))))
            start = P_F + o * N_CELL + qc * N_SHARE
            par[start:start + N_SHARE] = REF_LAMBDA[o] * ln
    par[P_A:P_B] = 1.0
    par[P_B:P_MATCH] = 0.1
    par[P_MATCH:P_TAU] = np.minimum(0.5 * np.arange(MATCH_CAP + 1), 4.0)
    par[P_TAU:] = 1.0
    return par


class State:
    """Tables, history and learned parameters of one stream (memory: :meth:`memory_bytes`)."""

    SNAPSHOT_STATE = True  # a model's snapshot copies this object's arrays (models._snapshot)

    def __init__(self, V: int, table_bits: int, orders: np.ndarray = ORDERS, slots: int = SLOTS):
        nb = 1 << table_bits
        self.orders = orders.copy()
        self.keys = np.zeros(nb, dtype=np.int64)  # context check per bucket (0 = empty)
        self.totals = np.zeros(nb, dtype=np.int32)  # n per bucket
        self.tokens = np.zeros((nb, slots), dtype=np.uint16)  # token ids: V <= 2**16 (ssm_config.MAX_BPE_MERGES)
        self.counts = np.zeros((nb, slots), dtype=np.uint16)  # 0 = free slot; at most COUNT_LIMIT
        self.history = np.zeros(1 << HIST_BITS, dtype=np.int32)
        self.match_table = np.zeros(1 << _match_bits(table_bits), dtype=np.int64)  # position + 1
        self.ist = np.zeros(IST_SIZE, dtype=np.int64)
        self.par = initial_parameters()
        self.rates = RATES.copy()
        # per-token work: the seen continuations (token, order, cell) and the buckets found
        self.ent_tok = np.zeros(N_ORDERS * slots, dtype=np.int64)
        self.ent_ord = np.zeros(N_ORDERS * slots, dtype=np.int64)
        self.ent_cell = np.zeros(N_ORDERS * slots, dtype=np.int64)
        self.ent_cnt = np.zeros(N_ORDERS * slots, dtype=np.int64)
        self.bucket = np.zeros(N_ORDERS, dtype=np.int64)
        self.ctx = np.zeros(N_ORDERS, dtype=np.int64)
        self.bias = np.zeros(V, dtype=np.float32)  # dense sparse-bias vector, zero between tokens
        self.z = np.zeros(V, dtype=np.float32)  # mixed logits before the temperature

    @staticmethod
    def memory_bytes(V: int, table_bits: int, slots: int = SLOTS) -> int:
        nb = 1 << table_bits
        return (nb * (12 + 4 * slots) + 4 * (1 << HIST_BITS) + 8 * (1 << _match_bits(table_bits))
                + 8 * V + 4 * N_PAR)

    def arrays(self):
        """The state as the tuple the kernels take (order fixed: see their unpacking)."""
        return (self.orders, self.keys, self.totals, self.tokens, self.counts, self.history,
                self.match_table, self.ist, self.par, self.rates, self.ent_tok, self.ent_ord,
                self.ent_cell, self.ent_cnt, self.bucket, self.ctx, self.bias, self.z)


@kernel
def _context_hashes(orders, history, pos, ctx):
    """ctx[o] = hash of the orders[o] tokens before ``pos`` (0 when fewer have been seen)."""
    mask = history.shape[0] - 1
    h = np.int64(0)
    o = 0
    for back in range(1, orders[N_ORDERS - 1] + 1):
        if back > pos:
            break
        h = wrapping_mul(wrapping_add(h, np.int64(history[(pos - back) & mask]) + 1), HASH_MUL)
        if back == orders[o]:
            ctx[o] = wrapping_mul(h ^ wrapping_mul(np.int64(o + 1), ORDER_MUL), HASH_MUL) | 1
            o += 1
    while o < N_ORDERS:
        ctx[o] = 0
        o += 1


@kernel
def _match_bits(table_bits):
    """log2 of the match table's entries: a quarter of the n-gram buckets, at least 2**10."""
    return max(table_bits - 2, 10)


@kernel
def _home(key, bits):
    """The first of the two buckets a context key may occupy (the other is this one xor 1)."""
    return (key >> np.int64(64 - bits)) & ((np.int64(1) << bits) - 1)


@kernel
def _find(keys, key, bits):
    """Bucket of ``key`` (one of two probes), or -1."""
    b = _home(key, bits)
    if keys[b] == key:
        return b
    if keys[b ^ 1] == key:
        return b ^ 1
    return np.int64(-1)


@kernel
def _cell(c, n):
    qc = _COUNT_BUCKET[c] if c < 16 else np.int64(7)
    qs = np.int64(N_SHARE - 1) if c == n else (np.int64(8) * c) // n
    return qc * N_SHARE + min(qs, np.int64(N_SHARE - 2))


@kernel
def _bucket(x, edges):
    """How many of the increasing ``edges`` are <= x."""
    n = 0
    for edge in edges:
        if x >= edge:
            n += 1
    return n


@kernel
def gather(ts, bits):
    """Find the contexts of the next token and list their seen continuations.

    ``ts`` is :meth:`State.arrays`.  Fills ctx, bucket (-1: not present), the entry lists and
    ist[I_LONGEST] (2 x (1 + the longest order with statistics) + 1 if that context has seen one
    token only; 0 if no context has statistics).
    """
    (orders, keys, totals, tokens, counts, history, match_table, ist, par, rates, ent_tok, ent_ord,
     ent_cell, ent_cnt, bucket, ctx, bias, z) = ts
    _context_hashes(orders, history, ist[I_POS], ctx)
    ne = 0
    longest = 0
    deterministic = 0
    for o in range(N_ORDERS):
        bucket[o] = -1
        if ctx[o] == 0:
            continue
        b = _find(keys, ctx[o], bits)
        bucket[o] = b
        if b < 0 or totals[b] == 0:
            continue
        longest = o + 1
        first = ne
        n = np.int64(totals[b])
        for j in range(tokens.shape[1]):
            c = np.int64(counts[b, j])
            if c > 0:
                ent_tok[ne] = tokens[b, j]
                ent_ord[ne] = o
                ent_cell[ne] = _cell(min(c, n), n)
                ent_cnt[ne] = c
                ne += 1
        deterministic = 1 if ne - first == 1 else 0
    ist[I_NENT] = ne
    ist[I_LONGEST] = 2 * longest + deterministic


@kernel
def mix_logits(mode, use_ssm, use_match, calibrate, prior, lg, entropy, lc, V, ts, out):
    """Write the coded logits into ``out[:V]``: z, or tau z when calibrating (then z is kept in
    ``ts``'s z for :func:`learn`).

    ``lg``: SSM logits (ignored without the SSM); ``entropy``: their entropy in nats (ln V without);
    ``lc``: the frequency prior.  ``ist`` records the chosen weight sets.
    """
    (orders, keys, totals, tokens, counts, history, match_table, ist, par, rates, ent_tok, ent_ord,
     ent_cell, ent_cnt, bucket, ctx, bias, z) = ts
    e = np.float32(0.4) + np.float32(0.6) * entropy / np.float32(5.5)
    e = min(max(e, np.float32(0.2)), np.float32(2.5))
    ne = ist[I_NENT]
    if mode == MIX_PRIOR:
        w = prior * e
        if use_ssm:
            for v in range(V):
                out[v] = lg[v] + w * lc[v]
        else:
            for v in range(V):
                out[v] = w * lc[v]
    elif mode == MIX_REFERENCE:
        for i in range(ne):
            o = ent_ord[i]
            bias[ent_tok[i]] += REF_LAMBDA[o] * log32(F1 + np.float32(ent_cnt[i]) / REF_ALPHA[o])
        b2 = bucket[1]
        if b2 >= 0 and totals[b2] > 0:
            top = 0
            for j in range(1, tokens.shape[1]):
                if counts[b2, j] > counts[b2, top]:
                    top = j
            conf = np.float32(counts[b2, top])
            bias[tokens[b2, top]] += np.float32(1.5) * (F1 - F1 / (F1 + conf * np.float32(0.3)))
        pos = ist[I_POS]
        mask = history.shape[0] - 1
        seen = min(pos, np.int64(RECENCY))
        for i in range(seen):
            age = np.float32(i) / np.float32(RECENCY)  # 0 for the last token
            bias[history[(pos - 1 - i) & mask]] += np.float32(0.05) * exp32(np.float32(-3.0) * age)
        for v in range(V):
            s = lg[v] if use_ssm else F0
            out[v] = s + e * (np.float32(0.1) * lc[v] + bias[v])
    else:
        eb = _bucket(entropy, ENTROPY_EDGES) if use_ssm else 0
        m = np.int64(ist[I_LONGEST] * N_ENTROPY + eb)
        ist[I_MIX] = m
        for i in range(ne):
            o = ent_ord[i]
            bias[ent_tok[i]] += par[P_W + m * N_ORDERS + o] * par[P_F + o * N_CELL + ent_cell[i]]
        mlen = ist[I_MLEN] if use_match else np.int64(0)
        if mlen > 0:
            bias[ist[I_MTOK]] += par[P_MATCH + min(mlen, np.int64(MATCH_CAP))]
        a = par[P_A + m]
        bw = par[P_B + m]
        if use_ssm:
            for v in range(V):
                out[v] = a * lg[v] + bw * lc[v] + bias[v]
        else:
            for v in range(V):
                out[v] = bw * lc[v] + bias[v]
        if calibrate:
            # temperature set: the margin of the top logit over the second (confidence) x SSM entropy
            top = out[0]
            second = np.float32(-3.0e38)
            for v in range(1, V):
                if out[v] > top:
                    second = top
                    top = out[v]
                elif out[v] > second:
                    second = out[v]
            k = np.int64(_bucket(top - second, MARGIN_EDGES) * N_ENTROPY + eb)
            ist[I_TAU] = k
            tau = par[P_TAU + k]
            for v in range(V):
                z[v] = out[v]
                out[v] = tau * z[v]


@kernel
def learn(mode, use_ssm, use_match, calibrate, lg, lc, V, probs, sym, ts):
    """One gradient step of the learned mixer on -ln probs[sym] (``probs``: the coded softmax)."""
    (orders, keys, totals, tokens, counts, history, match_table, ist, par, rates, ent_tok, ent_ord,
     ent_cell, ent_cnt, bucket, ctx, bias, z) = ts
    ne = ist[I_NENT]
    if mode == MIX_LEARNED:
        m = ist[I_MIX]
        k = ist[I_TAU]
        tau = par[P_TAU + k] if calibrate else F1
        if use_ssm:
            gs = F0
            for v in range(V):
                gs += probs[v] * lg[v]
            gs -= lg[sym]
            par[P_A + m] -= rates[R_AB] * tau * gs
        gl = F0
        for v in range(V):
            gl += probs[v] * lc[v]
        gl -= lc[sym]
        par[P_B + m] -= rates[R_AB] * tau * gl
        if calibrate:
            gz = F0
            for v in range(V):
                gz += probs[v] * z[v]
            gz -= z[sym]
            par[P_TAU + k] = max(par[P_TAU + k] - rates[R_TAU] * gz, np.float32(0.05))
        for i in range(ne):
            t = ent_tok[i]
            g = tau * (probs[t] - (F1 if t == sym else F0))
            o = ent_ord[i]
            iw = P_W + m * N_ORDERS + o
            i_f = P_F + o * N_CELL + ent_cell[i]
            wv = par[iw]
            par[iw] -= rates[R_W] * g * par[i_f]
            par[i_f] -= rates[R_F] * g * wv
        mlen = ist[I_MLEN] if use_match else np.int64(0)
        if mlen > 0:
            t = ist[I_MTOK]
            g = tau * (probs[t] - (F1 if t == sym else F0))
            par[P_MATCH + min(mlen, np.int64(MATCH_CAP))] -= rates[R_MATCH] * g
    # clear the sparse bias vector
    for i in range(ne):
        bias[ent_tok[i]] = F0
    if mode == MIX_REFERENCE:
        pos = ist[I_POS]
        mask = history.shape[0] - 1
        for i in range(min(pos, np.int64(RECENCY))):
            bias[history[(pos - 1 - i) & mask]] = F0
        b2 = bucket[1]
        if b2 >= 0:
            for j in range(tokens.shape[1]):
                bias[tokens[b2, j]] = F0
    if ist[I_MLEN] > 0:
        bias[ist[I_MTOK]] = F0


@kernel
def update(sym, bits, ts):
    """Count ``sym`` in every context of ``gather``, append it to the history, move the match model."""
    (orders, keys, totals, tokens, counts, history, match_table, ist, par, rates, ent_tok, ent_ord,
     ent_cell, ent_cnt, bucket, ctx, bias, z) = ts
    for o in range(N_ORDERS):
        key = ctx[o]
        if key == 0:
            continue
        b = bucket[o]
        if b < 0:
            b0 = _home(key, bits)
            b = b0 if totals[b0] <= totals[b0 ^ 1] else b0 ^ 1
            keys[b] = key
            totals[b] = 0
            for j in range(tokens.shape[1]):
                counts[b, j] = 0
        slot = -1
        low = 0
        for j in range(tokens.shape[1]):
            if counts[b, j] > 0 and tokens[b, j] == sym:
                slot = j
                break
            if counts[b, j] < counts[b, low]:
                low = j
        if slot < 0:
            slot = low
            totals[b] -= counts[b, low]
            tokens[b, slot] = sym
            counts[b, slot] = 0
        counts[b, slot] += 1
        totals[b] += 1
        if totals[b] >= COUNT_LIMIT:
            n = 0
            for j in range(tokens.shape[1]):
                counts[b, j] >>= 1
                n += counts[b, j]
            totals[b] = n
    # history and match model
    pos = ist[I_POS]
    mask = history.shape[0] - 1
    history[pos & mask] = sym
    mlen = ist[I_MLEN]
    if mlen > 0 and ist[I_MTOK] == sym:
        ist[I_MLEN] = mlen + 1
        ist[I_MPTR] += 1
    else:
        ist[I_MLEN] = 0
    pos += 1
    ist[I_POS] = pos
    if pos >= MATCH_MIN:
        h = np.int64(0)
        for back in range(1, MATCH_MIN + 1):
            h = wrapping_mul(wrapping_add(h, np.int64(history[(pos - back) & mask]) + 1), HASH_MUL)
        slot_m = _home(h, _match_bits(bits))
        if ist[I_MLEN] == 0:
            cand = match_table[slot_m]
            if cand > 0 and pos - cand < mask:
                # verify backwards: the match length is the number of agreeing tokens (at most 32)
                n = 0
                while (n < 32 and cand - 1 - n >= 0
                       and history[(cand - 1 - n) & mask] == history[(pos - 1 - n) & mask]):
                    n += 1
                if n >= MATCH_MIN:
                    ist[I_MLEN] = n
                    ist[I_MPTR] = cand
        match_table[slot_m] = pos
    if ist[I_MLEN] > 0:
        if pos - ist[I_MPTR] >= mask:
            ist[I_MLEN] = 0
        else:
            ist[I_MTOK] = history[ist[I_MPTR] & mask]
