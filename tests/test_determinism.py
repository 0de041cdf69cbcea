"""Bit-exact coding across thread counts and CPU targets, checked in fresh subprocesses.

Variants that change the CPU target run with their own empty numba cache, so their kernels are
compiled for that target; thread-count variants load the kernels this process compiled.  A stream
made under one setting is decoded under every other; all must agree with pinned hashes.
"""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

import statemix
from determinism_probe import probe_originals, probe_streams

HERE = Path(__file__).resolve().parent

#: sha256 of determinism_probe.probe_streams(); a change here is a change of format or arithmetic
GOLDEN = {
    "oneshot-2": "088268459c334bf3cc04b46c3fc56b9b45eea68413d938bab48b7212c33f440d",
    "stream-1": "4381d256221f60b9e04443643498bcc32ba1fb64ee9da7556a59471149e5282b",
    "stream-3": "07fb2e24522f8f1403d2c1586067dbf9c8ceaaf055de7e2247cbc8a965523c24",
    "ssm": "f7b0f1e02d996621641341bdc00978fe5116ff67f1793ff6129dbc36af5f99c6",
    "ssm-1": "246740c0d380b50a58040b0e61d59ef00351fe417198b3d422b40df5fdce6a48",
}

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
                   env=env, check=True, timeout=600)
    return json.loads(out.read_text())


@pytest.fixture(scope="module")
def streams() -> dict:
    return {name: stream.hex() for name, stream in probe_streams().items()}


def test_in_process_streams_match_golden(streams):
    originals = probe_originals()
    for name, stream in streams.items():
        assert hashlib.sha256(bytes.fromhex(stream)).hexdigest() == GOLDEN[name], name
        assert statemix.decompress(bytes.fromhex(stream)) == originals[name]


@pytest.mark.parametrize("variant", sorted(VARIANTS))
def test_variant_reproduces_and_decodes(tmp_path, streams, variant):
    result = _run_probe(tmp_path, variant, streams)
    assert result["hashes"] == GOLDEN
    assert result["decoded"] == {name: hashlib.sha256(data).hexdigest() for name, data in probe_originals().items()}


def test_threads_option_never_changes_output():
    data = probe_originals()["oneshot-2"]
    assert statemix.compress(data, threads=1) == statemix.compress(data, threads=2)
