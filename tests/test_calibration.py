"""Calibration metrics: hand-computed values, streaming against all rows at once, hindsight
temperature against a direct search, the byte distribution of a bit tree, and edge cases."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest

from statemix.calibration import (
    StageStats,
    brier,
    byte_distribution,
    classwise_ece,
    ece_equal_mass,
    ece_equal_width,
    entropy_bits,
    hindsight_temperature,
    nll_bits,
    top_k_accuracy,
)

# Five rows over three classes.  Row 2 sums to 1 exactly and puts 0.5 and 0.25 on bin edges (bins = 4,
# edges 0.25 0.5 0.75); no other probability is within 0.05 of an edge, so float rounding of the
# normalisation cannot move a value across one.  Row 4 ties classes 0 and 1: the argmax is class 0.
HAND_PROBS = np.array([
    [0.70, 0.20, 0.10],
    [0.10, 0.60, 0.30],
    [0.25, 0.25, 0.50],
    [0.05, 0.90, 0.05],
    [0.40, 0.40, 0.20],
])
HAND_SYMBOLS = np.array([0, 2, 1, 1, 1])
HAND_P_TRUE = [0.70, 0.30, 0.25, 0.90, 0.40]
# top-1: confidence 0.7 0.6 0.5 0.9 0.4; correct 1 0 0 1 0 (row 4: argmax 0, y = 1)
HAND_CONFIDENCE = [0.7, 0.6, 0.5, 0.9, 0.4]
HAND_CORRECT = [1, 0, 0, 1, 0]


def test_hand_nll_entropy_and_brier():
    assert nll_bits(HAND_PROBS, HAND_SYMBOLS) == pytest.approx(-sum(map(math.log2, HAND_P_TRUE)) / 5)
    rows_entropy = [-sum(p * math.log2(p) for p in row) for row in HAND_PROBS.tolist()]
    assert entropy_bits(HAND_PROBS) == pytest.approx(sum(rows_entropy) / 5)
    # squared errors: .09+.04+.01 | .01+.36+.49 | .0625+.5625+.25 | .0025+.01+.0025 | .16+.36+.04
    assert brier(HAND_PROBS, HAND_SYMBOLS) == pytest.approx((0.14 + 0.86 + 0.875 + 0.015 + 0.56) / 5)


def test_hand_top_k_with_a_tie():
    assert top_k_accuracy(HAND_PROBS, HAND_SYMBOLS, 1) == pytest.approx(2 / 5)  # rows 0, 3
    # rank of y: 0, 1, 2 (row 2: 0.5 above, and class 0 ties at 0.25 with a lower index), 0, 1
    assert top_k_accuracy(HAND_PROBS, HAND_SYMBOLS, 2) == pytest.approx(4 / 5)
    assert top_k_accuracy(HAND_PROBS, HAND_SYMBOLS, 3) == 1.0
    assert top_k_accuracy(HAND_PROBS, HAND_SYMBOLS, 5) == 1.0  # V = 3 < 5: every class counts


def assert_rows_close(actual, expected, **tolerance):
    """Rows (tuples) equal within ``pytest.approx``'s tolerance: pytest 9.2's approx refuses nested
    sequences."""
    assert len(actual) == len(expected)
    for row, want in zip(actual, expected):
        assert row == pytest.approx(want, **tolerance)


def test_hand_ece_equal_width():
    # bins = 4: 0.4 -> bin 1; 0.7, 0.6, 0.5 -> bin 2 (0.5 * 4 = 2 exactly); 0.9 -> bin 3
    # bin 1: 1/5 * |0 - 0.4| = 0.08; bin 2: 3/5 * |1/3 - 0.6| = 0.16; bin 3: 1/5 * |1 - 0.9| = 0.02
    ece, reliability = ece_equal_width(HAND_CONFIDENCE, HAND_CORRECT, 4)
    assert ece == pytest.approx(0.26)
    assert_rows_close([(c, a) for c, a, _ in reliability], [(0.4, 0.0), (0.6, 1 / 3), (0.9, 1.0)])
    assert [count for _, _, count in reliability] == [1, 3, 1]


def test_hand_ece_equal_mass():
    # sorted confidence 0.4 0.5 0.6 | 0.7 0.9 (array_split of 5 into 2: 3 + 2), correct 0 0 0 | 1 1
    # 3/5 * |0 - 0.5| + 2/5 * |1 - 0.8| = 0.3 + 0.08
    ece, reliability = ece_equal_mass(HAND_CONFIDENCE, HAND_CORRECT, 2)
    assert ece == pytest.approx(0.38)
    assert_rows_close([(c, a) for c, a, _ in reliability], [(0.5, 0.0), (0.8, 1.0)])
    assert [count for _, _, count in reliability] == [3, 2]
    # 8 bins for 5 rows: one row per non-empty piece, 3 empty pieces skipped:
    # (|0 - .4| + |0 - .5| + |0 - .6| + |1 - .7| + |1 - .9|) / 5
    ece, reliability = ece_equal_mass(HAND_CONFIDENCE, HAND_CORRECT, 8)
    assert ece == pytest.approx(1.9 / 5)
    assert [count for _, _, count in reliability] == [1] * 5


def test_hand_classwise_ece():
    # bins = 4; per bin |sum of [y = k] - sum of p_k|, then / 5:
    # class 0, p = .7 .1 .25 .05 .4, hit in row 0:
    # bin 0 {.1, .05} .15; bin 1 {.25, .4} .65; bin 2 {.7 hit} .3
    class0 = (0.15 + 0.65 + 0.3) / 5
    # class 1, p = .2 .6 .25 .9 .4, hits in rows 2 3 4: bin 0 {.2} .2; bin 1 {.25 hit, .4 hit} 1.35;
    # bin 2 {.6} .6; bin 3 {.9 hit} .1
    class1 = (0.2 + 1.35 + 0.6 + 0.1) / 5
    # class 2, p = .1 .3 .5 .05 .2, hit in row 1: bin 0 {.1, .05, .2} .35; bin 1 {.3 hit} .7; bin 2 {.5} .5
    class2 = (0.35 + 0.7 + 0.5) / 5
    assert classwise_ece(HAND_PROBS, HAND_SYMBOLS, 4) == pytest.approx((class0 + class1 + class2) / 3)


def test_hand_rows_through_stage_stats():
    stats = StageStats(3, bins=4)
    stats.add(HAND_PROBS[:2].astype(np.float32), HAND_SYMBOLS[:2])
    stats.add(HAND_PROBS[2:], HAND_SYMBOLS[2:])
    result = stats.result()
    assert (result.symbols, result.classes, result.bins) == (5, 3, 4)
    assert result.nll_bits == pytest.approx(-sum(map(math.log2, HAND_P_TRUE)) / 5, rel=1e-6)
    assert result.top1 == pytest.approx(2 / 5)
    assert result.top5 == 1.0
    assert result.ece == pytest.approx(0.26, rel=1e-6)
    assert result.ece_equal_mass == pytest.approx(0.38, rel=1e-6)  # 4 pieces: 2 1 1 1 rows
    assert result.brier == pytest.approx(0.49, rel=1e-6)
    assert result.classwise_ece == pytest.approx(classwise_ece(HAND_PROBS, HAND_SYMBOLS, 4), rel=1e-6)
    assert result.entropy_bits == pytest.approx(entropy_bits(HAND_PROBS), rel=1e-6)
    assert stats.costs == pytest.approx([-math.log2(p) for p in HAND_P_TRUE], rel=1e-6)


def dirichlet_rows(rng: np.random.Generator, n: int, classes: int) -> tuple[np.ndarray, np.ndarray]:
    """Peaked float32 rows (most probabilities tiny) and labels drawn from a blurred copy of them."""
    probs = rng.dirichlet(np.full(classes, 0.05), size=n).astype(np.float32)
    blurred = 0.7 * probs.astype(np.float64) + 0.3 / classes
    blurred /= blurred.sum(axis=1, keepdims=True)
    symbols = (blurred.cumsum(axis=1) < rng.uniform(size=(n, 1))).sum(axis=1)
    return probs, np.minimum(symbols, classes - 1)


def direct_classwise_ece(p: np.ndarray, symbols: np.ndarray, bins: int) -> float:
    n, classes = p.shape
    total = 0.0
    for k in range(classes):
        index = np.minimum(np.floor(p[:, k] * bins), bins - 1)
        for b in range(bins):
            in_bin = index == b
            if in_bin.any():
                freq = np.mean(symbols[in_bin] == k)
                total += in_bin.sum() / n * abs(freq - p[in_bin, k].mean())
    return total / classes


def direct_brier(p: np.ndarray, symbols: np.ndarray) -> float:
    total = 0.0
    for row, y in zip(p, symbols):
        target = np.zeros(len(row))
        target[y] = 1.0
        total += ((row - target) ** 2).sum()
    return total / len(p)


def direct_ece_equal_width(confidence: np.ndarray, correct: np.ndarray, bins: int) -> float:
    index = np.minimum(np.floor(confidence * bins), bins - 1)
    total = 0.0
    for b in range(bins):
        in_bin = index == b
        if in_bin.any():
            total += in_bin.sum() / len(confidence) * abs(correct[in_bin].mean() - confidence[in_bin].mean())
    return total


def test_streaming_equals_all_rows_at_once():
    rng = np.random.default_rng(11)
    probs, symbols = dirichlet_rows(rng, 3000, 256)
    stats = StageStats(256, bins=15)
    edges = [0, 700, 700, 701, 1999, 3000]  # chunks of 700, 0, 1, 1298 and 1001 rows
    for start, end in itertools.pairwise(edges):
        stats.add(probs[start:end], symbols[start:end])
    result = stats.result()

    p = probs.astype(np.float64)
    p /= p.sum(axis=1, keepdims=True)
    confidence = p.max(axis=1)
    correct = p.argmax(axis=1) == symbols
    ece, reliability = ece_equal_width(confidence, correct, 15)
    ece_mass, reliability_mass = ece_equal_mass(confidence, correct, 15)
    temperature, gain, at_bound = hindsight_temperature(probs, symbols)
    assert result.symbols == 3000 and result.classes == 256
    assert result.nll_bits == pytest.approx(nll_bits(probs, symbols), rel=1e-12)
    assert result.entropy_bits == pytest.approx(entropy_bits(probs), rel=1e-12)
    assert result.top1 == top_k_accuracy(probs, symbols, 1) == np.mean(correct)
    assert result.top5 == top_k_accuracy(probs, symbols, 5)
    assert 0 < result.top1 < result.top5 < 1
    assert result.ece == pytest.approx(ece, rel=1e-12)
    assert result.ece == pytest.approx(direct_ece_equal_width(confidence, correct, 15), rel=1e-9)
    assert_rows_close(result.reliability, reliability, rel=1e-12)
    assert result.ece_equal_mass == pytest.approx(ece_mass, rel=1e-12)
    assert_rows_close(result.reliability_equal_mass, reliability_mass, rel=1e-12)
    assert [count for _, _, count in result.reliability_equal_mass] == [200] * 15
    assert result.classwise_ece == pytest.approx(classwise_ece(probs, symbols, 15), rel=1e-12)
    assert result.classwise_ece == pytest.approx(direct_classwise_ece(p, symbols, 15), rel=1e-9)
    assert result.brier == pytest.approx(brier(probs, symbols), rel=1e-12)
    assert result.brier == pytest.approx(direct_brier(p, symbols), rel=1e-9)
    assert result.best_temperature == pytest.approx(temperature, rel=1e-9)
    assert result.temperature_gain_bits == pytest.approx(gain, rel=1e-9)
    assert result.temperature_at_bound == at_bound
    assert stats.costs == pytest.approx(-np.log2(np.maximum(p[np.arange(3000), symbols], 1e-30)), rel=1e-12)
    assert (p[np.arange(3000), symbols] < 1e-30).any()  # the floor was needed


def softmax(logits: np.ndarray) -> np.ndarray:
    shifted = np.exp(logits - logits.max(axis=1, keepdims=True))
    return shifted / shifted.sum(axis=1, keepdims=True)


def tempered_rows(seed: int, n: int, classes: int, sharpen: float) -> tuple[np.ndarray, np.ndarray]:
    """Labels drawn from softmax(z); predictions softmax(sharpen * z) in float32, so the best T is
    near ``sharpen`` (> 1: over-confident, < 1: under-confident)."""
    rng = np.random.default_rng(seed)
    logits = rng.normal(0.0, 2.0, (n, classes))
    truth = softmax(logits)
    symbols = (truth.cumsum(axis=1) < rng.uniform(size=(n, 1))).sum(axis=1)
    return softmax(sharpen * logits).astype(np.float32), np.minimum(symbols, classes - 1)


def direct_code_lengths(probs: np.ndarray, symbols: np.ndarray, temperatures: np.ndarray) -> np.ndarray:
    """sum over rows of -log2 softmax(ln max(p, 1e-30) / T)[y], for each T, by logsumexp."""
    p = probs.astype(np.float64)
    log_p = np.log(np.maximum(p / p.sum(axis=1, keepdims=True), 1e-30))
    out = []
    for temperature in temperatures:
        z = log_p / temperature
        top = z.max(axis=1)
        logsumexp = top + np.log(np.exp(z - top[:, None]).sum(axis=1))
        out.append((logsumexp - z[np.arange(len(z)), symbols]).sum() / math.log(2))
    return np.array(out)


def direct_search(probs: np.ndarray, symbols: np.ndarray) -> tuple[float, float]:
    """(T, bits saved against T = 1): a 400-point grid over [1/3, 4], then 400 points between the
    best one's neighbours (spacing 3e-5 relative)."""
    coarse = np.geomspace(1 / 3, 4, 400)
    best = int(np.argmin(direct_code_lengths(probs, symbols, coarse)))
    assert 0 < best < len(coarse) - 1
    fine = np.geomspace(coarse[best - 1], coarse[best + 1], 400)
    losses = direct_code_lengths(probs, symbols, fine)
    at_one = direct_code_lengths(probs, symbols, [1.0])[0]
    return float(fine[np.argmin(losses)]), float(at_one - losses.min())


