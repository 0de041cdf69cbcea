"""A plain-Python reference of the ssm model's mixing and coding (statemix.models.tokenmix, quantize).

Written from the docstrings of :mod:`statemix.models.tokenmix` and :mod:`statemix.quantize`, one
token at a time, with dicts for the hash table and NumPy float32 scalars in the kernels' order of
operations, so the coded frequencies must agree exactly.  It shares no code with the library except
the float32 exp and log of :mod:`statemix._fmath` (tested on their own): its own constants (orders'
weights, learning rates, bucket edges, hash multipliers), its own initial parameters (kept as
separate arrays w, f, a, b, match, tau; :meth:`NaiveTokenMix.packed` lays them out as the library's
``par``), its own softmax and entropy of the SSM's logits, and its own frequency assignment.

The SSM itself is not re-implemented (a plain-Python network would run for hours): with the SSM the
caller passes its logits for each token (from the library's :class:`statemix.models.nn.Network` run
on the same tokens), and everything after the logits is computed here.  For inputs of a few thousand
tokens (about 0.5 ms per token at V = 256).
"""

from __future__ import annotations

import math

import numpy as np

from statemix._fmath import exp32 as _exp32
from statemix._fmath import log32 as _log32

M64 = (1 << 64) - 1
F32 = np.float32

# the reference's fixed weights per order: lambda_o, alpha_o
LAMBDA = [F32(x) for x in (0.15, 0.10, 0.08, 0.06, 0.05, 0.04, 0.03, 0.50, 1.0)]
ALPHA = [F32(x) for x in (0.10, 0.05, 0.03, 0.02, 0.015, 0.01, 0.008, 0.001, 0.001)]
N_ORDERS = 9
SLOTS, COUNT_LIMIT = 32, 1023
MATCH_MIN, MATCH_CAP, RECENCY = 3, 15, 64
ENTROPY_EDGES = [F32(x) for x in (1.0, 2.5, 4.0)]
MARGIN_EDGES = [F32(x) for x in (0.5, 1.0, 2.0, 4.0)]
N_ENTROPY = len(ENTROPY_EDGES) + 1
N_MIX = 2 * (N_ORDERS + 1) * N_ENTROPY  # (longest order 0..9) x (one token seen) x entropy bucket
N_TAU = (len(MARGIN_EDGES) + 1) * N_ENTROPY
N_COUNT, N_SHARE = 8, 9
TYPICAL_COUNT = [F32(x) for x in (1, 2, 3, 4, 5.5, 8, 12.5, 24)]  # of the count buckets below
RATE_W, RATE_F, RATE_AB, RATE_MATCH, RATE_TAU = (F32(x) for x in (0.02, 0.002, 0.004, 0.02, 0.001))
HASH_MUL = 0x9E3779B97F4A7C15
ORDER_MUL = 0x2545F4914F6CDD1D
PRIOR, REFERENCE, LEARNED = 0, 1, 2  # mixing modes


def exp32(x) -> np.float32:
    return F32(_exp32(F32(x)))  # (a jitted function returns a Python float: keep float32 arithmetic)


def log32(x) -> np.float32:
    return F32(_log32(F32(x)))


def _mul(a: int, b: int) -> int:
    return (a * b) & M64


def count_bucket(c: int) -> int:
    """Counts 1, 2, 3, 4, 5-6, 7-9, 10-15, 16+ -> 0..7."""
    for bucket, top in enumerate((1, 2, 3, 4, 6, 9, 15)):
        if c <= top:
            return bucket
    return 7


def edges_below(x, edges) -> int:
    return sum(1 for edge in edges if x >= edge)


def lane_sum(a) -> np.float32:
    """Sum in 64 interleaved float32 lanes (element i into lane i mod 64), then lane j += lane j + w
    for w = 32, 16, ..., 1."""
    lanes = [F32(0)] * 64
    for i, x in enumerate(a):
        lanes[i % 64] += x
    w = 32
    while w >= 1:
        for j in range(w):
            lanes[j] += lanes[j + w]
        w //= 2
    return lanes[0]


