"""Every ``--level`` preset of every model, and the bounds a stream's model record must keep.

A preset is data only (no numba, no allocation), so the command line, ``statemix -l`` and the
record checks can read it cheaply.  Changing a number here changes the output of that level (the
golden tests in tests/test_determinism.py and tests/test_api.py pin it); the record bounds below are
the largest values any preset can produce, so a record outside them is refused as corrupt before a
byte is allocated.

cm (model id 1), per level: ``table_bits`` (log2 bytes of bit-history states per hashed context),
``hist_bits`` (log2 bytes of the match model's history), ``contexts``, ``mixers``, ``apms``, and
optionally ``kinds``, the component list (context kinds of ``statemix.models.bit.contexts``; without
it the level writes the first, 5-byte record: the first ``contexts`` kinds), ``source`` (the byte-distribution
input), ``detector`` (the record detector's revision, ``statemix.models.bit.record``) and ``revision`` (the
model's revision: constants without a field of their own, cm's Config).  Level 1 trades size for
speed.  With ``size_hint`` (the input length, when known) both sizes shrink to
``fit = max(12, bit_length(8 * size))``: ``table_bits <= fit + 2`` and ``hist_bits <= max(16, fit)``.

ssm (model id 2), per level: a named preset of :data:`SSM_PRESETS` and extra ``table_bits`` (log2 of
the n-gram buckets), shrunk to ``max(12, bit_length(size))`` for small inputs.  Level 1 is the count
models alone (no SSM), 2 the SSM with the count models, 3 the same with twice the buckets.
"""

from __future__ import annotations

DEFAULT_LEVEL = 2
LEVELS = (1, 2, 3)
#: Model families a user can choose: "cm" (the default: context mixing over bits, levels 1-3) and
#: "ssm" (an online-trained state-space model over bytes mixed in logit space with count models,
#: levels 1-3; far slower, and larger output than cm today, see bench/RESULTS.md).
MODELS = ("cm", "ssm")

CM_FIELDS = ("table_bits", "hist_bits", "contexts", "mixers", "apms")
#: The components of levels 2 and 3: the ten of the first records (orders 1-6 and 8, word, word pair,
#: sparse), the text contexts a greedy search on 300 kB of enwik8 added, in the order it added them
#: (bench/RESULTS.md, issue 12): markup, classes, indirect 1, word and classes, skip word, indirect 2;
#: and four that pay at 1 and 3 MB, though under the search's 0.05% each at 300 kB: word trio,
#: column, sparse 2, line start (-0.18% on enwik8_1M, -0.24% on enwik8_3M together, with their
#: regions a quarter of the others').  Orders 3, 5 and 6 gave way to letters, word opener and markup
#: name (the text state's words of the same names), each of which gained more than the order it
#: replaced: -0.26% on enwik8_1M in the same time and memory (bench/RESULTS.md).  Then word in
#: markup and name position: -0.18% on enwik8_1M (bench/RESULTS.md).  Then last word, token and
#: sentence, the best three of twenty candidates added one at a time, and next word and emphasis,
#: the best pair of six more added to those three (-0.32% on enwik8_1M together, bench/RESULTS.md).
#: Then eight contexts of the text's shape (class runs, byte classes, the line's first byte, the
#: markup state) with the last bytes or words, the best eight of 31 candidates screened on top of
#: those (-0.85% on enwik8_1M, -0.93% on enwik8_3M together, bench/RESULTS.md).  Then five more of
#: them (class runs with the last word, with c3 c2 c1 and with the 8 runs before; the cased word pair;
#: 2-bit classes of 16 bytes with c2 c1), the best five of nine screened on top of those eight, with
#: model revision 5, and four more (token pair, the word two back, the word with the class runs and
#: the markup state, the column with the classes), each -0.02% on enwik8_3M in round 3 of the screen,
#: -0.07% together (bench/RESULTS.md).
TEXT_KINDS = tuple(sorted((0, 2, 4, 6, 7, 8, 9, 16, 17, 14, 18, 11, 15, 10, 13, 19, 20, 34, 35, 36, 37, 38,
                           39, 40, 41, 42, 43, 44, 45, 46, 47, 48, 49, 50, 51, 52, 53, 54, 55, 56, 57, 58,
                           59, 60)))
