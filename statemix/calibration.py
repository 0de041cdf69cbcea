"""Calibration of predicted categorical distributions, measured in one streaming pass.

A model predicts, at every position, a distribution ``p`` over ``V`` classes (``V = 256`` byte
values in statemix); ``y`` is the class that occurred.  :class:`StageStats` takes the rows a chunk
at a time (:meth:`StageStats.add`) and :meth:`StageStats.result` returns a
:class:`StageCalibration`.  Each figure also has a pure function over whole arrays (what the
streaming figures are tested against).  Units: bits are base-2 logarithms; probabilities, accuracies
and calibration errors are fractions in [0, 1]; means are over the ``n`` positions.

Input.  Each row is divided by its sum in float64 (a float32 row sums to 1 only up to rounding);
the logarithm of a probability is taken of ``max(p, 1e-30)`` (a float32 probability may underflow to
0), and only there: every other use of ``p`` sees it as given.

Figures (``[.]`` is 1 when the condition holds, else 0):

- ``nll_bits`` = mean of ``-log2 p_y``: the cross-entropy, the code length of an exact coder, in bits
  per symbol.  :attr:`StageStats.costs` keeps it per position, in order, for learning curves.
- ``entropy_bits`` = mean of ``-sum_k p_k log2 p_k``, the model's own expected code length.  Below
  ``nll_bits`` means over-confident, above it under-confident.
- ``top1``, ``top5``: fraction of positions whose ``y`` is among the ``k`` most probable classes
  (``k = 1, 5``; every class when ``V <= k``).  Ties are ranked by class index, lowest first, as
  ``np.argmax`` does: the rank of ``y`` is ``#{j: p_j > p_y} + #{j < y: p_j = p_y}``, and ``y`` is
  among the top ``k`` when its rank is below ``k``.
- Top-1 expected calibration error: confidence ``c = max_k p_k``, correct ``= [argmax p = y]``; the
  positions are put in bins and ``ECE = sum_b (n_b / n) |accuracy_b - mean c_b|``, which equals
  ``sum_b |sum of correct in b - sum of c in b| / n``.  Empty bins count nothing.

  - ``ece``: equal-width bins, ``c`` goes to bin ``min(floor(c * bins), bins - 1)``;
  - ``ece_equal_mass``: the positions stably sorted by ``c`` and split by ``np.array_split`` into
    ``bins`` pieces of (nearly) equal count.

  ``reliability`` and ``reliability_equal_mass`` list, per non-empty bin in increasing confidence,
  ``(mean confidence, accuracy, count)``.
- ``classwise_ece``: for every class ``k``, the ``n`` values ``p_k`` in equal-width bins as above;
  ``freq_bk`` = fraction of bin ``b``'s positions whose ``y`` is ``k``, ``meanp_bk`` = their mean
  ``p_k``; ``CE_k = sum_b (n_bk / n) |freq_bk - meanp_bk|``, and ``classwise_ece`` is the mean of
  ``CE_k`` over all ``V`` classes.
- ``brier`` = mean of ``sum_k (p_k - [k = y])^2``, in [0, 2].
- Hindsight temperature: ``q_T = softmax(ln p / T)`` (``T > 1`` flattens, ``T < 1`` sharpens);
  ``best_temperature`` minimises the total ``sum -log2 q_T(y)`` over everything added, and
  ``temperature_gain_bits`` = that total at ``T = 1`` minus its minimum (bits over all positions,
  >= 0).  With ``beta = 1 / T`` the total in nats is ``L(beta) = sum [ln sum_k p_k^beta - beta ln p_y]``,
  convex in ``beta``, with ``L'(beta) = sum [E_beta(ln p) - ln p_y]``, ``E_beta`` the mean under the
  weights ``p_k^beta / sum_j p_j^beta``.  Both are summed exactly on the grid ``beta_j = j / 8``,
  ``j = 2..24`` (``T`` from 1/3 to 4); the minimum is that of the cubic Hermite interpolant (values and
  derivatives) on the grid interval(s) next to the smallest grid value where ``L'`` changes sign.
  ``temperature_at_bound`` says it lies at ``beta = 2/8`` or ``24/8``, where the true minimum may be
  outside the grid.  Against an exact minimisation the interpolated ``T`` is within about 3e-4
  (relative) for ``T`` up to 2 and 2e-3 near ``T = 3``, where the grid is coarsest in ``T``; the bits
  saved within about 1e-4 (relative).

Streaming.  :meth:`StageStats.add` keeps running sums for entropy, top-5 and Brier; per class and
bin the sums of ``[y = k]`` and of ``p_k`` (two ``(V, bins)`` arrays: the classwise error needs
nothing else); ``L`` and ``L'`` at the 23 grid points; and per position the cost, the confidence and
whether the argmax was right (17 bytes).  :meth:`StageStats.result` takes NLL and top-1 as means of
those, and bins both top-1 errors from them with :func:`ece_equal_width` and :func:`ece_equal_mass`.
The powers ``p^beta_j`` are ``r^j`` with ``r = p^(1/8) = exp(ln p / 8)``, built by repeated
multiplication in float64, in blocks of about 65,536 probabilities so the temporaries stay in cache.
Sums go through ``np.einsum``, not BLAS: OpenBLAS's threads spin after each call and, on a busy
machine, made every step twice as slow.  One :meth:`StageStats.add` of a ``(4096, 256)`` float32
chunk takes about 38 ms on one core (x86-64 Xeon, numpy 2.4), 18 ms of it for the temperature sums;
:meth:`StageStats.result` is O(n log n) for the sort of the equal-mass bins.

An empty :class:`StageStats` gives a result of zeros: ``symbols = 0``, every figure 0.0,
``best_temperature = 1.0``, no reliability bins.

:func:`byte_distribution` turns a binary model's predictions (P(bit = 1) at the nodes of the 8-level
tree over a byte's bits) into the byte distribution these figures take.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from numpy.polynomial import Polynomial

PROBABILITY_FLOOR = 1e-30  # a probability's logarithm is taken of max(p, PROBABILITY_FLOOR)
_GRID_STEPS = 8  # beta_j = j / _GRID_STEPS
INVERSE_TEMPERATURES = np.arange(2, 25) / _GRID_STEPS  # the grid of beta = 1 / T, T from 1/3 to 4
_BETA_ONE = int(np.flatnonzero(INVERSE_TEMPERATURES == 1.0)[0])  # grid index of T = 1
_POWER_BLOCK = 1 << 16  # probabilities per block of the temperature sums
_LN2 = np.log(2.0)


@dataclass
class StageCalibration:
    """Calibration figures of every row added to a :class:`StageStats` (see the module docstring)."""

    symbols: int  # positions measured
    classes: int  # V
    nll_bits: float  # mean -log2 p[y] (cross-entropy, bits per symbol)
    entropy_bits: float  # mean predicted entropy -sum_k p_k log2 p_k (bits per symbol)
    top1: float  # fraction with argmax p == y (ties: lowest index)
    top5: float  # fraction with y among the min(5, V) largest p
    ece: float  # top-1 ECE, equal-width confidence bins
    ece_equal_mass: float  # top-1 ECE, equal-count bins over sorted confidence
    classwise_ece: float  # mean over classes of the per-class ECE, equal-width bins on p_k
    brier: float  # mean of sum_k (p_k - [k == y])^2
    bins: int
    best_temperature: float  # T minimising sum -log2 softmax(ln p / T)[y] in hindsight
    temperature_gain_bits: float  # total bits saved by best_temperature against T = 1 (>= 0)
    temperature_at_bound: bool  # the minimum lies at an edge of the searched range of T
    reliability: list[tuple[float, float, int]]  # equal-width bins: (mean confidence, accuracy, count)
    reliability_equal_mass: list[tuple[float, float, int]]  # the same for the equal-mass bins


def _distributions(probs) -> np.ndarray:
    """``probs`` as a 2-D float64 array whose rows are divided by their sums."""
    p = np.asarray(probs, dtype=np.float64)
    if p.ndim != 2:
        raise ValueError(f"probs must be a 2-D array (rows x classes), not {p.ndim}-D")
    sums = p.sum(axis=1, keepdims=True)
    if not np.all(np.isfinite(sums) & (sums > 0)):
        raise ValueError("every row of probs must have a positive, finite sum")
    return p / sums


def _prepare(probs, symbols) -> tuple[np.ndarray, np.ndarray]:
    """Return (normalised rows, true classes as intp), checking that they match."""
    p = _distributions(probs)
    y = np.asarray(symbols)
    if y.shape != (len(p),) or (y.size and not np.issubdtype(y.dtype, np.integer)):
        raise ValueError(f"symbols must be {len(p)} integers, one per row of probs")
    y = y.astype(np.intp)
    if y.size and (y.min() < 0 or y.max() >= p.shape[1]):
        raise ValueError(f"symbols must lie in [0, {p.shape[1]})")
    return p, y


def _log(p: np.ndarray) -> np.ndarray:
    """Natural logarithm of ``max(p, PROBABILITY_FLOOR)``."""
    return np.log(np.maximum(p, PROBABILITY_FLOOR))


def _true(values: np.ndarray, y: np.ndarray) -> np.ndarray:
    """Each row's entry at its true class."""
    return values[np.arange(len(values)), y]