def initial_parameters():
    """w, f, a, b, match, tau at the start: f[o, cell] = lambda_o ln(1 + c / alpha_o) for the typical
    count c of the cell's count bucket (c / alpha_o in float32, ln correctly rounded: float64 log1p,
    then float32), w, a and tau 1, b 0.1, match[len] = min(0.5 len, 4)."""
    w = np.ones((N_MIX, N_ORDERS), dtype=np.float32)
    f = np.zeros((N_ORDERS, N_COUNT * N_SHARE), dtype=np.float32)
    for o in range(N_ORDERS):
        for qc in range(N_COUNT):
            ln = F32(math.log1p(float(TYPICAL_COUNT[qc] / ALPHA[o])))
            f[o, qc * N_SHARE:(qc + 1) * N_SHARE] = LAMBDA[o] * ln
    a = np.ones(N_MIX, dtype=np.float32)
    b = np.full(N_MIX, 0.1, dtype=np.float32)
    match = np.array([min(0.5 * n, 4.0) for n in range(MATCH_CAP + 1)], dtype=np.float32)
    tau = np.ones(N_TAU, dtype=np.float32)
    return w, f, a, b, match, tau


def assign_frequencies(q, scale, best: int, total: int, least: int):
    """f_v = least + floor(q_v * scale) (float32 product; NaN or negative counts as 0), the rest up to
    ``total`` to f[best]; None if that leaves f[best] below ``least``."""
    freqs = []
    for x in q:
        share = x * scale
        freqs.append(least + (math.floor(share) if share >= 0 else 0))
    freqs[best] += total - sum(freqs)
    return np.array(freqs, dtype=np.int64) if freqs[best] >= least else None


def quantize(z, total_bits: int, least: int):
    """Frequencies summing to 2**total_bits, each at least ``least``, for float32 logits z, and the
    coded softmax."""
    V = len(z)
    best = int(np.argmax(z))  # the first maximum
    q = [exp32(z[v] - z[best]) for v in range(V)]
    mass = lane_sum(q)
    total = 1 << total_bits
    scale = F32(np.float64(total - V * least) / np.float64(mass))
    while (freqs := assign_frequencies(q, scale, best, total, least)) is None:
        scale = scale * F32(0.5)
    inv = F32(1) / mass
    return freqs, np.array([x * inv for x in q], dtype=np.float32)


def softmax_entropy(lg):
    """The SSM's entropy in nats from its logits: H = lse - sum_v p_v lg_v, with p = exp(lg - max) / s
    and lse = max + ln s (s and the sum over v in lane order)."""
    top = max(lg)
    ex = [exp32(x - top) for x in lg]
    s = lane_sum(ex)
    inv = F32(1) / s
    p = [x * inv for x in ex]
    lse = top + log32(s)
    return lse - lane_sum([p[v] * lg[v] for v in range(len(lg))])


