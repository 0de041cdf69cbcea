"""cm: a bitwise context-mixing byte model, all in integer arithmetic.

This is statemix's first predictor (model id 1).  It codes each byte as 8 binary decisions, most
significant bit first, and for each bit mixes the predictions of its components.  Everything is
integer arithmetic on fixed tables, so encoder and decoder agree bit for bit on every machine.  The
components live in :mod:`.bit`, one job per module, in the order of the data flow for one bit
(``c0`` is the partial byte with a leading 1: 1..255; ``c1``, ``c2`` the previous bytes):

1. Counters (:mod:`.bit.tables`: the counter rule and every fixed table).  Orders 0 (``c0``) and 1
   (``c1, c0``) index counters directly.  Order 0 adapts fast (``LIMIT_ORDER0`` = 3: it follows the
   last few bits seen at this point of a byte); order 1, the state maps and the match model's
   counters use ``LIMIT_DIRECT`` = 1023.
2. Hashed contexts (:mod:`.bit.contexts`): each context of the component list selects a bit-history
   state per bit in its own region of the bit-history table; a counter per (context, state) - the
   "state map" - learns what each history really predicts.  Each state also gives a fixed "run"
   input: +-64 per bit seen (up to 16) when the history holds only 1s (+) or only 0s (-), else 0.
   The record contexts (:mod:`.bit.record` finds the record length from the history; the pixel
   contexts of :mod:`.bit.image` are looked up at every bit) are idle while no record is found: no
   lookup, input 0, nothing trained.  Their regions are 2**-RECORD_TABLE_SHIFT of the others'.  The
   8-bit image contexts of :mod:`.bit.image` are idle likewise unless the detector finds an 8-bit
   image; their regions are 2**-GRAY_TABLE_SHIFT of the others'.  The x86 instruction contexts
   (:mod:`.bit.instructions`) are idle outside blocks coded as x86 code (``encode(..., x86=True)``,
   as the block's kind records); their regions are the record contexts' size.  The small text
   contexts (:data:`.bit.contexts.SMALL_TEXT_KINDS`) have regions of 2**-SMALL_TEXT_TABLE_SHIFT.
3. Match model (:mod:`.bit.match`): the byte after the most recent earlier occurrence of the last
   bytes.  Byte histories (:mod:`.bit.byte_history`, records that say so): the byte that followed
   each text context last time, and how often in a row, one input per text context.
4. Mixing (:mod:`.bit.mixer`): up to seven mixers with selected weight sets and a final mixer, each
   trained on its own code length.
5. APMs (:mod:`.bit.sse`): up to four adaptive tables refine the mixer's probability; the coded
   probability is ``(2 p_mix + 14 mean(p_apm)) / 16``.
6. The probability goes to :func:`statemix.quantize.binary_frequency` and the range coder.

Input vector of the mixers (stretch units, width ``2 + n + 1 + r + b + s + 1`` for ``n`` contexts)::

    [order 0 | order 1 | context 0 .. n-1 | match | run 0 .. r-1 | byte history 0 .. b-1 | source | bias 256]

with ``r = n`` for a record with a component list and ``r = min(n, 9)`` for the first (5-byte)
records: there the tenth context's run input was overwritten by the bias, and that stays so;
``b``: the text contexts (the first in id order) if the record has byte histories, else 0; ``s``:
1 with a byte-distribution source, else 0.

The component list is part of the model record (:class:`Config`), so the mixer's width and the
tables follow from the record and adding a context never changes what an existing stream means.

``run_range`` is the single loop shared by encoder, decoder and learner (for blocks that were stored
instead of modelled): the three differ only in where each bit comes from and whether it is coded.
It runs any range of a block: the coder and all model state live in arrays (the state: one int64
array laid out by :data:`STATE_FIELDS`).

Memory (bytes): n * 2**table_bits (histories; a small text context's a quarter, a record or x86
instruction context's an eighth, an 8-bit image context's a sixteenth) + 2**hist_bits (history) +
2**hist_bits (match table, int32 per 4 bytes of history) + 8.25 MiB per APM + about 1.5 MiB (order-1
counters, weights, the text state's indirect tables, the record detector's counts) + with byte
histories, a quarter of each text context's history bytes (a 4-byte entry per 16 bytes).
"""

from __future__ import annotations

import contextlib
import functools
from collections import namedtuple
from dataclasses import asdict, dataclass

import numpy as np

from .._jit import kernel, threads_at_most, variant
from ..coder import dec_bit, dec_init, enc_bit, enc_finish, enc_init
from ..coder import new_state as new_coder_state
from ..quantize import binary_frequency
from . import presets
from ._snapshot import put_back, take
from .bit import byte_history, contexts, distribution, image, instructions, match, mixer, record, sse, text
from .bit.byte_history import byte_history_input, byte_history_train, byte_history_update
from .bit.contexts import bucket, context_hash, find_bucket
from .bit.distribution import source_begin, source_begin_no_ssm, source_input, source_learn, source_learn_no_ssm
from .bit.hashing import mix_hash, order6_hash
from .bit.match import match_expected, match_predict, match_state, match_train, match_update
from .bit.mixer import final_set, mixer_predict, mixer_select, mixer_update
from .bit.sse import apm_predict, apm_update
from .bit.tables import COUNTER_INIT, LUT_INITIAL, LUT_NEXT, LUT_RUN, lookup_tables, train
from .modes import DECODE, ENCODE, LEARN
from .nn.layout import S_TB, S_USE_SSM
from .protocol import ModelSpec, StageStep, TraceBlock
from .steps import timed_steps
from .tokenloop import STAGE_MIXED, STAGE_QUANTIZED, STAGE_SSM, record_stages

