"""cm's jitted loop: the model state's layout, one bit's prediction and update, and the byte loop.

The components and the order of the data flow are described in :mod:`statemix.models.cm`; this
module holds what numba compiles: :func:`run_range` (the one loop of encoder, decoder and learner),
the per-bit :func:`_predict` and :func:`_update` (calls; inlined into a loop compiled for one
shape), the per-byte :func:`_end_of_byte` (a call), the stage tracer of the diagnostics, and the
state array's layout (:data:`STATE_FIELDS`) with :func:`new_state`, which fills it from a
:class:`.configuration.Config`.

The loop reads the model's counts (:data:`Shape`) from the state; :func:`fixed_loop` compiles a copy
that has them as constants, for one shape: level 1's copy takes 0.73 times the generic loop's time
for the same bits (bench/RESULTS.md).
"""

from __future__ import annotations

from collections import namedtuple

import numpy as np

from ..._jit import kernel, variant
from ...coder import dec_bit, enc_bit
from ...quantize import binary_frequency
from ..bit import byte_history, contexts, image, instructions, match, mixer, record, sse, text
from ..bit.byte_history import byte_history_input, byte_history_train, byte_history_update
from ..bit.contexts import bucket, context_hash, find_bucket
from ..bit.distribution import (source_begin, source_begin_no_ssm, source_expected, source_input, source_learn,
                                source_learn_no_ssm)
from ..bit.hashing import mix_hash, order6_hash
from ..bit.match import match_expected, match_predict, match_state, match_strength, match_train, match_update
from ..bit.mixer import mixer_predict, mixer_select, mixer_update
from ..bit.sse import apm_predict, apm_update, coded_floor, coded_probability
from ..bit.tables import LUT_NEXT, LUT_RUN, train
from ..modes import DECODE, ENCODE
from ..nn.layout import S_TB, S_USE_SSM
from ..tokenloop import STAGE_QUANTIZED, record_stages

N_HASHED = len(contexts.NAMES)  # context kinds this build knows
LIMIT_DIRECT = 1023  # counter confidence cap (order 1, state maps, match)
LIMIT_ORDER0 = 3  # counter confidence cap of the order-0 contexts: they follow the last few bits
#: st[ABLATE], for diagnostics only (Model.ablated): bit 0 switches off the inputs flagged in the
#: state's "ablated" field (one word per input), bit 1 skips the APMs
ABLATE_INPUTS, ABLATE_APMS = 1, 2
MAX_INPUTS = 3 * N_HASHED + 6  # orders 0 and 1, contexts, match, runs, byte histories, source, match length, bias

# Counter array layout: [order 0: 256][order 1: 65536][match: 64][state maps: n x 256]
# [byte histories: n x byte_history.N_COUNTERS, with them].
ORDER1_BASE = 256
MATCH_SM_BASE = ORDER1_BASE + 65536
STATE_MAP_BASE = MATCH_SM_BASE + match.N_COUNTERS

#: The model's tables (views of the Model's arrays): 32-bit counters, bit-history states (uint8),
#: mixer weights and APM buckets (int32), the history ring (uint8), the match table (int32), the
#: fixed tables (int64, .bit.tables) and the mixers' input vector (int64 scratch).
Tables = namedtuple("Tables", "counters states weights apm hist mtable aux lut inputs byte_entries")
SCALARS = ("c0 hist4 hist8 pos bit p_mix table_bits hist_bits ablate n_ctx n_runs n_mix n_apm "
           "n_in source x86_block byte_histories match_input history_input source_input strength_input bias_input "
           "live_inputs revision").split()
(C0, HIST4, HIST8, POS, BIT, P_MIX, TABLE_BITS, HIST_BITS, ABLATE, N_CTX, N_RUNS, N_MIX, N_APM,
 N_IN, SOURCE, X86_BLOCK, BYTE_HISTORIES, MATCH_INPUT, HISTORY_INPUT, SOURCE_INPUT, STRENGTH_INPUT, BIAS_INPUT,
 LIVE_INPUTS, REVISION) = range(len(SCALARS))
