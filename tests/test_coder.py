"""The range coder and the quantization step against the plain references in tests/naive.py."""

from __future__ import annotations

import math
import random

import numpy as np
import pytest

from statemix import coder
from statemix.quantize import binary_frequency, quantize_distribution

import naive


def _intervals(rng: random.Random, count: int, total_bits: int):
    total = 1 << total_bits
    out = []
    for _ in range(count):
        freq = rng.choice([1, 2, rng.randint(1, total), total // 2, total - 1, rng.randint(1, 64)])
        freq = max(1, min(freq, total))
        cum = rng.randint(0, total - freq)
        out.append((cum, freq))
    return out


def _encode_kernel(intervals, total_bits, capacity=1 << 16):
    rc = coder.new_state()
    out = np.zeros(capacity, dtype=np.uint8)
    coder.enc_init(rc)
    for cum, freq in intervals:
        coder.enc_encode(rc, out, cum, freq, total_bits)
    n = coder.enc_finish(rc, out)
    return out[:n].tobytes(), rc


@pytest.mark.parametrize("total_bits", [1, 12, 16, 24, 30, 32])
def test_encoder_matches_reference(total_bits):
    rng = random.Random(total_bits)
    intervals = _intervals(rng, 2000, total_bits)
    reference = naive.RangeEncoder()
    for cum, freq in intervals:
        reference.encode(cum, freq, total_bits)
    assert _encode_kernel(intervals, total_bits)[0] == reference.finish()


def test_carry_propagation_matches_reference():
    # intervals at the very top of the range force long runs of 0xFF and carries
    total_bits = 16
    intervals = [(65535, 1)] * 300 + [(0, 1)] * 50 + [(65534, 2)] * 300
    reference = naive.RangeEncoder()
    for cum, freq in intervals:
        reference.encode(cum, freq, total_bits)
    assert _encode_kernel(intervals, total_bits)[0] == reference.finish()


@pytest.mark.parametrize("alphabet", [2, 256, 65536])
def test_symbols_round_trip(alphabet):
    rng = np.random.default_rng(alphabet)
    total_bits = 30
    probs = rng.dirichlet(np.full(alphabet, 0.05))
    freqs = np.zeros(alphabet, dtype=np.int64)
    quantize_distribution(probs, total_bits, freqs)
    cumulative = np.concatenate([[0], np.cumsum(freqs)]).astype(np.int64)
    symbols = rng.choice(alphabet, size=3000, p=probs)
    code, _ = _encode_kernel([(int(cumulative[s]), int(freqs[s])) for s in symbols], total_bits)
    rc = coder.new_state()
    src = np.frombuffer(code, dtype=np.uint8)
    coder.dec_init(rc, src)
    decoded = [coder.dec_symbol(rc, src, cumulative, total_bits) for _ in symbols]
    assert decoded == list(symbols)
    reference = naive.RangeDecoder(code)
    assert [reference.decode(list(cumulative), total_bits) for _ in symbols[:300]] == list(symbols[:300])


def test_code_length_close_to_ideal():
    # 65,536 symbols, a skewed distribution: coding costs at most 0.1% over the model's -log2 p
    rng = np.random.default_rng(3)
    total_bits = 30
    probs = rng.dirichlet(np.full(65536, 0.02))
    freqs = np.zeros(65536, dtype=np.int64)
    quantize_distribution(probs, total_bits, freqs)
    symbols = rng.choice(65536, size=20000, p=probs)
    ideal_bits = -np.log2(probs[symbols]).sum()
    cumulative = np.concatenate([[0], np.cumsum(freqs)])
    code, _ = _encode_kernel([(int(cumulative[s]), int(freqs[s])) for s in symbols], total_bits,
                             capacity=1 << 20)
    assert 8 * len(code) <= ideal_bits * 1.001 + 16


def test_binary_bits_round_trip_and_overflow_flag():
    rng = random.Random(5)
    bits = [rng.random() < 0.9 for _ in range(5000)]
    p1 = 60000
    rc = coder.new_state()
    out = np.zeros(4096, dtype=np.uint8)
    coder.enc_init(rc)
    for bit in bits:
        coder.enc_bit(rc, out, p1, bit)
    n = coder.enc_finish(rc, out)
    assert rc[coder.OVERFLOW] == 0
    src = out[:n].copy()
    rc2 = coder.new_state()
    coder.dec_init(rc2, src)
    assert [bool(coder.dec_bit(rc2, src, p1)) for _ in bits] == bits
    small = np.zeros(10, dtype=np.uint8)
    coder.enc_init(rc)
    for bit in bits:
        coder.enc_bit(rc, small, p1, bit)
    assert coder.enc_finish(rc, small) > 10 and rc[coder.OVERFLOW] == 1


def test_decoder_survives_garbage():
    rng = np.random.default_rng(9)
    cumulative = np.array([0, 1, 2, 1 << 29, 1 << 30], dtype=np.int64)
    for _ in range(20):
        src = rng.integers(0, 256, size=rng.integers(0, 40), dtype=np.uint8)
        rc = coder.new_state()
        coder.dec_init(rc, src)
        for _ in range(200):
            assert 0 <= coder.dec_symbol(rc, src, cumulative, 30) < 4


@pytest.mark.parametrize("n", [1, 2, 3, 255, 4096, 65536])
def test_quantize_matches_reference_and_is_valid(n):
    rng = np.random.default_rng(n)
    probs = rng.dirichlet(np.full(n, 0.1)) if n > 1 else np.array([1.0])
    probs[0] = 0.0  # a symbol the model thinks impossible still gets a frequency
    if n == 1:
        probs[0] = 1.0
    freqs = np.zeros(n, dtype=np.int64)
    quantize_distribution(probs, 30, freqs)
    assert freqs.min() >= 1 and int(freqs.sum()) == 1 << 30
    if n <= 4096:
        assert list(freqs) == naive.quantize(list(probs), 30)


def test_quantize_tolerates_nan_and_zero():
    for probs in (np.full(8, np.nan), np.zeros(8), np.array([np.inf, 1, 1, 1.0])):
        freqs = np.zeros(probs.shape[0], dtype=np.int64)
        quantize_distribution(probs, 16, freqs)
        assert freqs.min() >= 1 and int(freqs.sum()) == 1 << 16


def test_binary_frequency_clamps():
    assert [binary_frequency(p, 1) for p in (-5, 0, 1, 32768, 65535, 65536, 10**6)] == [1, 1, 1, 32768, 65535, 65535, 65535]
    assert [binary_frequency(p, 16) for p in (-5, 15, 16, 17, 65519, 65520, 65521, 10**6)] == [16, 16, 16, 17, 65519, 65520, 65520, 65520]


def test_coded_cost_of_binary_near_ideal():
    rng = random.Random(11)
    probs = [rng.randint(1, 65535) for _ in range(20000)]
    bits = [rng.random() < p / 65536 for p in probs]
    rc = coder.new_state()
    out = np.zeros(1 << 16, dtype=np.uint8)
    coder.enc_init(rc)
    for p, bit in zip(probs, bits):
        coder.enc_bit(rc, out, p, bit)
    n = coder.enc_finish(rc, out)
    ideal = sum(-math.log2(p / 65536 if b else 1 - p / 65536) for p, b in zip(probs, bits))
    assert 8 * n <= ideal * 1.001 + 16
