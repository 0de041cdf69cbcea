"""cm: a bitwise context-mixing byte model, all in integer arithmetic.

This is statemix's first predictor (model id 1).  It codes each byte as 8 binary decisions, most
significant bit first, and for each bit mixes the predictions of several contexts.  Everything is
integer arithmetic on fixed tables, so encoder and decoder agree bit for bit on every machine.

Data flow for one bit (``c0`` is the partial byte with a leading 1: 1..255; ``c1`` the previous byte):

1. Counters.  Each context selects a 32-bit counter: ``p`` (22 bits, P(1) in units of 2**-22) in the
   high bits and ``n`` (10 bits, how often it was updated, capped at ``limit``) in the low bits.
   Update: ``p += (bit * 2**22 - p) * DT[n] >> 16`` with ``DT[n] = 2**16 / (n + 1.5)``, i.e. a running
   average that becomes a slower adaptive rate as evidence accumulates.
   Contexts: order 0 (``c0``, direct table), order 1 (``c1, c0``, direct table), orders 2, 3, 4 and 6
   and the current word (letters, case-folded), hashed.
2. Hashed tables.  At each nibble boundary a context hash selects a bucket of 16 counters (one cache
   line); slot 0 holds a check value, slots 1..15 the counters of the nibble's partial bits.  A bucket
   whose check differs is reset (replacement: newest wins).  Each hashed order has ``2**table_bits``
   counters.
3. Match model.  The last ``2**hist_bits`` bytes are kept in a ring buffer; a hash of the last
   ``MIN_MATCH`` bytes finds the most recent earlier occurrence, which then predicts the byte that
   followed it.  Its input is a counter selected by (match length bucket, predicted bit).
4. Mixer.  Inputs are ``stretch(p) = ln(p / (1 - p))`` in units of 1/256 (range +-2047) plus a bias.
   A weight set chosen by (match state, ``c0``) gives ``dot = sum w_i x_i >> 16`` (weights in units of
   2**-16), and ``p_mix = squash(dot)`` (P(1) in units of 2**-16).  Training minimises code length:
   ``w_i += x_i * err * MIXER_RATE >> 18`` with ``err = bit * 2**16 - p_mix``.
5. APM (secondary estimation).  ``p_mix`` is refined by an adaptive table keyed by (``c1``, ``c0``) and
   33 interpolated buckets of ``stretch(p_mix)``; the coded probability is ``(p_mix + 3 p_apm) / 4``.
6. The probability goes to :func:`statemix.quantize.binary_frequency` and the range coder.

``run_block`` is the single loop shared by encoder, decoder and learner (for blocks that were stored
instead of modelled): the three differ only in where each bit comes from and whether it is coded.
The stretch and squash tables are computed with Python's ``decimal`` module (correctly rounded, so
identical everywhere), never with the platform's libm.
"""

from __future__ import annotations

from dataclasses import dataclass
from decimal import Context, Decimal

import numpy as np

from .._jit import kernel
from ..coder import dec_bit, enc_bit, enc_finish, enc_init, dec_init, new_state
from ..quantize import binary_frequency

MODEL_ID = 1

ENCODE, DECODE, LEARN = 0, 1, 2

MIN_MATCH = 6  # bytes of context that start a match
N_HASHED = 5  # orders 2, 3, 4, 6 and the word
N_INPUTS = 2 + N_HASHED + 1 + 1  # orders 0 and 1, hashed orders, match, bias
LIMIT_DIRECT = 255  # counter confidence cap, direct tables
LIMIT_HASHED = 127  # counter confidence cap, hashed tables
MIXER_RATE = 6  # mixer learning rate (scale: see module docstring)
APM_RATE = 6  # APM update: moves 2**-APM_RATE of the way to the target
COUNTER_INIT = 1 << 31  # p = 1/2, n = 0

