"""The statemix command, run for real in subprocesses (``python -m statemix_cli``).

Each run costs about a second (numba and the cached kernels load), so one test often checks several
things.  Every error case checks the whole contract: exit status 1, exactly one line on stderr that
starts with "statemix:", no traceback, and the directory exactly as it was (no output or temporary
file left, inputs unchanged down to their mtime).
"""

from __future__ import annotations

import os
import random
import shutil
import signal
import subprocess
import sys
import time
from importlib.metadata import version
from pathlib import Path

import pytest

import statemix

from conftest import SHARED_DATA, shared_file, shared_files, text_sample

CLI = [sys.executable, "-m", "statemix_cli"]
#: a guard against a hung command, long enough for a first run that compiles level 3 on a slow machine
TIMEOUT = 1200

TEXT = text_sample(20_000, seed=2)
#: text then random bytes: the random half makes the compressor try zstandard beside the model
MIXED = text_sample(6_000, seed=3) + random.Random(4).randbytes(6_000)


def run(args, cwd, stdin: bytes | None = None, **kwargs) -> subprocess.CompletedProcess:
    """Run the command in ``cwd``; stdout and stderr are captured unless given in ``kwargs``."""
    kwargs.setdefault("stdout", subprocess.PIPE)
    kwargs.setdefault("stderr", subprocess.PIPE)
    if stdin is None:
        kwargs["stdin"] = subprocess.DEVNULL
    return subprocess.run([*CLI, *map(str, args)], cwd=cwd, timeout=TIMEOUT, input=stdin, **kwargs)


def snapshot(directory: Path) -> dict:
    """Every entry of ``directory`` (hidden ones included) with its bytes, mode and mtime."""
    entries = {}
    for path in sorted(directory.iterdir()):
        info = path.lstat()
        content = path.read_bytes() if path.is_file() and os.access(path, os.R_OK) else None
        entries[path.name] = (content, info.st_mode, info.st_mtime_ns)
    return entries


def assert_ok(result: subprocess.CompletedProcess) -> None:
    assert result.returncode == 0, result.stderr.decode(errors="replace")
    assert result.stderr == b""


def assert_one_error(result: subprocess.CompletedProcess, *fragments: str) -> str:
    """Check the error contract of one failed run; return its message line."""
    err = result.stderr.decode(errors="replace")
    assert "Traceback" not in err, err
    assert result.returncode == 1, (result.returncode, err)
    lines = err.splitlines()
    assert len(lines) == 1, f"expected exactly one line on stderr, got {err!r}"
    assert lines[0].startswith("statemix: "), lines[0]
    for fragment in fragments:
        assert fragment in lines[0], (fragment, lines[0])
    return lines[0]


def check_error(directory: Path, args, *fragments: str, stdin: bytes | None = None,
                **kwargs) -> subprocess.CompletedProcess:
    """Run a command that must fail, and check that it left ``directory`` exactly as it was."""
    before = snapshot(directory)
    result = run(args, directory, stdin=stdin, **kwargs)
    assert_one_error(result, *fragments)
    assert snapshot(directory) == before
    return result


@pytest.fixture
def text_file(tmp_path) -> Path:
    path = tmp_path / "a.txt"
    path.write_bytes(TEXT)
    return path


@pytest.fixture
def smx_file(tmp_path) -> Path:
    """A valid .smx file (made with the library) in tmp_path."""
    path = tmp_path / "b.bin.smx"
    path.write_bytes(statemix.compress(TEXT))
    return path


# ---------------------------------------------------------------------------------------------------
# Working commands


def test_compress_and_decompress_files(tmp_path, text_file):
    text_file.chmod(0o640)
    os.utime(text_file, ns=(1_500_000_000_000_000_000, 1_500_000_000_000_000_000))
    original = snapshot(tmp_path)
    result = run(["a.txt"], tmp_path)
    assert_ok(result)
    assert result.stdout == b""
    compressed = tmp_path / "a.txt.smx"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a.txt", "a.txt.smx"]
    assert snapshot(tmp_path)["a.txt"] == original["a.txt"]  # the input is kept, untouched
    assert compressed.read_bytes() == statemix.compress(TEXT)  # the same bytes as the library's
    assert compressed.stat().st_mode & 0o777 == 0o640  # like xz: mode and mtime of the input
    assert compressed.stat().st_mtime_ns == text_file.stat().st_mtime_ns

    text_file.rename(tmp_path / "original.txt")
    result = run(["-d", "a.txt.smx"], tmp_path)
    assert_ok(result)
    assert result.stdout == b""
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a.txt", "a.txt.smx", "original.txt"]
    assert text_file.read_bytes() == TEXT
    assert text_file.stat().st_mode & 0o777 == 0o640


