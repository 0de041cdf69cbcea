"""bench/enwik8.py on small generated files, with a stand-in for statemix and whatever tools exist."""
from __future__ import annotations

import importlib.util
import json
import os
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
SCRIPT = ROOT / "bench" / "enwik8.py"
ENWIK8_1M = ROOT.parent / "shared" / "data" / "enwik8" / "enwik8_1M"

pytestmark = pytest.mark.skipif(not hasattr(os, "fork"), reason="the benchmark measures via fork")

FAKE_STATEMIX = r'''
import os, sys, time, zlib
args = sys.argv[1:]
if "--version" in args:
    print("fake-statemix 0"); sys.exit(0)
mode = os.environ.get("FAKE_MODE", "")
data = open(args[-1], "rb").read()
if mode == "sleep":
    time.sleep(30)
if "-d" in args:
    out = zlib.decompress(data)
    if mode == "corrupt":
        out = out[:100] + bytes([out[100] ^ 1]) + out[101:]
else:
    out = zlib.compress(data, 9)
sys.stdout.buffer.write(out)
'''


def load_module():
    spec = importlib.util.spec_from_file_location("bench_enwik8", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up there
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def bench():
    return load_module()


@pytest.fixture
def fake(tmp_path):
    path = tmp_path / "fake_statemix.py"
    path.write_text(FAKE_STATEMIX)
    return shlex.join([sys.executable, str(path)])


@pytest.fixture
def text_file(tmp_path):
    words = [b"statemix", b"model", b"<page>", b"[[link]]", b"the", b"of", b"1999", b"\n"]
    data = bytearray()
    state = 12345
    while len(data) < 200_000:
        state = (state * 1103515245 + 12345) % 2**31
        data += words[state % len(words)] + b" "
    path = tmp_path / "sample.txt"
    path.write_bytes(bytes(data[:200_000]))
    return path


def run(*args, env_extra=None):
    env = dict(os.environ, **(env_extra or {}))
    return subprocess.run([sys.executable, str(SCRIPT), "--no-progress", *map(str, args)],
                          capture_output=True, text=True, env=env, timeout=300)


def test_parse_size(bench):
    assert bench.parse_size("1e6") == 1_000_000
    assert bench.parse_size("3000000") == 3_000_000
    assert bench.parse_size("10M") == 10_000_000
    assert bench.parse_size("500kB") == 500_000
    assert bench.parse_size("whole") is None


def test_plan_sizes_clips_to_the_file(bench):
    sizes, notes = bench.plan_sizes([1_000_000, 3_000_000], 1_000_000)
    assert sizes == [1_000_000] and len(notes) == 1
    sizes, notes = bench.plan_sizes([1_000_000, None], 2_500_000)
    assert sizes == [1_000_000, 2_500_000] and notes == []


def test_first_difference(bench, tmp_path):
    a, b = tmp_path / "a", tmp_path / "b"
    a.write_bytes(b"x" * 5000)
    b.write_bytes(b"x" * 5000)
    assert bench.first_difference(a, b) is None
    b.write_bytes(b"x" * 4000 + b"y" + b"x" * 999)
    assert bench.first_difference(a, b) == 4000
    b.write_bytes(b"x" * 4500)
    assert bench.first_difference(a, b) == 4500


def test_enwik8_identity(bench):
    assert bench.is_enwik8_prefix(1_000_000, "83a2cefd8ca00049e0445542dabd25a0", "other")
    assert bench.is_enwik8_prefix(10_000_000, "unknown", bench.ENWIK8_MD5)
    assert not bench.is_enwik8_prefix(1_000_000, "unknown", "other")


def test_round_trip_table_and_json(tmp_path, fake, text_file):
    out = tmp_path / "result.json"
    done = run(text_file, "--sizes", "50k", "10M", "--statemix", fake, "--level", "2",
               "--threads", "1", "--json", out, "--extra", "copy=" + shlex.join([
                   sys.executable, "-c", "import shutil, sys; shutil.copyfile(*sys.argv[1:])"])
               + " {in} {out}")
    assert done.returncode == 0, done.stderr
    assert "| input bytes | compressor |" in done.stdout
    assert "statemix --level 2 -T 1" in done.stdout
    assert "UNVERIFIED" in done.stdout  # --extra without --extra-d
    report = json.loads(out.read_text())
    rows = [r for r in report["results"] if r["kind"] == "measured"]
    assert {r["size"] for r in rows} == {50_000, 200_000}  # 10M clipped to the whole file
    assert not any(r["kind"] == "published" for r in report["results"])
    for row in rows:
        if row["compressor"] == "copy":
            assert not row["verified"] and row["output_bytes"] == row["size"]
            continue
        assert row["verified"], row
        assert row["compress"]["peak_rss_bytes"] > 0 and row["compress"]["seconds"] > 0
    assert report["tools"][0]["version"] == "fake-statemix 0"


def test_failed_round_trip_is_marked(tmp_path, fake, text_file):
    out = tmp_path / "result.json"
    done = run(text_file, "--statemix", fake, "--json", out, "--skip", "xz", "--skip", "zstd",
               "--skip", "bzip2", "--skip", "gzip", env_extra={"FAKE_MODE": "corrupt"})
    assert done.returncode == 2
    assert "FAILED: round trip differs at byte 100" in done.stdout
    row = json.loads(out.read_text())["results"][0]
    assert row["compressed_bytes"] is None and not row["verified"]


def test_timeout_is_marked(tmp_path, fake, text_file):
    done = run(text_file, "--statemix", fake, "--json", tmp_path / "r.json", "--timeout", "1",
               "--skip", "xz", "--skip", "zstd", "--skip", "bzip2", "--skip", "gzip",
               env_extra={"FAKE_MODE": "sleep"})
    assert done.returncode == 2
    assert "FAILED: compress timed out" in done.stdout


def test_missing_input_says_where_to_get_enwik8(tmp_path):
    done = run(tmp_path / "enwik8", "--json", tmp_path / "r.json")
    assert done.returncode == 1
    assert "enwik8.zip" in done.stderr and "a1fa5ffddb56f4953e226637dabbb36a" in done.stderr
    assert not (tmp_path / "r.json").exists()


@pytest.mark.skipif(not ENWIK8_1M.is_file(), reason="shared enwik8_1M not present")
def test_published_row_beside_statemix_on_enwik8(tmp_path, fake):
    out = tmp_path / "result.json"
    done = run(ENWIK8_1M, "--statemix", fake, "--json", out, "--skip", "xz", "--skip", "zstd",
               "--skip", "bzip2", "--skip", "gzip", "--skip", "brotli", "--skip", "7z",
               "--skip", "zpaq")
    assert done.returncode == 0, done.stderr
    published = [r for r in json.loads(out.read_text())["results"] if r["kind"] == "published"]
    assert [(r["size"], r["compressed_bytes"]) for r in published] == [(1_000_000, 265_370)]