#: The model state is one int64 array ``st``: the scalars above, then one field per job, each at the
#: offset :func:`_layout` computes from its size (n contexts: at most N_HASHED).  One array, not a
#: named tuple of arrays: a named tuple's fields cost atomic reference counts per bit (measured: the
#: model ran 2.5 times slower), and one array lets the kernels' loads and stores be told apart.
STATE_FIELDS = (("scalars", len(SCALARS)), ("kinds", N_HASHED), ("orders", N_HASHED), ("hashes", N_HASHED),
                ("idle", N_HASHED), ("regions", N_HASHED), ("region_bits", N_HASHED), ("entry_bits", N_HASHED),
                ("buckets", N_HASHED),
                ("state_slots", N_HASHED), ("slots", 2 + N_HASHED), ("counter_inputs", N_HASHED),
                ("run_inputs", N_HASHED), ("match", match.STATE_SIZE),
                ("mixers", mixer.STATE_SIZE), ("apms", sse.STATE_SIZE), ("text", text.TEXT_SIZE),
                ("record", record.STATE_SIZE), ("instructions", instructions.STATE_SIZE), ("ablated", MAX_INPUTS),
                ("byte_history", byte_history.state_size(N_HASHED)))


def _layout(fields) -> dict:
    """Offsets of consecutive fields of the given sizes, and the total under "size"."""
    offsets, at = {}, 0
    for name, size in fields:
        offsets[name] = at
        at += size
    offsets["size"] = at
    return offsets


_AT = _layout(STATE_FIELDS)
(KINDS, ORDERS, HASHES, IDLE, REGIONS, REGION_BITS, ENTRY_BITS, BUCKETS, STATE_SLOTS, SLOTS, COUNTER_INPUTS,
 RUN_INPUTS) = (_AT[k] for k in ("kinds", "orders", "hashes", "idle", "regions", "region_bits", "entry_bits", "buckets",
                                 "state_slots", "slots", "counter_inputs", "run_inputs"))
MATCH, MIXERS, APMS, TEXT, RECORD, INSTRUCTIONS, ABLATED, BYTE_HISTORY, STATE_SIZE = (
    _AT[k] for k in ("match", "mixers", "apms", "text", "record", "instructions", "ablated", "byte_history",
                     "size"))
#: What a bit's work depends on besides the tables: how many contexts, run inputs, mixers, APMs and
#: byte histories, the inputs (a weight set's width) and of them the ones the mixers read (a prefix:
#: see :func:`_live_inputs`), whether there is a source and a match length input (0 or 1), and whether
#: any context may be hashed at every bit (an image context).  The loop reads it from the state
#: (:func:`_shape`); a loop compiled for one shape (:func:`fixed_loop`) has it as constants, so that
#: numba unrolls the loops they bound and drops the branches never taken.
Shape = namedtuple("Shape", "contexts runs mixers apms byte_histories inputs width source strength per_bit")


#: the int32 array ``aux``: the text state's tables (:mod:`.bit.text`), then the record detector's
RECORD_AUX = text.AUX_SIZE
AUX_SIZE = text.AUX_SIZE + record.AUX_SIZE


#: the shape a loop has as constants: none in the generic loop (0 contexts), a model's in each copy
#: that :func:`fixed_loop` compiles
_FIXED = Shape(*(0,) * len(Shape._fields))


@kernel(inline=True)
def _shape(st):
    """The :data:`Shape` of the model: the loop's constants if it has them, else read from ``st``."""
    if _FIXED.contexts:
        return _FIXED
    return Shape(st[N_CTX], st[N_RUNS], st[N_MIX], st[N_APM], st[BYTE_HISTORIES], st[N_IN], st[LIVE_INPUTS],
                 st[SOURCE], np.int64(st[STRENGTH_INPUT] >= 0), np.int64(1))


