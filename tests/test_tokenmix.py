"""Tests of the ssm model's count models and mixing (statemix.models.tokenmix)."""

from __future__ import annotations

import io

import numpy as np
import pytest

import statemix
from statemix.models import nn, spec_for_level, ssm, tokenmix
from statemix.models.nn import layout
from statemix.quantize import least_frequency

from conftest import config_with, text_sample
from naive_tokenmix import NaiveTokenMix


def mixed_input() -> bytes:
    """Text, a run long enough to age a bucket's counts, and a long repeat for the match model."""
    text = text_sample(900, seed=5)
    return text + b"a" * (tokenmix.COUNT_LIMIT + 80) + text[100:500]


def counts_config(**changes) -> ssm.Config:
    return config_with(use_ssm=0, table_bits=10, **changes)


@pytest.mark.parametrize("mixing,match,calibrate", [
    (tokenmix.MIX_PRIOR, 0, 0), (tokenmix.MIX_REFERENCE, 0, 0), (tokenmix.MIX_LEARNED, 0, 0),
    (tokenmix.MIX_LEARNED, 1, 1)])
def test_kernels_match_the_naive_reference(mixing, match, calibrate):
    """Every coded probability equals the plain-Python reference's, bit for bit (small table: buckets
    are evicted; a long run: counts are halved; a repeat: the match model predicts)."""
    data = mixed_input()
    config = counts_config(mixing=mixing, match=match, calibrate=calibrate)
    _check_against_naive(config, data)


#: a small SSM (the reference takes its logits from the library, so only speed depends on its size)
SMALL_SSM = dict(d_model=8, d_state=4, chunk=16, channel_block=8, iters_a=2, chunks_a=4, table_bits=10)


@pytest.mark.parametrize("mixing,match,calibrate", [
    (tokenmix.MIX_PRIOR, 0, 0), (tokenmix.MIX_REFERENCE, 0, 0), (tokenmix.MIX_LEARNED, 1, 1)])
def test_kernels_with_the_ssm_match_the_naive_reference(mixing, match, calibrate):
    """With the SSM: the reference gets the SSM's logits of every token from the library's Network
    run on the same tokens (checked: the SSM probability the model traced is that network's), and
    computes everything after them itself: the SSM's entropy, the mixing with its weights chosen by
    the entropy bucket, the gradient step on a (dz/da = SSM logits) and the coder's frequencies."""
    text = text_sample(700, seed=5)
    data = text + text[100:400]
    config = config_with(mixing=mixing, match=match, calibrate=calibrate, **SMALL_SSM)
    buckets = _check_against_naive(config, data)
    assert len(buckets) > 1  # the SSM's entropy moved between buckets


def _check_against_naive(config, data: bytes) -> set:
    """Code ``data`` with the library and the naive reference side by side; return the SSM entropy
    buckets seen."""
    model = ssm.Model(config)
    trace = np.zeros((len(data), 2))
    model.encode(data, 2 * len(data), trace)
    naive = NaiveTokenMix(256, config.table_bits, tokenmix.BYTE_ORDERS, config.mixing, config.match,
                          config.calibrate, config.prior)
    network = nn.Network(model.model_config) if config.use_ssm else None
    total = 1 << layout.TOTAL_BITS
    least = least_frequency(256, layout.TOTAL_BITS, bool(config.floor))
    buckets = set()
    for i, sym in enumerate(data):
        logits = None
        if network is not None:
            probs = network.predict()
            assert trace[i, 1] == np.float64(probs[sym]), f"SSM of token {i}"
            logits = network.acts.logits[network._t].copy()
        freqs = naive.frequencies(layout.TOTAL_BITS, least, logits)
        assert freqs.sum() == total
        assert trace[i, 0] == freqs[sym] / total, f"token {i}"
        buckets.add(naive.eb)
        naive.learn(sym)
        naive.update(sym)
        if network is not None:
            network.observe(sym)
    state = model.mixstate
    assert state.totals.max() < tokenmix.COUNT_LIMIT
    if config.mixing == tokenmix.MIX_LEARNED:
        assert np.array_equal(state.par, naive.packed())
        assert not np.array_equal(state.par, tokenmix.initial_parameters())
    return buckets


