"""cm: a bitwise context-mixing byte model, all in integer arithmetic.

This is statemix's first predictor (model id 1).  It codes each byte as 8 binary decisions, most
significant bit first, and for each bit mixes the predictions of its components.  Everything is
integer arithmetic on fixed tables, so encoder and decoder agree bit for bit on every machine.  The
components live in :mod:`..bit`, one job per module, in the order of the data flow for one bit
(``c0`` is the partial byte with a leading 1: 1..255; ``c1``, ``c2`` the previous bytes):

1. Counters (:mod:`..bit.tables`: the counter rule and every fixed table).  Orders 0 (``c0``) and 1
   (``c1, c0``) index counters directly.  Order 0 adapts fast (``loop.LIMIT_ORDER0`` = 3: it follows the
   last few bits seen at this point of a byte); order 1, the state maps and the match model's
   counters use ``loop.LIMIT_DIRECT`` = 1023.
2. Hashed contexts (:mod:`..bit.contexts`): each context of the component list selects a bit-history
   state per bit in its own region of the bit-history table; a counter per (context, state) - the
   "state map" - learns what each history really predicts.  Each state also gives a fixed "run"
   input: +-64 per bit seen (up to 16) when the history holds only 1s (+) or only 0s (-), else 0.
   The record contexts (:mod:`..bit.record` finds the record length from the history; the pixel
   contexts of :mod:`..bit.image` are looked up at every bit) are idle while no record is found: no
   lookup, input 0, nothing trained.  Their regions are 2**-``configuration.RECORD_TABLE_SHIFT`` of
   the others'.  The 8-bit image contexts of :mod:`..bit.image` are idle likewise unless the
   detector finds an 8-bit image; their regions are 2**-``configuration.GRAY_TABLE_SHIFT`` of the
   others'.  The x86 instruction contexts (:mod:`..bit.instructions`) are idle outside blocks coded
   as x86 code (``encode(..., x86=True)``, as the block's kind records); their regions are the record
   contexts' size.  The small text contexts (:data:`..bit.contexts.SMALL_TEXT_KINDS`) have regions
   the size of the others' up to 2**``configuration.FULL_TEXT_MAX_BITS`` bytes, above that half
   theirs, at most 2**``configuration.SMALL_TEXT_MAX_BITS`` (``Config.region_bits``).
3. Match model (:mod:`..bit.match`): the byte after the most recent earlier occurrence of the last
   bytes, and its length as an input of its own.  Byte histories
   (:mod:`..bit.byte_history`, records that say so): the byte that followed
   each text context last time, and how often in a row, one input per text context.
4. Mixing (:mod:`..bit.mixer`): up to nine mixers with selected weight sets and a final mixer, each
   trained on its own code length (a weight set learns faster while it is young; the final mixer's
   weight sets follow the word position as well as ``c0``).
5. APMs (:mod:`..bit.sse`): up to five adaptive tables refine the mixer's probability; the coded
   probability is ``(p_mix + 15 mean(p_apm)) / 16``.
6. The probability, kept within [2**-12, 1 - 2**-12] (so a code word of P bytes holds fewer than
   2,840 P bytes: statemix.container), goes to :func:`statemix.quantize.binary_frequency` and the
   range coder.

That is the latest model revision; what the earlier ones, still decoded, did otherwise is listed in
:data:`.configuration.REVISIONS`.

Input vector of the mixers (stretch units, width ``2 + n + 1 + r + b + s + l + 1`` for ``n`` contexts)::

    [order 0 | order 1 | context 0 .. n-1 | match | run 0 .. r-1 | byte history 0 .. b-1 | source | match length | bias 256]

with ``r = n`` for a record with a component list and ``r = min(n, 9)`` for the first (5-byte)
records: there the tenth context's run input was overwritten by the bias, and that stays so;
``b``: the text contexts (the first in the model's order) if the record has byte histories, else
0; ``s``: 1 with a byte-distribution source, else 0; ``l``: 1 (the match model's length input; 0
before model revision 2).  The contexts that can be idle (structure and x86, after the text
contexts in the model's order, :attr:`.configuration.Config.context_kinds`) have their inputs at
the very end, each one's context input then its run input
(:meth:`.configuration.Config.input_layout`): while they are idle the mixers read only the
vector's prefix (their inputs are 0; on text that saves about 8% of level 2's time).  Where the inputs
sit does not change the output (each has its own weights; the sums are of integers).

The component list is part of the model record (:class:`Config`, in :mod:`.configuration`), so
the mixer's width and the tables follow from the record and adding a context never changes what an
existing stream means.

:func:`.loop.run_range` is the single loop shared by encoder, decoder and learner (for blocks that
were stored instead of modelled): the three differ only in where each bit comes from and whether it
is coded.  It runs any range of a block: the coder and all model state live in arrays (the state:
one int64 array laid out by :data:`.loop.STATE_FIELDS`).  :class:`Model`, here, owns those arrays
and runs the loop over a block in timed steps.

Memory (bytes): n * 2**table_bits (histories; a small text context's the same up to 16 MiB, above
that half, at most 8 MiB; a record or x86 instruction context's an eighth, an 8-bit image context's a
sixteenth) + 2**hist_bits (history) +
2**hist_bits (match table, int32 per 4 bytes of history) + 8.25 MiB per APM + the mixers' weights (4
bytes per input per weight set and 4 for its uses, the sets of the mixers used,
:func:`..bit.mixer.sets`: about 154,000 sets, 97 MiB, at level 2; 1,792 sets, 0.1 MiB, at level 1)
+ about 1.8 MiB (order-1 counters, the text state's indirect and next-word tables, the record detector's counts) +
with byte histories, a quarter of each text context's history bytes (a 4-byte entry per 16 bytes; at
most 4 MiB a context) + with a byte-distribution source, its memory
(:mod:`..bit.distribution`: 174 MiB at level 2, 175 MiB at level 3).
"""