@kernel  # a call per bit: inlined, the generic loop took 1.2 times as long to compile, for about 2% of its speed
def _predict(st, counters, states, weights, apm, hist, lut, inputs, cum, lookup):
    """Return P(next bit = 1) in units of 2**-16; leave what update needs in ``st``.

    ``lookup``: find (or claim) the contexts' buckets at a nibble's first bit; False when the
    caller has put them in ``st`` (:func:`_node_predictions`).
    """
    c0 = st[C0]
    bit = st[BIT]
    c1 = st[HIST4] & 0xFF
    shape = _shape(st)
    n_ctx = shape.contexts
    n_in = shape.inputs
    if lookup:
        for k in range(n_ctx):
            if not st[IDLE + k]:
                if shape.per_bit and image.per_bit(st[KINDS + k]):
                    h = image.pixel_hash(st[KINDS + k], hist, (np.int64(1) << st[HIST_BITS]) - 1, st[POS],
                                         st[RECORD + record.LENGTH], c0, c1, bit)
                    st[BUCKETS + k] = bucket(states, st[REGIONS + k], st[REGION_BITS + k], h, lut)
                elif bit == 0 or bit == 4:
                    st[BUCKETS + k] = bucket(states, st[REGIONS + k], st[REGION_BITS + k],
                                             mix_hash(st[HASHES + k], c0), lut)
    nibble = (c0 & ((1 << (bit & 3)) - 1)) | (1 << (bit & 3))  # 1..15 within the bucket
    st[SLOTS + 0] = c0
    st[SLOTS + 1] = ORDER1_BASE + (c1 << 8) + c0
    n_runs = shape.runs
    known = 0  # hashed contexts seen before
    order = 0  # the longest order among them
    for k in range(n_ctx):
        slot = st[BUCKETS + k] + (1 if shape.per_bit and image.per_bit(st[KINDS + k]) else nibble)
        state = np.int64(states[slot]) if not st[IDLE + k] else np.int64(0)
        st[STATE_SLOTS + k] = slot
        st[SLOTS + 2 + k] = STATE_MAP_BASE + k * 256 + state
        if k < n_runs:
            inputs[st[RUN_INPUTS + k]] = lut[LUT_RUN + state]
        if state != 0:
            known += 1
            order = max(order, st[ORDERS + k])
    for k in range(2):
        inputs[k] = lut[np.int64(counters[st[SLOTS + k]]) >> 20]
    for k in range(n_ctx):  # an idle context gives nothing and learns nothing (see _update)
        inputs[st[COUNTER_INPUTS + k]] = lut[np.int64(counters[st[SLOTS + 2 + k]]) >> 20] if not st[IDLE + k] else 0
    inputs[st[MATCH_INPUT]] = match_predict(st, MATCH, hist, st[HIST_BITS], counters, MATCH_SM_BASE, lut, c0, bit)
    if shape.strength:
        inputs[st[STRENGTH_INPUT]] = match_strength(st, MATCH, MATCH_SM_BASE)
    n_bytes = shape.byte_histories
    for k in range(n_bytes):
        inputs[st[HISTORY_INPUT] + k] = byte_history_input(st, BYTE_HISTORY, n_bytes, k, counters,
                                                           STATE_MAP_BASE + n_ctx * 256, lut, c0, bit)
    if shape.source:
        inputs[st[SOURCE_INPUT]] = source_input(cum, c0, bit, lut)
    inputs[st[BIAS_INPUT]] = 256
    ablate = st[ABLATE]
    if ablate & ABLATE_INPUTS:
        for k in range(n_in):
            if st[ABLATED + k]:
                inputs[k] = 0

    predicting = match_state(st, MATCH)
    expected = match_expected(st, MATCH, hist, st[HIST_BITS]) if predicting > 0 else np.int64(-1)
    source_byte = np.int64(-1)
    if shape.source and predicting == 0 and st[REVISION] >= mixer.SOURCE_SELECTOR_REVISION:
        source_byte = source_expected(cum, c0, bit)
    mixer_select(st, MIXERS, n_in, n_ctx, shape.mixers, predicting, expected, st[MATCH + match.LEN], c0, c1,
                 (st[HIST4] >> 8) & 0xFF, known, order, bit, st[TEXT + text.MARKUP], st[TEXT + text.CLASSES],
                 st[RECORD + record.WINDOW], source_byte)
    p_mix = mixer_predict(weights, inputs, shape.width, st, MIXERS, shape.mixers, lut)
    st[P_MIX] = p_mix
    n_apm = shape.apms
    p_apm = apm_predict(apm, st, APMS, n_apm, p_mix, c0, c1, st[HIST4], expected, st[RECORD + record.WINDOW],
                        st[TEXT + text.WORD0], st[TEXT + text.WORD1], lut)
    floor = coded_floor(st[REVISION])
    if ablate & ABLATE_APMS:
        return binary_frequency(p_mix, floor)
    return binary_frequency(coded_probability(p_mix, p_apm, n_apm, st[REVISION]), floor)