@pytest.mark.parametrize("classes, rows, sharpen", [(3, 5000, 1.7), (3, 5000, 0.6), (256, 500, 1.7),
                                                    (256, 500, 0.6)])
def test_hindsight_temperature_matches_direct_search(classes, rows, sharpen):
    probs, symbols = tempered_rows(classes + rows, rows, classes, sharpen)
    temperature, saved, at_bound = hindsight_temperature(probs, symbols)
    expected_temperature, expected_saved = direct_search(probs, symbols)
    assert (temperature > 1) == (sharpen > 1)
    assert temperature == pytest.approx(expected_temperature, rel=1e-3)
    assert saved == pytest.approx(expected_saved, rel=1e-3, abs=1e-6)
    assert saved > 10 and not at_bound


def test_streamed_temperature_equals_one_pass():
    probs, symbols = tempered_rows(3, 2000, 256, 1.4)
    stats = StageStats(256)
    for start in range(0, 2000, 300):
        stats.add(probs[start:start + 300], symbols[start:start + 300])
    result = stats.result()
    assert (result.best_temperature, result.temperature_gain_bits) == pytest.approx(
        hindsight_temperature(probs, symbols)[:2], rel=1e-9)


def test_calibrated_rows_need_no_temperature():
    probs, symbols = tempered_rows(4, 20000, 256, 1.0)
    temperature, saved, at_bound = hindsight_temperature(probs, symbols)
    assert temperature == pytest.approx(1.0, abs=0.03)
    assert saved < 10  # bits over 20,000 symbols
    assert not at_bound