# Layout of the int64 scalar state array.
C0, HIST4, HIST8, POS, BIT, MATCH_PTR, MATCH_LEN, WORD, P_MIX, P_FINAL = range(10)
MATCH_BIT, MIX_SET, APM_SLOT, APM_WEIGHT, TABLE_BITS, HIST_BITS = range(10, 16)
HASH = 16  # N_HASHED context hashes at the last byte boundary
BUCKET = HASH + N_HASHED  # N_HASHED bucket base indices for the current nibble
SLOT = BUCKET + N_HASHED  # counter index used by each counter input this bit (2 + N_HASHED + 1)
ABLATE = SLOT + N_INPUTS  # diagnostics only: bit k silences input k; bit APM_OFF skips the APM
STATE_SIZE = ABLATE + 1
APM_OFF = N_INPUTS

#: Components that diagnostics can switch off, and their ABLATE bits.
COMPONENTS = {"order 0": 0, "order 1": 1, "order 2": 2, "order 3": 3, "order 4": 4, "order 6": 5,
              "word": 6, "match": 7, "APM": APM_OFF}

# Counter array layout: [order 0: 256][order 1: 65536][match: 64][hashed orders...].
ORDER1_BASE = 256
MATCH_SM_BASE = ORDER1_BASE + 65536
HASHED_BASE = MATCH_SM_BASE + 64


