"""Thread invariance that can fail: the parallel kernels and a parallel preset, at 1 and 2 threads.

Only the SSM network's kernels run in parallel (``prange`` in statemix.models.nn: ``forward_chunk``,
``backward_chunk``, ``adam_step``; with a training delay also a chunk's training, on a second thread
beside the coding of the next: ``statemix._jit.beside``), and the ssm model runs them on one thread
when its vocabulary is smaller than ``PARALLEL_MIN_VOCAB``: a test over bytes (V = 256) passes
whatever the thread count does to the arithmetic.  Every test here therefore uses V >=
``PARALLEL_MIN_VOCAB`` (the kernels called directly, or the bpe preset on an input with a large
vocabulary) and checks that the work really is split: numba runs 2 threads during the call and every
parallel loop has at least 2 iterations.  Results are compared bit for bit (float32 as uint32), never
within a tolerance: a sum whose order follows the partition (a ``prange`` loop adding into one
variable, which numba turns into per-thread partial sums, or anything depending on
``numba.get_thread_id()``) changes low bits at 2 threads, and these tests fail on that.
"""

from __future__ import annotations

import threading
import time

import numpy as np
import pytest

import statemix
from statemix._jit import kernel, prange, set_threads
from statemix.models import ssm
from statemix.models.nn import Network
from statemix.models.nn.backward import backward_chunk
from statemix.models.nn.forward import forward_chunk
from statemix.models.nn.layout import ADAM_BLOCK, H_CLIP, HEAD_BLOCK, S_E, S_EB
from statemix.models.nn.train import adam_step
from statemix.models.nn import train
from statemix.models import tokenloop

import numba  # after statemix: statemix._jit sets numba's environment (cache directory, no SVML) first

from conftest import EVERY_MODEL, config_with, text_sample
from determinism_probe import bpe_input, bpe_stream

#: the module's fixture trains the SSM (its parallel training compiles): the worker that compiles
#: every model runs these tests too (pytest -n, conftest)
pytestmark = EVERY_MODEL

#: 5 head blocks of HEAD_BLOCK tokens (the last one partial); the default preset's sizes otherwise:
#: 32-token chunks, width 32, 64 channels in 4 scan blocks of 16
V = ssm.PARALLEL_MIN_VOCAB + 904
CONFIG = config_with(vocab=V)


@pytest.fixture(autouse=True)
def two_threads():
    """Fail (not skip) where numba cannot run 2 threads; restore this thread's count afterwards."""
    assert numba.config.NUMBA_NUM_THREADS >= 2, (
        "these tests need 2 numba threads: set NUMBA_NUM_THREADS=2 on a machine with one core")
    before = numba.get_num_threads()
    yield
    numba.set_num_threads(before)


def on_threads(threads: int, function, *args):
    """``function(*args)`` with exactly ``threads`` numba threads."""
    numba.set_num_threads(threads)
    assert numba.get_num_threads() == threads
    return function(*args)


def same_bits(a: np.ndarray, b: np.ndarray) -> bool:
    """Equal bit for bit (float32 compared as uint32: -0.0 != 0.0, NaN payloads count)."""
    if a.dtype != b.dtype or a.shape != b.shape:
        return False
    if a.dtype == np.float32:
        return np.array_equal(a.view(np.uint32), b.view(np.uint32))
    return np.array_equal(a, b)


def copy_of(arrays):
    return type(arrays)(*(np.array(a, copy=True) for a in arrays))


def differing(one, two) -> list[str]:
    """Names of the fields of two Acts / Grads tuples that differ in any bit."""
    return [name for name, a, b in zip(one._fields, one, two) if not same_bits(a, b)]


@kernel(parallel=True)
def _thread_of_iteration(out):
    for i in prange(out.shape[0]):
        out[i] = numba.get_thread_id()


def test_two_threads_really_share_a_parallel_loop():
    """At 2 threads a prange loop of only 2 iterations runs on 2 different threads (so every loop of
    the tests below, which has at least 2, is really split), and at 1 thread on one."""
    ids = np.full(2, -1, dtype=np.int64)
    on_threads(2, _thread_of_iteration, ids)
    assert sorted(ids) == [0, 1]
    on_threads(1, _thread_of_iteration, ids)
    assert list(ids) == [0, 0]


