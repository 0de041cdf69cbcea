"""Predictors, their stream configuration records and the --level presets.

A model configuration is recorded in every stream header as ``model id (1 byte) | parameters``
(:class:`ModelSpec`); the decoder rebuilds exactly the same model from it.  Every model implements
the :class:`Model` protocol of :mod:`.protocol` (encode/decode/learn a block with ``progress``,
snapshot/restore, one trace hook, components/ablated, ``spec``); the codec, diagnostics and bench/
use models only through it and the functions below.  The presets of every model are in
:mod:`.presets`.

Layout::

    protocol.py      the Model protocol, ModelSpec, TraceBlock and StageStep (what the trace hooks report)
    presets.py       every --level preset of every model, and the record bounds they imply
    modes.py         ENCODE / DECODE / LEARN
    steps.py         kernel steps sized by the clock (where progress is reported)
    _snapshot.py     copies of a model's whole state (snapshot/restore)
    cm/              the bitwise model (model id 1): the Model (__init__.py), its record
                     (configuration.py) and its jitted loop over its components (loop.py) ...
    bit/             ... tables (stretch/squash, counter rule, bit histories), contexts, match,
                     mixer, sse (APMs): one job per module
    ssm.py           the ssm model (model id 2): BPE framing, kernel steps, snapshots ...
    ssm_config.py    ... its record, checks and presets ...
    tokenloop.py     ... its token coding loop (network softmax + count models -> coder) ...
    tokenmix.py      ... its count models and logit-space mixing ...
    nn/              ... and the SSM network itself: layout/init, numerics, forward, backward,
                     train (Adam, schedule, train_chunk), Network (runs position by position)

A model module defines ``MODEL_ID``, ``config_for_level(level, size_hint)``, a frozen ``Config``
dataclass with ``to_bytes()``, ``from_bytes()`` (raising ValueError on anything out of range: every
field is checked against what the presets can produce, before anything is allocated),
``memory_bytes()`` (the documented upper bound, computed without allocating) and ``describe()``
(words, naming the preset when the record is one), ``decoding_bounded(config, format_version)``
(whether a stream's size bounds its decoding work), and a ``Model(config)`` class implementing the
protocol.  ``progress``, when given, is called as ``progress(done)`` (bytes of this block processed
so far, increasing) between kernel steps of about 50 ms each, sized by the clock (:mod:`.steps`; one
exception: training a BPE vocabulary on a first block is one step); an exception it raises propagates out of the call, and
the model must then be abandoned (its state is part-way through the block).

How to add a context model (to cm), with the word context as the worked example
--------------------------------------------------------------------------------
The word context predicts from the letters of the current word (case-folded), whatever came before
the word.  Adding it took three places:

1. Its per-byte state, if it needs one, in the text state (:mod:`.bit.text`): ``WORD0`` is a hash of
   the letters so far, updated in ``text_update`` (``mix_hash(word, letter)`` on a letter, reset to 0
   after a non-letter, the finished word moved to ``WORD1``).  Contexts that are a function of the
   last bytes need nothing here.
2. Its hash, in :mod:`.bit.contexts`: a new kind id and name at the end of ``NAMES`` (in
   :mod:`.bit.kinds`; "word" is id 4), its order in ``ORDERS`` (0 if it is not an order-n context) and a branch in ``context_hash``
   (``mix_hash(word, 9 << 40)``, with a salt no other kind uses).
   Everything else follows from the component list: the context gets its own region of the
   bit-history table and its own state map, a mixer input and a run input, and the mixers' width
   grows by two.
3. A preset that uses it: add its name to the level's ``kinds`` in ``presets.CM_LEVELS`` (the
   component set, e.g. ``presets.TEXT_KINDS``).  Such a record carries the set as a mask
   (``00 02 ...``, see ``cm.Config``), so a stream written before the new kind existed decodes
   exactly as it did, and one that uses it is refused by a build that does not know it.

Then measure it alone: ``statemix diagnose FILE --ablation`` reports the bytes each component saves
(its input switched off, the rest as they are), ``python bench/component_costs.py FILE`` the bytes and
seconds of the preset with each component taken out of its record; record the gain and the cost in
bench/RESULTS.md beside the commit.
"""

