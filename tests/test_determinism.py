"""Bit-exact coding across thread counts and CPU targets, checked in fresh subprocesses.

Variants that change the CPU target run with their own empty numba cache, so their kernels are
compiled for that target; thread-count variants load the kernels this process compiled.  A stream
made under one setting is decoded under every other; all must agree with pinned hashes.
"""

from __future__ import annotations

import hashlib
import io
import json
import os
import subprocess
import sys
import threading
from pathlib import Path

import pytest

import statemix
from statemix.models import ssm
from conftest import EVERY_MODEL
from determinism_probe import probe_originals, probe_streams

#: the module's tests share a costly module fixture, which compiles every model: one test worker runs
#: them all (pytest -n), with the other tests that compile level 3 or the ssm model (conftest)
pytestmark = EVERY_MODEL

HERE = Path(__file__).resolve().parent

#: sha256 of determinism_probe.probe_streams(); a change here is a change of format or arithmetic
#: (last: the ssm model's coarse floor, its tokens other than the most probable kept 2**-9 of the
#: total, issue 50; before, cm's model revision 8 at levels 2 and 3, its coded probability kept
#: 2**-12 from 0 and 1, issue 50; before, level 3's source the pretrained SSM from its second weight file, issue 49; before,
#: its first; before, format 3, issue 50: block headers
#: checked by a CRC32, code words written whole, format 2's streams still decoding: test_api's goldens)
GOLDEN = {
    "oneshot-2": "24e0433e37932f49a4f8109e4f7740f559cbde885de9d13e833cfc03ff08603d",
    "stream-1": "60a652ff62d544386bc9874959d1fa94b66963245a42ab2b68af98803b2bc32e",
    "stream-3": "0eec3241aa7d045aefd4c153ceddcab99901a6178a44cd82a38ccce77badc8ba",
    "ssm": "1b6ed2e6c3e4e2dea31ee0077f024fd884112c65bb78735531048646d908d295",
    "ssm-1": "abce3180c521cc338ebd85f0bf10048cc5672bb76e89bf935ce250b916a78728",
    "ssm-bpe": "465b1c98e600dec8ae5c9f25d11fbb431b50fbd4182c6e6e25aa4895978d142f",
}
#: length of the stream of the ssm bpe preset (a parallel preset: V = 4,712 tokens)
BPE_GOLDEN_LENGTH = 6994

VARIANTS = {  # name: (environment, needs its own cache)
    "threads-1": ({"NUMBA_NUM_THREADS": "1"}, False),
    "threads-2": ({"NUMBA_NUM_THREADS": "2"}, False),
    # one fresh compile for the other CPU target: generic code, and glibc told to avoid AVX2 and FMA
    "cpu-generic-no-avx2-fma": ({"NUMBA_CPU_NAME": "generic", "GLIBC_TUNABLES": "glibc.cpu.hwcaps=-AVX2,-FMA"}, True),
}


def _run_probe(tmp_path: Path, name: str, streams: dict) -> dict:
    env_changes, own_cache = VARIANTS[name]
    env = {k: v for k, v in os.environ.items() if not k.startswith("NUMBA_")}
    env.update(env_changes)
    if own_cache:
        env["STATEMIX_CACHE_DIR"] = str(tmp_path / f"cache-{name}")
    given = tmp_path / f"in-{name}.json"
    given.write_text(json.dumps(streams))
    out = tmp_path / f"out-{name}.json"
    subprocess.run([sys.executable, str(HERE / "determinism_probe.py"), str(given), str(out)],
                   env=env, check=True, timeout=2400)  # the CPU-target variant compiles every kernel
    return json.loads(out.read_text())


@pytest.fixture(scope="module")
def streams() -> dict:
    return {name: stream.hex() for name, stream in probe_streams().items()}


def test_in_process_streams_match_golden(streams):
    originals = probe_originals()
    for name, stream in streams.items():
        assert hashlib.sha256(bytes.fromhex(stream)).hexdigest() == GOLDEN[name], name
        assert statemix.decompress(bytes.fromhex(stream)) == originals[name]


@pytest.mark.parametrize("variant", [name for name, (_, own_cache) in VARIANTS.items() if not own_cache])
def test_variant_reproduces_and_decodes(tmp_path, streams, variant):
    result = _run_probe(tmp_path, variant, streams)
    assert result["hashes"] == GOLDEN
    assert result["decoded"] == {name: hashlib.sha256(data).hexdigest() for name, data in probe_originals().items()}


@pytest.mark.xdist_group("generic-cpu")
def test_the_generic_cpu_target_reproduces_and_decodes(tmp_path):
    """Every kernel compiled again for the generic CPU target: its streams hash as the golden, so they
    are byte for byte those of every other setting, and it decodes them.  It needs none of this
    process's compiles, so it runs in a test worker of its own, beside the others (pytest -n)."""
    result = _run_probe(tmp_path, "cpu-generic-no-avx2-fma", {})
    assert result["hashes"] == GOLDEN
    assert result["decoded"] == {name: hashlib.sha256(data).hexdigest() for name, data in probe_originals().items()}


def test_bpe_golden_pins_a_parallel_preset(streams):
    """The "ssm-bpe" golden is the bpe preset with a vocabulary large enough that the ssm model runs
    its kernels on every thread (V >= PARALLEL_MIN_VOCAB): the other ssm goldens are over bytes, which
    run on one thread, so only this one pins the arithmetic of the parallel path."""
    stream = bytes.fromhex(streams["ssm-bpe"])
    assert len(stream) == BPE_GOLDEN_LENGTH
    (info,) = statemix.read_info(io.BytesIO(stream))
    assert info.model.describe().startswith("ssm preset bpe (")
    (block,) = info.blocks
    assert block.kind == "modelled"
    vocabulary = ssm.Model(ssm.PRESETS["bpe"]).train_vocabulary(probe_originals()["ssm-bpe"])
    assert vocabulary.size >= ssm.PARALLEL_MIN_VOCAB


def test_threads_option_never_changes_output(side_jobs):
    data = probe_originals()["oneshot-2"]
    assert statemix.compress(data, threads=1) == statemix.compress(data, threads=2)
    assert side_jobs and threading.get_ident() not in side_jobs  # zstandard ran beside the model
