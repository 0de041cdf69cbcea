"""Tests of the ssm model: kernels against tests/naive_ssm.py, configuration, round trips, threads."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest

from statemix._jit import set_threads
from statemix.models import ssm
from statemix.models.nn import backward as bwd
from statemix.models.nn import forward as fwd
from statemix.models.nn import layout
from statemix.models.nn import train

import naive_ssm as naive
from conftest import config_with, text_sample

TINY = dict(vocab=16, d_model=8, expand=2, d_state=4, conv=4, layers=2, chunk=8, channel_block=8)


def tiny(**changes) -> ssm.Config:
    return config_with(**{**TINY, **changes})


def prepared_model(config: ssm.Config, seed: int = 3):
    """A model with perturbed parameters, a random start state and a chunk of tokens."""
    rng = np.random.default_rng(seed)
    m = ssm.Model(config).network
    m.P += (rng.standard_normal(m.P.size) * 0.3).astype(np.float32)
    train.refresh_a(m.P, m.off, m.sz, m.Aneg)
    K = config.conv
    hs, xh = m.acts.hs, m.acts.xh
    hs[:, 0] = rng.standard_normal(hs[:, 0].shape).astype(np.float32)
    xh[:, :K - 1] = rng.standard_normal(xh[:, :K - 1].shape).astype(np.float32)
    m.tin[:] = rng.integers(0, config.vocab, config.chunk)
    m.tin[3] = m.tin[1]  # a repeated token: embedding gradients must add up
    m.tout[:] = rng.integers(0, config.vocab, config.chunk)
    return m


def start_state(m, config):
    return m.acts.hs[:, 0].copy(), m.acts.xh[:, :config.conv - 1].copy()


# ---- configuration ----------------------------------------------------------------------------

def test_config_round_trip_and_presets():
    for config in (ssm.PRESETS["reference"], ssm.PRESETS["default"], ssm.PRESETS["bpe"],
                   tiny(bptt=0, seed=7)):
        raw = config.to_bytes()
        assert len(raw) < 100
        assert ssm.Config.from_bytes(raw).to_bytes() == raw
    assert ssm.PRESETS["reference"].bptt == 0 and ssm.PRESETS["reference"].preset == 1


@pytest.mark.parametrize("field,value", [("vocab", 1), ("d_model", 0), ("chunk", 0), ("bptt", 2),
                                         ("channel_block", 5), ("lr", 0.0), ("smoothing", 1.0),
                                         ("clip", float("nan"))])
def test_config_rejects_out_of_range(field, value):
    raw = tiny(**{field: value}).to_bytes() if field != "vocab" else None
    if raw is None:
        with pytest.raises(ValueError):
            tiny(vocab=1).validate()
        return
    with pytest.raises(ValueError):
        ssm.Config.from_bytes(raw)


def test_config_rejects_wrong_length():
    with pytest.raises(ValueError):
        ssm.Config.from_bytes(tiny().to_bytes()[:-3])
    with pytest.raises(ValueError):
        ssm.Config.from_bytes(tiny().to_bytes() + b"\0")


def test_config_records_before_the_delay_and_the_floor_read_as_they_were_written():
    """Records of 67 bytes were written before the coarse floor existed: they mean floor 0; those of
    66 bytes before the training delay: delay 0 and floor 0."""
    delayed = tiny(delay=1).to_bytes()
    assert len(delayed) == 68 and ssm.Config.from_bytes(delayed).delay == 1
    assert ssm.Config.from_bytes(delayed).floor == 1
    assert ssm.Config.from_bytes(delayed[:67]) == replace(ssm.Config.from_bytes(delayed), floor=0)
    old = tiny().to_bytes()[:66]
    assert ssm.Config.from_bytes(old).to_bytes() == replace(tiny(), floor=0).to_bytes()
    for field in ("delay", "floor"):
        with pytest.raises(ValueError):
            ssm.Config.from_bytes(tiny(**{field: 2}).to_bytes())


# ---- kernels against the naive reference ---------------------------------------------------------

# sizes that exercise the kernels' special paths: several HEAD_BLOCKs with a V that is not a multiple
# of the unrolling; a d_model and a chunk that are not multiples of 8 (the one-at-a-time tails)
KERNEL_CONFIGS = {"tiny": {}, "blocked head": dict(vocab=2 * layout.HEAD_BLOCK + 37),
                  "odd sizes": dict(d_model=12, chunk=13)}


@pytest.mark.parametrize("changes", KERNEL_CONFIGS.values(), ids=KERNEL_CONFIGS.keys())
def test_forward_matches_naive_and_coding_pass(changes):
    """The chunk's forward pass agrees with the naive reference and, bit for bit, with the
    token-by-token coding pass."""
    config = tiny(**changes)
    m = prepared_model(config)
    h0, x0 = start_state(m, config)
    fwd.forward_chunk(m.P, m.Aneg, m.off, m.sz, m.acts, m.tin, m.sz[layout.S_EB])
    logits = m.acts.logits.copy()
    ref, _ = naive.forward(m.P, config, m.tin, h0, x0)
    np.testing.assert_allclose(logits, ref, rtol=2e-4, atol=2e-5)
    lanes = np.empty(layout.LANES, dtype=np.float32)
    for t in range(config.chunk):
        fwd.forward_position(m.P, m.Aneg, m.off, m.sz, m.acts, m.tin, t, lanes)
    assert np.array_equal(m.acts.logits, logits)
    probs = m.acts.probs
    np.testing.assert_allclose(probs.sum(1), 1.0, rtol=1e-5)


SOURCE_CONFIGS = {**KERNEL_CONFIGS, "byte preset": dict(vocab=256, d_model=32, d_state=16, chunk=32, channel_block=16)}


@pytest.mark.parametrize("changes", SOURCE_CONFIGS.values(), ids=SOURCE_CONFIGS.keys())
def test_compiled_passes_compute_what_their_source_says(changes):
    """The forward and backward passes, compiled with their steps inlined, give bit for bit what
    their Python source gives run line by line (each step then a kernel of its own).  Inlined into
    a ``prange`` body, numba 0.68 dropped the closing element store of three steps (``lse[t]`` of
    the softmax, ``rstd[L, t]`` of the final LayerNorm, the target's logit gradient): the first
    changed no output, the other two changed the gradient.  Those three stay calls."""
    config = tiny(**changes)
    lanes = np.empty(layout.LANES, dtype=np.float32)
    runs = []
    for compiled in (True, False):
        m = prepared_model(config)
        forward_chunk, forward_position, backward_chunk = (
            (k if compiled else k.py_func) for k in (fwd.forward_chunk, fwd.forward_position, bwd.backward_chunk))
        forward_chunk(m.P, m.Aneg, m.off, m.sz, m.acts, m.tin, m.sz[layout.S_EB])
        backward_chunk(m.P, m.Aneg, m.off, m.sz, m.hy, m.acts, m.grads, m.tin, m.tout, m.G, m.sz[layout.S_EB])
        chunk_acts = [a.copy() for a in m.acts]
        for t in range(config.chunk):
            forward_position(m.P, m.Aneg, m.off, m.sz, m.acts, m.tin, t, lanes)
        runs.append([m.G.copy(), *chunk_acts, *m.acts, *m.grads])
    for compiled, source in zip(*runs):
        assert np.array_equal(compiled.view(np.uint32), source.view(np.uint32))


def kernel_and_naive_gradients(config):
    m = prepared_model(config)
    h0, x0 = start_state(m, config)
    fwd.forward_chunk(m.P, m.Aneg, m.off, m.sz, m.acts, m.tin, m.sz[layout.S_EB])
    bwd.backward_chunk(m.P, m.Aneg, m.off, m.sz, m.hy, m.acts, m.grads, m.tin, m.tout, m.G, m.sz[layout.S_EB])
    analytic = naive.gradient(m.P, config, m.tin, m.tout, h0, x0, bptt=bool(config.bptt))
    return m, h0, x0, analytic


@pytest.mark.parametrize("changes", KERNEL_CONFIGS.values(), ids=KERNEL_CONFIGS.keys())
def test_backward_matches_naive_gradient(changes):
    """Kernel (float32) against the naive analytic gradient (float64)."""
    m, _, _, analytic = kernel_and_naive_gradients(tiny(**changes))
    scale = np.abs(analytic).max()
    np.testing.assert_allclose(m.G, analytic, rtol=2e-3, atol=2e-5 * scale)


@pytest.mark.parametrize("bptt", [0, 1])
def test_naive_gradient_matches_finite_differences(bptt):
    config = tiny(bptt=bptt)
    m, h0, x0, analytic = kernel_and_naive_gradients(config)
    scale = np.abs(analytic).max()
    np.testing.assert_allclose(m.G, analytic, rtol=2e-3, atol=2e-5 * scale)
    detached = None
    if not bptt:
        _, cache = naive.forward(m.P, config, m.tin, h0, x0)
        detached = (cache["hs"][:, :config.chunk], cache["xin"])
    rng = np.random.default_rng(1)
    indices = rng.choice(m.P.size, 120, replace=False)
    off = m.off
    # make sure every tensor kind is probed at least once
    indices = np.unique(np.concatenate([indices, off[:-1] + 1]))
    numeric = naive.numeric_gradient(m.P, config, m.tin, m.tout, h0, x0, indices, detached)
    np.testing.assert_allclose(analytic[indices], numeric, rtol=1e-5, atol=1e-8)


def test_bptt_differs_from_one_step():
    m1 = prepared_model(tiny(bptt=1))
    m0 = prepared_model(tiny(bptt=0))
    for m in (m0, m1):
        fwd.forward_chunk(m.P, m.Aneg, m.off, m.sz, m.acts, m.tin, m.sz[layout.S_EB])
        bwd.backward_chunk(m.P, m.Aneg, m.off, m.sz, m.hy, m.acts, m.grads, m.tin, m.tout, m.G, m.sz[layout.S_EB])
    assert not np.array_equal(m0.G, m1.G)


@pytest.mark.parametrize("clip", [1e6, 0.05])
def test_adam_step_matches_naive(clip):
    rng = np.random.default_rng(5)
    n = 10_000  # more than two blocks of the parallel partition
    P = rng.standard_normal(n).astype(np.float32)
    G = (rng.standard_normal(n) * 0.01).astype(np.float32)
    M = (rng.standard_normal(n) * 0.001).astype(np.float32)
    W = (rng.random(n) * 1e-5).astype(np.float32)
    config = tiny(clip=clip)
    hy = layout.hyper(config)
    sf = np.array([0.9 ** 3, 0.999 ** 3], dtype=np.float32)  # three steps already taken
    partial = np.zeros((n + layout.ADAM_BLOCK - 1) // layout.ADAM_BLOCK, dtype=np.float32)
    ref = naive.adam(P, G, M, W, np.float32(config.lr), np.float32(0.9), np.float32(0.999),
                     np.float32(1e-8), np.float32(clip), 4)
    Pk, Mk, Wk = P.copy(), M.copy(), W.copy()
    norm = train.adam_step(Pk, G, Mk, Wk, hy, sf, np.float32(config.lr), partial)
    assert norm == pytest.approx(ref[3], rel=1e-5)
    np.testing.assert_allclose(Mk, ref[1], rtol=1e-5, atol=1e-9)
    np.testing.assert_allclose(Wk, ref[2], rtol=1e-5, atol=1e-12)
    np.testing.assert_allclose(Pk, ref[0], rtol=1e-6, atol=1e-7)
    np.testing.assert_allclose(sf, [0.9 ** 4, 0.999 ** 4], rtol=1e-6)


def test_init_is_deterministic_and_scaled():
    config = ssm.PRESETS["reference"]
    a = layout.init_params(config)
    b = layout.init_params(config)
    assert np.array_equal(a, b)
    layers, glob = naive.unpack(a, config)
    assert abs(glob[layout.HEAD].std() - 0.02) < 0.002
    assert abs(layers[0][layout.DT_B].std() - 0.1) < 0.03
    np.testing.assert_allclose(layers[1][layout.A_LOG][:, 0], np.log(np.arange(1, 17)), rtol=1e-6)
    assert np.all(layers[0][layout.DSKIP] == 1.0)
    assert not np.array_equal(a, layout.init_params(config_with(seed=1)))


# ---- whole model ----------------------------------------------------------------------------------

BYTES_TINY = dict(d_model=8, d_state=4, chunk=16, channel_block=8, iters_a=2, chunks_a=4)


def test_round_trip_in_blocks_with_learned_block():
    config = config_with(**BYTES_TINY)
    data = text_sample(3000, seed=4)
    blocks = [data[:1000], data[1000:1500], data[1500:]]
    enc = ssm.Model(config)
    coded = [enc.encode(blocks[0], 2000), None, None]
    enc.learn(blocks[1])  # a block the codec stored instead
    coded[2] = enc.encode(blocks[2], 3000)
    assert coded[0] is not None and len(coded[0]) < 800
    dec = ssm.Model(config)
    out = dec.decode(coded[0], len(blocks[0]))
    dec.learn(blocks[1])
    out += blocks[1] + dec.decode(coded[2], len(blocks[2]))
    assert out == data
    assert np.array_equal(enc.network.P, dec.network.P)


def test_encode_overflow_returns_none_and_still_learns():
    config = config_with(**BYTES_TINY)
    data = bytes(np.random.default_rng(2).integers(0, 256, 700, dtype=np.uint8))
    a, b = ssm.Model(config), ssm.Model(config)
    assert a.encode(data, 100) is None
    b.learn(data)
    assert np.array_equal(a.network.P, b.network.P)


def test_token_interface_round_trip():
    config = tiny(chunk=8)
    tokens = np.random.default_rng(9).integers(0, 16, 300)
    coded = ssm.Model(config).encode_tokens(tokens, 1000)
    assert np.array_equal(ssm.Model(config).decode_tokens(coded, 300), tokens)
    with pytest.raises(ValueError):
        ssm.Model(config).encode_tokens(np.array([16]), 10)
    with pytest.raises(ValueError):
        ssm.Model(config).encode(b"abc", 10)  # a token configuration does not code bytes


def test_output_identical_at_one_and_two_threads():
    config = config_with(**BYTES_TINY)
    data = text_sample(2500, seed=8)
    outputs = []
    try:
        for threads in (1, 2):
            set_threads(threads)
            outputs.append(ssm.Model(config).encode(data, 5000))
    finally:
        set_threads(1)
    assert outputs[0] == outputs[1]


# ---- BPE tokens --------------------------------------------------------------------------------

BPE_TINY = dict(BYTES_TINY, tokenizer=ssm.TOK_BPE, merges=96)


def bpe_blocks(seed: int = 11):
    data = text_sample(9000, seed=seed)
    return [data[:3000], data[3000:5000], data[5000:6500], data[6500:]]


def test_bpe_config_fields_are_validated():
    config = config_with(**BPE_TINY)
    back = ssm.Config.from_bytes(config.to_bytes())
    assert back.to_bytes() == config.to_bytes() and (back.tokenizer, back.merges) == (1, 96)
    assert ssm.PRESETS["bpe"].tokenizer == ssm.TOK_BPE and ssm.PRESETS["bpe"].preset == 3
    for bad in (dict(tokenizer=2), dict(vocab=300), dict(merges=ssm.MAX_BPE_MERGES + 1)):
        with pytest.raises(ValueError):
            ssm.Config.from_bytes(config_with(**{**BPE_TINY, **bad}).to_bytes())
    with pytest.raises(ValueError):  # merges only mean something with the BPE tokenizer
        ssm.Config.from_bytes(config_with(merges=5).to_bytes())
    assert config.memory_bytes() > config_with(**BYTES_TINY).memory_bytes()


def test_bpe_round_trip_with_vocabulary_in_first_code_word():
    config = config_with(**BPE_TINY)
    blocks = bpe_blocks()
    enc = ssm.Model(config)
    coded = [enc.encode(b, 2 * len(b)) for b in blocks]
    assert enc.vocab_size == 256 + enc.vocabulary.n_merges and enc.vocabulary.n_merges > 0
    assert len(coded[0]) > len(enc.vocabulary.to_bytes())  # the vocabulary travels in block 1
    dec = ssm.Model(config)
    assert dec.vocab_size is None  # allocated with the first block
    out = b"".join(dec.decode(c, len(b)) for c, b in zip(coded, blocks))
    assert out == b"".join(blocks)
    assert dec.vocabulary == enc.vocabulary
    assert np.array_equal(enc.network.P, dec.network.P)


def test_bpe_round_trip_with_stored_first_block_and_empty_blocks():
    config = config_with(**BPE_TINY)
    blocks = bpe_blocks(seed=12)
    enc = ssm.Model(config)
    assert enc.encode(b"", 10) == b""  # an empty block codes to nothing and defines nothing
    enc.encode(blocks[0], 2 * len(blocks[0]))  # coded, but the codec stored it after all
    coded1 = enc.encode(blocks[1], 2 * len(blocks[1]))
    assert enc.encode(blocks[2], 10) is None  # too long: stored; the model learned it anyway
    coded3 = enc.encode(blocks[3], 2 * len(blocks[3]))
    dec = ssm.Model(config)
    dec.learn(b"")
    dec.learn(blocks[0])  # trains the same vocabulary from the raw block
    out = blocks[0] + dec.decode(coded1, len(blocks[1]))
    dec.learn(blocks[2])
    out += blocks[2] + dec.decode(coded3, len(blocks[3]))
    assert out == b"".join(blocks)
    assert dec.vocabulary == enc.vocabulary
    assert np.array_equal(enc.network.P, dec.network.P) and np.array_equal(enc.counts, dec.counts)


def test_bpe_corrupt_vocabulary_is_an_error():
    from statemix._errors import StatemixError

    config = config_with(**BPE_TINY)
    block = bpe_blocks()[0]
    coded = ssm.Model(config).encode(block, 2 * len(block))
    for bad in (coded[:3], b"\xff" * 8, coded[:1] + bytes([coded[1] ^ 0x55]) + coded[2:]):
        with pytest.raises(StatemixError):
            ssm.Model(config).decode(bad, len(block))


def test_bpe_output_identical_at_one_and_two_threads():
    config = config_with(**BPE_TINY)
    blocks = bpe_blocks(seed=13)
    outputs = []
    try:
        for threads in (1, 2):
            set_threads(threads)
            m = ssm.Model(config)
            outputs.append([m.encode(b, 2 * len(b)) for b in blocks])
    finally:
        set_threads(1)
    assert outputs[0] == outputs[1]


def test_small_vocabularies_run_on_one_thread(monkeypatch):
    """Models of fewer than PARALLEL_MIN_VOCAB tokens run their kernels on one thread (faster; the
    output is the same), byte models on every thread, and the caller's thread setting is restored
    afterwards."""
    import numba

    seen = []
    monkeypatch.setattr(ssm.Model, "_run_block", lambda self, *args: seen.append(numba.get_num_threads()) or 0)
    set_threads(2)
    try:
        before = numba.get_num_threads()
        ssm.Model(tiny(vocab=ssm.PARALLEL_MIN_VOCAB - 1)).learn_tokens(np.zeros(3, dtype=np.int64))
        ssm.Model(ssm.PRESETS["mix"]).learn(b"abc")
        assert seen == [1, before] and numba.get_num_threads() == before
    finally:
        set_threads(1)


def test_network_runs_position_by_position_without_a_coder():
    """nn.Network alone gives the SSM probabilities the coding loop saw (trace[:, 1]), training included."""
    from statemix.models.nn import Network

    config = config_with(**BYTES_TINY)
    data = text_sample(200, seed=6)
    trace = np.zeros((len(data), 2))
    ssm.Model(config).encode(data, 1000, trace)
    network = Network(config)
    seen = []
    for byte in data:
        seen.append(float(network.predict()[byte]))
        network.observe(byte)
    assert np.array_equal(np.array(seen), trace[:, 1])
    with pytest.raises(ValueError):
        network.observe(1)


def test_delayed_training_in_the_coding_loop_is_the_delay_run_in_turn():
    """With delay 1 the coding loop trains on each chunk beside the coding of the next one
    (tokenloop.run_range).  The SSM's probability of every byte equals that of nn.Network
    run position by position, which trains in turn (train.finish_chunk), with blocks that end inside a
    chunk (a pending chunk trained with no coding beside it).  The first chunk is coded with the same
    weights with and without a delay, the second is not: its probabilities differ."""
    from statemix.models.nn import Network

    config = config_with(**BYTES_TINY, delay=1)
    data = text_sample(40 * config.chunk + 5, seed=6)
    model = ssm.Model(config)
    trace = np.zeros((len(data), 2))
    cuts = [0, 7, 7 + 3 * config.chunk, 300, len(data)]
    for a, b in zip(cuts, cuts[1:]):
        block_trace = np.zeros((b - a, 2))
        model.encode(data[a:b], 4 * (b - a), block_trace)
        trace[a:b] = block_trace
    network = Network(config)
    seen = []
    T = config.chunk
    for i, byte in enumerate(data):
        if i % T == 0:
            start = network.acts.hs[:, 0].copy(), network.acts.xh[:, :config.conv - 1].copy()
        seen.append(float(network.predict()[byte]))
        network.observe(byte)
        if i % T == T - 1:  # handed over: the chunk and the state it started from
            assert np.array_equal(network.acts_t.hs[:, 0], start[0])
            assert np.array_equal(network.acts_t.xh[:, :config.conv - 1], start[1])
            assert np.array_equal(network.tout_t, np.frombuffer(data[i + 1 - T:i + 1], dtype=np.uint8))
    assert np.array_equal(np.array(seen), trace[:, 1])
    # the coding loop trained on the last whole chunk beside the last 5 bytes; in turn, that waits
    # for the end of the next chunk.  The coding weights are the same.
    assert np.array_equal(network.Pc, model.network.Pc)
    assert network.st[layout.ST_PENDING] == 1 and model.network.st[layout.ST_PENDING] == 0
    train.train_pending(network.net, network.acts_t, network.grads)
    assert np.array_equal(network.P, model.network.P)
    undelayed = np.zeros((len(data), 2))
    ssm.Model(config_with(**BYTES_TINY)).encode(data, 4 * len(data), undelayed)
    assert np.array_equal(undelayed[:T, 1], trace[:T, 1])
    assert not np.array_equal(undelayed[T:2 * T, 1], trace[T:2 * T, 1])