from __future__ import annotations

import functools

import numpy as np

from ..._jit import announce
from ...coder import dec_init, enc_init, finish_whole
from ...coder import new_state as new_coder_state
from .._snapshot import put_back, take
from ..bit import byte_history, contexts, distribution, mixer, sse
from ..bit.tables import COUNTER_INIT, LUT_INITIAL, lookup_tables
from ..modes import DECODE, ENCODE, LEARN
from ..protocol import ModelSpec, StageStep, TraceBlock
from ..steps import timed_steps
from ..tokenloop import STAGE_MIXED, STAGE_QUANTIZED, STAGE_SSM
from .configuration import Config, config_for_level
from .loop import (ABLATE, ABLATE_APMS, ABLATE_INPUTS, ABLATED, AUX_SIZE, STAGE_NODES, STAGE_NODES_MIXER, STAGE_ROWS,
                   STATE_MAP_BASE, X86_BLOCK, Tables, coding, fixed_loop, fixed_shape, new_state, run_range,
                   run_range_no_ssm)

__all__ = ["MODEL_ID", "Config", "Model", "config_for_level", "decoding_bounded"]

MODEL_ID = 1

#: level 1's shape and the loop compiled for it (:func:`.loop.fixed_loop`): the same bits as the
#: generic loop's in about 0.7 times the time (bench/RESULTS.md); any record of that shape uses it
LEVEL1_SHAPE = fixed_shape(config_for_level(1, None))
run_range_level1 = fixed_loop(LEVEL1_SHAPE, "level1")


def decoding_bounded(config: Config, format_version: int) -> bool:
    """Whether a stream of ``format_version`` with this record costs model work in proportion to its
    bytes (statemix.container, "Streams read only on request"): a record of level 1's shape in
    every version (its loop takes about 1 microsecond a byte, and a block holds at most 1 MiB), any
    other from model revision ``bit.sse.FLOOR_REVISION`` in version 3 (whole code words under the
    coarse floor)."""
    return fixed_shape(config) == LEVEL1_SHAPE or (format_version >= 3 and config.coarse_floor)


#: each loop's copy for coding, without the stage tracer (:func:`.loop.coding`)
_CODING = {loop: coding(loop) for loop in (run_range, run_range_no_ssm, run_range_level1)}