@kernel  # a call once per byte: inlined, it made cm's loop take about 80 s more to compile
def _end_of_byte(st, hist, mtable, aux, byte_entries, byte):
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
    text.text_update(st, TEXT, aux, pos, byte, (c4 >> 8) & 0xFF, (c4 >> 16) & 0xFF)
    record.record_update(st, RECORD, aux, RECORD_AUX, hist, hist_mask, pos - 1, byte)
    record.window(st, RECORD, hist, hist_mask, pos)
    st[INSTRUCTIONS] = instructions.advance(st[INSTRUCTIONS], byte)
    idle = st[RECORD + record.LENGTH] == 0
    no_image = st[RECORD + record.PIXEL] == 0
    no_code = st[X86_BLOCK] == 0
    for k in range(st[N_CTX]):
        kind = st[KINDS + k]
        st[HASHES + k] = context_hash(kind, c4, c8, st, TEXT, RECORD, INSTRUCTIONS, aux, hist, hist_mask, pos)
        st[IDLE + k] = ((idle and contexts.needs_record(kind)) or (no_image and image.is_gray(kind))
                        or (no_code and instructions.is_instruction(kind)))
    _live_inputs(st)
    n = st[BYTE_HISTORIES]
    if n:
        byte_history_update(st, BYTE_HISTORY, n, byte_entries, st[ENTRY_BITS:ENTRY_BITS + n],
                            st[HASHES:HASHES + n], st[IDLE:IDLE + n], byte)
    match_update(st, MATCH, hist, mtable, hist_bits, pos, byte, order6_hash(c4, c8))


@kernel(inline=True)
def _live_inputs(st):
    """The width of the input vector's prefix the mixers read: every input but those of the idle
    contexts at its end, after the bias (the structure and x86 contexts, 0 while idle: on text 26 of
    level 2's 91 inputs, 8% of its time)."""
    live = st[BIAS_INPUT] + 1
    for k in range(st[N_CTX]):
        at = st[COUNTER_INPUTS + k]
        if at >= live and not st[IDLE + k]:
            live = 1 + (st[RUN_INPUTS + k] if k < st[N_RUNS] else at)
    st[LIVE_INPUTS] = live


@kernel  # a call per bit, as _predict
def _update(st, counters, states, weights, apm, hist, mtable, aux, lut, inputs, byte_entries, bit):
    """Learn from the coded bit; advance to the next bit."""
    shape = _shape(st)
    n_ctx = shape.contexts
    train(counters, st[SLOTS + 0], bit, LIMIT_ORDER0, lut)
    train(counters, st[SLOTS + 1], bit, LIMIT_DIRECT, lut)
    for k in range(n_ctx):
        if not st[IDLE + k]:
            train(counters, st[SLOTS + 2 + k], bit, LIMIT_DIRECT, lut)
            slot = st[STATE_SLOTS + k]
            states[slot] = lut[LUT_NEXT + 2 * np.int64(states[slot]) + bit]
    match_train(st, MATCH, counters, bit, lut)
    if shape.byte_histories:
        byte_history_train(st, BYTE_HISTORY, shape.byte_histories, counters, bit, lut)
    mixer_update(weights, inputs, shape.width, st, MIXERS, shape.mixers, st[P_MIX], bit, st[POS])
    apm_update(apm, st, APMS, shape.apms, bit, lut, st[REVISION] >= sse.TWO_BUCKETS_REVISION)

    c0 = st[C0] * 2 + bit
    st[BIT] += 1
    if c0 >= 256:
        _end_of_byte(st, hist, mtable, aux, byte_entries, c0 & 0xFF)
        c0 = 1
        st[BIT] = 0
    st[C0] = c0


#: rows of a byte's stage trace (see _stage_row): the source's rows (:func:`.tokenloop.record_stages`:
#: its SSM softmax, mixed softmax and quantized distribution over byte values), then P(bit = 1) at
#: every node c0 = 1..255 of the byte's bit tree, coded and of the mixer (before the APMs), with
#: learning frozen at the byte's start
STAGE_NODES, STAGE_NODES_MIXER = STAGE_QUANTIZED + 1, STAGE_QUANTIZED + 2
STAGE_ROWS = STAGE_NODES_MIXER + 1


@kernel(allocates=True)  # diagnostics only, once per byte: a call, not inlined (about 20 s less compiling)
def _stage_row(st, tb, src, out):
    """Fill one byte's stage trace ``out`` (float32, STAGE_ROWS x 256) before its first bit."""
    if st[SOURCE]:
        record_stages(out, src.acts.probs[src.at[0]], src.net.sz[S_USE_SSM], src.ex, src.freqs, 256,
                      np.float64(1 << src.net.sz[S_TB]))
    _node_predictions(st, tb, src.cum, out[STAGE_NODES], out[STAGE_NODES_MIXER])


