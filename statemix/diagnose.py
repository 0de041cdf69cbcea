"""Diagnostics: where the bits go, and how well calibrated the model's predictions are.

:func:`diagnose` compresses the input as :func:`statemix.compress` does (same model record, same
blocks, the same choice per block of the model's code word, zstandard or storing, through
``codec.BlockCoder``; a block the model does not code leaves it as it was, and a block it skips
counts no events, so ``ideal_bits`` covers the blocks the model saw), records through
the model's trace hook (:mod:`statemix.models.protocol`) the probability the model gave to every
coded event, and returns a :class:`Report` (data, no printing).  It uses models only through that
protocol, so every model family works.  An event is one binary prediction: a bit for cm, one of the
``ceil(log2 V)`` decisions a token is split into for ssm (the same code length); all figures are per
event unless the name says per byte.  Units: bits for code lengths, probabilities in [0, 1].

- Code length: ``ideal_bits`` = sum of -log2 p(coded event) (what an exact coder would pay);
  ``coded_bits`` = bits of the modelled blocks' code words, and coder overhead = coded bits / ideal
  bits of those blocks - 1; ``header_bytes`` = the stream's bytes outside block payloads (header,
  block headers, trailer).
- Calibration: negative log-likelihood (= cross-entropy) and mean predicted entropy (entropy below
  cross-entropy means over-confidence); top-1 expected calibration error with equal-width confidence
  bins; classwise ECE (per class, bins over that class's probability, averaged over classes); Brier
  score (sum over classes of squared error); and the single temperature ``T`` (logits divided by T)
  that would have minimised the code length in hindsight, with the bits it would save.
- Learning curve: bits per byte of the model's ideal code over consecutive windows of the input.
  The bytes of blocks the model never coded (stored or zstandard: incompressible regions) are
  counted at their cost, 8 times their payload's bytes spread over their data (8 bits per byte for
  a stored block), and reported as ``unmodelled_bytes``; per-byte figures of events divide by the
  bytes the model coded (``input_bytes - unmodelled_bytes``).
- Ablation (opt-in, one extra pass each): the ideal code length with each model component switched
  off (``Model.ablated``), minus the baseline: the bits that component saves.
- Stages (``stages=True``, the default): every distribution over symbol values (bytes, or the ssm
  model's tokens) that the model forms on the way to the coder, measured over the same positions
  (the symbols of the blocks the model encoded) through ``Model.trace_stages``
  (:class:`statemix.models.StageStep`), with the softmax figures of :mod:`statemix.calibration`.
  The ssm model: the SSM's own softmax, the softmax mixed with the count models (the n-gram logit
  biases and learned mixing), the quantized distribution it codes.  cm: its byte-distribution
  source's stages (levels 2 and 3: the count models' mixed and quantized distributions, and the
  SSM's softmax at level 3), then the byte distributions implied by the mixer's and by the coded
  binary predictions at every node of the byte's bit tree, with the model's learning frozen at
  the byte's start (computed for diagnostics only: at level 2 a diagnosis takes about 6 times as
  long with it, 21.6 s against 3.9 s for 100 KB of enwik8; on the coded path the real model
  learns between bits, so its code length differs slightly from the coded one, and the report
  gives both).

JSON keys (:meth:`Report.to_dict`): ``input_bytes``, ``compressed_bytes``, ``header_bytes``,
``ideal_bits``, ``modelled_ideal_bits``, ``coded_bits``, ``model``, ``unmodelled_bytes``, ``bits_per_byte``,
``coder_overhead``, ``calibration`` (binary events: ``events``, ``nll_bits``, ``entropy_bits``,
``ece``, ``classwise_ece``, ``brier``, ``bins``, ``best_temperature``, ``temperature_gain_bits``,
``reliability`` as [mean confidence, accuracy, count] per bin), ``learning_curve`` ([start byte,
end byte, bits per byte]), ``ablation`` (component -> bits it saves), and ``stages``: a list in
data-flow order of {``name``, ``bytes`` (input bytes its symbols cover), ``bits_per_byte`` (its
code length over them), ``calibration`` (:class:`statemix.calibration.StageCalibration`:
``symbols``, ``classes``, ``nll_bits``, ``entropy_bits``, ``top1``, ``top5``, ``ece``,
``ece_equal_mass``, ``classwise_ece``, ``brier``, ``bins``, ``best_temperature``,
``temperature_gain_bits``, ``temperature_at_bound``, ``reliability``,
``reliability_equal_mass``), ``learning_curve`` (as above)}.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field

import numpy as np

from . import calibration as measures
from . import container
from .calibration import StageCalibration, StageStats
from .codec import BlockCoder
from .models import TraceBlock, build_model, spec_for_level


@dataclass
class Calibration:
    events: int
    nll_bits: float  # mean -log2 p(true) per event (cross-entropy)
    entropy_bits: float  # mean entropy of the predictions per event
    ece: float  # top-1 expected calibration error
    classwise_ece: float
    brier: float
    bins: int
    best_temperature: float
    temperature_gain_bits: float  # total bits saved by best_temperature over the whole input
    reliability: list[tuple[float, float, int]]  # per bin: (mean confidence, accuracy, count)


@dataclass
class StageReport:
    """One stage's distributions: their code length and calibration, and its learning curve."""

    name: str
    bytes: int  # input bytes covered by its symbols
    bits_per_byte: float  # its code length (sum of -log2 p(symbol)) over those bytes
    calibration: StageCalibration
    learning_curve: list[tuple[int, int, float]]  # (start byte, end byte, bits per byte)