def _lookup_tables() -> np.ndarray:
    """Return int64 [stretch (4096) | squash (4096) | DT (1024)], computed exactly in decimal."""
    ctx = Context(prec=30)
    stretch = np.empty(4096, dtype=np.int64)
    for i in range(4096):
        p = Decimal(2 * i + 1) / Decimal(8192)
        v = int(((p / (1 - p)).ln(ctx) * 256).to_integral_value())
        stretch[i] = max(-2047, min(2047, v))
    squash = np.empty(4096, dtype=np.int64)
    for i in range(4096):
        x = Decimal(i - 2048) / Decimal(256)
        v = int((Decimal(65536) / (1 + (-x).exp(ctx))).to_integral_value())
        squash[i] = max(1, min(65535, v))
    dt = np.array([131072 // (2 * n + 3) for n in range(1024)], dtype=np.int64)
    return np.concatenate([stretch, squash, dt])


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
def _bucket(counters, region, table_bits, h):
    """Return the first counter of the 16-counter bucket for hash ``h`` (resetting it on a miss)."""
    index = (h >> 12) & ((np.int64(1) << (table_bits - 4)) - 1)
    check = ((h >> 40) & np.int64(0xFFFFFF)) | np.int64(1)
    base = region + (index << 4)
    if np.int64(counters[base]) != check:
        counters[base] = check
        for k in range(1, 16):
            counters[base + k] = COUNTER_INIT
    return base


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
def _predict(st, counters, weights, apm, hist, lut, inputs):
    """Return P(next bit = 1) in units of 2**-16; leave what update needs in ``st``."""
    c0 = st[C0]
    bit = st[BIT]
    c1 = st[HIST4] & 0xFF
    table_bits = st[TABLE_BITS]
    if bit == 0 or bit == 4:
        region = np.int64(HASHED_BASE)
        for k in range(N_HASHED):
            st[BUCKET + k] = _bucket(counters, region, table_bits, _hash(st[HASH + k], c0))
            region += np.int64(1) << table_bits
    nibble = (c0 & ((1 << (bit & 3)) - 1)) | (1 << (bit & 3))  # 1..15 within the bucket
    st[SLOT + 0] = c0
    st[SLOT + 1] = ORDER1_BASE + (c1 << 8) + c0
    for k in range(N_HASHED):
        st[SLOT + 2 + k] = st[BUCKET + k] + nibble
    for k in range(2 + N_HASHED):
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

    # mixer, weight set by (match state, c0)
    match_state = 0 if st[MATCH_BIT] < 0 else (1 if match_len < 16 else 2)
    mix_set = (match_state * 256 + c0) * N_INPUTS
    st[MIX_SET] = mix_set
    dot = np.int64(0)
    for k in range(N_INPUTS):
        dot += np.int64(weights[mix_set + k]) * inputs[k]
    p_mix = _squash(lut, dot >> 16)
    st[P_MIX] = p_mix

    # APM keyed by (c1, c0), interpolating 33 buckets over stretch(p_mix)
    position = (_stretch(lut, p_mix) + 2048) * 32
    low = position >> 12
    weight = position & 4095
    row = ((c1 << 8) + c0) * 33 + low
    p_apm = (np.int64(apm[row]) * (4096 - weight) + np.int64(apm[row + 1]) * weight) >> 12
    st[APM_SLOT] = row + (weight >> 11)
    if (ablate >> APM_OFF) & 1:
        p_apm = p_mix
    p = binary_frequency((p_mix + 3 * p_apm) >> 2)
    st[P_FINAL] = p
    return p


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
    else:
        st[WORD] = 0
    st[HASH + 0] = _hash(c4 & 0xFFFF, 2 << 40)
    st[HASH + 1] = _hash(c4 & 0xFFFFFF, 3 << 40)
    st[HASH + 2] = _hash(c4, 4 << 40)
    six = _hash(c4 | ((c8 & 0xFFFF) << 32), 6 << 40)
    st[HASH + 3] = six
    st[HASH + 4] = _hash(st[WORD], 9 << 40)

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
def _update(st, counters, weights, apm, hist, mtable, lut, inputs, bit):
    """Learn from the coded bit; advance to the next bit."""
    for k in range(2):
        _train(counters, st[SLOT + k], bit, LIMIT_DIRECT, lut)
    for k in range(2, 2 + N_HASHED):
        _train(counters, st[SLOT + k], bit, LIMIT_HASHED, lut)
    if st[MATCH_BIT] >= 0:
        _train(counters, st[MATCH_BIT], bit, LIMIT_DIRECT, lut)

    err = ((np.int64(bit) << 16) - st[P_MIX]) * MIXER_RATE
    mix_set = st[MIX_SET]
    for k in range(N_INPUTS):
        w = np.int64(weights[mix_set + k]) + ((inputs[k] * err) >> 18)
        weights[mix_set + k] = max(-(1 << 24), min(1 << 24, w))

    slot = st[APM_SLOT]
    a = np.int64(apm[slot])
    apm[slot] = a + (((np.int64(bit) << 16) - a) >> APM_RATE)

    c0 = st[C0] * 2 + bit
    st[BIT] += 1
    if c0 >= 256:
        _end_of_byte(st, hist, mtable, c0 & 0xFF)
        c0 = 1
        st[BIT] = 0
    st[C0] = c0


@kernel
def run_block(mode, data, coded, rc, st, counters, weights, apm, hist, mtable, lut, trace):
    """Encode ``data`` into ``coded``, decode ``coded`` into ``data``, or only learn ``data``.

    Returns the code word length for ENCODE (see :func:`statemix.coder.enc_finish`), else 0.
    If ``trace`` is non-empty, ``trace[8 * i + j]`` receives the probability (units of 2**-16) that the
    model gave to the bit actually coded at bit j of byte i.
    """
    if mode == ENCODE:
        enc_init(rc)
    elif mode == DECODE:
        dec_init(rc, coded)
    inputs = np.zeros(N_INPUTS, dtype=np.int64)
    tracing = trace.shape[0] > 0
    for i in range(data.shape[0]):
        byte = np.int64(data[i]) if mode != DECODE else np.int64(0)
        for j in range(8):
            p = _predict(st, counters, weights, apm, hist, lut, inputs)
            if mode == DECODE:
                bit = dec_bit(rc, coded, p)
            else:
                bit = (byte >> (7 - j)) & 1
                if mode == ENCODE:
                    enc_bit(rc, coded, p, bit)
            if tracing:
                trace[8 * i + j] = p if bit else 65536 - p
            _update(st, counters, weights, apm, hist, mtable, lut, inputs, bit)
        if mode == DECODE:
            data[i] = st[HIST4] & 0xFF
    if mode == ENCODE:
        return enc_finish(rc, coded)
    return 0


@dataclass(frozen=True)
class Config:
    """Options of the cm model that change the output (all recorded in the stream header).

    ``table_bits``: log2 of the counters per hashed order (memory: 4 bytes each, N_HASHED orders).
    ``hist_bits``: log2 of the match model's history bytes (its hash table has 2**(hist_bits-2)
    int32 entries).
    """

    table_bits: int = 22
    hist_bits: int = 24

    def to_bytes(self) -> bytes:
        return bytes([self.table_bits, self.hist_bits])

    @classmethod
    def from_bytes(cls, raw: bytes) -> "Config":
        if len(raw) != 2:
            raise ValueError("cm model configuration must be 2 bytes")
        config = cls(raw[0], raw[1])
        if not (12 <= config.table_bits <= 24 and 16 <= config.hist_bits <= 28):
            raise ValueError(f"cm model configuration out of range: {config}")
        return config

    def memory_bytes(self) -> int:
        """Upper bound of the model's memory, in bytes."""
        counters = HASHED_BASE + N_HASHED * (1 << self.table_bits)
        apm_and_weights = 65536 * 33 + 3 * 256 * N_INPUTS
        return 4 * (counters + apm_and_weights) + (1 << self.hist_bits) + 4 * (1 << (self.hist_bits - 2))


class Model:
    """The cm model's state: one object per stream, fed every block of the stream in order."""

    def __init__(self, config: Config):
        self.config = config
        self.lut = lookup_tables()
        self.state = np.zeros(STATE_SIZE, dtype=np.int64)
        self.state[C0] = 1
        self.state[TABLE_BITS] = config.table_bits
        self.state[HIST_BITS] = config.hist_bits
        self.counters = np.zeros(HASHED_BASE + N_HASHED * (1 << config.table_bits), dtype=np.uint32)
        self.counters[:HASHED_BASE] = COUNTER_INIT
        weights = np.full((3 * 256, N_INPUTS), (1 << 16) // 4, dtype=np.int32)
        weights[:, -1] = 0  # bias
        self.weights = weights.ravel()
        bucket_centres = np.minimum((np.arange(33) - 16) * 128, 2047)  # stretch units
        self.apm = np.tile(self.lut[4096 + 2048 + bucket_centres], 65536).astype(np.int32)
        self.hist = np.zeros(1 << config.hist_bits, dtype=np.uint8)
        self.mtable = np.zeros(1 << (config.hist_bits - 2), dtype=np.int32)
        self.rc = new_state()
        #: diagnostics: when a list, encode() and learn() append the probability (units of 2**-16)
        #: given to each coded bit, as an int32 array per block
        self.traces: list | None = None

    def ablate(self, components) -> None:
        """Switch off the named COMPONENTS (diagnostics only; such a model makes no valid stream)."""
        self.state[ABLATE] = sum(1 << COMPONENTS[name] for name in components)

    def _run(self, mode: int, data: np.ndarray, coded: np.ndarray) -> int:
        trace = _NO_TRACE
        if self.traces is not None and mode != DECODE:
            trace = np.empty(8 * data.shape[0], dtype=np.int32)
            self.traces.append(trace)
        return run_block(mode, data, coded, self.rc, self.state, self.counters, self.weights,
                         self.apm, self.hist, self.mtable, self.lut, trace)

    def encode(self, data: bytes, limit: int) -> bytes | None:
        """Code ``data``; return the code word, or None if it would be longer than ``limit`` bytes.

        The model learns ``data`` either way.
        """
        raw = np.frombuffer(data, dtype=np.uint8).copy()  # run_block takes one writable array type
        out = np.empty(limit, dtype=np.uint8)
        n = self._run(ENCODE, raw, out)
        return None if n > limit else out[:n].tobytes()

    def decode(self, coded: bytes, size: int) -> bytes:
        """Decode ``size`` bytes from the code word ``coded``."""
        out = np.empty(size, dtype=np.uint8)
        self._run(DECODE, out, np.frombuffer(coded, dtype=np.uint8).copy())
        return out.tobytes()

    def learn(self, data: bytes) -> None:
        """Update the model with ``data`` without coding it (a block stored by other means)."""
        self._run(LEARN, np.frombuffer(data, dtype=np.uint8).copy(), _NO_CODED)


_NO_TRACE = np.zeros(0, dtype=np.int32)
_NO_CODED = np.zeros(0, dtype=np.uint8)
