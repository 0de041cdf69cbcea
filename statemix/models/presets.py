"""Every ``--level`` preset of every model, and the bounds a stream's model record must keep.

A preset is data only (no numba, no allocation), so the command line, ``statemix -l`` and the
record checks can read it cheaply.  Changing a number here changes the output of that level (the
golden tests in tests/test_determinism.py and tests/test_api.py pin it); the record bounds below are
the largest values any preset writes or wrote, so a record outside them is refused as corrupt before
a byte is allocated.

cm (model id 1), per level: ``table_bits`` (log2 bytes of bit-history states per hashed context),
``hist_bits`` (log2 bytes of the match model's history), ``contexts``, ``mixers``, ``apms``, and
optionally ``kinds``, the component list (context kind ids, named in ``statemix.models.bit.kinds``;
without it the level writes the first, 5-byte record: the first ``contexts`` kinds), ``source`` (the
byte-distribution input), ``detector`` (the record detector's revision,
``statemix.models.bit.record``), ``byte_histories`` (the contexts' byte histories,
``statemix.models.bit.byte_history``) and ``revision`` (the model's revision: constants without a
field of their own, cm's Config).  Level 1 trades size for speed; level 2 is the whole model; level 3
is level 2 with larger regions and the pretrained SSM as its byte-distribution source.  With
``size_hint`` (the input length, when known) both sizes shrink to ``fit = max(12, bit_length(8 *
size))``: ``table_bits <= fit + 2`` and ``hist_bits <= max(16, fit)``; below 512 KiB there are no
byte histories.

ssm (model id 2), per level: a named preset of :data:`SSM_PRESETS` and extra ``table_bits`` (log2 of
the n-gram buckets), shrunk to ``max(12, bit_length(size))`` for small inputs.  Level 1 is the count
models alone (no SSM), 2 the SSM with the count models, 3 the same with twice the buckets.
"""

from __future__ import annotations

from .bit.kinds import IDS

DEFAULT_LEVEL = 2
LEVELS = (1, 2, 3)
#: Model families a user can choose: "cm" (the default: context mixing over bits, levels 1-3) and
#: "ssm" (an online-trained state-space model over bytes mixed in logit space with count models,
#: levels 1-3; far slower, and larger output than cm today, see bench/RESULTS.md).
MODELS = ("cm", "ssm")

CM_FIELDS = ("table_bits", "hist_bits", "contexts", "mixers", "apms")


def _kinds(*names: str) -> tuple[int, ...]:
    """The ids of the context kinds ``names`` (:data:`.bit.kinds.NAMES`), sorted."""
    return tuple(sorted(IDS[name] for name in names))


#: The text contexts of levels 2 and 3 (never idle), by what they read; what each hashes is in
#: .bit.contexts, what each gained when it joined in bench/RESULTS.md.  Orders 3, 5 and 6 are not
#: among them: letters, word opener and markup name gain more in their place.
TEXT_KINDS = _kinds(
    # the last bytes, and the bytes that followed them before
    "order 1 history", "order 2", "order 4", "order 8", "sparse", "sparse 2", "indirect 1", "indirect 2",
    # words and tokens
    "word", "word pair", "word trio", "skip word", "last word", "word two back", "next word", "cased word pair",
    "word opener", "letters", "token", "token pair", "sentence",
    # markup
    "markup", "markup name", "word in markup", "name position", "emphasis", "markup order 3",
    # the line
    "column", "line start", "line and markup", "line and word", "line and classes", "column and classes",
    # the text's shape: the classes of the last bytes, and the runs of bytes of one class
    "classes", "classes order 2", "word and classes", "classes and last word", "shape order 2",
    "class runs", "runs order 2", "runs order 3", "runs and last word", "sixteen runs", "word and runs",
)
#: The structure contexts (fixed-size records and tables, one-bit and 8-bit images): idle while the
#: record detector finds no record or image row, so text pays little for them.
STRUCTURE_KINDS = _kinds("record above", "record rows", "record neighbours", "record column",
                         "image", "image rows", "pixels", "pixels wide",
                         "gray gradient", "gray above", "gray vertical")
#: The x86 instruction contexts: idle outside blocks coded as x86 code.
INSTRUCTION_KINDS = _kinds("x86 instruction", "x86 opcodes")
#: The component list of levels 2 and 3, in id order (the model puts its text contexts first:
#: cm.Config.context_kinds).
CM_KINDS = tuple(sorted(TEXT_KINDS + STRUCTURE_KINDS + INSTRUCTION_KINDS))
#: Levels 2 and 3 give their contexts byte histories (.bit.byte_history).  Byte histories learn slowly
#: and cost small inputs, so a preset sized to an input under 512 KiB (a fit under
#: BYTE_HISTORIES_MIN_FIT, see cm_fit) has none; one for an input of unknown size has them.
BYTE_HISTORIES_MIN_FIT = 23
#: Level 1 is built for speed: the first record's five contexts (order 2, order 3, order 4, order 6,
#: word), 2 mixers, one APM, 2**22-byte regions and history.
#: Level 2 is the whole model: the components of CM_KINDS with regions sized from 2**24 bytes (each
#: kind's: cm.Config.region_bits), a 2**24-byte history, nine mixers (what selects each one's weights:
#: .bit.mixer), five APMs (.bit.sse), the count models as byte-distribution source (source 1,
#: .bit.distribution), record detector 2 (.bit.record), byte histories, and model revision 8 (the
#: constants without a field of their own: cm.Config).
#: Level 3 is level 2 with regions sized from 2**25 bytes (twice level 2's, but the small text
#: contexts' stay 8 MiB) and the pretrained SSM with the count models as its byte-distribution
#: source (source 5: the SSM of source 3, d_model 64, started from the second weight file shipped in
#: the package and fine-tuned online; streams of sources 3 and 4, the same SSM from random weights and
#: from the first weight file, decode as before).
#: Its history (and match table) holds 2**24 bytes, as level 2's: with more, its tables would need
#: more than the decoder's default memory limit.
CM_LEVELS = {
    1: dict(table_bits=22, hist_bits=22, contexts=5, mixers=2, apms=1),
    2: dict(table_bits=24, hist_bits=24, contexts=len(CM_KINDS), mixers=9, apms=5, kinds=CM_KINDS, source=1,
            detector=2, byte_histories=True, revision=8),
    3: dict(table_bits=25, hist_bits=24, contexts=len(CM_KINDS), mixers=9, apms=5, kinds=CM_KINDS, source=5,
            detector=2, byte_histories=True, revision=8),
}
#: Largest sizes any cm preset writes or wrote (level 3's history had 2**26 bytes before the shape
#: contexts): a record asking for more is corrupt (and could not be allocated on an ordinary
#: machine: 2**26 * 10 bytes of tables alone is 640 MiB).
CM_MAX_TABLE_BITS = max(p["table_bits"] for p in CM_LEVELS.values())
CM_MAX_HIST_BITS = 26
CM_MIN_TABLE_BITS, CM_MIN_HIST_BITS = 12, 16