#: and the structure contexts (issue 14: fixed-size records, tables, one-bit and 8-bit images), idle
#: while no record or image row is found, so text pays little for them (bench/RESULTS.md)
STRUCTURE_KINDS = tuple(range(21, 32))
#: and the x86 instruction contexts, idle outside blocks coded as x86 code (bench/RESULTS.md: -5.5% on
#: /usr/bin/bash)
INSTRUCTION_KINDS = (32, 33)
CM_KINDS = tuple(sorted(TEXT_KINDS + STRUCTURE_KINDS + INSTRUCTION_KINDS))
#: Levels 2 and 3 have byte histories (bench/RESULTS.md, issue 12: at level 2 they gain 0.26% on
#: enwik8_1M and 0.48% on enwik8_3M for 1.2 times the time, since the kernels count no references;
#: level 2 had none while they took it past issue 12's 60 s per MB).  Level 2's contexts at 32 MiB
#: regions gained only 0.03% and 0.14% more: not taken.
#: Byte histories cost small inputs (their inputs learn slowly: +1-2% on the 4-50 kB Calgary and
#: Canterbury texts, +0.55% at 100 kB of enwik8, +0.38% at 500 kB of book1; −0.08% at 500 kB of enwik8,
#: −0.26% at 1 MB): a preset sized to an input under 512 KiB (a fit, see cm_fit, under
#: BYTE_HISTORIES_MIN_FIT) has none; one for an input of unknown size has them.
BYTE_HISTORIES_MIN_FIT = 23
#: Levels 2 and 3 have model revision 1 (the mixers' initial weights and learning rates,
#: .bit.mixer.REVISIONS) and an eighth mixer, selected by the character classes of c2 and c1 with c0
#: (bench/RESULTS.md, issue 12: together -1.1% on enwik8_1M, for 1.04 times the time); then model
#: revision 2 (the APMs train both buckets, the match model's length input) and a ninth mixer,
#: selected by the word position, the markup state and c0 (bench/RESULTS.md, issue 12: together -0.42% on
#: enwik8_1M and -0.43% on enwik8_3M, for about 1.09 times the time).
#: Then model revision 3: the mixers' rate boosted per weight set while it is young, not for the
#: stream, on half the base rate (bench/RESULTS.md, issue 12: -0.41% on enwik8_1M).  Then model
#: revision 4 and a fifth APM: the final mixer's weight sets by half the word position, the APMs'
#: share of the coded probability 15/16, the fifth APM keyed by the word pair (bench/RESULTS.md,
#: issue 12: -0.08% on enwik8_1M, -0.13% on enwik8_3M, in the same time, 8 MiB more).  Then model
#: revision 5: the small text contexts' regions half the others', at most 8 MiB, not a quarter
#: (bench/RESULTS.md, issue 12: -0.11% on enwik8_3M at level 2; level 3's stay 8 MiB).  Then model
#: revision 6: mixer 3 selected by the byte-distribution source's most likely byte while the match
#: model has none, and at most 2**20 byte-history entries per context (bench/RESULTS.md, issue 12:
#: -0.04% on enwik8_1M and enwik8_3M; level 3's bound 84 MiB less).  Then model revision 7: the
#: small text contexts' regions the others' up to 16 MiB (level 2's; level 3's stay 8 MiB), and the
#: byte-distribution source's count models in twice the buckets of 16 slots, not 32, in about the same
#: memory (bench/RESULTS.md, issue 12: -0.10% and -0.06% on enwik8_3M at level 2; its bound 1,013 ->
#: 1,257 MiB, after 16-bit slots took it from 1,141 to 1,013 MiB).
#: Level 1 has 2 mixers and 2**22-byte regions (bench/RESULTS.md, issue 12: -2.4% on enwik8_1M for
#: 1.2 times the time; 1 mixer and 2**20 before).  Level 3's history (and match table) holds 2**24
#: bytes, as level 2's, since kinds 52-60 (2**26 before the shape contexts 44-51, 2**25 before kinds
#: 52-60: its tables would need more than the decoder's default limit; inputs under 16 MiB code as
#: before).  Level 3's byte-distribution source is the pretrained SSM with the count models (source 4:
#: the SSM of source 3, d_model 64, started from the weights shipped in the package and fine-tuned
#: online; streams of source 3, the same SSM from random weights, decode as before).
CM_LEVELS = {
    1: dict(table_bits=22, hist_bits=22, contexts=5, mixers=2, apms=1),
    2: dict(table_bits=24, hist_bits=24, contexts=len(CM_KINDS), mixers=9, apms=5, kinds=CM_KINDS, source=1,
            detector=2, byte_histories=True, revision=7),
    3: dict(table_bits=25, hist_bits=24, contexts=len(CM_KINDS), mixers=9, apms=5, kinds=CM_KINDS, source=4,
            detector=2, byte_histories=True, revision=7),
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