MODEL_ID = 1

N_HASHED = len(contexts.NAMES)  # context kinds this build knows
FIRST_RECORD_KINDS, FIRST_RECORD_RUNS = 10, 9  # contexts and run inputs a first record can have (see above)
LIMIT_DIRECT = 1023  # counter confidence cap (order 1, state maps, match)
LIMIT_ORDER0 = 3  # counter confidence cap of the order-0 contexts: they follow the last few bits
N_MIXERS = mixer.N_MIXERS
RECORD_TABLE_SHIFT = 3  # the record contexts' regions are 2**-RECORD_TABLE_SHIFT of the others'
GRAY_TABLE_SHIFT = 4  # and the 8-bit image contexts' 2**-GRAY_TABLE_SHIFT (their values are at most 2**12)
SMALL_TEXT_TABLE_SHIFT = 2  # and the small text contexts' (contexts.SMALL_TEXT_KINDS) 2**-SMALL_TEXT_TABLE_SHIFT
#: st[ABLATE], for diagnostics only (Model.ablated): bit 0 switches off the inputs flagged in the
#: state's "ablated" field (one word per input), bit 1 skips the APMs
ABLATE_INPUTS, ABLATE_APMS = 1, 2
MAX_INPUTS = 3 * N_HASHED + 5  # orders 0 and 1, contexts, match, runs, byte histories, source, bias

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
           "n_in source x86_block byte_histories").split()
(C0, HIST4, HIST8, POS, BIT, P_MIX, TABLE_BITS, HIST_BITS, ABLATE, N_CTX, N_RUNS, N_MIX, N_APM,
 N_IN, SOURCE, X86_BLOCK, BYTE_HISTORIES) = range(len(SCALARS))
#: The model state is one int64 array ``st``: the scalars above, then one field per job, each at the
#: offset :func:`_layout` computes from its size (n contexts: at most N_HASHED).  One array, not a
#: named tuple of arrays: a named tuple's fields cost atomic reference counts per bit (measured: the
#: model ran 2.5 times slower), and one array lets the kernels' loads and stores be told apart.
STATE_FIELDS = (("scalars", len(SCALARS)), ("kinds", N_HASHED), ("orders", N_HASHED), ("hashes", N_HASHED),
                ("idle", N_HASHED), ("regions", N_HASHED), ("region_bits", N_HASHED), ("buckets", N_HASHED),
                ("state_slots", N_HASHED), ("slots", 2 + N_HASHED), ("match", match.STATE_SIZE),
                ("mixers", mixer.STATE_SIZE), ("apms", sse.STATE_SIZE), ("text", text.TEXT_SIZE),
                ("record", record.STATE_SIZE), ("instructions", instructions.STATE_SIZE), ("ablated", MAX_INPUTS),
                ("byte_history", byte_history.state_size(N_HASHED)), ("entry_regions", N_HASHED),
                ("entry_bits", N_HASHED))


def _layout(fields) -> dict:
    """Offsets of consecutive fields of the given sizes, and the total under "size"."""
    offsets, at = {}, 0
    for name, size in fields:
        offsets[name] = at
        at += size
    offsets["size"] = at
    return offsets


_AT = _layout(STATE_FIELDS)
KINDS, ORDERS, HASHES, IDLE, REGIONS, REGION_BITS, BUCKETS, STATE_SLOTS, SLOTS = (
    _AT[k] for k in ("kinds", "orders", "hashes", "idle", "regions", "region_bits", "buckets", "state_slots", "slots"))
MATCH, MIXERS, APMS, TEXT, RECORD, INSTRUCTIONS, ABLATED, BYTE_HISTORY, ENTRY_REGIONS, ENTRY_BITS, STATE_SIZE = (
    _AT[k] for k in ("match", "mixers", "apms", "text", "record", "instructions", "ablated", "byte_history",
                     "entry_regions", "entry_bits", "size"))
#: the int32 array ``aux``: the text state's tables (:mod:`.bit.text`), then the record detector's
RECORD_AUX = text.AUX_SIZE
AUX_SIZE = text.AUX_SIZE + record.AUX_SIZE