def cm_sized(level: int, fit: int | None) -> dict:
    """The cm preset of ``level`` with its tables sized to ``fit`` (None: full size)."""
    # kinds: the component list (None: the first records); detector: the record detector's revision;
    # byte_histories: the contexts' byte histories (.bit.byte_history); revision: the model's
    # revision (cm.Config: the mixers' learning rates)
    preset = {"kinds": None, "source": 0, "detector": 0, "byte_histories": False, "revision": 0, **CM_LEVELS[level]}
    if fit is not None:
        preset["table_bits"] = min(preset["table_bits"], fit + 2)
        preset["hist_bits"] = min(preset["hist_bits"], max(CM_MIN_HIST_BITS, fit))
        preset["byte_histories"] = preset["byte_histories"] and fit >= BYTE_HISTORIES_MIN_FIT
    return preset


def cm_fit(size_hint: int | None) -> int | None:
    return None if size_hint is None else max(12, (max(size_hint, 1) * 8).bit_length())


def cm_levels_of(fields: dict) -> list[int]:
    """The cm levels whose preset, at some input size, is exactly ``fields``."""
    fits = (None, *range(12, 64))
    return [level for level in LEVELS if any(cm_sized(level, fit) == fields for fit in fits)]


#: Named ssm presets: changes to the defaults of ``statemix.models.ssm.Config``.
SSM_PRESETS = {
    "reference": dict(preset=1, bptt=0, prior=0.1),
    "default": dict(preset=2),
    # BPE tokens (bench/ssm_study.py, enwik8_3M, 3 blocks): 12,288 merges beat 8,192 (839,167 against
    # 841,543 bytes); 16-token chunks with one Adam step beat 8 (852,586) and 24 (842,258) and run
    # about 1.6x faster than 32-token chunks with two (837,225 at 8,192 merges); lr 0.0015 beat 0.001
    # and 0.002.
    "bpe": dict(preset=3, tokenizer=1, merges=12288, chunk=16, iters_c=1, chunks_a=20, chunks_b=40,
                prior=0.1, lr=0.0015, lr_min=0.0015),
    # Count models and learned mixing (bench/RESULTS.md, issue 5): over bytes, the count models gave
    # 253,338 bytes on enwik8_1M against 285,685 over 1,024 BPE merges and 275,228 over 256; with the
    # SSM, bytes gave 245,426 against 273,456 for the 12,288-merge vocabulary.  32 slots per bucket
    # beat 8 (302,839) and 16 (262,372); 2**20 buckets beat 2**18 (257,654), 2**22 gained 0.4%.
    # The learned temperature (calibrate=1) is left off: on top of learned mixing it did not help
    # (300 kB of enwik8 with the SSM: 78,063 bytes without, 78,108-78,179 with; bench/RESULTS.md).
    # No label smoothing (issue 13): statemix diagnose showed the SSM's softmax under-confident
    # (hindsight temperature 0.84, 2.7% of its code length) from training toward 0.88 y + 0.12
    # uniform; without it the SSM's own code fell 4.8% and the coded stream 1.26% on enwik8_1M
    # (242,293 -> 239,246 bytes of code words), 1.46% on lcet10.  Streams record smoothing, so
    # those written with 0.12 decode as before.
    # A training delay of one chunk (issue 16): each chunk is trained on a second thread while the
    # next is coded.  With one Adam step per 16-token chunk instead of two per 32, enwik8_1M gave
    # 239,302 bytes of code words against 239,246, in 17.9 s instead of 45.2 s at -T2 (32-token
    # chunks with one step: 240,241; with two and the delay: 239,797 in 30.2 s; bench/RESULTS.md).
    "mix": dict(preset=4, mixing=2, match=1, table_bits=20, smoothing=0.0, delay=1, chunk=16, iters_c=1),
    "counts": dict(preset=5, use_ssm=0, mixing=2, match=1, table_bits=20),
}
#: ssm level -> (named preset, extra table bits)
SSM_LEVELS = {1: ("counts", 0), 2: ("mix", 0), 3: ("mix", 1)}


def ssm_table_bits(table_bits: int, size_hint: int | None) -> int:
    return table_bits if size_hint is None else min(table_bits, max(12, size_hint.bit_length()))
