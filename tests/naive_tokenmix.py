"""A plain-Python reference of statemix.models.tokenmix without the SSM (``use_ssm`` 0).

Written from the module's docstring, one token at a time, with dicts for the hash table and
NumPy float32 scalars in the kernels' order of operations, so the coded frequencies must agree
exactly.  Slow (about 5 ms per token): for inputs of a few thousand tokens.
"""

from __future__ import annotations

import numpy as np

from statemix._fmath import exp32, log32
from statemix.models import tokenmix as tm
from statemix.quantize import assign_frequencies

M64 = (1 << 64) - 1
F32 = np.float32


def _mul(a: int, b: int) -> int:
    return (a * b) & M64


HASH_MUL = int(tm.HASH_MUL) & M64
ORDER_MUL = int(tm.ORDER_MUL) & M64


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
        self.par = tm.initial_parameters().astype(np.float32)
        self.rates = tm.RATES.copy()
        self.counts = [0] * V
        self.lc = np.zeros(V, dtype=np.float32)

    # ---- statistics -------------------------------------------------------------------------
    def _contexts(self):
        ctx, h, pos = [], 0, len(self.history)
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
        qc = int(tm._COUNT_BUCKET[c]) if c < 16 else 7
        qs = tm.N_SHARE - 1 if c == n else (8 * c) // n
        return qc * tm.N_SHARE + min(qs, tm.N_SHARE - 2)

    # ---- one token ----------------------------------------------------------------------------
    def frequencies(self, total_bits: int) -> np.ndarray:
        """The coder's frequencies for the next token (and remember what learning needs)."""
        V, par = self.V, self.par
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
        e = F32(0.4) + F32(0.6) * log32(F32(V)) / F32(5.5)  # no SSM: a uniform softmax, H = ln V
        e = min(max(e, F32(0.2)), F32(2.5))
        bias = np.zeros(V, dtype=np.float32)
        tau = F32(1.0)
        if self.mixing == tm.MIX_PRIOR:
            z = (self.prior * e) * self.lc
        elif self.mixing == tm.MIX_REFERENCE:
            for t, o, _, c in entries:
                bias[t] += tm.REF_LAMBDA[o] * log32(F32(1) + F32(c) / tm.REF_ALPHA[o])
            b2 = self.found[1]
            if b2 >= 0 and self.buckets[b2][1] > 0:
                cnts = self.buckets[b2][3]
                top = max(range(len(cnts)), key=lambda j: (cnts[j], -j))
                conf = F32(cnts[top])
                bias[self.buckets[b2][2][top]] += F32(1.5) * (F32(1) - F32(1) / (F32(1) + conf * F32(0.3)))
            pos = len(self.history)
            for i in range(min(pos, tm.RECENCY)):
                age = F32(i) / F32(tm.RECENCY)
                bias[self.history[pos - 1 - i]] += F32(0.05) * exp32(F32(-3.0) * age)
            z = np.array([e * (F32(0.1) * self.lc[v] + bias[v]) for v in range(V)], dtype=np.float32)
        else:
            m = (2 * longest + deterministic) * tm.N_ENTROPY
            self.m = m
            for t, o, cell, _ in entries:
                bias[t] += par[tm.P_W + m * tm.N_ORDERS + o] * par[tm.P_F + o * tm.N_CELL + cell]
            mlen = self.mlen if self.use_match else 0
            if mlen > 0:
                bias[self.mtok] += par[tm.P_MATCH + min(mlen, tm.MATCH_CAP)]
            bw = par[tm.P_B + m]
            z = np.array([bw * self.lc[v] + bias[v] for v in range(V)], dtype=np.float32)
            top, second = sorted(z)[-1], sorted(z)[-2]
            margin = top - second
            self.k = sum(margin >= F32(edge) for edge in (0.5, 1.0, 2.0, 4.0)) * tm.N_ENTROPY
            if self.calibrate:
                tau = par[tm.P_TAU + self.k]
        self.z = z
        out = np.array([tau * z[v] for v in range(V)], dtype=np.float32)
        best = int(np.argmax(out))  # first maximum
        ex = np.array([exp32(out[v] - out[best]) for v in range(V)], dtype=np.float32)
        mass = _lane_sum(ex)
        total = 1 << total_bits
        scale = F32(np.float64(total - V) / np.float64(mass))
        freqs = np.zeros(V, dtype=np.int32)
        while not assign_frequencies(ex, V, scale, best, total, freqs):
            scale = scale * F32(0.5)
        inv = F32(1) / mass
        self.probs = np.array([ex[v] * inv for v in range(V)], dtype=np.float32)
        return freqs

    def learn(self, sym: int) -> None:
        if self.mixing != tm.MIX_LEARNED:
            return
        par, probs, rates = self.par, self.probs, self.rates
        m, k = self.m, self.k
        tau = par[tm.P_TAU + k] if self.calibrate else F32(1)
        gl = gz = F32(0)
        for v in range(self.V):
            gl += probs[v] * self.lc[v]
            gz += probs[v] * self.z[v]
        gl -= self.lc[sym]
        gz -= self.z[sym]
        par[tm.P_B + m] -= rates[tm.R_AB] * tau * gl
        if self.calibrate:
            par[tm.P_TAU + k] = max(par[tm.P_TAU + k] - rates[tm.R_TAU] * gz, F32(0.05))
        for t, o, cell, _ in self.entries:
            g = tau * (probs[t] - (F32(1) if t == sym else F32(0)))
            iw = tm.P_W + m * tm.N_ORDERS + o
            i_f = tm.P_F + o * tm.N_CELL + cell
            wv = par[iw]
            par[iw] -= rates[tm.R_W] * g * par[i_f]
            par[i_f] -= rates[tm.R_F] * g * wv
        mlen = self.mlen if self.use_match else 0
        if mlen > 0:
            g = tau * (probs[self.mtok] - (F32(1) if self.mtok == sym else F32(0)))
            par[tm.P_MATCH + min(mlen, tm.MATCH_CAP)] -= rates[tm.R_MATCH] * g

    def update(self, sym: int) -> None:
        for key, b in zip(self.ctx, self.found):
            if key == 0:
                continue
            if b < 0:
                b0 = (key >> (64 - self.bits)) & ((1 << self.bits) - 1)
                t0 = self.buckets[b0][1] if b0 in self.buckets else 0
                t1 = self.buckets[b0 ^ 1][1] if (b0 ^ 1) in self.buckets else 0
                b = b0 if t0 <= t1 else b0 ^ 1
                self.buckets[b] = [key, 0, [0] * tm.SLOTS, [0] * tm.SLOTS]
            entry = self.buckets[b]
            toks, cnts = entry[2], entry[3]
            live = [j for j in range(tm.SLOTS) if cnts[j] > 0 and toks[j] == sym]
            if live:
                slot = live[0]
            else:
                slot = min(range(tm.SLOTS), key=lambda j: (cnts[j], j))
                entry[1] -= cnts[slot]
                toks[slot], cnts[slot] = sym, 0
            cnts[slot] += 1
            entry[1] += 1
            if entry[1] >= tm.COUNT_LIMIT:
                for j in range(tm.SLOTS):
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
        if pos >= tm.MATCH_MIN:
            h = 0
            for back in range(1, tm.MATCH_MIN + 1):
                h = _mul(h + self.history[pos - back] + 1, HASH_MUL)
            slot = (h >> (64 - self.match_bits)) & ((1 << self.match_bits) - 1)
            if self.mlen == 0:
                cand = self.match_table.get(slot, 0)
                if cand > 0:
                    n = 0
                    while n < 32 and cand - 1 - n >= 0 and self.history[cand - 1 - n] == self.history[pos - 1 - n]:
                        n += 1
                    if n >= tm.MATCH_MIN:
                        self.mlen, self.mptr = n, cand
            self.match_table[slot] = pos
        if self.mlen > 0:
            self.mtok = self.history[self.mptr]
        # the frequency prior
        self.counts[sym] += 1
        self.lc[sym] = log32(F32(1) + F32(self.counts[sym]))


def _lane_sum(a: np.ndarray) -> np.float32:
    """The ssm module's 64-lane sum then pairwise tree, in float32."""
    lanes = [F32(0)] * 64
    for i, x in enumerate(a):
        lanes[i % 64] += x
    w = 32
    while w >= 1:
        for j in range(w):
            lanes[j] += lanes[j + w]
        w //= 2
    return lanes[0]
