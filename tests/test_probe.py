"""The second probe's findings (issue 50), one test per row of its table: each was seen to fail
before its fix.  Level 1 throughout, so that the kernels compile quickly."""

from __future__ import annotations

import errno
import io
import os
import random
import re
import subprocess
import time
from pathlib import Path

import pytest

import statemix

from conftest import text_sample
from test_cli import CLI, assert_ok, assert_one_error, check_error, run, snapshot, wait_until_working

SMALL = text_sample(3_000, seed=21)


@pytest.fixture
def small_smx(tmp_path) -> Path:
    path = tmp_path / "b.smx"
    path.write_bytes(statemix.compress(SMALL, level=1))
    return path


# row 1 ----------------------------------------------------------------------------------------------

@pytest.mark.parametrize("variable", ["STATEMIX_CACHE_DIR", "NUMBA_CACHE_DIR"])
def test_probe_1_cache_clean_up_removes_only_what_statemix_made(tmp_path, variable):
    from statemix import _jit

    base = tmp_path / "cache"
    mine = base / "src-thesis"  # the user's folder, in the folder they gave as the cache
    (mine / "chapters").mkdir(parents=True)
    (mine / "chapters" / "one.tex").write_text("It was a dark and stormy night.\n")
    stale = base / "src-0000000000000000"  # one statemix made, unused for a month
    stale.mkdir()
    (stale / getattr(_jit, "STAMP", ".statemix-kernels")).touch()
    month_ago = time.time() - 30 * 86400
    for folder in (mine, stale):
        os.utime(folder, (month_ago, month_ago))
    env = {k: v for k, v in os.environ.items() if k not in ("STATEMIX_CACHE_DIR", "NUMBA_CACHE_DIR")}
    env[variable] = str(base)
    subprocess.run([*CLI[:1], "-c", "import statemix._jit"], env=env, cwd=tmp_path, check=True, timeout=300)
    assert (mine / "chapters" / "one.tex").read_text() == "It was a dark and stormy night.\n"
    assert not stale.exists()


# row 2 ----------------------------------------------------------------------------------------------

@pytest.mark.parametrize("arguments,error", [
    (dict(encoding="utf8x"), LookupError),
    (dict(newline="x"), ValueError),
    (dict(errors=5), TypeError),
    (dict(errors="no-such-handler"), LookupError),
])
def test_probe_2_open_checks_text_arguments_before_touching_the_file(tmp_path, arguments, error):
    path = tmp_path / "existing.smx"
    path.write_bytes(statemix.compress(b"kept", level=1))
    before = path.read_bytes()
    with pytest.raises(error):
        statemix.open(path, "wt", level=1, **arguments)
    assert path.read_bytes() == before


# row 3 ----------------------------------------------------------------------------------------------

def test_probe_3_force_works_with_names_as_long_as_the_plain_command_takes(tmp_path):
    name = "n" * 240  # NAME.smx is 244 bytes: its hidden temporary name would be over 255
    (tmp_path / name).write_bytes(SMALL)
    assert_ok(run(["-1", name], tmp_path))  # the plain command works
    (tmp_path / name).write_bytes(SMALL[::-1])
    assert_ok(run(["-1", "-f", name], tmp_path))
    assert statemix.decompress((tmp_path / (name + ".smx")).read_bytes()) == SMALL[::-1]
    assert_ok(run(["-d", "-f", name + ".smx"], tmp_path))
    assert (tmp_path / name).read_bytes() == SMALL[::-1]
    assert sorted(p.name for p in tmp_path.iterdir()) == [name, name + ".smx"]


# row 4 ----------------------------------------------------------------------------------------------

@pytest.mark.skipif(not os.path.exists("/dev/full"), reason="needs /dev/full")
@pytest.mark.parametrize("args", [["-V"], ["-h"], ["-l", "b.smx"], ["diagnose", "--level", "1", "--no-stages", "b.txt"]],
                         ids=["version", "help", "list", "diagnose"])