def _announce_compiles() -> None:
    """Name each loop, and its seconds of compiling, for the announcement of its first compile (first
    run, empty cache, on this project's 2-core test machine: bench/RESULTS.md)."""
    for loop, what, coding_seconds, tracing_seconds in (
            (run_range_level1, "cm's level-1 loop", 20, 30), (run_range_no_ssm, "cm's level-2 loop", 35, 50),
            (run_range, "cm's level-3 loop (with the SSM)", 240, 260)):
        announce(_CODING[loop], what, coding_seconds)
        announce(loop, f"{what} with its stage tracer", tracing_seconds)


_announce_compiles()

#: attributes that are configuration or shared read-only tables, not state (see :meth:`Model.snapshot`)
_CONSTANT = frozenset({"config", "spec", "lut", "_sink", "_stage_sink", "_loop"})


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
        self.weights = mixer.initial_weights(mixer.sets.py_func(config.contexts, config.mixers), config.inputs,
                                             config.mixers, config.revision, config.input_layout().bias)
        self.apm = sse.initial_apm(config.apms, config.has_records)
        self.hist = np.zeros(1 << config.hist_bits, dtype=np.uint8)
        self.mtable = np.zeros(1 << (config.hist_bits - 2), dtype=np.int32)
        self.aux = np.zeros(AUX_SIZE, dtype=np.int32)
        self.source = (distribution.Source(config.source, config.source_table_bits, config.source_slots)
                       if config.source else None)
        self.rc = new_coder_state()
        self.inputs = np.zeros(config.inputs, dtype=np.int64)
        # the loop the record asks for: with the SSM, compiled for level 1's shape, or the generic one
        self._loop = (run_range if self.source is not None and self.source.uses_ssm
                      else run_range_level1 if fixed_shape(config) == LEVEL1_SHAPE else run_range_no_ssm)
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
        from ...calibration import byte_distribution

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
        layout = config.input_layout()
        inputs = {"order 0": [0], "order 1": [1], "match": [i for i in (layout.match, layout.strength) if i >= 0],
                  "APMs": []}
        if config.source:
            inputs[distribution.NAMES[config.source]] = [layout.source]
        inputs["byte histories"] = list(range(layout.histories, layout.histories + config.byte_history_inputs))
        for k, kind in enumerate(config.context_kinds):
            inputs[contexts.NAMES[kind]] = [layout.counters[k]] + layout.runs[k:k + 1]
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
        staging = self._stage_sink is not None and mode == ENCODE
        loop = self._loop if staging else _CODING[self._loop]
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
        return finish_whole(self.rc, coded) if mode == ENCODE else 0

    def max_raw_length(self, payload_length: int) -> int:
        """The most bytes a code word of ``payload_length`` bytes can hold (statemix.container: every
        bit costs more than 2**-16 / ln 2 bits under :func:`statemix.quantize.binary_frequency`'s clamp,
        2**-12 / ln 2 from model revision ``bit.sse.FLOOR_REVISION``)."""
        from ...container import CM_BYTES_PER_PAYLOAD_BYTE, CM_COARSE_BYTES_PER_PAYLOAD_BYTE

        return payload_length * (CM_COARSE_BYTES_PER_PAYLOAD_BYTE if self.config.coarse_floor
                                 else CM_BYTES_PER_PAYLOAD_BYTE)

    def max_learned_length(self, payload_length: int) -> int | None:
        """The most bytes a learned block of ``payload_length`` bytes of payload may hold: as a code
        word from model revision ``bit.sse.FLOOR_REVISION`` (statemix.container), else no bound of
        the model's."""
        return self.max_raw_length(payload_length) if self.config.coarse_floor else None

    def encode(self, data: bytes, limit: int, *, progress=None, x86: bool = False) -> bytes | None:
        """Code ``data``; return the code word, or None if it would be longer than ``limit`` bytes.

        The model learns ``data`` either way.  ``x86``: the block is x86 code (after the branch
        transform), which wakes the instruction contexts (:mod:`..bit.instructions`).
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