@pytest.fixture(scope="module")
def chunk():
    """A network over V token ids after two trained chunks (at 1 thread), then a third chunk run
    position by position without training: its activations are those of the coding pass, and the
    state at its start is still in hs[:, 0]."""
    saved = numba.get_num_threads()
    numba.set_num_threads(1)
    network = Network(CONFIG)
    tokens = np.random.default_rng(18).integers(0, V, size=3 * CONFIG.chunk)
    for i, token in enumerate(tokens):
        network.predict()
        network.observe(int(token), train=i < 2 * CONFIG.chunk)
    numba.set_num_threads(saved)
    return network


def test_the_kernels_have_parallel_work_at_this_size(chunk):
    """The loops are parallel (compiled with parallel=True) and have at least 2 iterations each."""
    for dispatcher in (forward_chunk, backward_chunk, adam_step):
        assert dispatcher.targetoptions.get("parallel"), dispatcher
    assert V >= ssm.PARALLEL_MIN_VOCAB
    E = CONFIG.d_model * CONFIG.expand
    assert min(CONFIG.chunk, E // CONFIG.channel_block, -(-V // HEAD_BLOCK), CONFIG.d_model) >= 2
    assert chunk.P.shape[0] // ADAM_BLOCK >= 2


def test_forward_chunk_is_the_same_at_one_and_two_threads(chunk):
    """The chunk's forward pass rerun from its start: every activation equal at 1 and 2 threads, and
    equal to the position-by-position coding pass (the same code per element, whatever the split)."""
    args = (chunk.P, chunk.Aneg, chunk.off, chunk.sz)
    results = {}
    for threads in (1, 2):
        acts = copy_of(chunk.acts)
        on_threads(threads, forward_chunk, *args, acts, chunk.tin, chunk.sz[S_EB])
        results[threads] = acts
    assert differing(results[1], results[2]) == []
    assert differing(results[2], chunk.acts) == []


def backward_at(chunk, threads: int):
    G = np.full_like(chunk.G, np.nan)  # the kernel must overwrite every entry
    grads = copy_of(chunk.grads)
    on_threads(threads, backward_chunk, chunk.P, chunk.Aneg, chunk.off, chunk.sz, chunk.hy,
               copy_of(chunk.acts), grads, chunk.tin, chunk.tout, G, chunk.sz[S_EB])
    return G, grads


def test_backward_chunk_is_the_same_at_one_and_two_threads(chunk):
    """Every parameter gradient and every activation gradient equal bit for bit at 1 and 2 threads."""
    G1, grads1 = backward_at(chunk, 1)
    G2, grads2 = backward_at(chunk, 2)
    assert same_bits(G1, G2)
    assert differing(grads1, grads2) == []
    assert np.all(np.isfinite(G1)) and np.count_nonzero(G1) > G1.shape[0] // 2


def test_adam_step_is_the_same_at_one_and_two_threads(chunk):
    """Two Adam steps with the gradient clipped (so the global norm, the one reduction over the
    partition, reaches the parameters): parameters, moments, bias corrections, the per-block norms
    and the returned norm equal bit for bit at 1 and 2 threads."""
    G, _ = backward_at(chunk, 1)
    hy = chunk.hy.copy()
    hy[H_CLIP] = np.float32(1e-3)
    results = {}
    for threads in (1, 2):
        P, M, W, sf, partial = (a.copy() for a in (chunk.P, chunk.M, chunk.W, chunk.sf, chunk.partial))
        norms = [on_threads(threads, adam_step, P, G * np.float32(step), M, W, hy, sf, np.float32(0.002),
                            partial) for step in (1, 2)]
        results[threads] = (P, M, W, sf, partial, np.array(norms, dtype=np.float32))
    assert results[1][5][0] > hy[H_CLIP]  # clipped
    for name, one, two in zip(("P", "M", "W", "sf", "partial", "norms"), results[1], results[2]):
        assert same_bits(one, two), name
    assert not same_bits(results[1][0], chunk.P)


def test_serial_twins_give_the_bits_of_the_parallel_kernels(chunk):
    """The delayed trainer runs inside a parallel loop, so it calls serial twins of the parallel
    kernels (train._forward_chunk_serial, ...), with the scans in one task of all E channels as the
    trainer calls them: every output equal to the parallel kernel's at 2 threads (channel blocks of
    ``channel_block``), bit for bit."""
    for twin in (train._forward_chunk_serial, train._backward_chunk_serial, train._adam_step_serial):
        assert not twin.targetoptions.get("parallel"), twin
    results = {}
    assert chunk.sz[S_EB] < chunk.sz[S_E]
    for name, forward, backward, adam, block in (
            ("parallel", forward_chunk, backward_chunk, adam_step, chunk.sz[S_EB]),
            ("serial", train._forward_chunk_serial, train._backward_chunk_serial, train._adam_step_serial,
             chunk.sz[S_E])):
        acts, grads = copy_of(chunk.acts), copy_of(chunk.grads)
        P, M, W, sf, partial = (a.copy() for a in (chunk.P, chunk.M, chunk.W, chunk.sf, chunk.partial))
        G = np.full_like(chunk.G, np.nan)
        on_threads(2, forward, P, chunk.Aneg, chunk.off, chunk.sz, acts, chunk.tin, block)
        on_threads(2, backward, P, chunk.Aneg, chunk.off, chunk.sz, chunk.hy, acts, grads, chunk.tin,
                   chunk.tout, G, block)
        norm = on_threads(2, adam, P, G, M, W, chunk.hy, sf, np.float32(0.002), partial)
        results[name] = (acts, grads, (G, P, M, W, sf, partial, np.array([norm], dtype=np.float32)))
    assert differing(results["parallel"][0], results["serial"][0]) == []
    assert differing(results["parallel"][1], results["serial"][1]) == []
    for one, two in zip(results["parallel"][2], results["serial"][2]):
        assert same_bits(one, two)


def test_delayed_training_stream_is_the_same_at_one_and_two_threads(monkeypatch):
    """The ssm preset mix trains with a delay of one chunk: at 2 threads the training of a chunk
    runs on a second thread beside the coding of the next (statemix._jit.beside).  Coded at -T1 and
    -T2 the stream is the same bytes, each decodes at the other thread count, and the model ran at
    the thread count asked for: at 2 threads every delayed training ran off the coding thread, and
    some while a chunk was being coded; at 1 thread all on it, in turn.  A coder that read the
    weights the trainer writes would differ between the runs."""
    assert ssm.PRESETS["mix"].delay == 1
    data = text_sample(6000, seed=4)
    runs = []
    run_block = ssm.Model._run_block

    def spy(self, *args):
        runs.append(numba.get_num_threads())
        return run_block(self, *args)

    spans = {"coding": [], "training": []}

    def timed(name, kernel_):
        def call(*args):
            started = time.perf_counter()
            kernel_(*args)
            spans[name].append((started, time.perf_counter(), threading.get_ident()))
        return call

    monkeypatch.setattr(ssm.Model, "_run_block", spy)
    monkeypatch.setattr(tokenloop, "code_tokens", timed("coding", tokenloop.code_tokens))
    monkeypatch.setattr(tokenloop, "train_pending", timed("training", tokenloop.train_pending))
    streams, overlapping, off_thread = {}, {}, {}
    for threads in (1, 2):
        set_threads(threads)
        spans["coding"].clear(), spans["training"].clear()
        streams[threads] = statemix.compress(data, model="ssm")
        assert spans["training"]
        off_thread[threads] = {ident != threading.get_ident() for _, _, ident in spans["training"]}
        overlapping[threads] = any(a < d and c < b for a, b, _ in spans["training"] for c, d, _ in spans["coding"])
    assert streams[1] == streams[2]
    assert statemix.decompress(streams[1], threads=2) == data
    assert statemix.decompress(streams[2], threads=1) == data
    assert runs == [1, 2, 2, 1]
    assert off_thread == {1: {False}, 2: {True}} and overlapping == {1: False, 2: True}


def test_bpe_preset_stream_is_the_same_at_one_and_two_threads(monkeypatch):
    """A whole stream of the ssm bpe preset (V = 4,712: the parallel path) is the same bytes coded
    at -T1 and -T2, and each decodes at the other thread count.  A spy on the model's block loop
    checks that it ran at the thread count asked for, with V >= PARALLEL_MIN_VOCAB (no forced single
    thread)."""
    data = bpe_input()
    runs = []
    run_block = ssm.Model._run_block

    def spy(self, *args):
        runs.append((self.model_config.vocab >= ssm.PARALLEL_MIN_VOCAB, numba.get_num_threads()))
        return run_block(self, *args)

    monkeypatch.setattr(ssm.Model, "_run_block", spy)
    streams = {}
    for threads in (1, 2):
        set_threads(threads)
        streams[threads] = bpe_stream(data)
    assert streams[1] == streams[2]
    assert statemix.decompress(streams[1], threads=2) == data
    assert statemix.decompress(streams[2], threads=1) == data
    assert runs == [(True, 1), (True, 2), (True, 2), (True, 1)]