def test_stdout_option_writes_no_file(tmp_path, text_file):
    before = snapshot(tmp_path)
    compressed = run(["-c", "a.txt"], tmp_path)
    assert_ok(compressed)
    assert compressed.stdout == statemix.compress(TEXT)
    assert snapshot(tmp_path) == before
    (tmp_path / "a.txt.smx").write_bytes(compressed.stdout)
    before = snapshot(tmp_path)
    decompressed = run(["--decompress", "--stdout", "a.txt.smx"], tmp_path)
    assert_ok(decompressed)
    assert decompressed.stdout == TEXT
    assert snapshot(tmp_path) == before


def test_output_option(tmp_path, text_file):
    assert_ok(run(["-o", "out.bin", "a.txt"], tmp_path))
    assert (tmp_path / "out.bin").read_bytes() == statemix.compress(TEXT)
    assert_ok(run(["-d", "--output", "back.txt", "out.bin"], tmp_path))  # any suffix with -o
    assert (tmp_path / "back.txt").read_bytes() == TEXT
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a.txt", "back.txt", "out.bin"]


def test_stdin_to_stdout(tmp_path):
    no_file = run([], tmp_path, stdin=TEXT)
    assert_ok(no_file)
    dash = run(["-"], tmp_path, stdin=TEXT)
    assert_ok(dash)
    assert no_file.stdout == dash.stdout
    compressor = statemix.Compressor()  # no size is known on a pipe
    assert no_file.stdout == compressor.compress(TEXT) + compressor.flush()
    for args in (["-d"], ["-dc", "-"]):
        result = run(args, tmp_path, stdin=no_file.stdout)
        assert_ok(result)
        assert result.stdout == TEXT
    assert list(tmp_path.iterdir()) == []


def test_test_option(tmp_path, smx_file):
    before = snapshot(tmp_path)
    result = run(["-t", "b.bin.smx"], tmp_path)
    assert_ok(result)
    assert result.stdout == b""
    verbose = run(["--test", "-v", "b.bin.smx", "-"], tmp_path, stdin=smx_file.read_bytes())
    assert verbose.returncode == 0
    assert verbose.stdout == b""
    assert verbose.stderr.decode().count("OK") == 2
    assert snapshot(tmp_path) == before


def test_list_option(tmp_path, smx_file):
    concatenated = tmp_path / "two.smx"
    concatenated.write_bytes(statemix.compress(b"x" * 100) + statemix.compress(b""))
    before = snapshot(tmp_path)
    result = run(["-l", "b.bin.smx", "two.smx"], tmp_path)
    assert_ok(result)
    lines = result.stdout.decode().splitlines()
    assert len(lines) == 3  # heading, one line per file
    fields = lines[1].split()
    assert fields[0] == "1" and fields[1] == "2"  # streams, blocks (16 KiB, then the rest)
    assert fields[2] == str(smx_file.stat().st_size) and fields[3] == str(len(TEXT))
    assert fields[-1] == "b.bin.smx"
    fields = lines[2].split()
    assert fields[:4] == ["2", "1", str(concatenated.stat().st_size), "100"]
    verbose = run(["--list", "-v", "two.smx"], tmp_path)
    assert_ok(verbose)
    assert "stream 1" in verbose.stdout.decode() and "stream 2" in verbose.stdout.decode()
    assert snapshot(tmp_path) == before


def test_keep_is_the_default_and_rm_deletes_the_input(tmp_path, text_file):
    assert_ok(run(["-k", "a.txt"], tmp_path))
    assert text_file.read_bytes() == TEXT
    (tmp_path / "a.txt.smx").unlink()
    assert_ok(run(["--rm", "a.txt"], tmp_path))
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a.txt.smx"]
    assert_ok(run(["-d", "--rm", "a.txt.smx"], tmp_path))
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a.txt"]
    assert text_file.read_bytes() == TEXT


