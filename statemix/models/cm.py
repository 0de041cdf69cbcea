"""cm: a bitwise context-mixing byte model, all in integer arithmetic.

This is statemix's first predictor (model id 1).  It codes each byte as 8 binary decisions, most
significant bit first, and for each bit mixes the predictions of several contexts.  Everything is
integer arithmetic on fixed tables, so encoder and decoder agree bit for bit on every machine.

Data flow for one bit (``c0`` is the partial byte with a leading 1: 1..255; ``c1``, ``c2`` the
previous bytes):

1. Counters.  A counter is 32 bits: ``p`` (22 bits, P(1) in units of 2**-22) in the high bits and
   ``n`` (10 bits, updates seen, capped at a limit) in the low bits.  Update:
   ``p += (bit * 2**22 - p) * DT[n] >> 16`` with ``DT[n] = 2**16 / (n + 1.5)``: a running average whose
   rate slows as evidence accumulates, down to ``1 / (limit + 1.5)``.  Orders 0 (``c0``) and 1 (``c1,
   c0``) index counters directly.  Order 0 adapts fast (``LIMIT_ORDER0`` = 3: it follows the last few
   bits seen at this point of a byte); order 1, the state maps and the match model's counters use
   ``LIMIT_DIRECT`` = 1023.
2. Bit histories.  Up to ten hashed contexts (orders 2, 3, 4, 6, the current word, order 5, the word
   with the previous word - words are runs of letters, case-folded - the sparse pair (c2, c3), order
   8, and order 1; a configuration uses the first ``contexts`` of them) each select one byte per bit: a
   bit-history state (counts of 0s and 1s seen, the larger discounted when the other bit appears,
   and the last bit; see ``_bit_history_tables``).  The state is mapped to a probability by a counter
   per (context kind, state) - the "state map" - which learns what each history really predicts.
   Each state also gives a second, fixed "run" input: +-64 per bit seen (up to 16) when the history
   holds only 1s (+) or only 0s (-), else 0.
3. Hashed tables.  At each nibble boundary a context hash selects a 16-byte bucket: byte 0 holds an
   8-bit check, bytes 1..15 the states of the nibble's partial bits.  Of two neighbouring buckets the
   one whose check matches is used; otherwise the one with less history is cleared and taken.  Each
   context kind has ``2**table_bits`` bytes.
4. Match model.  The last ``2**hist_bits`` bytes are kept in a ring buffer; a hash of the last
   ``MIN_MATCH`` bytes finds the most recent earlier occurrence, which then predicts the byte that
   followed it.  Its input is a counter selected by (match length bucket, predicted bit).
5. Mixing.  Inputs are ``stretch(p) = ln(p / (1 - p))`` in units of 1/256 (range +-2047) plus a bias.
   Three mixers each pick a weight set - by (match state, ``c0``), by (``c1``, top 2 bits of ``c2``),
   and by (number of hashed contexts with history, bit position) - and give ``dot_m = sum w_i x_i >> 16`` (weights in units of
   2**-16).  A final mixer, one weight set per ``c0``, combines the three: ``p_mix = squash(sum v_m
   dot_m >> 16)`` (P(1) in units of 2**-16).  Every mixer is trained on its own code length:
   ``w_i += x_i * err * rate >> 18`` with ``err = bit * 2**16 - p``; the rate starts high and decays
   to ``MIXER_RATE`` as the stream grows, and a mixer whose prediction missed by less than
   ``MIXER_SKIP / 2**16`` is not trained (faster, and slightly smaller output).
6. APMs (secondary estimation).  Two adaptive tables keyed by (``c1``, ``c0``) and by a 16-bit hash
   of (``c2``, ``c1``, ``c0``), each with 33 buckets interpolated over ``stretch(p_mix)``, refine
   ``p_mix``; the coded probability is ``(2 p_mix + 7 p_apm1 + 7 p_apm2) / 16``.
7. The probability goes to :func:`statemix.quantize.binary_frequency` and the range coder.

``run_range`` is the single loop shared by encoder, decoder and learner (for blocks that were stored
instead of modelled): the three differ only in where each bit comes from and whether it is coded.
The stretch and squash tables are computed with Python's ``decimal`` module (correctly rounded, so
identical everywhere), never with the platform's libm.

Memory (bytes): contexts * 2**table_bits (histories) + 2**hist_bits (history) + 2**hist_bits (match
table, int32 per 4 bytes of history) + about 17.6 MiB (APMs, order-1 counters, weights).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from decimal import ROUND_HALF_EVEN, Context, Decimal

import numpy as np

from .._jit import kernel
from ..coder import dec_bit, enc_bit, enc_finish, enc_init, dec_init, new_state
from ..quantize import binary_frequency
from . import presets
from ._snapshot import put_back, take
from .modes import DECODE, ENCODE, LEARN
from .protocol import ModelSpec, TraceBlock

MODEL_ID = 1



MIN_MATCH = 6  # bytes of context that start a match
N_HASHED = 10  # at most: orders 2, 3, 4, 6, the word, order 5, the word pair, sparse (c2, c3), order 8, 1
N_INPUTS = 2 + N_HASHED + 1 + 1 + N_HASHED  # orders 0 and 1, hashed orders, match, bias, runs
RUN = 2 + N_HASHED + 2  # first "run" input: how one-sided each hashed context's history is
LIMIT_DIRECT = 1023  # counter confidence cap (order 1, state maps, match)
LIMIT_ORDER0 = 3  # counter confidence cap of the order-0 contexts: they follow the last few bits
N_MIXERS = 3
MIXER1_SETS = 3 * 256  # first weight set of mixer 1; mixer 0 has (3 match states x c0)
MIXER2_SETS = MIXER1_SETS + 1024  # mixer 1 has (c1, top 2 bits of c2); mixer 2 (known contexts x bit position)
FINAL_SETS = (MIXER2_SETS + (N_HASHED + 1) * 8) * N_INPUTS  # final mixer: one set per c0
MIXER_SETS = FINAL_SETS // N_INPUTS + (256 * N_MIXERS + N_INPUTS - 1) // N_INPUTS
FINAL_RATE = 2
MIXER_RATE = 4  # mixer learning rate (scale: see module docstring)
MIXER_SKIP = 1024  # mixers skip training when |bit - p| < MIXER_SKIP / 2**16
MIXER_RATE_BOOST = 24  # extra rate at the start of a stream, decaying as 2**16 / (bytes seen + 2**16)
APM_RATE = 6  # APM update: moves 2**-APM_RATE of the way to the target
COUNTER_INIT = 1 << 31  # p = 1/2, n = 0
HISTORY_CAP = 24  # largest bit count a bit-history state remembers
LUT_NEXT, LUT_SEEN, LUT_INITIAL, LUT_RUN = 9216, 9728, 9984, 10240  # bit-history tables in lut

# Layout of the int64 scalar state array.
C0, HIST4, HIST8, POS, BIT, MATCH_PTR, MATCH_LEN, WORD, P_MIX, PREV_WORD = range(10)
MATCH_BIT, TABLE_BITS, HIST_BITS = range(10, 13)
APM_SLOT, MIX_SET, P_MIXER, DOT = 13, 15, 18, 21  # per APM: slot; per mixer: set, P(1), stretch(P)
HASH = 24  # N_HASHED context hashes at the last byte boundary
BUCKET = HASH + N_HASHED  # N_HASHED bucket base indices for the current nibble
SLOT = BUCKET + N_HASHED  # counter index used by each counter input this bit (2 + N_HASHED + 1)
STATE_SLOT = SLOT + N_INPUTS  # N_HASHED indices of the bit-history states used this bit
ABLATE = STATE_SLOT + N_HASHED  # diagnostics only: bit k silences input k; bit APM_OFF skips the APMs
N_CTX, N_MIX, N_APM = ABLATE + 1, ABLATE + 2, ABLATE + 3  # the configuration's structure
STATE_SIZE = ABLATE + 4
APM_OFF = N_INPUTS

#: Components that diagnostics can switch off, and the ABLATE bits (inputs) of each.
_HASHED_NAMES = ("order 2", "order 3", "order 4", "order 6", "word", "order 5", "word pair", "sparse", "order 8", "order 1 history")
COMPONENTS = {"order 0": 1 << 0, "order 1": 1 << 1, "match": 1 << (2 + N_HASHED), "APMs": 1 << APM_OFF}
COMPONENTS.update({name: (1 << (2 + k)) | (1 << (RUN + k)) for k, name in enumerate(_HASHED_NAMES)})

# Counter array layout: [order 0: 256][order 1: 65536][match: 64][state maps: N_HASHED x 256].
ORDER1_BASE = 256
MATCH_SM_BASE = ORDER1_BASE + 65536
STATE_MAP_BASE = MATCH_SM_BASE + 64
N_COUNTERS = STATE_MAP_BASE + N_HASHED * 256


def _lookup_tables() -> np.ndarray:
    """Return int64 [stretch (4096) | squash (4096) | DT (1024)], computed exactly in decimal.

    Every operation goes through one explicit decimal context, so neither the platform nor the
    caller's decimal settings can change a table entry.
    """
    ctx = Context(prec=20, rounding=ROUND_HALF_EVEN)
    one = Decimal(1)
    stretch = np.empty(4096, dtype=np.int64)
    for i in range(4096):
        p = ctx.divide(Decimal(2 * i + 1), Decimal(8192))
        logit = ctx.ln(ctx.divide(p, ctx.subtract(one, p)))
        stretch[i] = max(-2047, min(2047, int(ctx.to_integral_value(ctx.multiply(logit, Decimal(256))))))
    squash = np.empty(4096, dtype=np.int64)
    for i in range(4096):
        x = ctx.divide(Decimal(i - 2048), Decimal(256))
        p = ctx.divide(Decimal(65536), ctx.add(one, ctx.exp(ctx.minus(x))))
        squash[i] = max(1, min(65535, int(ctx.to_integral_value(p))))
    dt = np.array([131072 // (2 * n + 3) for n in range(1024)], dtype=np.int64)
    next_state, seen, run, initial = _bit_history_tables()
    return np.concatenate([stretch, squash, dt, next_state, seen, initial, run])


def _bit_history_tables() -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Enumerate the bit-history states: (n0, n1, last bit), counts capped at HISTORY_CAP.

    Seeing bit y increments n_y and, if the other count exceeds 2, shrinks it to half plus one, so a
    history favours recent bits.  State 0 is the empty history.  Returns the transition table
    ``next[2 * state + y]``, the number of bits each state has seen (``n0 + n1``), and each state's
    initial probability of a 1, ``(2 n1 + 1) / (2 (n0 + n1) + 2)``, as a 32-bit counter (22-bit p).
    """
    start = (0, 0, 2)
    index = {start: 0}
    order = [start]
    transitions = []
    for n0, n1, _ in order:  # grows while iterating: breadth-first enumeration
        for y in (0, 1):
            a, b = (n0, n1) if y == 0 else (n1, n0)  # a: count of y, b: the other
            a = min(a + 1, HISTORY_CAP)
            b = b if b <= 2 else b // 2 + 1
            nxt = (a, b, 0) if y == 0 else (b, a, 1)
            if nxt not in index:
                index[nxt] = len(order)
                order.append(nxt)
            transitions.append(index[nxt])
    assert len(order) <= 256
    pad = 256 - len(order)
    seen = [n0 + n1 for n0, n1, _ in order] + [0] * pad
    run = [(64 * min(n1, 16) if n0 == 0 else -64 * min(n0, 16) if n1 == 0 else 0) for n0, n1, _ in order] + [0] * pad
    initial = [(((2 * n1 + 1) << 22) // (2 * (n0 + n1) + 2)) << 10 for n0, n1, _ in order] + [1 << 31] * pad
    return (np.array(transitions + [0] * 2 * pad, dtype=np.int64), np.array(seen, dtype=np.int64),
            np.array(run, dtype=np.int64),
            np.array(initial, dtype=np.int64))


_LUT: np.ndarray | None = None


def lookup_tables() -> np.ndarray:
    global _LUT
    if _LUT is None:
        _LUT = _lookup_tables()
    return _LUT


@kernel
def _stretch(lut, p16):
    return lut[p16 >> 4]


@kernel
def _squash(lut, x):
    if x > 2047:
        x = 2047
    if x < -2048:
        x = -2048
    return lut[4096 + x + 2048]


@kernel
def _hash(x, salt):
    x = (x + salt) * np.int64(-7046029254386353131)
    x = (x ^ (x >> 29)) * np.int64(-4658895280553007687)
    x = (x ^ (x >> 32)) * np.int64(-7723592293110705685)
    return x ^ (x >> 29)


@kernel
def _bucket(states, region, table_bits, h, lut):
    """Return the first byte of the 16-byte bucket for hash ``h``.

    Byte 0 of a bucket is an 8-bit check of the hash, bytes 1..15 the bit-history states of the
    nibble's partial bits.  Two neighbouring buckets are candidates; on a miss the one whose first
    state has seen fewer bits is cleared and taken.
    """
    index = (h >> 12) & ((np.int64(1) << (table_bits - 4)) - 1)
    check = (h >> 40) & np.int64(0xFF)
    first = region + (index << 4)
    second = region + ((index ^ 1) << 4)
    if states[first] == check:
        return first
    if states[second] == check:
        return second
    victim = first
    if lut[LUT_SEEN + np.int64(states[second + 1])] < lut[LUT_SEEN + np.int64(states[first + 1])]:
        victim = second
    states[victim] = check
    for k in range(1, 16):
        states[victim + k] = 0
    return victim


@kernel
def _train(counters, slot, bit, limit, lut):
    s = np.int64(counters[slot])
    n = s & 1023
    p = s >> 10
    p += ((np.int64(bit) << 22) - p) * lut[8192 + n] >> 16
    if n < limit:
        n += 1
    counters[slot] = (p << 10) | n


@kernel
def _predict(st, counters, states, weights, apm, hist, lut, inputs):
    """Return P(next bit = 1) in units of 2**-16; leave what update needs in ``st``."""
    c0 = st[C0]
    bit = st[BIT]
    c1 = st[HIST4] & 0xFF
    table_bits = st[TABLE_BITS]
    n_ctx = st[N_CTX]
    if bit == 0 or bit == 4:
        region = np.int64(0)
        for k in range(n_ctx):
            st[BUCKET + k] = _bucket(states, region, table_bits, _hash(st[HASH + k], c0), lut)
            region += np.int64(1) << table_bits
    nibble = (c0 & ((1 << (bit & 3)) - 1)) | (1 << (bit & 3))  # 1..15 within the bucket
    st[SLOT + 0] = c0
    st[SLOT + 1] = ORDER1_BASE + (c1 << 8) + c0
    known = 0  # hashed contexts seen before: a stand-in for the longest matching order
    for k in range(n_ctx):
        slot = st[BUCKET + k] + nibble
        state = np.int64(states[slot])
        st[STATE_SLOT + k] = slot
        st[SLOT + 2 + k] = STATE_MAP_BASE + k * 256 + state
        inputs[RUN + k] = lut[LUT_RUN + state]
        if state != 0:
            known += 1
    for k in range(2 + n_ctx):  # inputs of absent contexts stay 0
        inputs[k] = lut[np.int64(counters[st[SLOT + k]]) >> 20]

    # match model: the byte after the earlier occurrence, if its first bits agree with c0
    st[MATCH_BIT] = -1
    inputs[2 + N_HASHED] = 0
    match_len = st[MATCH_LEN]
    if match_len > 0:
        hist_mask = (np.int64(1) << st[HIST_BITS]) - 1
        expected = np.int64(hist[st[MATCH_PTR] & hist_mask]) | 256
        if (expected >> (8 - bit)) == c0:
            ebit = (expected >> (7 - bit)) & 1
            length_bucket = match_len if match_len < 16 else 16 + min(match_len >> 4, 15)
            slot = MATCH_SM_BASE + length_bucket * 2 + ebit
            st[MATCH_BIT] = slot
            inputs[2 + N_HASHED] = lut[np.int64(counters[slot]) >> 20]
    inputs[N_INPUTS - 1] = 256
    ablate = st[ABLATE]
    if ablate != 0:
        for k in range(N_INPUTS):
            if (ablate >> k) & 1:
                inputs[k] = 0

    # up to three mixers and a final mixer combining them
    match_state = 0 if st[MATCH_BIT] < 0 else (1 if match_len < 16 else 2)
    st[MIX_SET] = (match_state * 256 + c0) * N_INPUTS
    st[MIX_SET + 1] = (MIXER1_SETS + c1 + ((st[HIST4] >> 6) & 0x300)) * N_INPUTS
    st[MIX_SET + 2] = (MIXER2_SETS + known * 8 + bit) * N_INPUTS
    total = np.int64(0)
    final_set = FINAL_SETS + c0 * N_MIXERS
    n_mix = st[N_MIX]
    for m in range(n_mix):
        mix_set = st[MIX_SET + m]
        dot = np.int64(0)
        for k in range(N_INPUTS):
            dot += np.int64(weights[mix_set + k]) * inputs[k]
        dot = max(-2047, min(2047, dot >> 16))
        st[P_MIXER + m] = _squash(lut, dot)
        st[DOT + m] = dot
        total += np.int64(weights[final_set + m]) * dot
    p_mix = _squash(lut, total >> 16) if n_mix > 1 else st[P_MIXER]
    st[P_MIX] = p_mix

    # two APMs, keyed by (c1, c0) and by a hash of (c2, c1, c0), over stretch(p_mix)
    position = (_stretch(lut, p_mix) + 2048) * 32
    low = position >> 12
    weight = position & 4095
    order2 = ((((st[HIST4] & 0xFFFF) << 8) | c0) * np.int64(0x9E3779B1) >> 20) & 0xFFFF
    p_apm = np.int64(0)
    n_apm = st[N_APM]
    for a in range(n_apm):
        row = ((c1 << 8) + c0 if a == 0 else 65536 + order2) * 33 + low
        p_apm += (np.int64(apm[row]) * (4096 - weight) + np.int64(apm[row + 1]) * weight) >> 12
        st[APM_SLOT + a] = row + (weight >> 11)
    if (ablate >> APM_OFF) & 1:
        return binary_frequency(p_mix)
    return binary_frequency((2 * p_mix + (14 * p_apm) // n_apm) >> 4)


@kernel
def _end_of_byte(st, hist, mtable, byte):
    """Advance the byte contexts, the history and the match model after a whole byte."""
    hist_bits = st[HIST_BITS]
    hist_mask = (np.int64(1) << hist_bits) - 1
    pos = st[POS]
    hist[pos & hist_mask] = byte
    pos += 1
    st[POS] = pos
    st[HIST8] = ((st[HIST8] << 8) | (st[HIST4] >> 24)) & 0xFFFFFFFF
    st[HIST4] = ((st[HIST4] << 8) | byte) & 0xFFFFFFFF
    c4 = st[HIST4]
    c8 = st[HIST8]
    letter = byte | 32
    if 97 <= letter <= 122:
        st[WORD] = _hash(st[WORD], letter)
    elif st[WORD] != 0:
        st[PREV_WORD] = st[WORD]
        st[WORD] = 0
    six = _hash(c4 | ((c8 & 0xFFFF) << 32), 6 << 40)
    st[HASH + 0] = _hash(c4 & 0xFFFF, 2 << 40)
    st[HASH + 1] = _hash(c4 & 0xFFFFFF, 3 << 40)
    st[HASH + 2] = _hash(c4, 4 << 40)
    st[HASH + 3] = six
    st[HASH + 4] = _hash(st[WORD], 9 << 40)
    st[HASH + 5] = _hash(c4 | ((c8 & 0xFF) << 32), 5 << 40)
    st[HASH + 6] = _hash(st[WORD] + _hash(st[PREV_WORD], 11 << 40), 10 << 40)
    st[HASH + 7] = _hash(c4 & 0xFFFF00, 12 << 40)
    st[HASH + 8] = _hash(c4 | (c8 << 32), 8 << 40)
    st[HASH + 9] = _hash(c4 & 0xFF, 1 << 40)

    # match model: extend the current match, or look for a new one
    match_bits = hist_bits - 2
    if st[MATCH_LEN] > 0:
        if hist[st[MATCH_PTR] & hist_mask] == byte:
            st[MATCH_LEN] = min(st[MATCH_LEN] + 1, 65535)
            st[MATCH_PTR] += 1
        else:
            st[MATCH_LEN] = 0
    entry = (six >> 20) & ((np.int64(1) << match_bits) - 1)
    if st[MATCH_LEN] == 0 and pos >= MIN_MATCH:
        stored = np.int64(mtable[entry])
        distance = (pos - stored) & 0x7FFFFFFF  # positions are kept modulo 2**31
        candidate = pos - distance
        if stored != 0 and 0 < distance < hist_mask - 64:
            length = 0
            while length < 32 and hist[(candidate - 1 - length) & hist_mask] == hist[(pos - 1 - length) & hist_mask]:
                length += 1
            if length >= MIN_MATCH:
                st[MATCH_LEN] = length
                st[MATCH_PTR] = candidate
    mtable[entry] = pos & 0x7FFFFFFF


@kernel
def _update(st, counters, states, weights, apm, hist, mtable, lut, inputs, bit):
    """Learn from the coded bit; advance to the next bit."""
    n_ctx, n_mix = st[N_CTX], st[N_MIX]
    _train(counters, st[SLOT + 0], bit, LIMIT_ORDER0, lut)
    _train(counters, st[SLOT + 1], bit, LIMIT_DIRECT, lut)
    for k in range(2, 2 + n_ctx):
        _train(counters, st[SLOT + k], bit, LIMIT_DIRECT, lut)
    for k in range(n_ctx):
        slot = st[STATE_SLOT + k]
        states[slot] = lut[LUT_NEXT + 2 * np.int64(states[slot]) + bit]
    if st[MATCH_BIT] >= 0:
        _train(counters, st[MATCH_BIT], bit, LIMIT_DIRECT, lut)

    if n_mix > 1:
        final_set = FINAL_SETS + st[C0] * N_MIXERS
        err = ((np.int64(bit) << 16) - st[P_MIX]) * FINAL_RATE
        for m in range(n_mix):
            w = np.int64(weights[final_set + m]) + ((st[DOT + m] * err) >> 18)
            weights[final_set + m] = max(-(1 << 24), min(1 << 24, w))
    rate = MIXER_RATE + (MIXER_RATE_BOOST << 16) // (st[POS] + (1 << 16))  # faster while young
    for m in range(n_mix):
        miss = (np.int64(bit) << 16) - st[P_MIXER + m]
        if -MIXER_SKIP < miss < MIXER_SKIP:  # well predicted: the update would be negligible
            continue
        err = miss * rate
        mix_set = st[MIX_SET + m]
        for k in range(N_INPUTS):
            w = np.int64(weights[mix_set + k]) + ((inputs[k] * err) >> 18)
            weights[mix_set + k] = max(-(1 << 24), min(1 << 24, w))

    for a in range(st[N_APM]):
        slot = st[APM_SLOT + a]
        value = np.int64(apm[slot])
        apm[slot] = value + (((np.int64(bit) << 16) - value) >> APM_RATE)

    c0 = st[C0] * 2 + bit
    st[BIT] += 1
    if c0 >= 256:
        _end_of_byte(st, hist, mtable, c0 & 0xFF)
        c0 = 1
        st[BIT] = 0
    st[C0] = c0


@kernel
def run_range(mode, data, coded, rc, st, counters, states, weights, apm, hist, mtable, lut, inputs, trace,
              start, end):
    """Encode, decode or only learn bytes ``start`` to ``end`` of ``data`` (one step of a block).

    The coder (``rc``, started by :func:`statemix.coder.enc_init` or ``dec_init``) and every model
    state live in the arrays, so a block run in several steps gives the same bits as in one.  ENCODE
    codes ``data`` into ``coded``; DECODE decodes ``coded`` into ``data``; LEARN only updates.  If
    ``trace`` is non-empty, ``trace[8 * i + j]`` receives the probability (units of 2**-16) that the
    model gave to the bit actually coded at bit j of byte i.  ``inputs`` is the mixer's input vector
    (``N_INPUTS`` int64, scratch: every bit rewrites what it reads).
    """
    tracing = trace.shape[0] > 0
    for i in range(start, end):
        byte = np.int64(data[i]) if mode != DECODE else np.int64(0)
        for j in range(8):
            p = _predict(st, counters, states, weights, apm, hist, lut, inputs)
            if mode == DECODE:
                bit = dec_bit(rc, coded, p)
            else:
                bit = (byte >> (7 - j)) & 1
                if mode == ENCODE:
                    enc_bit(rc, coded, p, bit)
            if tracing:
                trace[8 * i + j, 0] = p if bit else 65536 - p
                trace[8 * i + j, 1] = st[P_MIX] if bit else 65536 - st[P_MIX]
            _update(st, counters, states, weights, apm, hist, mtable, lut, inputs, bit)
        if mode == DECODE:
            data[i] = st[HIST4] & 0xFF


@dataclass(frozen=True)
class Config:
    """Options of the cm model that change the output (all recorded in the stream header).

    ``table_bits``: log2 of the bytes of bit-history states per hashed context.
    ``hist_bits``: log2 of the match model's history bytes (its hash table has 2**(hist_bits-2)
    int32 entries).
    ``contexts``: how many hashed contexts, taken in the order of ``_HASHED_NAMES`` (1..10).
    ``mixers``: how many mixers (1..3; with one, no final mixer).  ``apms``: how many APMs (1..2).
    A stream record is accepted only within the sizes the presets write (:mod:`.presets`).
    """

    table_bits: int = 22
    hist_bits: int = 24
    contexts: int = N_HASHED
    mixers: int = N_MIXERS
    apms: int = 2

    def to_bytes(self) -> bytes:
        return bytes([self.table_bits, self.hist_bits, self.contexts, self.mixers, self.apms])

    @classmethod
    def from_bytes(cls, raw: bytes) -> "Config":
        if len(raw) != 5:
            raise ValueError("cm model configuration must be 5 bytes")
        config = cls(*raw)
        if not (presets.CM_MIN_TABLE_BITS <= config.table_bits <= presets.CM_MAX_TABLE_BITS
                and presets.CM_MIN_HIST_BITS <= config.hist_bits <= presets.CM_MAX_HIST_BITS
                and 1 <= config.contexts <= N_HASHED and 1 <= config.mixers <= N_MIXERS and 1 <= config.apms <= 2):
            raise ValueError(f"cm model configuration out of range: {config}")
        return config

    def memory_bytes(self) -> int:
        """Upper bound of the model's memory, in bytes."""
        words = N_COUNTERS + 2 * 65536 * 33 + MIXER_SETS * N_INPUTS  # counters, APMs, weights
        return 4 * words + (self.contexts << self.table_bits) + (1 << self.hist_bits) + 4 * (1 << (self.hist_bits - 2))

    def components(self) -> list[str]:
        """The names of the components this configuration has (see COMPONENTS)."""
        return ["order 0", "order 1", *_HASHED_NAMES[: self.contexts], "match", "APMs"]

    def describe(self) -> str:
        """In words: "cm level 2 (10 contexts of 16 MiB, 3 mixers, 2 APMs, 16 MiB history, ...)"."""
        levels = presets.cm_levels_of(asdict(self))
        name = "cm " + (f"level {' or '.join(map(str, levels))}" if levels else "custom")
        return (f"{name} ({self.contexts} contexts of {_size(1 << self.table_bits)}, {self.mixers} "
                f"mixer{'s' if self.mixers > 1 else ''}, {self.apms} APM{'s' if self.apms > 1 else ''}, "
                f"{_size(1 << self.hist_bits)} history, at most {_size(self.memory_bytes())} of memory)")


def _size(n: int) -> str:
    return f"{n >> 20} MiB" if n >= 1 << 20 else f"{n >> 10} KiB"


def config_for_level(level: int, size_hint: int | None) -> Config:
    """The cm configuration of ``--level`` ``level`` for an input of ``size_hint`` bytes (None: unknown)."""
    return Config(**presets.cm_sized(level, presets.cm_fit(size_hint)))


#: bytes per kernel step: about 10-30 ms of work at any level on a 2020s core
STEP_BYTES = 1 << 14
#: attributes that are configuration or shared read-only tables, not state (see :meth:`Model.snapshot`)
_CONSTANT = frozenset({"config", "spec", "lut", "_sink"})


class Model:
    """The cm model's state: one object per stream, fed every block of the stream in order."""

    def __init__(self, config: Config):
        self.config = config
        self.spec = ModelSpec(MODEL_ID, config.to_bytes())
        self.lut = lookup_tables()
        self.state = np.zeros(STATE_SIZE, dtype=np.int64)
        self.state[C0] = 1
        self.state[TABLE_BITS] = config.table_bits
        self.state[HIST_BITS] = config.hist_bits
        self.state[N_CTX], self.state[N_MIX], self.state[N_APM] = config.contexts, config.mixers, config.apms
        self.counters = np.full(N_COUNTERS, COUNTER_INIT, dtype=np.uint32)
        self.counters[STATE_MAP_BASE:] = np.tile(self.lut[LUT_INITIAL : LUT_INITIAL + 256], N_HASHED)
        self.states = np.zeros(config.contexts << config.table_bits, dtype=np.uint8)
        weights = np.full((MIXER_SETS, N_INPUTS), (1 << 16) // 4, dtype=np.int32)
        weights[:, -1] = 0  # bias
        self.weights = weights.ravel()
        self.weights[FINAL_SETS:] = (1 << 16) // N_MIXERS
        bucket_centres = np.minimum((np.arange(33) - 16) * 128, 2047)  # stretch units
        self.apm = np.tile(self.lut[4096 + 2048 + bucket_centres], 2 * 65536).astype(np.int32)
        self.hist = np.zeros(1 << config.hist_bits, dtype=np.uint8)
        self.mtable = np.zeros(1 << (config.hist_bits - 2), dtype=np.int32)
        self.rc = new_state()
        self.inputs = np.zeros(N_INPUTS, dtype=np.int64)
        self._sink = None  # the trace hook (see statemix.models.protocol)

    def trace(self, sink) -> None:
        """Report every later encoded or learned block to ``sink`` (a :class:`.protocol.TraceBlock`)."""
        self._sink = sink

    def components(self) -> list[str]:
        return self.config.components()

    def ablated(self, components) -> "Model":
        """A fresh model with the named COMPONENTS switched off (diagnostics only: no valid stream)."""
        model = Model(self.config)
        model.state[ABLATE] = sum(COMPONENTS[name] for name in components)
        return model

    def _run(self, mode: int, data: np.ndarray, coded: np.ndarray, progress) -> int:
        trace = _NO_TRACE
        if self._sink is not None and mode != DECODE:
            trace = np.empty((8 * data.shape[0], 2), dtype=np.int32)
        if mode == ENCODE:
            enc_init(self.rc)
        elif mode == DECODE:
            dec_init(self.rc, coded)
        n = data.shape[0]
        for start in range(0, n, STEP_BYTES):
            end = min(n, start + STEP_BYTES)
            run_range(mode, data, coded, self.rc, self.state, self.counters, self.states, self.weights,
                      self.apm, self.hist, self.mtable, self.lut, self.inputs, trace, start, end)
            if progress is not None:
                progress(end)
        if trace.shape[0]:
            p = trace / 65536.0
            self._sink(TraceBlock(p[:, 0], np.unpackbits(data).astype(np.int8), np.repeat(np.arange(n), 8), n,
                                  {"mixer": p[:, 1]}))
        return enc_finish(self.rc, coded) if mode == ENCODE else 0

    def encode(self, data: bytes, limit: int, *, progress=None) -> bytes | None:
        """Code ``data``; return the code word, or None if it would be longer than ``limit`` bytes.

        The model learns ``data`` either way.
        """
        raw = np.frombuffer(data, dtype=np.uint8).copy()  # run_range takes one writable array type
        out = np.empty(max(limit, 0), dtype=np.uint8)
        n = self._run(ENCODE, raw, out, progress)
        return None if n > limit else out[:n].tobytes()

    def decode(self, coded: bytes, size: int, *, progress=None) -> bytes:
        """Decode ``size`` bytes from the code word ``coded``."""
        out = np.empty(size, dtype=np.uint8)
        self._run(DECODE, out, np.frombuffer(coded, dtype=np.uint8).copy(), progress)
        return out.tobytes()

    def learn(self, data: bytes, *, progress=None) -> None:
        """Update the model with ``data`` without coding it (a block stored by other means)."""
        self._run(LEARN, np.frombuffer(data, dtype=np.uint8).copy(), _NO_CODED, progress)

    def snapshot(self, reuse=None):
        """A copy of the whole model state (into ``reuse``'s arrays, an earlier snapshot, if given)."""
        return take(self, _CONSTANT, reuse)

    def restore(self, snapshot) -> None:
        """Put ``snapshot`` back: the model behaves as if the blocks seen since had never been."""
        put_back(self, _CONSTANT, snapshot)


_NO_TRACE = np.zeros((0, 2), dtype=np.int32)
_NO_CODED = np.zeros(0, dtype=np.uint8)