from __future__ import annotations

import importlib

from .._errors import StatemixError
from .presets import DEFAULT_LEVEL, LEVELS, MODELS
from .protocol import MODEL_MODULES, Model, ModelSpec, StageStep, TraceBlock, memory_bound_mib

__all__ = ["DEFAULT_LEVEL", "LEVELS", "MODELS", "MODEL_MODULES", "Model", "ModelSpec", "StageStep", "TraceBlock",
           "build_model", "decoding_bounded", "memory_needed", "spec_for_level"]

_MIB = 1 << 20


def spec_for_level(level: int | None, size_hint: int | None = None, model: str | None = None) -> ModelSpec:
    """Return the model configuration of a model family and --level preset.

    ``size_hint`` (the input's length when known) shrinks the tables of small inputs: they cannot fill
    them, and smaller tables start faster and stay in cache.
    """
    if model not in (None, *MODELS):
        raise StatemixError(f"model must be one of {', '.join(MODELS)}, not {model!r}")
    if level is None:
        level = DEFAULT_LEVEL
    if level not in LEVELS:
        raise StatemixError(f"level must be one of {', '.join(map(str, LEVELS))}, not {level}")
    module = importlib.import_module(f"{__name__}.{model or 'cm'}")
    return ModelSpec(module.MODEL_ID, module.config_for_level(level, size_hint).to_bytes())


def _config(spec: ModelSpec):
    """Parse and check every field of ``spec`` (nothing is allocated); return (module, config)."""
    name = MODEL_MODULES.get(spec.model_id)
    if name is None:
        raise StatemixError(f"unsupported model id {spec.model_id}: this stream needs another statemix")
    module = importlib.import_module(f"{__name__}.{name}")
    try:
        config = module.Config.from_bytes(spec.parameters)
    except ValueError as exc:
        raise StatemixError(f"corrupt stream: {exc}") from None
    return module, config


def memory_needed(spec: ModelSpec) -> int:
    """The documented upper bound of the memory of ``spec``'s model, in bytes (nothing allocated).

    A snapshot (:meth:`Model.snapshot`) holds one more copy of about the same size.
    """
    return _config(spec)[1].memory_bytes()


def decoding_bounded(spec: ModelSpec, format_version: int) -> bool:
    """Whether decoding a stream of ``format_version`` with ``spec``'s model costs work in proportion
    to the stream's bytes (statemix.container, "Streams read only on request"); nothing allocated."""
    module, config = _config(spec)
    return module.decoding_bounded(config, format_version)


def size_in_words(nbytes: int) -> str:
    """``nbytes`` as a person reads it, never rounded to 0: "1,536 MiB", "1.5 MiB", "1 KiB", "500 bytes"."""
    for unit, shift in (("MiB", 20), ("KiB", 10)):
        if nbytes >= 1 << shift:
            value = nbytes / (1 << shift)
            return f"{value:,.0f} {unit}" if value == int(value) else f"{value:,.1f} {unit}"
    return f"{nbytes:,} bytes"


def build_model(spec: ModelSpec, *, memory_limit: int | None = None):
    """Return a fresh model for ``spec``, or raise StatemixError if this build cannot make it.

    The record is checked field by field before anything is allocated; with ``memory_limit``
    (bytes), a model whose memory bound exceeds it is refused with a one-line message.
    """
    module, config = _config(spec)
    if memory_limit is not None:
        need = config.memory_bytes()
        if need > memory_limit:
            raise StatemixError(
                f"this stream's model needs {memory_bound_mib(need)} of memory, more than the limit of "
                f"{size_in_words(memory_limit)} (raise it with --memory)")
    return module.Model(config)
