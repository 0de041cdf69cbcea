"""Predictors, their stream configuration records and the --level presets.

A model configuration is recorded in every stream header as ``model id (1 byte) | parameters``; the
decoder rebuilds exactly the same model from it.  Models live in one module each, listed in
``MODEL_MODULES`` by id; the presets of every model are in :mod:`.presets`.  A model module defines
``MODEL_ID``, a frozen ``Config`` dataclass with ``to_bytes()``, ``from_bytes()`` (raising ValueError
on anything out of range: every field is checked against what the presets can produce, before
anything is allocated), ``memory_bytes()`` (the documented upper bound, computed without allocating)
and ``describe()`` (words, naming the preset when the record is one), and a ``Model(config)`` class:

- ``encode(data, limit, *, progress=None) -> bytes | None``: the code word for ``data``, or None if
  longer than ``limit``;
- ``decode(coded, size, *, progress=None) -> bytes``: the ``size`` bytes coded in ``coded``;
- ``learn(data, *, progress=None)``: update the model as ``encode`` would, without coding;
- ``snapshot(reuse=None)`` and ``restore(snapshot)``: a copy of the whole state, and putting it back
  (the model then behaves bit for bit as if the blocks since the snapshot had never been seen).

``progress``, when given, is called as ``progress(done)`` (bytes of this block processed so far,
increasing) between kernel steps of at most about 0.1 s each; an exception it raises propagates out
of the call, and the model must then be abandoned (its state is part-way through the block).
"""

from __future__ import annotations

import importlib

from .._errors import StatemixError
from .presets import DEFAULT_LEVEL, LEVELS, MODELS
from .protocol import MODEL_MODULES, Model, ModelSpec, TraceBlock

__all__ = ["DEFAULT_LEVEL", "LEVELS", "MODELS", "MODEL_MODULES", "Model", "ModelSpec", "TraceBlock",
           "build_model", "memory_needed", "spec_for_level"]

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
                f"this stream's model needs {-(-need // _MIB):,} MiB of memory, more than the limit of "
                f"{memory_limit // _MIB:,} MiB (raise it with --memory)")
    return module.Model(config)
