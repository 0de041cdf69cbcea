"""The one interface every model implements, and what its trace hook reports.

The codec, :mod:`statemix.diagnose` and bench/ use models only through :class:`Model` (built by
:func:`statemix.models.build_model` from a stream's model record).  A model is fed every block of
one stream in order; encoder and decoder run the same code, so a decoder's model is in the same
state as the encoder's after every block.

Trace hook.  ``model.trace(sink)`` makes every later :meth:`Model.encode` and :meth:`Model.learn`
call ``sink(block)`` once with a :class:`TraceBlock`; ``model.trace(None)`` stops.  Every model
reports its predictions as binary events, whatever it codes: cm codes bits; the ssm model codes
tokens, and a token's coded distribution is split exactly into ``ceil(log2 V)`` binary decisions
over the bits of the token id, most significant first (P(bit = 1 | the bits before) = the mass of
the tokens with that prefix and a 1 next, over the mass of the prefix).  The code length is the
same (the chain rule), so one set of diagnostics (code length, calibration, learning curve) fits
every model.  ``model.trace_stages(sink)`` reports more: for every coded symbol, the whole
distribution over the symbol values that each stage of the model gave (a :class:`StageStep` per
model step), for the softmax diagnostics of :mod:`statemix.calibration`.  ``components`` holds the
same probability under one component alone (cm: the mixer before the APMs; ssm: the SSM's own softmax), which is what comparisons and ablations need;
:meth:`Model.ablated` builds a diagnostics-only copy with components switched off.
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass, field
from typing import Callable, Protocol, runtime_checkable

import numpy as np

from .._errors import StatemixError

#: model id (the first byte of a model record) -> the module of statemix.models that implements it
MODEL_MODULES = {1: "cm", 2: "ssm"}


def memory_bound_mib(nbytes: int) -> str:
    """A memory bound of ``nbytes`` bytes in words, in MiB rounded up: "1,387 MiB"."""
    return f"{-(-nbytes >> 20):,} MiB"


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
        """The model in words, e.g. "cm level 2 (10 contexts of 16 MiB, 3 mixers, 2 APMs, ...)"."""
        name = MODEL_MODULES.get(self.model_id)
        if name is None:
            return f"unknown model {self.model_id} ({self.parameters.hex() or 'no parameters'})"
        module = importlib.import_module(f"{__package__}.{name}")
        try:
            config = module.Config.from_bytes(self.parameters)
        except ValueError as exc:
            return f"{name} with an invalid record ({exc})"
        return config.describe()


@dataclass
class TraceBlock:
    """The predictions behind one block, one entry per binary event (units: probabilities in [0, 1]).

    ``p_coded[k]``: the probability the model gave to the outcome of event k (what the coder paid
    ``-log2`` of); ``bits[k]``: that outcome (0 or 1); ``byte_of_event[k]``: the byte of the block
    the event belongs to (a token's events: its last byte); ``size``: the block's length in bytes;
    ``components``: name -> the probability of the same outcome under that component alone.
    """

    p_coded: np.ndarray
    bits: np.ndarray
    byte_of_event: np.ndarray
    size: int
    components: dict[str, np.ndarray] = field(default_factory=dict)

    @property
    def p1(self) -> np.ndarray:
        """P(bit = 1) of every event."""
        return np.where(self.bits == 1, self.p_coded, 1 - self.p_coded)


@dataclass
class StageStep:
    """Every stage's distribution for consecutive symbols of an encoded block (one model step).

    ``symbols[i]``: the coded symbol (a byte value, or a token id); ``byte_ends[i]``: the index in
    the block of its last byte; ``stages``: stage name -> float32 array (len(symbols), V), row i the
    distribution that stage gave over the V symbol values before symbol i, in the data flow's order
    (the last is the one coded, or implied by what was coded).
    """

    symbols: np.ndarray
    byte_ends: np.ndarray
    stages: dict[str, np.ndarray]


Sink = Callable[[TraceBlock], None]


@runtime_checkable
class Model(Protocol):
    """A predictor of one stream, fed every block in order (see the module docstring)."""

    #: the model record this model writes into the stream header
    spec: ModelSpec

    def encode(self, data: bytes, limit: int, *, progress=None, x86: bool = False) -> bytes | None:
        """The code word for ``data``, or None if longer than ``limit`` (the model learns either way).
        ``x86``: the block is x86 code after the branch transform (:mod:`statemix.x86`; its kind
        records it), which a model may model as such."""

    def decode(self, coded: bytes, size: int, *, progress=None, x86: bool = False) -> bytes:
        """The ``size`` bytes coded in ``coded`` (``x86``: as :meth:`encode` was given)."""

    def learn(self, data: bytes, *, progress=None, x86: bool = False) -> None:
        """Update the model as :meth:`encode` would, without coding (a block stored otherwise;
        ``x86``: as :meth:`encode` was given)."""

    def snapshot(self, reuse=None):
        """A copy of the whole state (into the arrays of ``reuse``, an earlier snapshot, if given)."""

    def restore(self, snapshot) -> None:
        """Put a snapshot back: behave bit for bit as if the blocks since had never been seen."""

    def trace(self, sink: Sink | None) -> None:
        """Report every later encoded or learned block to ``sink`` as a :class:`TraceBlock`."""

    def trace_stages(self, sink: Callable[[StageStep], None] | None) -> None:
        """Report every later encoded block's stage distributions to ``sink``, a :class:`StageStep`
        per model step (diagnostics only; it may slow the model down many times)."""

    def components(self) -> list[str]:
        """Names of the components :meth:`ablated` can switch off."""

    def ablated(self, components) -> "Model":
        """A fresh model of the same record with ``components`` switched off (diagnostics only: its
        code words are not a valid stream)."""


def bits_msb_first(values: np.ndarray, width: int) -> np.ndarray:
    """The ``width`` bits of each value, most significant first (int8, ``len(values) * width``)."""
    shifts = np.arange(width - 1, -1, -1, dtype=np.int64)
    return ((np.asarray(values, dtype=np.int64)[:, None] >> shifts) & 1).astype(np.int8).ravel()