@pytest.mark.parametrize("sharpen, edge", [(8.0, 4.0), (0.15, 1 / 3)])
def test_temperature_outside_the_grid_is_flagged(sharpen, edge):
    probs, symbols = tempered_rows(5, 2000, 3, sharpen)
    temperature, saved, at_bound = hindsight_temperature(probs, symbols)
    assert at_bound
    assert temperature == pytest.approx(edge)
    assert saved == pytest.approx(direct_code_lengths(probs, symbols, [1.0, edge]) @ [1, -1], rel=1e-9)


def test_byte_distribution_matches_a_product_loop():
    rng = np.random.default_rng(6)
    p1 = rng.uniform(0.01, 0.99, (4, 256))
    p1[:, 0] = np.nan  # column 0 is unused
    expected = np.ones((4, 256))
    for byte in range(256):
        node = 1
        for position in range(8):
            bit = (byte >> (7 - position)) & 1
            expected[:, byte] *= np.where(bit, p1[:, node], 1 - p1[:, node])
            node = 2 * node + bit
    result = byte_distribution(p1)
    assert result.shape == (4, 256)
    np.testing.assert_allclose(result, expected, rtol=1e-13)
    np.testing.assert_allclose(result.sum(axis=1), 1.0, rtol=1e-13)


def test_byte_distribution_of_certain_bits():
    p1 = np.zeros((1, 256))  # every bit 0 ...
    p1[0, 1] = 1.0  # ... but the first: the byte is 0b10000000
    assert byte_distribution(p1)[0].tolist() == [1.0 if b == 0x80 else 0.0 for b in range(256)]