@kernel(allocates=True)
def _node_predictions(st, tb, cum, coded, mixed):
    """P(bit = 1) at every node of the next byte's bit tree (``coded[c0]``, and the mixer's in
    ``mixed[c0]``, c0 = 1..255), as the model stands before the byte's first bit.

    Diagnostics only (the coder never sees it): nothing is written to the tables, and a bucket not
    found reads as the empty bucket a lookup would claim (:func:`.bit.contexts.find_bucket`).  On
    the coded path the model learns between bits, so the coder's probabilities differ slightly
    (mixer weights and APMs learn).
    """
    counters, states, weights, apm, hist, mtable, aux, lut, inputs, byte_entries = tb
    n_ctx = st[N_CTX]
    scratch = st.copy()
    found = np.empty((16, n_ctx), dtype=np.int64)  # per nibble node 1..15 (bits 0 and 4)
    for node in range(1, 256):
        bit = 0
        while (node >> (bit + 1)) > 0:
            bit += 1
        scratch[:] = st
        scratch[C0] = node
        scratch[BIT] = bit
        if bit == 0 or bit == 4:
            key = 0 if bit == 0 else node & 15
            for k in range(n_ctx):
                found[key, k] = find_bucket(states, st[REGIONS + k], st[REGION_BITS + k], mix_hash(st[HASHES + k], node))
        ancestor = 0 if bit < 4 else (node >> (bit - 4)) & 15
        for k in range(n_ctx):
            scratch[BUCKETS + k] = found[ancestor, k]
            if image.per_bit(st[KINDS + k]):
                h = image.pixel_hash(st[KINDS + k], hist, (np.int64(1) << st[HIST_BITS]) - 1, st[POS],
                                     st[RECORD + record.LENGTH], node, st[HIST4] & 0xFF, bit)
                scratch[BUCKETS + k] = find_bucket(states, st[REGIONS + k], st[REGION_BITS + k], h)
        p = _predict(scratch, counters, states, weights, apm, hist, lut, inputs, cum, False)
        p_mix = scratch[P_MIX]
        coded[node] = np.float32(p / 65536.0)
        mixed[node] = np.float32(p_mix / 65536.0)


@kernel
def run_range(mode, data, coded, rc, st, tb, src, trace, stages, start, end):
    """Encode, decode or only learn bytes ``start`` to ``end`` of ``data`` (one step of a block).

    The coder (``rc``, started by :func:`statemix.coder.enc_init` or ``dec_init``) and every model
    state live in the arrays, so a block run in several steps gives the same bits as in one.  ENCODE
    codes ``data`` into ``coded``; DECODE decodes ``coded`` into ``data``; LEARN only updates.  If
    ``trace`` has rows, ``trace[8 * i + j, 0]`` receives the probability (units of 2**-16) that the
    model gave to the bit actually coded at bit j of byte i, and ``trace[8 * i + j, 1]`` the
    mixer's (before the APMs).  If ``stages`` has rows, row ``i - start`` receives byte i's stage
    distributions (:func:`_stage_row`).  ``st``: the state array; ``tb``: the :data:`Tables`;
    ``src``: the byte-distribution source's arrays (:mod:`.bit.distribution`; unused without a
    source).
    """
    tracing = trace.shape[0] > 0
    staging = stages.shape[0] > 0
    counters, states, weights, apm, hist, mtable, aux, lut, inputs, byte_entries = tb
    cum = src.cum  # per bit only this array: a named tuple's arrays would cost reference counts per bit
    for i in range(start, end):
        byte = np.int64(data[i]) if mode != DECODE else np.int64(0)
        source = _shape(st).source
        if source:
            source_begin(src)
        if staging:
            _stage_row(st, tb, src, stages[i - start])
        for j in range(8):
            p = _predict(st, counters, states, weights, apm, hist, lut, inputs, cum, True)
            if mode == DECODE:
                bit = dec_bit(rc, coded, p)
            else:
                bit = (byte >> (7 - j)) & 1
                if mode == ENCODE:
                    enc_bit(rc, coded, p, bit)
            if tracing:
                p_mix = st[P_MIX]
                trace[8 * i + j, 0] = p if bit else 65536 - p
                trace[8 * i + j, 1] = p_mix if bit else 65536 - p_mix
            _update(st, counters, states, weights, apm, hist, mtable, aux, lut, inputs, byte_entries, bit)
        if mode == DECODE:
            data[i] = st[HIST4] & 0xFF
        if source:
            source_learn(src, st[HIST4] & 0xFF)


@kernel
def _no_stage_row(st, tb, src, out):
    """:func:`_stage_row` in the coding loops (:func:`coding`), which are never given stage rows."""


