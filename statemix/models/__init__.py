"""Predictors, their stream configuration records and the --level presets.

A model configuration is recorded in every stream header as ``model id (1 byte) | parameters``; the
decoder rebuilds exactly the same model from it.  Models live in one module each, listed in
``MODEL_MODULES`` by id.  A model module defines ``MODEL_ID``, a frozen ``Config`` dataclass with
``to_bytes()``, ``from_bytes()`` (raising ValueError on anything out of range) and
``memory_bytes()``, and a ``Model(config)`` class with three methods, all driven by the model's single
predict/update loop:

- ``encode(data, limit) -> bytes | None``: the code word for ``data``, or None if longer than ``limit``;
- ``decode(coded, size) -> bytes``: the ``size`` bytes coded in ``coded``;
- ``learn(data)``: update the model as ``encode`` would, without coding (blocks stored otherwise).
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass

from .._errors import StatemixError

DEFAULT_LEVEL = 2
LEVELS = (1, 2, 3)
#: Model families a user can choose: "cm" (the default: context mixing over bits, levels 1-3) and
#: "ssm" (an online-trained state-space model over bytes mixed in logit space with count models,
#: levels 1-3; far slower, and larger output than cm today, see bench/RESULTS.md).
MODELS = ("cm", "ssm")


@dataclass(frozen=True)
class ModelSpec:
    """What a stream header records about its model: which model, with which parameters."""

    model_id: int
    parameters: bytes

    def to_bytes(self) -> bytes:
        return bytes([self.model_id]) + self.parameters

    @classmethod
    def from_bytes(cls, raw: bytes) -> "ModelSpec":
        if not raw:
            raise StatemixError("corrupt stream: empty model configuration")
        return cls(raw[0], bytes(raw[1:]))

    def describe(self) -> str:
        return f"model {self.model_id} ({self.parameters.hex() or 'no parameters'})"


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
    if model == "ssm":
        return _ssm_spec(level, size_hint)
    from .cm import MODEL_ID, Config

    # level: (table_bits, hist_bits, contexts, mixers, APMs); level 1 trades size for speed
    table_bits, hist_bits, contexts, mixers, apms = {1: (20, 22, 5, 1, 1), 2: (24, 24, 10, 3, 2),
                                                     3: (25, 26, 10, 3, 2)}[level]
    if size_hint is not None:
        fit = max(12, (max(size_hint, 1) * 8).bit_length())
        table_bits = min(table_bits, fit + 2)
        hist_bits = min(hist_bits, max(16, fit))
    return ModelSpec(MODEL_ID, Config(table_bits, hist_bits, contexts, mixers, apms).to_bytes())


def _ssm_spec(level: int, size_hint: int | None) -> ModelSpec:
    """ssm levels: 1 the count models alone (no SSM), 2 SSM + count models, 3 the same, twice the buckets."""
    from dataclasses import replace

    from .ssm import MODEL_ID, PRESETS

    config = PRESETS["counts" if level == 1 else "mix"]
    table_bits = config.table_bits + (1 if level == 3 else 0)
    if size_hint is not None:
        table_bits = min(table_bits, max(12, size_hint.bit_length()))
    return ModelSpec(MODEL_ID, replace(config, table_bits=table_bits).to_bytes())


MODEL_MODULES = {1: "cm", 2: "ssm"}


def build_model(spec: ModelSpec):
    """Return a fresh model for ``spec``, or raise StatemixError if this build cannot make it."""
    name = MODEL_MODULES.get(spec.model_id)
    if name is None:
        raise StatemixError(f"unsupported model id {spec.model_id}: this stream needs another statemix")
    module = importlib.import_module(f"{__name__}.{name}")
    try:
        config = module.Config.from_bytes(spec.parameters)
    except ValueError as exc:
        raise StatemixError(f"corrupt stream: {exc}") from None
    return module.Model(config)