def _mean(total: float, count: int) -> float:
    """``total / count``, 0.0 when nothing was counted."""
    return float(total / count) if count else 0.0


def _costs(p: np.ndarray, y: np.ndarray) -> np.ndarray:
    """-log2 p_y per row."""
    return -_log(_true(p, y)) / _LN2


def _entropy_total(p: np.ndarray, log_p: np.ndarray) -> float:
    """Sum over rows of -sum_k p_k log2 p_k."""
    return float(-np.einsum("ij,ij->", p, log_p) / _LN2)


def _true_class_rank(p: np.ndarray, y: np.ndarray) -> np.ndarray:
    """Per row, how many classes rank above the true one (greater p, or equal p and lower index)."""
    p_true = _true(p, y)[:, None]
    lower_index = np.arange(p.shape[1]) < y[:, None]
    return np.count_nonzero(p > p_true, axis=1) + np.count_nonzero((p == p_true) & lower_index, axis=1)


def _brier_total(p: np.ndarray, y: np.ndarray) -> float:
    """Sum over rows of sum_k (p_k - [k = y])^2 = sum_k p_k^2 - 2 p_y + 1."""
    return float(np.einsum("ij,ij->", p, p) - 2 * _true(p, y).sum() + len(p))


def _equal_width_bin(values: np.ndarray, bins: int) -> np.ndarray:
    """Bin ``min(floor(x * bins), bins - 1)`` of each value ``x`` in [0, 1]."""
    return np.minimum((values * bins).astype(np.intp), bins - 1)  # truncation is floor for x >= 0