def test_force_overwrites(tmp_path, text_file):
    target = tmp_path / "a.txt.smx"
    target.write_bytes(b"old contents")
    check_error(tmp_path, ["a.txt"], "a.txt.smx", "exists")
    assert target.read_bytes() == b"old contents"
    assert_ok(run(["-f", "a.txt"], tmp_path))
    assert target.read_bytes() == statemix.compress(TEXT)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a.txt", "a.txt.smx"]
    check_error(tmp_path, ["-d", "a.txt.smx"], "a.txt", "exists")  # decompressing onto a.txt
    text_file.write_bytes(b"something else")
    assert_ok(run(["-d", "--force", "a.txt.smx"], tmp_path))
    assert text_file.read_bytes() == TEXT


def test_suffix_option(tmp_path, text_file):
    assert_ok(run(["-S", ".sm", "a.txt"], tmp_path))
    (tmp_path / "a.txt").rename(tmp_path / "original")
    assert_ok(run(["-d", "--suffix", ".sm", "a.txt.sm"], tmp_path))
    assert text_file.read_bytes() == TEXT


def test_empty_file_round_trips(tmp_path):
    (tmp_path / "empty").write_bytes(b"")
    assert_ok(run(["empty"], tmp_path))
    compressed = (tmp_path / "empty.smx").read_bytes()
    assert compressed == statemix.compress(b"")
    (tmp_path / "empty").unlink()
    assert_ok(run(["-d", "empty.smx"], tmp_path))
    assert (tmp_path / "empty").read_bytes() == b""
    result = run(["-"], tmp_path, stdin=b"")
    assert_ok(result)
    assert statemix.decompress(result.stdout) == b""


def test_threads_never_change_the_output(tmp_path):
    (tmp_path / "mixed.bin").write_bytes(MIXED)
    outputs = []
    for threads in ("1", "2"):
        result = run(["-c", "-T", threads, "mixed.bin"], tmp_path)
        assert_ok(result)
        outputs.append(result.stdout)
    assert outputs[0] == outputs[1]
    assert outputs[0] == statemix.compress(MIXED)
    (tmp_path / "mixed.bin.smx").write_bytes(outputs[0])
    result = run(["-dc", "--threads", "1", "mixed.bin.smx"], tmp_path)  # (-T 2: the default here)
    assert_ok(result)
    assert result.stdout == MIXED
    # segments: -T 2 codes two at once (tests/test_segments.py watches them run together)
    text = text_sample(200_000, seed=8)
    (tmp_path / "text.txt").write_bytes(text)
    segmented = [run(["-1", "-c", "-T", threads, "--segment-size", "64KiB", "text.txt"], tmp_path)
                 for threads in ("1", "2")]
    assert segmented[0].stdout == segmented[1].stdout == statemix.compress(text, level=1, segment_size=1 << 16)


def test_levels_round_trip(tmp_path):
    # 64 kB: large enough that level 1's smaller tables show in the output (see spec_for_level)
    data = text_sample(64_000, seed=8)
    (tmp_path / "big.txt").write_bytes(data)
    outputs = {}
    for level in (1, 2, 3):
        result = run(["--level", level, "-c", "big.txt"], tmp_path)
        assert_ok(result)
        outputs[level] = result.stdout
        assert outputs[level] == statemix.compress(data, level=level)
        (tmp_path / f"level{level}.smx").write_bytes(outputs[level])
    assert outputs[1] != outputs[2]
    assert_ok(run(["-t", "level1.smx", "level2.smx", "level3.smx"], tmp_path))


def test_version_and_help(tmp_path):
    result = run(["-V"], tmp_path)
    assert_ok(result)
    assert result.stdout.decode().strip() == f"statemix {version('statemix')}"
    assert_ok(run(["--version"], tmp_path))
    for flag in ("-h", "--help"):
        result = run([flag], tmp_path)
        assert_ok(result)
        text = result.stdout.decode()
        assert text.startswith("Usage:")
        for option in ("--decompress", "--stdout", "--test", "--list", "--keep", "--force", "--threads",
                       "--level", "--version"):
            assert option in text
    assert list(tmp_path.iterdir()) == []