@dataclass
class Report:
    input_bytes: int
    compressed_bytes: int
    header_bytes: int
    ideal_bits: float  # whole input
    modelled_ideal_bits: float  # the modelled blocks only
    coded_bits: int  # the modelled blocks' code words
    model: str
    calibration: Calibration
    learning_curve: list[tuple[int, int, float]]  # (start byte, end byte, bits per byte)
    unmodelled_bytes: int = 0  # bytes of blocks the model never coded (counted at their cost in the curve)
    ablation: dict[str, float] = field(default_factory=dict)  # component -> bits it saves
    stages: list[StageReport] = field(default_factory=list)  # in data-flow order, the coded one last

    @property
    def bits_per_byte(self) -> float:
        return 8 * self.compressed_bytes / self.input_bytes if self.input_bytes else 0.0

    @property
    def coder_overhead(self) -> float:
        return self.coded_bits / self.modelled_ideal_bits - 1 if self.modelled_ideal_bits else 0.0

    def to_dict(self) -> dict:
        out = asdict(self)
        out["bits_per_byte"] = self.bits_per_byte
        out["coder_overhead"] = self.coder_overhead
        return out


class _StageCollector:
    """The sink of ``Model.trace_stages``: streams every stage into a StageStats, in arrival order."""

    def __init__(self, bins: int):
        self.bins = bins
        self.stats: dict[str, StageStats] = {}
        self.positions: list[np.ndarray] = []  # per step: the input byte each symbol ends at
        self.block_start = 0  # the input byte where the block being coded starts
        self.covered = 0  # input bytes of the blocks that reported stages
        self._reported = False

    def __call__(self, step) -> None:
        for name, probs in step.stages.items():
            if name not in self.stats:
                self.stats[name] = StageStats(probs.shape[1], self.bins)
            self.stats[name].add(probs, step.symbols)
        self.positions.append(step.byte_ends + self.block_start)
        self._reported = True

    def end_block(self, size: int) -> None:
        if self._reported:
            self.covered += size
        self._reported = False
        self.block_start += size

    def reports(self, input_bytes: int, curve_points: int) -> list[StageReport]:
        positions = np.concatenate(self.positions) if self.positions else np.zeros(0, np.int64)
        out = []
        for name, stats in self.stats.items():
            per_byte = np.bincount(positions, stats.costs, minlength=input_bytes)
            bits = float(stats.costs.sum())
            out.append(StageReport(name, self.covered, bits / self.covered if self.covered else 0.0, stats.result(),
                                   _curve(per_byte, curve_points)))
        return out


def _curve(per_byte: np.ndarray, points: int) -> list[tuple[int, int, float]]:
    """Bits per byte over ``points`` consecutive windows of a per-byte cost."""
    edges = np.unique(np.linspace(0, len(per_byte), max(points, 1) + 1).astype(int))
    return [(int(a), int(b), float(per_byte[a:b].sum() / (b - a))) for a, b in zip(edges[:-1], edges[1:])]


def _traced_compress(data: bytes, level: int | None, model: str | None = None, ablate=(), stages=None):
    """Compress like statemix.compress; return (stream, its block headers, TraceBlock per block).

    With ``ablate``, the model has those components switched off (the stream is then not valid);
    with ``stages`` (a :class:`_StageCollector`), it also receives the model's stage distributions.
    """
    spec = spec_for_level(level, len(data), model)
    predictor = build_model(spec)
    if ablate:
        predictor = predictor.ablated(ablate)
    traces: list[TraceBlock] = []
    predictor.trace(traces.append)
    if stages is not None:
        predictor.trace_stages(stages)
    coder = BlockCoder(predictor)
    out = [container.write_header(spec)]
    blocks, crc, start = [], 0, 0
    while start < len(data):
        raw = data[start:start + container.block_limit(len(blocks))]
        count = len(traces)
        block = coder.block(raw, offset=start)
        start += len(raw)
        crc = container.crc32(raw, crc)
        if stages is not None:
            stages.end_block(len(raw))
        if len(traces) == count:  # a block the model never saw (or reported nothing for)
            traces.append(TraceBlock(np.zeros(0), np.zeros(0, np.int8), np.zeros(0, np.int64), len(raw)))
        blocks.append(container.read_block_header(block, 0))
        out.append(block)
    out.append(container.write_trailer(len(data), crc))
    return b"".join(out), blocks, traces