def _ece_from_bin_sums(counts, confidence_sums, correct_sums) -> tuple[float, list]:
    """(ECE, reliability) from per-bin counts and sums of confidence and of correctness."""
    total = int(np.sum(counts))
    ece = _mean(np.abs(np.asarray(correct_sums) - np.asarray(confidence_sums)).sum(), total)
    reliability = [(float(conf / count), float(hits / count), int(count))
                   for count, conf, hits in zip(counts, confidence_sums, correct_sums) if count]
    return ece, reliability


def ece_equal_width(confidence, correct, bins: int) -> tuple[float, list]:
    """Top-1 (ECE, reliability) with confidence ``c`` in bin ``min(floor(c * bins), bins - 1)``.

    ``confidence``: per position the largest probability; ``correct``: whether its class was the
    true one.  Reliability: ``(mean confidence, accuracy, count)`` per non-empty bin.
    """
    confidence = np.asarray(confidence, dtype=np.float64)
    correct = np.asarray(correct, dtype=np.float64)
    index = _equal_width_bin(confidence, bins)
    return _ece_from_bin_sums(np.bincount(index, minlength=bins),
                              np.bincount(index, confidence, minlength=bins),
                              np.bincount(index, correct, minlength=bins))


def ece_equal_mass(confidence, correct, bins: int) -> tuple[float, list]:
    """Top-1 (ECE, reliability) over ``bins`` bins of (nearly) equal count.

    The positions are stably sorted by confidence and split by ``np.array_split``; empty pieces (fewer
    positions than bins) are skipped.
    """
    confidence = np.asarray(confidence, dtype=np.float64)
    correct = np.asarray(correct, dtype=np.float64)
    order = np.argsort(confidence, kind="stable")
    pieces = [piece for piece in np.array_split(order, bins) if piece.size]
    return _ece_from_bin_sums([piece.size for piece in pieces],
                              [confidence[piece].sum() for piece in pieces],
                              [correct[piece].sum() for piece in pieces])