def test_help_does_not_import_the_library(tmp_path):
    code = ("import sys; from statemix_cli.main import run\n"
            "try:\n    run(['--help'])\nexcept SystemExit:\n    pass\n"
            "sys.stderr.write(' '.join(m for m in ('numba', 'statemix') if m in sys.modules))")
    result = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, capture_output=True,
                            timeout=TIMEOUT, stdin=subprocess.DEVNULL)
    assert result.returncode == 0
    assert result.stderr == b""


def test_several_files_one_bad(tmp_path, text_file):
    (tmp_path / "c.txt").write_bytes(b"second file\n")
    result = run(["a.txt", "missing.txt", "c.txt"], tmp_path)
    assert result.returncode == 1
    lines = result.stderr.decode().splitlines()
    assert len(lines) == 1 and lines[0].startswith("statemix: ") and "missing.txt" in lines[0]
    assert statemix.decompress((tmp_path / "a.txt.smx").read_bytes()) == TEXT
    assert statemix.decompress((tmp_path / "c.txt.smx").read_bytes()) == b"second file\n"


def test_already_compressed_is_a_warning(tmp_path, smx_file):
    before = snapshot(tmp_path)
    result = run(["b.bin.smx"], tmp_path)
    assert result.returncode == 2
    lines = result.stderr.decode().splitlines()
    assert len(lines) == 1 and lines[0].startswith("statemix: ") and "suffix" in lines[0]
    quiet = run(["-q", "b.bin.smx"], tmp_path)
    assert quiet.returncode == 2 and quiet.stderr == b""
    assert snapshot(tmp_path) == before


def test_refuses_to_write_compressed_data_to_a_terminal(tmp_path, text_file):
    pty = pytest.importorskip("pty")
    leader, follower = pty.openpty()
    try:
        check_error(tmp_path, ["a.txt", "-c"], "terminal", stdout=follower)
    finally:
        os.close(leader)
        os.close(follower)


# ---------------------------------------------------------------------------------------------------
# Errors: exit status 1, one line, nothing left behind, inputs untouched


def test_missing_file(tmp_path, text_file):
    check_error(tmp_path, ["nope.txt"], "nope.txt")
    check_error(tmp_path, ["-d", "nope.smx"], "nope.smx")


def test_directory(tmp_path, text_file):
    (tmp_path / "sub").mkdir()
    check_error(tmp_path, ["sub"], "sub", "directory")
    check_error(tmp_path, ["-d", "sub"], "sub")


def test_path_through_a_file(tmp_path, text_file):
    # unreadable even for root: a path that goes through a regular file
    check_error(tmp_path, ["a.txt/inner"], "a.txt/inner")


@pytest.mark.skipif(os.geteuid() == 0, reason="root can read a file of mode 000")
def test_unreadable_file(tmp_path, text_file):
    text_file.chmod(0)
    try:
        check_error(tmp_path, ["a.txt"], "a.txt", "ermission")
    finally:
        text_file.chmod(0o644)


def test_input_that_is_not_a_statemix_stream(tmp_path, text_file):
    shutil.copy(text_file, tmp_path / "plain.smx")
    check_error(tmp_path, ["-d", "plain.smx"], "plain.smx", "not a statemix stream")
    check_error(tmp_path, ["-d", "-"], "(stdin)", stdin=TEXT)


def test_unknown_suffix_when_decompressing(tmp_path, smx_file):
    shutil.copy(smx_file, tmp_path / "c.bin")
    check_error(tmp_path, ["-d", "c.bin"], "c.bin", "suffix")
    shutil.copy(smx_file, tmp_path / ".smx")
    check_error(tmp_path, ["-d", ".smx"], ".smx", "suffix")  # nothing before the suffix