def test_exact_zeros_stay_finite():
    probs = np.array([[1.0, 0.0, 0.0], [0.5, 0.5, 0.0], [0.2, 0.3, 0.5]], dtype=np.float32)
    symbols = np.array([1, 2, 2])  # two rows put p = 0 on the true class
    stats = StageStats(3, bins=5)
    stats.add(probs, symbols)
    result = stats.result()
    figures = [value for value in vars(result).values() if isinstance(value, float)]
    assert all(math.isfinite(value) for value in figures)
    assert stats.costs[:2] == pytest.approx([-math.log2(1e-30)] * 2)
    assert result.entropy_bits == pytest.approx((1.0 + entropy_bits(probs[2:])) / 3)


def test_no_rows_gives_zeros():
    stats = StageStats(256)
    before_any = stats.result()
    stats.add(np.zeros((0, 256), np.float32), np.zeros(0, np.int64))
    result = stats.result()
    assert result == before_any
    assert (result.symbols, result.classes, result.bins) == (0, 256, 15)
    assert (result.nll_bits, result.entropy_bits, result.top1, result.top5, result.ece,
            result.ece_equal_mass, result.classwise_ece, result.brier) == (0.0,) * 8
    assert result.best_temperature == 1.0
    assert (result.temperature_gain_bits, result.temperature_at_bound) == (0.0, False)
    assert result.reliability == result.reliability_equal_mass == []
    assert stats.costs.shape == (0,)


def test_fewer_than_five_classes():
    probs = np.array([[0.1, 0.9], [0.6, 0.4]])
    stats = StageStats(2)
    stats.add(probs, [0, 0])
    assert stats.result().top5 == 1.0
    assert stats.result().top1 == 0.5


@pytest.mark.parametrize("probs, symbols", [
    (np.full((2, 4), 0.25), [0, 1]),  # 4 classes, the stats expect 3
    (np.full((2, 3), 1 / 3), [0, 3]),  # symbol out of range
    (np.full((2, 3), 1 / 3), [0]),  # one symbol for two rows
    (np.zeros((1, 3)), [0]),  # not a distribution
])
def test_bad_input_is_refused(probs, symbols):
    with pytest.raises(ValueError):
        StageStats(3).add(probs, symbols)