class NaiveTokenMix:
    def __init__(self, V: int, table_bits: int, orders, mixing: int, match: int, calibrate: int,
                 prior: float):
        self.V, self.bits, self.orders = V, table_bits, [int(o) for o in orders]
        self.mixing, self.use_match, self.calibrate, self.prior = mixing, match, calibrate, F32(prior)
        self.buckets = {}  # index -> [key, total, tokens, counts]
        self.history = []
        self.match_table = {}
        self.match_bits = max(table_bits - 2, 10)
        self.mptr = self.mlen = self.mtok = 0
        self.w, self.f, self.a, self.b, self.match, self.tau = initial_parameters()
        self.counts = [0] * V
        self.lc = np.zeros(V, dtype=np.float32)

    def packed(self) -> np.ndarray:
        """The parameters in the library's layout: w, f, a, b, match, tau."""
        return np.concatenate([self.w.ravel(), self.f.ravel(), self.a, self.b, self.match, self.tau])

    # ---- statistics -------------------------------------------------------------------------
    def _contexts(self):
        ctx, pos = [], len(self.history)
        for o in self.orders:
            if o > pos:
                ctx.append(0)
                continue
            h = 0
            for back in range(1, o + 1):
                h = _mul(h + self.history[pos - back] + 1, HASH_MUL)
            key = _mul(h ^ ((len(ctx) + 1) * ORDER_MUL & M64), HASH_MUL) | 1
            ctx.append(key)
        return ctx

    def _bucket_of(self, key):
        b = (key >> (64 - self.bits)) & ((1 << self.bits) - 1)
        for cand in (b, b ^ 1):
            entry = self.buckets.get(cand)
            if entry is not None and entry[0] == key:
                return cand
        return -1

    def _cell(self, c, n):
        qs = N_SHARE - 1 if c == n else (8 * c) // n
        return count_bucket(c) * N_SHARE + min(qs, N_SHARE - 2)

    # ---- one token ----------------------------------------------------------------------------
    def frequencies(self, total_bits: int, least: int, logits=None) -> np.ndarray:
        """The coder's frequencies for the next token, each at least ``least`` (and remember what
        learning needs).

        ``logits``: the SSM's logits for this token (float32, V), or None without the SSM.
        """
        V = self.V
        self.ctx = self._contexts()
        self.found = [self._bucket_of(k) if k else -1 for k in self.ctx]
        entries, longest, deterministic = [], 0, 0
        for o, b in enumerate(self.found):
            if b < 0 or self.buckets[b][1] == 0:
                continue
            longest = o + 1
            _, n, toks, cnts = self.buckets[b]
            live = [(t, c) for t, c in zip(toks, cnts) if c > 0]
            deterministic = int(len(live) == 1)
            for t, c in live:
                entries.append((t, o, self._cell(min(c, n), n), c))
        self.entries = entries
        use_ssm = logits is not None
        self.use_ssm = use_ssm
        self.lg = lg = logits if use_ssm else np.zeros(V, dtype=np.float32)
        h = softmax_entropy(lg) if use_ssm else log32(F32(V))  # logits 0: a uniform softmax
        e = F32(0.4) + F32(0.6) * h / F32(5.5)
        e = min(max(e, F32(0.2)), F32(2.5))
        self.eb = eb = edges_below(h, ENTROPY_EDGES) if use_ssm else 0  # the SSM's entropy bucket
        bias = np.zeros(V, dtype=np.float32)
        tau = F32(1.0)
        if self.mixing == PRIOR:
            w = self.prior * e
            z = np.array([(lg[v] + w * self.lc[v]) if use_ssm else w * self.lc[v] for v in range(V)],
                         dtype=np.float32)
        elif self.mixing == REFERENCE:
            for t, o, _, c in entries:
                bias[t] += LAMBDA[o] * log32(F32(1) + F32(c) / ALPHA[o])
            b2 = self.found[1]
            if b2 >= 0 and self.buckets[b2][1] > 0:
                cnts = self.buckets[b2][3]
                top = max(range(len(cnts)), key=lambda j: (cnts[j], -j))
                conf = F32(cnts[top])
                bias[self.buckets[b2][2][top]] += F32(1.5) * (F32(1) - F32(1) / (F32(1) + conf * F32(0.3)))
            pos = len(self.history)
            for i in range(min(pos, RECENCY)):
                age = F32(i) / F32(RECENCY)
                bias[self.history[pos - 1 - i]] += F32(0.05) * exp32(F32(-3.0) * age)
            z = np.array([lg[v] + e * (F32(0.1) * self.lc[v] + bias[v]) for v in range(V)], dtype=np.float32)
        else:
            m = (2 * longest + deterministic) * N_ENTROPY + eb
            self.m = m
            for t, o, cell, _ in entries:
                bias[t] += self.w[m, o] * self.f[o, cell]
            mlen = self.mlen if self.use_match else 0
            if mlen > 0:
                bias[self.mtok] += self.match[min(mlen, MATCH_CAP)]
            a, bw = self.a[m], self.b[m]
            z = np.array([((a * lg[v] + bw * self.lc[v]) if use_ssm else bw * self.lc[v]) + bias[v]
                          for v in range(V)], dtype=np.float32)
            top, second = sorted(z)[-1], sorted(z)[-2]
            self.k = edges_below(top - second, MARGIN_EDGES) * N_ENTROPY + eb
            if self.calibrate:
                tau = self.tau[self.k]
        self.z = z
        out = np.array([tau * z[v] for v in range(V)], dtype=np.float32)
        freqs, self.probs = quantize(out, total_bits, least)
        return freqs

    def learn(self, sym: int) -> None:
        """One gradient step on -ln p(sym) of the learned mixer (g_v = tau (p_v - [v = sym]))."""
        if self.mixing != LEARNED:
            return
        probs, m, k, lg = self.probs, self.m, self.k, self.lg
        tau = self.tau[k] if self.calibrate else F32(1)
        ga = gb = gz = F32(0)
        for v in range(self.V):
            ga += probs[v] * lg[v]
            gb += probs[v] * self.lc[v]
            gz += probs[v] * self.z[v]
        if self.use_ssm:
            self.a[m] -= RATE_AB * tau * (ga - lg[sym])
        self.b[m] -= RATE_AB * tau * (gb - self.lc[sym])
        if self.calibrate:
            self.tau[k] = max(self.tau[k] - RATE_TAU * (gz - self.z[sym]), F32(0.05))
        for t, o, cell, _ in self.entries:
            g = tau * (probs[t] - (F32(1) if t == sym else F32(0)))
            wv = self.w[m, o]
            self.w[m, o] -= RATE_W * g * self.f[o, cell]
            self.f[o, cell] -= RATE_F * g * wv
        mlen = self.mlen if self.use_match else 0
        if mlen > 0:
            g = tau * (probs[self.mtok] - (F32(1) if self.mtok == sym else F32(0)))
            self.match[min(mlen, MATCH_CAP)] -= RATE_MATCH * g

    def update(self, sym: int) -> None:
        for key, b in zip(self.ctx, self.found):
            if key == 0:
                continue
            if b < 0:
                b0 = (key >> (64 - self.bits)) & ((1 << self.bits) - 1)
                t0 = self.buckets[b0][1] if b0 in self.buckets else 0
                t1 = self.buckets[b0 ^ 1][1] if (b0 ^ 1) in self.buckets else 0
                b = b0 if t0 <= t1 else b0 ^ 1
                self.buckets[b] = [key, 0, [0] * SLOTS, [0] * SLOTS]
            entry = self.buckets[b]
            toks, cnts = entry[2], entry[3]
            live = [j for j in range(SLOTS) if cnts[j] > 0 and toks[j] == sym]
            if live:
                slot = live[0]
            else:
                slot = min(range(SLOTS), key=lambda j: (cnts[j], j))
                entry[1] -= cnts[slot]
                toks[slot], cnts[slot] = sym, 0
            cnts[slot] += 1
            entry[1] += 1
            if entry[1] >= COUNT_LIMIT:
                for j in range(SLOTS):
                    cnts[j] >>= 1
                entry[1] = sum(cnts)
        # match model
        self.history.append(sym)
        if self.mlen > 0 and self.mtok == sym:
            self.mlen += 1
            self.mptr += 1
        else:
            self.mlen = 0
        pos = len(self.history)
        if pos >= MATCH_MIN:
            h = 0
            for back in range(1, MATCH_MIN + 1):
                h = _mul(h + self.history[pos - back] + 1, HASH_MUL)
            slot = (h >> (64 - self.match_bits)) & ((1 << self.match_bits) - 1)
            if self.mlen == 0:
                cand = self.match_table.get(slot, 0)
                if cand > 0:
                    n = 0
                    while n < 32 and cand - 1 - n >= 0 and self.history[cand - 1 - n] == self.history[pos - 1 - n]:
                        n += 1
                    if n >= MATCH_MIN:
                        self.mlen, self.mptr = n, cand
            self.match_table[slot] = pos
        if self.mlen > 0:
            self.mtok = self.history[self.mptr]
        # the frequency prior
        self.counts[sym] += 1
        self.lc[sym] = log32(F32(1) + F32(self.counts[sym]))