def coding(loop):
    """``loop`` compiled with :func:`_no_stage_row` for its stage tracer: the loop that codes, whose
    first compile then leaves out the tracer (about a fifth of it); the tracing loop compiles only
    when diagnostics ask for stages.  The same bits."""
    return variant(loop, "coding", _stage_row=_no_stage_row)


#: :func:`run_range` for a model without the SSM (no source, or the count models' source): the same
#: loop, compiled without the SSM's passes (half the compiling; .tokenloop's variants say why)
run_range_no_ssm = variant(run_range, "no_ssm", source_begin=source_begin_no_ssm, source_learn=source_learn_no_ssm)


def fixed_shape(config) -> Shape | None:
    """The :data:`Shape` of ``config`` (a :class:`.configuration.Config`) as constants for
    :func:`fixed_loop`, or None when it changes while the model runs (the mixers' width, with
    contexts that can be idle) or the model has a source (the SSM's loop is :func:`run_range`)."""
    kinds = config.context_kinds
    if config.source or any(contexts.can_idle(kind) for kind in kinds):
        return None
    per_bit = any(image.per_bit.py_func(kind) for kind in kinds)
    return Shape(config.contexts, config.run_inputs, config.mixers, config.apms, config.byte_history_inputs,
                 config.inputs, config.inputs, 0, int(config.match_strength), int(per_bit))


def fixed_loop(shape: Shape, name: str):
    """:func:`run_range` compiled for models of ``shape`` only (from :func:`fixed_shape`), named
    ``run_range_<name>``, with :func:`_predict` and :func:`_update` inlined: the same bits, in less
    time (level 1: about 0.7 times; inlined, the constants reach the loops they bound)."""
    shaped = variant(_shape, name, _FIXED=shape)
    return variant(run_range, name, _predict=variant(_predict, name, inline=True, _shape=shaped),
                   _update=variant(_update, name, inline=True, _shape=shaped), _shape=shaped,
                   source_begin=source_begin_no_ssm, source_learn=source_learn_no_ssm)


def new_state(config) -> np.ndarray:
    """The initial state array of ``config``, a :class:`.configuration.Config` (layout: :data:`STATE_FIELDS`)."""
    st = np.zeros(STATE_SIZE, dtype=np.int64)
    st[C0] = 1
    st[TABLE_BITS], st[HIST_BITS] = config.table_bits, config.hist_bits
    st[N_CTX], st[N_RUNS], st[N_MIX], st[N_APM], st[N_IN] = (config.contexts, config.run_inputs, config.mixers,
                                                             config.apms, config.inputs)
    st[SOURCE] = config.source
    layout = config.input_layout()
    st[COUNTER_INPUTS:COUNTER_INPUTS + config.contexts] = layout.counters
    st[RUN_INPUTS:RUN_INPUTS + config.run_inputs] = layout.runs
    st[MATCH_INPUT], st[HISTORY_INPUT], st[SOURCE_INPUT] = layout.match, layout.histories, layout.source
    st[STRENGTH_INPUT] = layout.strength
    st[REVISION] = config.revision
    st[BIAS_INPUT], st[LIVE_INPUTS] = layout.bias, config.inputs
    n = st[BYTE_HISTORIES] = config.byte_history_inputs  # the first n contexts have byte histories
    st[BYTE_HISTORY + byte_history.ENTRY * n:BYTE_HISTORY + (byte_history.EXPECT + 1) * n] = -1  # no entry, no byte
    st[KINDS:KINDS + config.contexts] = config.context_kinds
    st[ORDERS:ORDERS + config.contexts] = [contexts.ORDERS[kind] for kind in config.context_kinds]
    st[IDLE:IDLE + config.contexts] = [contexts.can_idle(kind) for kind in config.context_kinds]  # no record, no x86 yet
    bits = [config.region_bits(kind) for kind in config.context_kinds]
    st[REGION_BITS:REGION_BITS + config.contexts] = bits
    st[REGIONS:REGIONS + config.contexts] = np.cumsum([0] + [1 << b for b in bits])[:-1]
    st[ENTRY_BITS:ENTRY_BITS + config.contexts] = [config.entry_bits(kind) for kind in config.context_kinds]
    st[RECORD + record.USED] = config.has_records
    st[RECORD + record.GATED] = config.detector
    st[RECORD + record.WINDOW] = -1
    mixer.set_rates(st, MIXERS, config.revision)
    return st