def _cost(p_coded: np.ndarray) -> np.ndarray:
    return -np.log2(np.maximum(p_coded, 1e-12))


def hindsight_temperature(p1: np.ndarray, bits: np.ndarray) -> tuple[float, float]:
    """Return (T, bits saved): the temperature minimising sum -log2 p(bit) of sigmoid(logit(p1) / T)."""
    logit = np.log(p1) - np.log1p(-p1)
    sign = np.where(bits == 1, 1.0, -1.0)
    margin = sign * logit  # p(true) = sigmoid(margin * beta), beta = 1 / T

    def loss(beta: float) -> float:
        return float(np.logaddexp(0.0, -margin * beta).sum())

    beta = 1.0
    for _ in range(50):  # Newton on a convex function of beta
        s = 1.0 / (1.0 + np.exp(margin * beta))  # 1 - p(true)
        gradient = float(-(margin * s).sum())
        curvature = float((margin * margin * s * (1 - s)).sum())
        if curvature <= 0:
            break
        step = gradient / curvature
        beta = max(beta - step, 1e-3)
        if abs(step) < 1e-10:
            break
    saved = (loss(1.0) - loss(beta)) / np.log(2.0)
    return 1.0 / beta, max(saved, 0.0)


def calibration(p1: np.ndarray, bits: np.ndarray, bins: int = 15) -> Calibration:
    """Calibration figures of binary predictions ``p1`` = P(bit = 1) against the true ``bits``: the
    two-class case of :mod:`statemix.calibration` (the temperature: :func:`hindsight_temperature`)."""
    p1 = np.clip(p1, 1e-12, 1 - 1e-12)
    probs = np.stack([1 - p1, p1], axis=1)
    bits = np.asarray(bits, dtype=np.int64)
    confidence = np.maximum(p1, 1 - p1)
    correct = (p1 >= 0.5) == (bits == 1)  # a tie predicts 1
    ece, reliability = measures.ece_equal_width(confidence, correct, bins)
    temperature, gain = hindsight_temperature(p1, bits)
    return Calibration(len(p1), measures.nll_bits(probs, bits), measures.entropy_bits(probs), ece,
                       measures.classwise_ece(probs, bits, bins), measures.brier(probs, bits), bins, temperature,
                       gain, reliability)


def diagnose(data, /, *, level: int | None = None, model: str | None = None, bins: int = 15,
             curve_points: int = 50, ablation: bool = False, stages: bool = True) -> Report:
    """Compress ``data`` as statemix.compress would (``model``: "cm" or "ssm") and report where the
    bits go (``stages``: also every stage's distributions; see the module docstring)."""
    data = bytes(memoryview(data).cast("B"))
    collector = _StageCollector(bins) if stages else None
    stream, blocks, traces = _traced_compress(data, level, model, stages=collector)
    p_coded = np.concatenate([t.p_coded for t in traces]) if traces else np.zeros(0)
    bits = np.concatenate([t.bits for t in traces]) if traces else np.zeros(0, np.int8)
    p1 = np.where(bits == 1, p_coded, 1 - p_coded)
    cost = _cost(p_coded)
    modelled = [(b, t) for b, t in zip(blocks, traces) if b.kind in container.MODELLED_KINDS]
    per_byte = np.zeros(len(data))
    start = unmodelled = 0
    for b, t in zip(blocks, traces):
        if t.p_coded.shape[0] == 0 and t.size:  # a block the model never coded: at its cost
            per_byte[start:start + t.size] = 8 * b.payload_length / t.size
            unmodelled += t.size
        else:
            per_byte[start:start + t.size] = np.bincount(t.byte_of_event, _cost(t.p_coded), minlength=t.size)
        start += t.size
    curve = _curve(per_byte, curve_points)
    spec = container.read_header(stream)[0]
    report = Report(
        input_bytes=len(data),
        compressed_bytes=len(stream),
        header_bytes=len(stream) - sum(b.payload_length for b in blocks),
        ideal_bits=float(cost.sum()),
        modelled_ideal_bits=float(sum(_cost(t.p_coded).sum() for _, t in modelled)),
        coded_bits=8 * sum(b.payload_length for b, _ in modelled),
        model=spec.describe(),
        calibration=calibration(p1, bits, bins),
        learning_curve=curve,
        unmodelled_bytes=unmodelled,
        stages=collector.reports(len(data), curve_points) if collector is not None else [],
    )
    if ablation:
        for name in build_model(spec).components():
            _, _, off = _traced_compress(data, level, model, ablate=(name,))
            report.ablation[name] = float(sum(_cost(t.p_coded).sum() for t in off)) - report.ideal_bits
    return report