class _ClasswiseBins:
    """Per class ``k`` and equal-width bin ``b`` of ``p_k``: the sums of ``[y = k]`` and of ``p_k``."""

    def __init__(self, classes: int, bins: int):
        self.classes, self.bins, self.rows = classes, bins, 0
        self.hits = np.zeros((classes, bins))
        self.mass = np.zeros((classes, bins))

    def add(self, p: np.ndarray, y: np.ndarray) -> None:
        """Add normalised rows ``p`` with true classes ``y``."""
        index = _equal_width_bin(p, self.bins)
        cell = index + np.arange(self.classes) * self.bins  # flat index into (classes, bins)
        size = self.classes * self.bins
        self.mass += np.bincount(cell.ravel(), p.ravel(), minlength=size).reshape(self.mass.shape)
        self.hits += np.bincount(_true(cell, y), minlength=size).reshape(self.hits.shape)
        self.rows += len(p)

    def ece(self) -> float:
        """Mean over classes of ``sum_b (n_bk / n) |freq_bk - meanp_bk| = sum_b |hits_bk - mass_bk| / n``."""
        return _mean(np.abs(self.hits - self.mass).sum(), self.rows * self.classes)


class _TemperatureGrid:
    """``L(beta)`` and ``L'(beta)`` (nats) summed over rows at every grid point ``INVERSE_TEMPERATURES``."""

    def __init__(self):
        self.rows = 0
        self.loss = np.zeros(len(INVERSE_TEMPERATURES))
        self.slope = np.zeros(len(INVERSE_TEMPERATURES))

    def add(self, log_p: np.ndarray, y: np.ndarray) -> None:
        """Add rows given by ``ln max(p, 1e-30)`` with true classes ``y``, in cache-sized blocks."""
        step = max(1, _POWER_BLOCK // max(1, log_p.shape[1]))
        for start in range(0, len(log_p), step):
            self._add_block(log_p[start:start + step], y[start:start + step])
        self.rows += len(log_p)

    def _add_block(self, log_p: np.ndarray, y: np.ndarray) -> None:
        """Sum ``ln Z_j - beta_j ln p_y`` and ``E_j(ln p) - ln p_y``, with ``Z_j = sum_k r_k^j``."""
        root = np.exp(log_p / _GRID_STEPS)  # r = p^(1/8)
        power = root * root  # r^j, from j = 2
        partition = np.empty((len(INVERSE_TEMPERATURES), len(log_p)))  # Z_j per row
        weighted_log = np.empty_like(partition)  # sum_k r_k^j ln p_k per row
        for j in range(len(INVERSE_TEMPERATURES)):
            np.einsum("ij->i", power, out=partition[j])
            np.einsum("ij,ij->i", power, log_p, out=weighted_log[j])
            power *= root
        log_p_true = _true(log_p, y).sum()
        self.loss += np.log(partition).sum(axis=1) - INVERSE_TEMPERATURES * log_p_true
        self.slope += (weighted_log / partition).sum(axis=1) - log_p_true

    def best(self) -> tuple[float, float, bool]:
        """(T, bits saved against T = 1, whether the minimum lies at an edge of the grid)."""
        if not self.rows:
            return 1.0, 0.0, False
        beta, loss = _interpolated_minimum(self.loss, self.slope)
        saved = (self.loss[_BETA_ONE] - loss) / _LN2
        at_bound = beta in (INVERSE_TEMPERATURES[0], INVERSE_TEMPERATURES[-1])
        return float(1.0 / beta), float(max(saved, 0.0)), bool(at_bound)


def _interpolated_minimum(loss: np.ndarray, slope: np.ndarray) -> tuple[float, float]:
    """(beta, L) at the minimum over the grid and the Hermite cubics of the neighbouring intervals
    where the slope changes sign."""
    best = int(np.argmin(loss))
    candidates = [(INVERSE_TEMPERATURES[best], loss[best])]
    for left in (best - 1, best):
        right = left + 1
        if left >= 0 and right < len(loss) and slope[left] <= 0 <= slope[right]:
            candidates.append(_hermite_minimum(INVERSE_TEMPERATURES[left], INVERSE_TEMPERATURES[right],
                                               loss[left], loss[right], slope[left], slope[right]))
    return min(candidates, key=lambda candidate: candidate[1])


def _hermite_minimum(a: float, b: float, loss_a: float, loss_b: float,
                     slope_a: float, slope_b: float) -> tuple[float, float]:
    """(x, H(x)) at the minimum over [a, b] of the cubic H with these values and slopes at a and b."""
    h = b - a
    cubic = Polynomial([loss_a, h * slope_a,  # in t = (x - a) / h
                        3 * (loss_b - loss_a) - h * (2 * slope_a + slope_b),
                        2 * (loss_a - loss_b) + h * (slope_a + slope_b)])
    roots = cubic.deriv().roots()
    interior = [t.real for t in roots if np.isreal(t) and 0 <= t.real <= 1]
    t = min([0.0, 1.0, *interior], key=cubic)
    return a + h * t, float(cubic(t))


def nll_bits(probs, symbols) -> float:
    """Mean of -log2 p_y in bits per symbol (the cross-entropy)."""
    p, y = _prepare(probs, symbols)
    return _mean(_costs(p, y).sum(), len(p))


def entropy_bits(probs) -> float:
    """Mean predicted entropy -sum_k p_k log2 p_k in bits per symbol."""
    p = _distributions(probs)
    return _mean(_entropy_total(p, _log(p)), len(p))


def top_k_accuracy(probs, symbols, k: int) -> float:
    """Fraction of rows whose true class is among the ``k`` most probable (ties: lower index first)."""
    p, y = _prepare(probs, symbols)
    return _mean(np.count_nonzero(_true_class_rank(p, y) < k), len(p))


def classwise_ece(probs, symbols, bins: int) -> float:
    """Mean over the classes of each class's ECE over equal-width bins of its probability."""
    p, y = _prepare(probs, symbols)
    accumulator = _ClasswiseBins(p.shape[1], bins)
    accumulator.add(p, y)
    return accumulator.ece()


def brier(probs, symbols) -> float:
    """Mean over rows of sum_k (p_k - [k = y])^2."""
    p, y = _prepare(probs, symbols)
    return _mean(_brier_total(p, y), len(p))


def hindsight_temperature(probs, symbols) -> tuple[float, float, bool]:
    """(T, bits saved, at bound): the T in [1/3, 4] minimising sum -log2 softmax(ln p / T)[y], the
    total bits it saves against T = 1 (>= 0), and whether it lies at an edge of that range."""
    p, y = _prepare(probs, symbols)
    grid = _TemperatureGrid()
    grid.add(_log(p), y)
    return grid.best()


def byte_distribution(p1_nodes) -> np.ndarray:
    """(n, 256) float64 byte distributions from a binary tree's P(bit = 1), shape (n, 256).

    Column ``c0`` (1..255) of ``p1_nodes`` is P(next bit = 1 | the bits so far), ``c0`` being 1
    followed by those bits, most significant first (1 before the first bit; ``0b1b0b1`` after ``b0
    b1``); column 0 is unused.  Entry ``b`` of the result is the product over the 8 bits of ``b`` of
    P(that bit | its prefix).  Built level by level: the distribution over ``i``-bit prefixes ``m``
    splits into ``2m`` and ``2m + 1`` with the node ``2^i + m``.
    """
    p1 = np.asarray(p1_nodes, dtype=np.float64)
    if p1.ndim != 2 or p1.shape[1] != 256:
        raise ValueError(f"p1_nodes must have shape (n, 256), not {p1.shape}")
    prefixes = np.ones((len(p1), 1))
    for depth in range(8):
        one = p1[:, 1 << depth:2 << depth]
        prefixes = np.stack([prefixes * (1 - one), prefixes * one], axis=2).reshape(len(p1), -1)
    return prefixes


class StageStats:
    """Streaming calibration figures of distributions over ``classes`` classes (module docstring).

    Memory: 17 bytes per position added plus two ``(classes, bins)`` arrays.
    """

    def __init__(self, classes: int, bins: int = 15):
        if classes < 1 or bins < 1:
            raise ValueError("classes and bins must be at least 1")
        self.classes, self.bins = classes, bins
        self._entropy_bits = self._brier = 0.0
        self._top5_hits = 0
        self._costs: list[np.ndarray] = []
        self._confidence: list[np.ndarray] = []
        self._correct: list[np.ndarray] = []
        self._classwise = _ClasswiseBins(classes, bins)
        self._temperature = _TemperatureGrid()

    def add(self, probs, symbols) -> None:
        """probs: (n, V) array (float32 or float64) of distributions over V classes, rows summing to 1 up
        to float32 rounding (each row is normalised in float64; p below 1e-30 counts as 1e-30 in
        logarithms); symbols: (n,) ints, the true class of each row."""
        p, y = _prepare(probs, symbols)
        if p.shape[1] != self.classes:
            raise ValueError(f"probs has {p.shape[1]} classes, this StageStats {self.classes}")
        log_p = _log(p)
        rank = _true_class_rank(p, y)
        self._costs.append(_costs(p, y))
        self._confidence.append(p.max(axis=1))
        self._correct.append(rank == 0)
        self._entropy_bits += _entropy_total(p, log_p)
        self._top5_hits += np.count_nonzero(rank < 5)
        self._brier += _brier_total(p, y)
        self._classwise.add(p, y)
        self._temperature.add(log_p, y)

    @property
    def costs(self) -> np.ndarray:
        """-log2 p[y] (float64) per symbol added, in order (for learning curves)."""
        return np.concatenate(self._costs) if self._costs else np.zeros(0)

    def result(self) -> StageCalibration:
        """Every figure over the rows added so far (all zeros, T = 1, when none were)."""
        costs = self.costs
        n = len(costs)
        confidence = np.concatenate(self._confidence) if n else np.zeros(0)
        correct = np.concatenate(self._correct) if n else np.zeros(0, dtype=bool)
        ece, reliability = ece_equal_width(confidence, correct, self.bins)
        ece_mass, reliability_mass = ece_equal_mass(confidence, correct, self.bins)
        temperature, gain, at_bound = self._temperature.best()
        return StageCalibration(
            symbols=n, classes=self.classes,
            nll_bits=_mean(costs.sum(), n), entropy_bits=_mean(self._entropy_bits, n),
            top1=_mean(np.count_nonzero(correct), n), top5=_mean(self._top5_hits, n),
            ece=ece, ece_equal_mass=ece_mass, classwise_ece=self._classwise.ece(),
            brier=_mean(self._brier, n), bins=self.bins,
            best_temperature=temperature, temperature_gain_bits=gain, temperature_at_bound=at_bound,
            reliability=reliability, reliability_equal_mass=reliability_mass)