def test_truncated_stream(tmp_path, smx_file):
    data = smx_file.read_bytes()
    smx_file.write_bytes(data[: len(data) // 2])
    check_error(tmp_path, ["-d", "--rm", "b.bin.smx"], "b.bin.smx", "truncated")
    smx_file.write_bytes(data[:-1])
    check_error(tmp_path, ["-t", "b.bin.smx"], "b.bin.smx")


def test_flipped_bytes(tmp_path, smx_file):
    data = smx_file.read_bytes()
    for offset in (len(data) // 2, 17, 22, len(data) - 2):  # code word, block header, its CRC32, trailer
        corrupt = bytearray(data)
        corrupt[offset] ^= 0xFF
        smx_file.write_bytes(bytes(corrupt))
        check_error(tmp_path, ["-d", "b.bin.smx"], "b.bin.smx")


def test_trailing_garbage(tmp_path, smx_file):
    smx_file.write_bytes(smx_file.read_bytes() + b"garbage\n")
    check_error(tmp_path, ["-d", "b.bin.smx"], "b.bin.smx")
    check_error(tmp_path, ["-l", "b.bin.smx"], "b.bin.smx", stdout=subprocess.DEVNULL)


def test_empty_stream(tmp_path):
    (tmp_path / "empty.smx").write_bytes(b"")
    check_error(tmp_path, ["-d", "empty.smx"], "empty.smx", "empty")
    check_error(tmp_path, ["-d"], "(stdin)", stdin=b"")


def test_unknown_format_version(tmp_path, smx_file):
    data = bytearray(smx_file.read_bytes())
    data[4] = 9
    smx_file.write_bytes(bytes(data))
    check_error(tmp_path, ["-d", "b.bin.smx"], "b.bin.smx", "version 9")


def test_output_in_a_path_through_a_file(tmp_path, text_file):
    check_error(tmp_path, ["-o", "a.txt/out.smx", "a.txt"], "a.txt/out.smx")


@pytest.mark.skipif(os.geteuid() == 0, reason="root can write into a read-only directory")
def test_read_only_directory(tmp_path, text_file):
    tmp_path.chmod(0o555)
    try:
        check_error(tmp_path, ["a.txt"], "a.txt.smx")
    finally:
        tmp_path.chmod(0o755)


def test_read_only_location_even_for_root(tmp_path, text_file):
    # sysfs refuses new files to everyone, root included: a read-only location on any Linux machine
    if not os.path.isdir("/sys/kernel") or os.access("/sys", os.W_OK) and _can_create("/sys"):
        pytest.skip("no read-only location here")
    check_error(tmp_path, ["-o", "/sys/statemix-test.smx", "a.txt"], "/sys/statemix-test.smx")


def _can_create(directory):
    try:
        with open(os.path.join(directory, ".statemix-probe"), "wb"):
            pass
    except OSError:
        return False
    os.unlink(os.path.join(directory, ".statemix-probe"))
    return True


def _limit_file_size():  # runs in the child: writes past 1 KiB fail with EFBIG (not SIGXFSZ)
    import resource

    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
    resource.setrlimit(resource.RLIMIT_FSIZE, (1024, 1024))


@pytest.mark.skipif(not hasattr(signal, "SIGXFSZ"), reason="needs RLIMIT_FSIZE and SIGXFSZ")
def test_write_error(tmp_path):
    data = random.Random(9).randbytes(20_000)  # compresses to ~20 kB: more than the limit
    (tmp_path / "r.bin").write_bytes(data)
    (tmp_path / "r.bin.smx").write_bytes(statemix.compress(data))
    assert_ok(run(["-t", "r.bin.smx"], tmp_path))  # numba's cache is warm: the limit hits only us
    (tmp_path / "r.bin.smx").unlink()
    check_error(tmp_path, ["r.bin"], "r.bin", preexec_fn=_limit_file_size)
    (tmp_path / "r.bin").rename(tmp_path / "r")
    (tmp_path / "r.smx").write_bytes(statemix.compress(data))
    check_error(tmp_path, ["-d", "r.smx"], "r", preexec_fn=_limit_file_size)


@pytest.mark.parametrize("args", [
    ["--level", "5", "a.txt"],
    ["-k", "--rm", "a.txt"],
    ["-o", "x.smx", "a.txt", "a.txt"],
    ["--no-such-option", "a.txt"],
    ["-T", "-1", "a.txt"],
    ["-S", "", "a.txt"],
])
def test_usage_errors(tmp_path, text_file, args):
    check_error(tmp_path, args)


# ---------------------------------------------------------------------------------------------------
# Interruption


def cpu_seconds(pid: int) -> float:
    """User + system CPU time of a running process (Linux /proc)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def wait_until_working(proc: subprocess.Popen, seconds: float, timeout: float = 60) -> None:
    """Wait until ``proc`` has used ``seconds`` of CPU (past start-up: inside the model's loop)."""
    deadline = time.monotonic() + timeout
    while cpu_seconds(proc.pid) < seconds:
        assert proc.poll() is None, "the command ended before it could be interrupted"
        assert time.monotonic() < deadline, "the command did not get to work"
        time.sleep(0.05)


def start_compressing_3_mb(directory: Path) -> tuple[dict, subprocess.Popen]:
    """Start compressing 3 MB of text (several seconds of model work at the default level) in
    ``directory``; return the folder as it was and the process, once it is inside the model."""
    (directory / "big.txt").write_bytes(text_sample(3_000_000, seed=6))
    before = snapshot(directory)
    proc = subprocess.Popen([*CLI, "big.txt"], cwd=directory, stdin=subprocess.DEVNULL,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        wait_until_working(proc, 2.5)
    except BaseException:
        proc.kill()
        proc.communicate()
        raise
    return before, proc


@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM], ids=["SIGINT", "SIGTERM"])
def test_interruption_leaves_nothing_behind(tmp_path, signum):
    before, proc = start_compressing_3_mb(tmp_path)
    try:
        assert proc.poll() is None, "the command ended before it could be interrupted"
        signalled = time.monotonic()
        proc.send_signal(signum)
        out, err = proc.communicate(timeout=120)
        reaction = time.monotonic() - signalled
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    result = subprocess.CompletedProcess(proc.args, proc.returncode, out, err)
    assert_one_error(result, "interrupt")
    assert out == b""
    assert snapshot(tmp_path) == before
    assert reaction < 1.5, f"the signal took effect after {reaction:.2f} s"


def test_sigkill_leaves_nothing_behind(tmp_path):
    before, proc = start_compressing_3_mb(tmp_path)
    proc.kill()
    proc.communicate()
    assert snapshot(tmp_path) == before  # the output had no name yet (O_TMPFILE)


# ---------------------------------------------------------------------------------------------------
# The shared corpora (../shared/data), when this machine has them


def round_trip_through_cli(files: list[Path], directory: Path) -> None:
    names = []
    for source in files:
        name = source.name
        shutil.copy(source, directory / name)
        names.append(name)
    assert_ok(run(names, directory))
    for name in names:
        (directory / name).rename(directory / (name + ".orig"))
    assert_ok(run(["-d", *(name + ".smx" for name in names)], directory))
    for source, name in zip(files, names):
        assert (directory / name).read_bytes() == source.read_bytes(), name


def test_small_shared_files_round_trip(tmp_path):
    files = [shared_file("corpora", "canterbury", "grammar.lsp"),
             shared_file("corpora", "canterbury", "xargs.1")]
    round_trip_through_cli(files, tmp_path)


@pytest.mark.slow
@pytest.mark.parametrize("source", shared_files(),
                         ids=lambda p: str(p.relative_to(SHARED_DATA)) if isinstance(p, Path) else None)
def test_shared_file_round_trips(tmp_path, source):
    round_trip_through_cli([source], tmp_path)


def test_streams_of_older_formats_are_decoded_only_with_legacy(tmp_path):
    """A level-2 stream of format 2 (its size bounds no work: statemix.container) is refused with one
    line naming --legacy, the directory untouched; ``-l -v`` says so; with --legacy it decodes."""
    from test_api import GOLDEN_INPUT, GOLDEN_TEXT_V2

    (tmp_path / "old.txt.smx").write_bytes(GOLDEN_TEXT_V2)
    check_error(tmp_path, ["-d", "old.txt.smx"], "old.txt.smx", "read only on request", "--legacy")
    check_error(tmp_path, ["-t", "-T1", "old.txt.smx"], "read only on request")
    listed = run(["-l", "-v", "old.txt.smx"], tmp_path)
    assert_ok(listed)
    assert b"format 2 (decoded only with --legacy)" in listed.stdout
    assert_ok(run(["-d", "--legacy", "old.txt.smx"], tmp_path))
    assert (tmp_path / "old.txt").read_bytes() == GOLDEN_INPUT