@kernel(inline=True)
def _predict(st, counters, states, weights, apm, hist, lut, inputs, cum, lookup):
    """Return P(next bit = 1) in units of 2**-16; leave what update needs in ``st``.

    ``lookup``: find (or claim) the contexts' buckets at a nibble's first bit; False when the
    caller has put them in ``st`` (:func:`_node_predictions`).
    """
    c0 = st[C0]
    bit = st[BIT]
    c1 = st[HIST4] & 0xFF
    n_ctx = st[N_CTX]
    n_in = st[N_IN]
    if lookup:
        for k in range(n_ctx):
            if not st[IDLE + k]:
                if image.per_bit(st[KINDS + k]):
                    h = image.pixel_hash(st[KINDS + k], hist, (np.int64(1) << st[HIST_BITS]) - 1, st[POS],
                                         st[RECORD + record.LENGTH], c0, c1, bit)
                    st[BUCKETS + k] = bucket(states, st[REGIONS + k], st[REGION_BITS + k], h, lut)
                elif bit == 0 or bit == 4:
                    st[BUCKETS + k] = bucket(states, st[REGIONS + k], st[REGION_BITS + k],
                                             mix_hash(st[HASHES + k], c0), lut)
    nibble = (c0 & ((1 << (bit & 3)) - 1)) | (1 << (bit & 3))  # 1..15 within the bucket
    st[SLOTS + 0] = c0
    st[SLOTS + 1] = ORDER1_BASE + (c1 << 8) + c0
    run = 3 + n_ctx  # first run input
    n_runs = st[N_RUNS]
    known = 0  # hashed contexts seen before
    order = 0  # the longest order among them
    for k in range(n_ctx):
        slot = st[BUCKETS + k] + (1 if image.per_bit(st[KINDS + k]) else nibble)
        state = np.int64(states[slot]) if not st[IDLE + k] else np.int64(0)
        st[STATE_SLOTS + k] = slot
        st[SLOTS + 2 + k] = STATE_MAP_BASE + k * 256 + state
        if k < n_runs:
            inputs[run + k] = lut[LUT_RUN + state]
        if state != 0:
            known += 1
            order = max(order, st[ORDERS + k])
    for k in range(2 + n_ctx):
        inputs[k] = lut[np.int64(counters[st[SLOTS + k]]) >> 20]
    for k in range(n_ctx):
        if st[IDLE + k]:  # an idle context gives nothing and learns nothing (see _update)
            inputs[2 + k] = 0
    inputs[2 + n_ctx] = match_predict(st, MATCH, hist, st[HIST_BITS], counters, MATCH_SM_BASE, lut, c0, bit)
    n_bytes = st[BYTE_HISTORIES]
    for k in range(n_bytes):
        inputs[run + n_runs + k] = byte_history_input(st, BYTE_HISTORY, n_bytes, k, counters,
                                                      STATE_MAP_BASE + n_ctx * 256, lut, c0, bit)
    if st[SOURCE]:
        inputs[n_in - 2] = source_input(cum, c0, bit, lut)
    inputs[n_in - 1] = 256
    ablate = st[ABLATE]
    if ablate & ABLATE_INPUTS:
        for k in range(n_in):
            if st[ABLATED + k]:
                inputs[k] = 0

    predicting = match_state(st, MATCH)
    expected = match_expected(st, MATCH, hist, st[HIST_BITS]) if predicting > 0 else np.int64(-1)
    mixer_select(st, MIXERS, n_in, n_ctx, st[N_MIX], predicting, expected, st[MATCH + match.LEN], c0, c1,
                 (st[HIST4] >> 8) & 0xFF, known, order, bit, st[TEXT + text.MARKUP], st[RECORD + record.WINDOW])
    final = final_set(n_ctx, n_in, c0)
    p_mix = mixer_predict(weights, inputs, n_in, st, MIXERS, st[N_MIX], final, lut)
    st[P_MIX] = p_mix
    n_apm = st[N_APM]
    p_apm = apm_predict(apm, st, APMS, n_apm, p_mix, c0, c1, st[HIST4], expected, st[RECORD + record.WINDOW], lut)
    if ablate & ABLATE_APMS:
        return binary_frequency(p_mix)
    return binary_frequency((2 * p_mix + (14 * p_apm) // n_apm) >> 4)


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
    n = st[BYTE_HISTORIES]
    if n:
        byte_history_update(st, BYTE_HISTORY, n, byte_entries, st[ENTRY_REGIONS:ENTRY_REGIONS + n],
                            st[ENTRY_BITS:ENTRY_BITS + n], st[HASHES:HASHES + n], st[IDLE:IDLE + n], byte)
    match_update(st, MATCH, hist, mtable, hist_bits, pos, byte, order6_hash(c4, c8))


@kernel(inline=True)
def _update(st, counters, states, weights, apm, hist, mtable, aux, lut, inputs, byte_entries, bit):
    """Learn from the coded bit; advance to the next bit."""
    n_ctx = st[N_CTX]
    train(counters, st[SLOTS + 0], bit, LIMIT_ORDER0, lut)
    train(counters, st[SLOTS + 1], bit, LIMIT_DIRECT, lut)
    for k in range(n_ctx):
        if not st[IDLE + k]:
            train(counters, st[SLOTS + 2 + k], bit, LIMIT_DIRECT, lut)
            slot = st[STATE_SLOTS + k]
            states[slot] = lut[LUT_NEXT + 2 * np.int64(states[slot]) + bit]
    match_train(st, MATCH, counters, bit, lut)
    if st[BYTE_HISTORIES]:
        byte_history_train(st, BYTE_HISTORY, st[BYTE_HISTORIES], counters, bit, lut)
    n_in = st[N_IN]
    final = final_set(n_ctx, n_in, st[C0])
    mixer_update(weights, inputs, n_in, st, MIXERS, st[N_MIX], final, st[P_MIX], bit, st[POS])
    apm_update(apm, st, APMS, st[N_APM], bit, lut)

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


@kernel  # diagnostics only, once per byte: a call, not inlined (about 20 s less compiling)
def _stage_row(st, tb, src, out):
    """Fill one byte's stage trace ``out`` (float32, STAGE_ROWS x 256) before its first bit."""
    if st[SOURCE]:
        record_stages(out, src.acts.probs[src.at[0]], src.net.sz[S_USE_SSM], src.ex, src.freqs, 256,
                      np.float64(1 << src.net.sz[S_TB]))
    _node_predictions(st, tb, src.cum, out[STAGE_NODES], out[STAGE_NODES_MIXER])


@kernel
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
        if st[SOURCE]:
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
        if st[SOURCE]:
            source_learn(src, st[HIST4] & 0xFF)


#: :func:`run_range` for a model without the SSM (no source, or the count models' source): the same
#: loop, compiled without the SSM's passes (half the compiling; .tokenloop's variants say why)
run_range_no_ssm = variant(run_range, "no_ssm", source_begin=source_begin_no_ssm, source_learn=source_learn_no_ssm)


RECORD_LIST = b"\x00\x01"  # a record with a component list starts so (a first record's table_bits is >= 12)
RECORD_MASK = b"\x00\x02"  # and one with a component set
RECORD_WIDE = b"\x00\x03"  # and one with a component set that holds kinds from 32 on
DETECTOR_SHIFT = 6  # a component set's last byte: the byte-distribution source, and these 2 bits the detector's
BYTE_HISTORIES_BIT = 1 << 5  # and this bit: the byte histories (sources are below it)
#: the record detector's revision -> its bits in the component set's last byte (see Config), and back
DETECTOR_BITS = (0b00, 0b10, 0b11)
DETECTOR_REVISIONS = {bits: revision for revision, bits in enumerate(DETECTOR_BITS)}


@dataclass(frozen=True)
class Config:
    """Options of the cm model that change the output (all recorded in the stream header).

    ``table_bits``: log2 of the bytes of bit-history states per hashed context.
    ``hist_bits``: log2 of the match model's history bytes (its hash table has 2**(hist_bits-2)
    int32 entries).  ``contexts``: how many hashed contexts.  ``mixers``: how many mixers (1..7,
    the first of :mod:`.bit.mixer`'s list; with one, no final mixer).  ``apms``: how many APMs (1..4,
    the first of :mod:`.bit.sse`'s list).  ``kinds``: the component set, the context kinds of
    :mod:`.bit.contexts` (kept in id order); None for the first records, which list no
    components and mean the first ``contexts`` kinds in id order (with the run quirk described in the
    module docstring).  ``source``: the byte-distribution input (:mod:`.bit.distribution`, 0 for
    none).  ``detector``: the record detector's revision (0, 1 or 2, see Records).

    Records: the first format is 5 bytes ``table_bits, hist_bits, contexts, mixers, apms``; a record
    with a component list is ``00 01 table_bits hist_bits mixers apms n kind_0 .. kind_n-1`` (read,
    no longer written); the one written for a component list is the set, ``00 02 table_bits hist_bits
    mixers apms``, a 32-bit little-endian mask with bit ``kind`` set for each kind used, and the
    byte-distribution source (:mod:`.bit.distribution`) in the low 6 bits of its last byte, and in its
    top 2 bits (from ``DETECTOR_SHIFT``) the record detector's revision (:mod:`.bit.record`) as
    :data:`DETECTOR_BITS` writes it: ``00`` revision 0, the first, blind to text; ``10`` revision 1,
    which finds no short or weak record in text; ``11`` revision 2, which also finds the rows of
    8-bit images (``01`` is refused: a newer statemix may know it).  A set with kinds from 32 on
    (the x86 instruction contexts) is written ``00 03 table_bits hist_bits mixers apms n``, an
    ``n``-byte mask (5 to 8 bytes, its last byte not 0) and the same last byte.  (The kinds in id
    order: the model's output does not depend on the order of its contexts, since each owns its own
    tables and the mixers' integer sums do not depend on the order of their terms).  A stream record
    is accepted only within the sizes the presets write (:mod:`.presets`).
    """

    table_bits: int = 22
    hist_bits: int = 24
    contexts: int = N_HASHED
    mixers: int = 3
    apms: int = 2
    kinds: tuple | None = None
    source: int = distribution.SOURCE_NONE
    detector: int = 0
    byte_histories: bool = False

    def __post_init__(self):
        if self.kinds is not None:  # a set of kinds, kept in id order (see Records)
            object.__setattr__(self, "kinds", tuple(sorted(self.kinds)))

    @property
    def context_kinds(self) -> tuple:
        return tuple(range(self.contexts)) if self.kinds is None else tuple(self.kinds)

    @property
    def has_records(self) -> bool:
        """Whether the model has record contexts (and so the record selectors: .bit.mixer, .bit.sse)."""
        return any(contexts.is_structure(kind) for kind in self.context_kinds)

    @property
    def run_inputs(self) -> int:
        return min(self.contexts, FIRST_RECORD_RUNS) if self.kinds is None else self.contexts

    @property
    def byte_history_inputs(self) -> int:
        """How many contexts have byte histories: the text contexts, which come first in id order
        (the structure and x86 contexts, idle on text, have none)."""
        if not self.byte_histories:
            return 0
        return sum(not contexts.is_structure(kind) and not instructions.is_instruction(kind) for kind in self.context_kinds)

    @property
    def inputs(self) -> int:
        """Width of the mixers' input vector (see the module docstring)."""
        return 2 + self.contexts + 1 + self.run_inputs + self.byte_history_inputs + (1 if self.source else 0) + 1

    def to_bytes(self) -> bytes:
        if self.kinds is None:
            return bytes([self.table_bits, self.hist_bits, self.contexts, self.mixers, self.apms])
        mask = sum(1 << kind for kind in self.kinds)
        fields = bytes([self.table_bits, self.hist_bits, self.mixers, self.apms])
        width = (mask.bit_length() + 7) // 8
        if width <= 4:
            head, width = RECORD_MASK + fields, 4
        else:
            head = RECORD_WIDE + fields + bytes([width])
        last = self.source | (BYTE_HISTORIES_BIT if self.byte_histories else 0) | (DETECTOR_BITS[self.detector] << DETECTOR_SHIFT)
        return head + mask.to_bytes(width, "little") + bytes([last])

    @classmethod
    def from_bytes(cls, raw: bytes) -> "Config":
        raw = bytes(raw)
        if raw[:2] in (RECORD_LIST, RECORD_MASK, RECORD_WIDE):
            source, detector, histories = 0, 0, False
            if raw[:2] == RECORD_LIST and len(raw) >= 7:
                kinds = tuple(raw[7:])
                if raw[6] != len(kinds):
                    raise ValueError("cm component list has the wrong length")
            elif raw[:2] == RECORD_MASK and len(raw) == 11:
                kinds, source, detector, histories = _component_set(raw[6:10], raw[10])
            elif raw[:2] == RECORD_WIDE and len(raw) >= 7 and 5 <= raw[6] <= 8 and len(raw) == 8 + raw[6] and raw[-2]:
                kinds, source, detector, histories = _component_set(raw[7:-1], raw[-1])
            else:
                raise ValueError("cm model record has the wrong length")
            config = cls(raw[2], raw[3], len(kinds), raw[4], raw[5], kinds, source, detector, histories)
            if len(set(kinds)) != len(kinds) or any(k >= N_HASHED for k in kinds):
                raise ValueError(f"cm component list invalid (unknown or repeated context): {kinds}; a context "
                                 f"this build does not know needs a newer statemix")
        elif len(raw) == 5:
            config = cls(*raw)
            if config.contexts > FIRST_RECORD_KINDS:
                raise ValueError(f"cm first record with more than {FIRST_RECORD_KINDS} contexts: {config}")
        else:
            raise ValueError("cm model configuration must be 5 bytes or a component list")
        if not (presets.CM_MIN_TABLE_BITS <= config.table_bits <= presets.CM_MAX_TABLE_BITS
                and presets.CM_MIN_HIST_BITS <= config.hist_bits <= presets.CM_MAX_HIST_BITS
                and 1 <= config.contexts <= N_HASHED and 1 <= config.mixers <= N_MIXERS and 1 <= config.apms <= sse.N_APMS):
            raise ValueError(f"cm model configuration out of range: {config}")
        return config

    def memory_bytes(self) -> int:
        """Upper bound of the model's memory, in bytes."""
        counters = STATE_MAP_BASE + self.contexts * 256 + self.byte_history_inputs * byte_history.N_COUNTERS
        words = counters + sse.rows(self.apms, self.has_records) * sse.BUCKETS + mixer.sets(self.contexts) * self.inputs + 256 * N_MIXERS
        return (4 * (words + AUX_SIZE) + self.history_bytes + (1 << self.hist_bits)
                + 4 * (1 << (self.hist_bits - 2)) + distribution.memory_bytes(self.source, self.source_table_bits)
                + 4 * self.byte_history_entries)

    def region_bits(self, kind: int) -> int:
        """log2 of the bytes of bit-history states of context ``kind``: ``table_bits``, an eighth of
        that for the record contexts (binary data is rarely as varied as text, and a table there
        did not pay for its memory: bench/RESULTS.md, issue 14) and a sixteenth for the 8-bit image
        contexts (which keeps level 3 under the decoder's default memory limit); the x86 instruction
        contexts' as the record contexts' (a full region gained 0.04% on /usr/bin/bash); a quarter for
        the small text contexts (contexts.SMALL_TEXT_KINDS: a full region gained 0.02% on enwik8_1M and
        0.05% on enwik8_3M, for 2 x 48 MiB more at level 2 when compressing)."""
        if image.is_gray(kind):
            return self.table_bits - GRAY_TABLE_SHIFT
        if kind in contexts.SMALL_TEXT_KINDS:
            return self.table_bits - SMALL_TEXT_TABLE_SHIFT
        small = contexts.needs_record(kind) or instructions.is_instruction(kind)
        return self.table_bits - (RECORD_TABLE_SHIFT if small else 0)

    def entry_bits(self, kind: int) -> int:
        """log2 of the byte-history entries of context ``kind`` (:mod:`.bit.byte_history`)."""
        return self.region_bits(kind) - byte_history.ENTRY_SHIFT

    @property
    def byte_history_entries(self) -> int:
        """uint32 entries of the byte-history table: every context's part (none without byte histories)."""
        return sum(1 << self.entry_bits(kind) for kind in self.context_kinds[: self.byte_history_inputs])

    @property
    def history_bytes(self) -> int:
        """Bytes of the bit-history table: every context's region."""
        return sum(1 << self.region_bits(kind) for kind in self.context_kinds)

    @property
    def source_table_bits(self) -> int:
        """log2 of the byte-distribution source's n-gram buckets: 2**4 fewer than a context's bytes,
        at most 2**20 (the ssm preset's), so both shrink alike with the input."""
        return min(20, max(12, self.table_bits - 4))

    def components(self) -> list[str]:
        """The names of the components this configuration has (see :meth:`Model.ablated`)."""
        source = [distribution.NAMES[self.source]] if self.source else []
        histories = ["byte histories"] if self.byte_histories else []
        return ["order 0", "order 1", *(contexts.NAMES[k] for k in self.context_kinds), "match", *histories, *source,
                "APMs"]

    def describe(self) -> str:
        """In words: "cm level 2 (10 contexts of 16 MiB, 3 mixers, 2 APMs, 16 MiB history, ...)"."""
        levels = presets.cm_levels_of(asdict(self))
        name = "cm " + (f"level {' or '.join(map(str, levels))}" if levels else "custom")
        listed = f": {', '.join(self.components()[2:-2])}" if self.kinds is not None else ""
        sizes = f"{self.contexts} contexts of {_size(1 << self.table_bits)}"
        for what, test, shift in (("record", contexts.needs_record, RECORD_TABLE_SHIFT),
                                  ("8-bit image", image.is_gray, GRAY_TABLE_SHIFT),
                                  ("x86 instruction", instructions.is_instruction, RECORD_TABLE_SHIFT),
                                  ("small text", contexts.SMALL_TEXT_KINDS.__contains__, SMALL_TEXT_TABLE_SHIFT)):
            count = sum(map(test, self.context_kinds))
            if count:
                sizes += f", {count} of them {what} contexts of {_size(1 << (self.table_bits - shift))}"
        return (f"{name} ({sizes}{listed}, {self.mixers} "
                f"mixer{'s' if self.mixers > 1 else ''}, {self.apms} APM{'s' if self.apms > 1 else ''}, "
                f"{_size(1 << self.hist_bits)} history, at most {_size(self.memory_bytes())} of memory)")


def _component_set(mask: bytes, last: int) -> tuple[tuple, int, int, bool]:
    """(kinds, source, detector, byte histories) of a component set's mask (little-endian) and its last byte."""
    bits = int.from_bytes(mask, "little")
    kinds = tuple(kind for kind in range(8 * len(mask)) if (bits >> kind) & 1)
    source, revision = last & (BYTE_HISTORIES_BIT - 1), last >> DETECTOR_SHIFT
    if source not in distribution.PRESETS and source != distribution.SOURCE_NONE:
        raise ValueError(f"cm byte-distribution source {source} unknown (a newer statemix may know it)")
    if revision not in DETECTOR_REVISIONS:
        raise ValueError(f"cm record detector {revision:02b} unknown (a newer statemix may know it)")
    return kinds, source, DETECTOR_REVISIONS[revision], bool(last & BYTE_HISTORIES_BIT)


def _size(n: int) -> str:
    return f"{n >> 20} MiB" if n >= 1 << 20 else f"{n >> 10} KiB"


def config_for_level(level: int, size_hint: int | None) -> Config:
    """The cm configuration of ``--level`` ``level`` for an input of ``size_hint`` bytes (None: unknown)."""
    return Config(**presets.cm_sized(level, presets.cm_fit(size_hint)))


#: attributes that are configuration or shared read-only tables, not state (see :meth:`Model.snapshot`)
_CONSTANT = frozenset({"config", "spec", "lut", "_sink", "_stage_sink"})


def new_state(config: Config) -> np.ndarray:
    """The initial state array of ``config`` (layout: :data:`STATE_FIELDS`)."""
    st = np.zeros(STATE_SIZE, dtype=np.int64)
    st[C0] = 1
    st[TABLE_BITS], st[HIST_BITS] = config.table_bits, config.hist_bits
    st[N_CTX], st[N_RUNS], st[N_MIX], st[N_APM], st[N_IN] = (config.contexts, config.run_inputs, config.mixers,
                                                             config.apms, config.inputs)
    st[SOURCE] = config.source
    n = st[BYTE_HISTORIES] = config.byte_history_inputs  # the first n contexts have byte histories
    st[BYTE_HISTORY + byte_history.ENTRY * n:BYTE_HISTORY + (byte_history.EXPECT + 1) * n] = -1  # no entry, no byte
    entry_bits = [config.entry_bits(kind) for kind in config.context_kinds[:n]]
    st[ENTRY_BITS:ENTRY_BITS + n] = entry_bits
    st[ENTRY_REGIONS:ENTRY_REGIONS + n] = np.cumsum([0] + [1 << b for b in entry_bits])[:-1]
    st[KINDS:KINDS + config.contexts] = config.context_kinds
    st[ORDERS:ORDERS + config.contexts] = [contexts.ORDERS[kind] for kind in config.context_kinds]
    st[IDLE:IDLE + config.contexts] = [contexts.is_structure(kind) or instructions.is_instruction(kind)
                                       for kind in config.context_kinds]  # no record yet, no x86 block
    bits = [config.region_bits(kind) for kind in config.context_kinds]
    st[REGION_BITS:REGION_BITS + config.contexts] = bits
    st[REGIONS:REGIONS + config.contexts] = np.cumsum([0] + [1 << b for b in bits])[:-1]
    st[RECORD + record.USED] = config.has_records
    st[RECORD + record.GATED] = config.detector
    st[RECORD + record.WINDOW] = -1
    return st


class Model:
    """The cm model's state: one object per stream, fed every block of the stream in order."""

    def __init__(self, config: Config):
        self.config = config
        self.spec = ModelSpec(MODEL_ID, config.to_bytes())
        self.lut = lookup_tables()
        self.state = new_state(config)
        state_maps = STATE_MAP_BASE + config.contexts * 256
        self.counters = np.full(state_maps + config.byte_history_inputs * byte_history.N_COUNTERS, COUNTER_INIT,
                                dtype=np.uint32)
        self.counters[STATE_MAP_BASE:state_maps] = np.tile(self.lut[LUT_INITIAL : LUT_INITIAL + 256], config.contexts)
        self.byte_entries = np.zeros(max(config.byte_history_entries, 1), dtype=np.uint32)
        # the histories, then the empty bucket that read-only lookups return (contexts.find_bucket)
        self.states = np.zeros(config.history_bytes + 16, dtype=np.uint8)
        self.weights = mixer.initial_weights(mixer.sets(config.contexts), config.inputs, config.mixers)
        self.apm = sse.initial_apm(config.apms, config.has_records)
        self.hist = np.zeros(1 << config.hist_bits, dtype=np.uint8)
        self.mtable = np.zeros(1 << (config.hist_bits - 2), dtype=np.int32)
        self.aux = np.zeros(AUX_SIZE, dtype=np.int32)
        self.source = distribution.Source(config.source, config.source_table_bits) if config.source else None
        self.rc = new_coder_state()
        self.inputs = np.zeros(config.inputs, dtype=np.int64)
        self._sink = None  # the trace hooks (see statemix.models.protocol)
        self._stage_sink = None

    def trace(self, sink) -> None:
        """Report every later encoded or learned block to ``sink`` (a :class:`.protocol.TraceBlock`)."""
        self._sink = sink

    def trace_stages(self, sink) -> None:
        """Report every later encoded block's stage distributions to ``sink``, a
        :class:`.protocol.StageStep` per step (diagnostics: about 6 times the time of coding at level 2)."""
        self._stage_sink = sink

    def _stage_step(self, data: np.ndarray, start: int, end: int, stages: np.ndarray) -> StageStep:
        from ..calibration import byte_distribution

        named = {}
        if self.source is not None:
            source = distribution.NAMES[self.config.source]
            if self.source.uses_ssm:
                named[f"{source}: SSM softmax"] = stages[:, STAGE_SSM]
            named[f"{source}: mixed"] = stages[:, STAGE_MIXED]
            named[f"{source}: quantized"] = stages[:, STAGE_QUANTIZED]
        named["cm mixer (implied)"] = byte_distribution(stages[:, STAGE_NODES_MIXER])
        named["cm coded (implied)"] = byte_distribution(stages[:, STAGE_NODES])
        return StageStep(data[start:end].astype(np.int64), np.arange(start, end), named)

    def components(self) -> list[str]:
        return self.config.components()

    def ablated(self, components) -> "Model":
        """A fresh model with the named components switched off (diagnostics only: no valid stream)."""
        config = self.config
        inputs = {"order 0": [0], "order 1": [1], "match": [2 + config.contexts], "APMs": []}
        if config.source:
            inputs[distribution.NAMES[config.source]] = [config.inputs - 2]
        first_history = 3 + config.contexts + config.run_inputs
        inputs["byte histories"] = list(range(first_history, first_history + config.byte_history_inputs))
        for k, kind in enumerate(config.context_kinds):
            inputs[contexts.NAMES[kind]] = [2 + k] + ([3 + config.contexts + k] if k < config.run_inputs else [])
        model = Model(config)
        switched_off = [i for name in components for i in inputs[name]]
        model.state[ABLATED + np.array(switched_off, dtype=np.int64)] = 1
        model.state[ABLATE] = (ABLATE_INPUTS if switched_off else 0) | (ABLATE_APMS if "APMs" in components else 0)
        return model

    def tables(self) -> Tables:
        """The model's arrays as the jitted loop takes them."""
        return Tables(self.counters, self.states, self.weights, self.apm, self.hist, self.mtable, self.aux,
                      self.lut, self.inputs, self.byte_entries)

    def _run(self, mode: int, data: np.ndarray, coded: np.ndarray, progress) -> int:
        trace = _NO_TRACE
        if self._sink is not None and mode != DECODE:
            trace = np.empty((8 * data.shape[0], 2), dtype=np.int32)
        if mode == ENCODE:
            enc_init(self.rc)
        elif mode == DECODE:
            dec_init(self.rc, coded)
        n = data.shape[0]
        tables = self.tables()
        source = self.source.arrays() if self.source is not None else _no_source()
        uses_ssm = self.source is not None and self.source.uses_ssm
        staging = self._stage_sink is not None and mode == ENCODE
        loop = run_range if uses_ssm else run_range_no_ssm
        # the SSM source runs on one thread inside cm's byte loop: measured not to pay before the
        # SIMD backward pass, not measured since (--model ssm's byte models now use every thread)
        with threads_at_most(1) if uses_ssm else contextlib.nullcontext():
            for start, end in timed_steps(n, STEP_BYTES_STAGES if staging else STEP_BYTES_MOST):
                stages = np.zeros((end - start, STAGE_ROWS, 256), dtype=np.float32) if staging else _NO_STAGES
                loop(mode, data, coded, self.rc, self.state, tables, source, trace, stages, start, end)
                if staging:
                    self._stage_sink(self._stage_step(data, start, end, stages))
                if progress is not None:
                    progress(end)
        if trace.shape[0]:
            p = trace / 65536.0
            self._sink(TraceBlock(p[:, 0], np.unpackbits(data).astype(np.int8), np.repeat(np.arange(n), 8), n,
                                  {"mixer": p[:, 1]}))
        return enc_finish(self.rc, coded) if mode == ENCODE else 0

    def encode(self, data: bytes, limit: int, *, progress=None, x86: bool = False) -> bytes | None:
        """Code ``data``; return the code word, or None if it would be longer than ``limit`` bytes.

        The model learns ``data`` either way.  ``x86``: the block is x86 code (after the branch
        transform), which wakes the instruction contexts (:mod:`.bit.instructions`).
        """
        self.state[X86_BLOCK] = x86
        raw = np.frombuffer(data, dtype=np.uint8).copy()  # run_range takes one writable array type
        out = np.empty(max(limit, 0), dtype=np.uint8)
        n = self._run(ENCODE, raw, out, progress)
        return None if n > limit else out[:n].tobytes()

    def decode(self, coded: bytes, size: int, *, progress=None, x86: bool = False) -> bytes:
        """Decode ``size`` bytes from the code word ``coded`` (``x86``: as :meth:`encode` was told)."""
        self.state[X86_BLOCK] = x86
        out = np.empty(size, dtype=np.uint8)
        self._run(DECODE, out, np.frombuffer(coded, dtype=np.uint8).copy(), progress)
        return out.tobytes()

    def learn(self, data: bytes, *, progress=None, x86: bool = False) -> None:
        """Update the model with ``data`` without coding it (a block stored by other means), exactly
        as :meth:`encode` would (``x86``: as :meth:`encode` was told)."""
        self.state[X86_BLOCK] = x86
        self._run(LEARN, np.frombuffer(data, dtype=np.uint8).copy(), _NO_CODED, progress)

    def snapshot(self, reuse=None):
        """A copy of the whole model state (into ``reuse``'s arrays, an earlier snapshot, if given)."""
        return take(self, _CONSTANT, reuse)

    def restore(self, snapshot) -> None:
        """Put ``snapshot`` back: the model behaves as if the blocks seen since had never been."""
        put_back(self, _CONSTANT, snapshot)


_NO_TRACE = np.zeros((0, 2), dtype=np.int32)
_NO_STAGES = np.zeros((0, STAGE_ROWS, 256), dtype=np.float32)
#: the most bytes in one kernel step (steps are timed: :mod:`.steps`), and while stages are traced
#: (each byte's stages: 5 KiB of float32)
STEP_BYTES_MOST = 1 << 16
STEP_BYTES_STAGES = 1 << 10


@functools.cache
def _no_source() -> distribution.Arrays:
    """The arrays run_range takes without a source: of the right types, never read or written."""
    return distribution.Source(distribution.SOURCE_COUNTS, 12).arrays()
_NO_CODED = np.zeros(0, dtype=np.uint8)