def test_learned_mixing_and_match_help():
    data = text_sample(6000, seed=9) * 2
    sizes = {}
    for name, changes in {"prior": dict(mixing=0), "reference": dict(mixing=1),
                          "learned": dict(mixing=2), "match": dict(mixing=2, match=1)}.items():
        model = ssm.Model(counts_config(**changes))
        sizes[name] = len(model.encode(data, 2 * len(data)))
    assert sizes["learned"] < sizes["reference"] < sizes["prior"]
    assert sizes["match"] < sizes["learned"]


@pytest.mark.parametrize("level", [1, 2])
def test_levels_round_trip_through_the_api(level):
    data = text_sample(4000, seed=2) + bytes(range(256)) + text_sample(3000, seed=2)
    stream = statemix.compress(data, model="ssm", level=level)
    assert statemix.decompress(stream) == data
    (info,) = statemix.read_info(io.BytesIO(stream))
    assert info.model.describe().startswith(f"ssm level {level}")  # the record the level asked for


def test_streaming_blocks_and_learned_blocks_round_trip():
    """Blocks coded one after another, one of them only learned (stored by the codec)."""
    config = ssm.PRESETS["counts"]
    blocks = [text_sample(3000, seed=s) for s in (1, 2, 3)]
    enc, dec = ssm.Model(config), ssm.Model(config)
    words = [enc.encode(blocks[0], 10_000)]
    enc.learn(blocks[1])
    words.append(enc.encode(blocks[2], 10_000))
    assert dec.decode(words[0], len(blocks[0])) == blocks[0]
    dec.learn(blocks[1])
    assert dec.decode(words[1], len(blocks[2])) == blocks[2]


def test_level_presets_and_table_sizing():
    small = ssm.Config.from_bytes(spec_for_level(1, 5000, "ssm").parameters)
    assert small.use_ssm == 0 and small.mixing == tokenmix.MIX_LEARNED and small.table_bits == 13
    big = ssm.Config.from_bytes(spec_for_level(None, 1 << 30, "ssm").parameters)
    assert big.use_ssm == 1 and big.match == 1 and big.calibrate == 0 and big.table_bits == 20
    assert ssm.Config.from_bytes(spec_for_level(3, None, "ssm").parameters).table_bits == 21
    assert big.memory_bytes() > tokenmix.State.memory_bytes(256, 20) > 140 << 20  # 2**20 buckets of 140 bytes


@pytest.mark.parametrize("field,value", [("mixing", 3), ("use_ssm", 2), ("match", 2),
                                         ("calibrate", 2), ("table_bits", 9), ("table_bits", 22)])
def test_config_rejects_bad_mixing_fields(field, value):
    raw = bytearray(ssm.PRESETS["mix"].to_bytes())
    index = {"mixing": -5, "use_ssm": -4, "match": -3, "calibrate": -2, "table_bits": -1}[field]
    raw[index] = value
    with pytest.raises(ValueError):
        ssm.Config.from_bytes(bytes(raw))


def test_initial_parameters_are_the_reference_weights_without_libm():
    """f starts at lambda ln(1 + c / alpha), correctly rounded (checked against float64 numpy)."""
    par = tokenmix.initial_parameters()
    for o in range(tokenmix.N_ORDERS):
        for qc in range(tokenmix.N_COUNT):
            x = float(tokenmix._COUNT_TYPICAL[qc] / tokenmix.REF_ALPHA[o])
            value = par[tokenmix.P_F + o * tokenmix.N_CELL + qc * tokenmix.N_SHARE]
            assert value == pytest.approx(float(tokenmix.REF_LAMBDA[o]) * np.log1p(x), rel=3e-7)
    assert np.array_equal(par, tokenmix.initial_parameters())