def test_probe_4_a_full_standard_output_is_one_line(tmp_path, small_smx, args):
    (tmp_path / "b.txt").write_bytes(SMALL)
    with open("/dev/full", "wb") as full:
        result = run(args, tmp_path, stdout=full)
    assert_one_error(result, "(stdout)", "cannot write", "No space left on device")


# row 5 ----------------------------------------------------------------------------------------------

def test_probe_5_an_empty_output_name_is_a_usage_error_before_any_work(tmp_path):
    (tmp_path / "a.txt").write_bytes(SMALL)
    started = time.monotonic()
    result = check_error(tmp_path, ["-1", "-o", "", "a.txt"], "-o/--output", "empty")
    assert time.monotonic() - started < 10
    assert b"compiling" not in result.stderr


def test_probe_5_a_second_writer_of_the_same_output_is_refused_before_its_work(tmp_path):
    (tmp_path / "big.txt").write_bytes(text_sample(3_000_000, seed=6))
    (tmp_path / "other.txt").write_bytes(text_sample(3_000_000, seed=7))
    first = subprocess.Popen([*CLI, "-1", "-T1", "-o", "c.smx", "big.txt"], cwd=tmp_path, stdin=subprocess.DEVNULL,
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        wait_until_working(first, 1.5)
        started = time.monotonic()
        second = run(["-1", "-T1", "-o", "c.smx", "other.txt"], tmp_path)
        took = time.monotonic() - started
        overlapped = first.poll() is None
    finally:
        out, err = first.communicate(timeout=600)
    line = assert_one_error(second, "c.smx", "another statemix is writing")
    assert line.count("c.smx") == 1, line
    assert took < 5, f"refused after {took:.1f} s"
    assert overlapped, "the first writer ended before the second was refused: no overlap was tested"
    assert first.returncode == 0, err
    assert statemix.decompress((tmp_path / "c.smx").read_bytes()) == (tmp_path / "big.txt").read_bytes()


# row 6 ----------------------------------------------------------------------------------------------

def test_probe_6_stdout_and_output_contradict(tmp_path):
    (tmp_path / "a.txt").write_bytes(SMALL)
    result = check_error(tmp_path, ["-1", "-c", "-o", "out.smx", "a.txt"], "-c/--stdout", "-o/--output", "contradict")
    assert result.stdout == b""


# row 7 ----------------------------------------------------------------------------------------------

@pytest.mark.parametrize("text,size", [
    ("1.5GiB", 3 << 29), ("1.5 GiB", 3 << 29), ("800MB", 800 << 20), ("800mb", 800 << 20), ("1.5MiB", 3 << 19),
    ("64KB", 1 << 16), ("64k", 1 << 16), ("2G", 2 << 30), ("0.5M", 1 << 19), ("1000", 1000), (".5KiB", 512),
])
def test_probe_7_sizes_as_xz_and_zstd_take_them(text, size):
    from statemix_cli.main import _size_option

    assert _size_option(text, None) == size


def test_probe_7_sizes_on_the_command_line_and_small_limits_printed_right(tmp_path, small_smx):
    assert_ok(run(["--memory", "1.5GiB", "-t", "b.smx"], tmp_path))
    assert_ok(run(["--memory", "800MB", "-t", "b.smx"], tmp_path))
    (tmp_path / "a.txt").write_bytes(SMALL * 40)  # 120 kB: two segments of 64 KB
    assert_ok(run(["-1", "--segment-size", "64KB", "a.txt"], tmp_path))
    assert len(statemix.read_info(io.BytesIO((tmp_path / "a.txt.smx").read_bytes()))) == 2
    assert_ok(run(["-1", "-f", "--segment-size", "1.5MiB", "a.txt"], tmp_path))
    line = assert_one_error(run(["--memory", "1k", "-t", "b.smx"], tmp_path), "1 KiB")
    assert "limit of 0 MiB" not in line
    check_error(tmp_path, ["--memory", "1.5.5GiB", "-t", "b.smx"], "not a size")


# row 8 ----------------------------------------------------------------------------------------------

def test_probe_8_the_progress_bar_label_is_escaped_like_messages(capsys):
    from statemix_cli.main import _progress
    from statemix_cli.messages import escape

    name = "evil\x1b[2Jname\nsecond line"
    bar = _progress(100, name, True)
    try:
        assert bar.desc == escape(name)
        assert "\x1b" not in bar.desc and "\n" not in bar.desc
    finally:
        bar.close()


# row 9 ----------------------------------------------------------------------------------------------

def test_probe_9_list_counts_the_seek_index_in_the_compressed_size(tmp_path):
    data = SMALL * 50  # 150 kB: three segments of 64 KiB and a seek index
    path = tmp_path / "seg.smx"
    path.write_bytes(statemix.compress(data, level=1, segment_size=1 << 16))
    result = run(["-l", "seg.smx"], tmp_path)
    assert_ok(result)
    row = result.stdout.decode().splitlines()[1].split()
    assert (int(row[0]), int(row[2]), int(row[3])) == (3, path.stat().st_size, len(data))


# row 10 ---------------------------------------------------------------------------------------------

def test_probe_10_diagnose_counts_stored_regions_at_their_cost():
    from statemix.diagnose import diagnose

    noise = random.Random(7).randbytes(1 << 15)  # the second block (16-48 KiB): stored
    data = text_sample(1 << 14, seed=1) + noise + text_sample(1 << 15, seed=2)
    report = diagnose(data, level=1, stages=False, curve_points=80)
    assert report.unmodelled_bytes == len(noise)
    inside = [bpb for start, end, bpb in report.learning_curve if start >= 1 << 14 and end <= 3 << 14]
    assert inside and min(inside) >= 7.9, inside  # stored: 8 bits per byte, not 0
    assert report.to_dict()["unmodelled_bytes"] == len(noise)


# row 11 ---------------------------------------------------------------------------------------------

def test_probe_11_trailing_junk_is_named_with_its_offset(tmp_path, small_smx):
    stream = small_smx.read_bytes()
    small_smx.write_bytes(stream + b"junk after the stream\n")
    where = f"byte {len(stream):,}"
    check_error(tmp_path, ["-d", "b.smx"], "b.smx", where, "trailing")
    check_error(tmp_path, ["-d", "-T1", "b.smx"], "b.smx", where, "trailing")
    check_error(tmp_path, ["-l", "b.smx"], "b.smx", where, "trailing", stdout=subprocess.DEVNULL)
    with pytest.raises(statemix.StatemixError, match=re.escape(where)):
        statemix.decompress(small_smx.read_bytes())


def test_probe_11_a_suffix_without_a_name(tmp_path, small_smx):
    (tmp_path / "dir").mkdir()
    small_smx.rename(tmp_path / "dir" / ".smx")
    check_error(tmp_path, ["-d", "dir/.smx"], "dir/.smx", "no file name before the .smx suffix")


def test_probe_11_rm_that_cannot_remove_says_so(tmp_path, monkeypatch, capsys):
    from statemix_cli import main as cli

    (tmp_path / "a.txt").write_bytes(SMALL)
    monkeypatch.chdir(tmp_path)
    real_unlink = os.unlink

    def read_only(path, *args, **kwargs):
        if os.fspath(path) == "a.txt":
            raise OSError(errno.EROFS, os.strerror(errno.EROFS), path)
        return real_unlink(path, *args, **kwargs)

    monkeypatch.setattr(cli.os, "unlink", read_only)
    with pytest.raises(SystemExit) as exit_:
        cli.run(["-1", "--rm", "a.txt"])
    assert exit_.value.code == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "a.txt: cannot remove" in err[0] and "Read-only file system" in err[0], err
    assert statemix.decompress((tmp_path / "a.txt.smx").read_bytes()) == SMALL
    assert (tmp_path / "a.txt").read_bytes() == SMALL
