"""The command line under a person's hands: special files, privileges, terminals, odd names.

Runs the real command in subprocesses, as tests/test_cli.py does (whose helpers it uses).  Checks that
need root (mknod) skip elsewhere; the unreadable-file check drops root's capabilities with setpriv so
that a file of mode 000 is really unreadable.
"""

from __future__ import annotations

import fcntl
import os
import re
import shutil
import signal
import socket
import stat
import struct
import subprocess
import sys
import termios
import threading
import time
from pathlib import Path

import pytest

import statemix

from conftest import SHARED_DATA, text_sample
from test_cli import CLI, TEXT, assert_ok, assert_one_error, check_error, run, snapshot

needs_root = pytest.mark.skipif(os.geteuid() != 0, reason="needs root (mknod)")


@pytest.fixture
def text_file(tmp_path) -> Path:
    path = tmp_path / "a.txt"
    path.write_bytes(TEXT)
    return path


@needs_root
def test_character_device_output_is_written_through(tmp_path, text_file):
    device = tmp_path / "null"
    os.mknod(device, stat.S_IFCHR | 0o666, os.makedev(1, 3))  # a copy of /dev/null
    for args in (["-o", "null", "a.txt"], ["-f", "-o", "null", "a.txt"], ["-d", "-f", "-o", "null", "-"]):
        stdin = statemix.compress(TEXT) if "-d" in args else None
        assert_ok(run(args, tmp_path, stdin=stdin))
        assert stat.S_ISCHR(device.lstat().st_mode), args
        assert device.stat().st_rdev == os.makedev(1, 3)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a.txt", "null"]


def test_dev_null_output(tmp_path, text_file):
    assert_ok(run(["-o", "/dev/null", "a.txt"], tmp_path))
    assert stat.S_ISCHR(os.stat("/dev/null").st_mode)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a.txt"]


def test_fifo_output_is_written_through(tmp_path, text_file):
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    received = []
    reader = threading.Thread(target=lambda: received.append(fifo.read_bytes()))
    reader.start()
    assert_ok(run(["-o", "pipe", "a.txt"], tmp_path))
    reader.join(60)
    assert statemix.decompress(received[0]) == TEXT
    assert stat.S_ISFIFO(fifo.lstat().st_mode)


def test_output_of_a_fifo_input_gets_the_usual_mode(tmp_path):
    fifo = tmp_path / "in"
    os.mkfifo(fifo)
    writer = threading.Thread(target=lambda: fifo.write_bytes(TEXT))
    writer.start()
    old = os.umask(0o022)
    try:
        assert_ok(run(["in"], tmp_path))
    finally:
        os.umask(old)
    writer.join(60)
    assert stat.S_IMODE((tmp_path / "in.smx").stat().st_mode) == 0o644  # 0666 & ~umask
    assert statemix.decompress((tmp_path / "in.smx").read_bytes()) == TEXT


def test_socket_output_is_an_error(tmp_path, text_file):
    with socket.socket(socket.AF_UNIX) as server:
        server.bind(str(tmp_path / "sock"))
        check_error(tmp_path, ["-o", "sock", "a.txt"], "sock")


def test_directory_output_is_an_error(tmp_path, text_file):
    (tmp_path / "d").mkdir()
    check_error(tmp_path, ["-f", "-o", "d", "a.txt"], "d", "directory")


@pytest.mark.skipif(shutil.which("setpriv") is None, reason="needs setpriv (util-linux)")
def test_unreadable_file_in_the_middle_of_a_list(tmp_path):
    for name in ("a", "b", "c"):
        (tmp_path / name).write_bytes(name.encode() * 1000)
    (tmp_path / "b").chmod(0)
    drop = ["setpriv", "--inh-caps=-all", "--bounding-set=-all", "--"]
    if os.geteuid() != 0:
        drop = []
    result = subprocess.run([*drop, *CLI, "a", "b", "c"], cwd=tmp_path, capture_output=True,
                            stdin=subprocess.DEVNULL, timeout=300)
    (tmp_path / "b").chmod(0o644)
    assert result.returncode == 1
    lines = result.stderr.decode().splitlines()
    assert len(lines) == 1 and lines[0].startswith("statemix: b: ") and "ermission" in lines[0], lines
    assert statemix.decompress((tmp_path / "a.smx").read_bytes()) == b"a" * 1000
    assert statemix.decompress((tmp_path / "c.smx").read_bytes()) == b"c" * 1000
    assert not (tmp_path / "b.smx").exists()


def test_stale_temporary_files_of_dead_processes_are_removed(tmp_path, text_file):
    host = socket.gethostname()
    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True,
                          text=True, check=True).stdout.strip()
    stale = tmp_path / f".x.smx.{host}.{dead}.0123abcd.smxtmp"
    alive = tmp_path / f".y.smx.{host}.{os.getpid()}.0123abcd.smxtmp"
    foreign = tmp_path / f".z.smx.other-host.{dead}.0123abcd.smxtmp"
    for path in (stale, alive, foreign):
        path.write_bytes(b"partial")
    assert_ok(run(["a.txt"], tmp_path))
    assert not stale.exists()
    assert alive.exists() and foreign.exists()


def test_control_characters_in_names_are_escaped(tmp_path):
    check_error(tmp_path, ["no\nsuch\x1bfile"], "no\\nsuch\\x1bfile")


def test_list_verbose_names_the_model_in_words(tmp_path, text_file):
    assert_ok(run(["a.txt"], tmp_path))
    result = run(["-l", "-v", "a.txt.smx"], tmp_path)
    assert_ok(result)
    line = result.stdout.decode().splitlines()[-1]
    assert "format 3" in line and "cm level 2" in line, line


def test_memory_option_refuses_a_stream_that_needs_more(tmp_path, text_file):
    assert_ok(run(["a.txt"], tmp_path))
    os.unlink(text_file)
    check_error(tmp_path, ["-d", "--memory", "1MiB", "a.txt.smx"], "a.txt.smx", "MiB", "--memory")
    check_error(tmp_path, ["-d", "--memory", "lots", "a.txt.smx"], "memory")
    assert_ok(run(["-d", "--memory", "2GiB", "a.txt.smx"], tmp_path))
    assert text_file.read_bytes() == TEXT


def test_python_m_statemix_runs_the_command_line(tmp_path, text_file):
    result = subprocess.run([sys.executable, "-m", "statemix", "-c", "a.txt"], cwd=tmp_path,
                            capture_output=True, timeout=300)
    assert result.returncode == 0, result.stderr
    assert statemix.decompress(result.stdout) == TEXT


def _text_of(size: int) -> bytes:
    """``size`` bytes of enwik8 (of generated text where ../shared is missing)."""
    path = SHARED_DATA / "enwik8" / "enwik8_1M"
    return path.read_bytes()[:size] if path.is_file() else text_sample(size, seed=16)


@pytest.mark.parametrize("level,size", [("1", 1_000_000), ("2", 300_000)])  # some seconds each
def test_progress_bar_moves_in_a_terminal(tmp_path, level, size):
    pty = pytest.importorskip("pty")
    (tmp_path / "one.txt").write_bytes(_text_of(size))
    leader, follower = pty.openpty()
    fcntl.ioctl(follower, termios.TIOCSWINSZ, struct.pack("HHHH", 24, 100, 0, 0))  # 100 columns
    proc = subprocess.Popen([*CLI, "-v", "--level", level, "one.txt"], cwd=tmp_path, stdin=subprocess.DEVNULL,
                            stdout=subprocess.DEVNULL, stderr=follower)
    os.close(follower)
    screen = bytearray()
    while True:
        try:
            piece = os.read(leader, 4096)
        except OSError:  # the terminal's other side closed
            break
        if not piece:
            break
        screen += piece
    proc.wait(300)
    os.close(leader)
    assert proc.returncode == 0, screen
    updates = re.findall(rb"one\.txt:\s+\d+%", bytes(screen))
    percentages = {u.split(b":")[1].strip() for u in updates}
    assert len(percentages) >= 3, bytes(screen)


# ---------------------------------------------------------------------------------------------------
# A first run's compile is announced before it starts.  Each test starts the command with an empty
# kernel cache and stops it (SIGKILL: a signal is acted on only after a compile) once the level-1
# loop's compile has been announced, or would have been: the coder's first kernel, compiled just
# before the loop is called, is cached, and a few seconds have passed.


def _cold_start(tmp_path: Path, args: list[str], stderr, **env_changes) -> tuple[subprocess.Popen, Path]:
    (tmp_path / "a.txt").write_bytes(TEXT)
    cache = tmp_path / "cache"
    env = {k: v for k, v in os.environ.items() if k not in ("STATEMIX_CACHE_DIR", "NUMBA_CACHE_DIR")}
    env.update({"STATEMIX_CACHE_DIR": str(cache), **env_changes})
    proc = subprocess.Popen(args, cwd=tmp_path, env=env, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                            stderr=stderr)
    return proc, cache


def _loop_compiling(cache: Path) -> bool:
    """Whether a compile of cm's loop has begun (the announcement comes at once): the kernel the
    coder runs just before the loop is cached, three seconds ago."""
    return any(time.time() - path.stat().st_mtime > 3 for path in cache.rglob("*enc_init*.nbi"))


def _wait_for(condition, proc: subprocess.Popen, seconds: float = 240) -> None:
    deadline = time.monotonic() + seconds
    while not condition():
        assert proc.poll() is None, "the command ended first"
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.1)


def _stderr_lines(proc: subprocess.Popen, lines: list) -> threading.Thread:
    reader = threading.Thread(target=lambda: lines.extend(proc.stderr), daemon=True)
    reader.start()
    return reader


ANNOUNCEMENT = re.compile(r"statemix: compiling cm's level-1 loop for this machine: about \d+ s, once \(later "
                          r"runs load it from .*cache\)")


def test_a_first_compile_is_announced_before_it_starts(tmp_path):
    proc, cache = _cold_start(tmp_path, [*CLI, "-1", "a.txt"], subprocess.PIPE)
    lines = []
    _stderr_lines(proc, lines)
    try:
        _wait_for(lambda: lines, proc)
        assert not (tmp_path / "a.txt.smx").exists()  # said before the work, not after it
    finally:
        proc.kill()
        proc.wait()
    assert len(lines) == 1 and ANNOUNCEMENT.fullmatch(lines[0].decode().strip()), lines


def test_quiet_silences_the_compile_announcement_and_the_library_is_quiet(tmp_path):
    library = [sys.executable, "-c", "import statemix; statemix.compress(open('a.txt', 'rb').read(), level=1)"]
    for args in ([*CLI, "-q", "-1", "a.txt"], library):
        proc, cache = _cold_start(tmp_path, args, subprocess.PIPE)
        try:
            _wait_for(lambda: _loop_compiling(cache), proc)
        finally:
            proc.kill()
            _, err = proc.communicate()
        assert err == b"", args
        shutil.rmtree(cache)


def test_the_library_announces_a_compile_as_a_logging_message(tmp_path):
    script = ("import logging, statemix; logging.basicConfig(level=logging.INFO); "
              "statemix.compress(open('a.txt', 'rb').read(), level=1)")
    proc, cache = _cold_start(tmp_path, [sys.executable, "-c", script], subprocess.PIPE)
    lines = []
    _stderr_lines(proc, lines)
    try:
        _wait_for(lambda: lines, proc)
    finally:
        proc.kill()
        proc.wait()
    assert lines[0].decode().startswith("INFO:statemix:compiling cm's level-1 loop for this machine"), lines


def test_without_a_writable_cache_every_run_says_it_compiles(tmp_path):
    (tmp_path / "not-a-directory").write_bytes(b"")
    proc, _ = _cold_start(tmp_path, [*CLI, "-1", "a.txt"], subprocess.PIPE,
                          STATEMIX_CACHE_DIR="", XDG_CACHE_HOME=str(tmp_path / "not-a-directory"))
    lines = []
    _stderr_lines(proc, lines)
    try:
        _wait_for(lambda: lines, proc)
    finally:
        proc.kill()
        proc.wait()
    assert "on every run: no cache directory can be written" in lines[0].decode(), lines


def test_a_compile_counts_its_seconds_in_a_terminal(tmp_path):
    pty = pytest.importorskip("pty")
    leader, follower = pty.openpty()
    proc, cache = _cold_start(tmp_path, [*CLI, "-v", "-1", "a.txt"], follower)
    os.close(follower)
    screen = bytearray()
    try:
        while not re.search(rb"compiling \.\.\. [2-9] s", screen):
            assert proc.poll() is None, bytes(screen)
            screen += os.read(leader, 4096)
    finally:
        proc.kill()
        proc.wait()
        os.close(leader)
    assert ANNOUNCEMENT.search(screen.decode()), bytes(screen)


# ---------------------------------------------------------------------------------------------------
# What --rm may remove, outputs that are the input, the output's owner and mode, closed standard
# streams, signals while a FIFO is opened


@pytest.mark.parametrize("args", [["-f", "--rm", "-o", "a.txt", "a.txt"], ["-f", "-o", "a.txt", "a.txt"],
                                  ["-d", "-f", "--rm", "-o", "b.smx", "b.smx"], ["-f", "-o", "link", "a.txt"]])
def test_an_output_that_is_the_input_is_refused_even_with_force(tmp_path, text_file, args):
    (tmp_path / "b.smx").write_bytes(statemix.compress(TEXT, level=1))
    os.symlink("a.txt", tmp_path / "link")
    check_error(tmp_path, args, "is the input file itself")


@pytest.mark.parametrize("decompress", [False, True])
def test_rm_keeps_the_input_when_the_output_is_a_device(tmp_path, text_file, decompress):
    if decompress:
        (tmp_path / "b.smx").write_bytes(statemix.compress(TEXT, level=1))
    args = ["-d", "--rm", "-o", "/dev/null", "b.smx"] if decompress else ["--rm", "-o", "/dev/null", "a.txt"]
    check_error(tmp_path, args, "/dev/null", "not a regular file")


@pytest.mark.parametrize("kind", ["hard link", "symbolic link", "setuid"])
def test_rm_skips_links_and_setuid_files_without_force(tmp_path, text_file, kind):
    if kind == "hard link":
        os.link(text_file, tmp_path / "name")
    elif kind == "symbolic link":
        os.symlink("a.txt", tmp_path / "name")
    else:
        shutil.copy(text_file, tmp_path / "name")
        (tmp_path / "name").chmod(0o4755)
    check_error(tmp_path, ["--rm", "name"], "name", "-f")
    assert_ok(run(["-1", "-f", "--rm", "name"], tmp_path))  # as xz: -f removes it after all
    assert not os.path.lexists(tmp_path / "name")
    assert text_file.read_bytes() == TEXT
    assert statemix.decompress((tmp_path / "name.smx").read_bytes()) == TEXT


@needs_root
def test_a_device_input_needs_a_named_output_and_is_never_removed(tmp_path):
    device = tmp_path / "zero"
    os.mknod(device, stat.S_IFCHR | 0o666, os.makedev(1, 5))  # a copy of /dev/zero: endless zeros
    check_error(tmp_path, ["zero"], "zero", "not a regular file")
    check_error(tmp_path, ["--rm", "zero"], "zero", "not a regular file")
    check_error(tmp_path, ["-f", "--rm", "-o", "out.smx", "zero"], "zero", "not a regular file")
    assert stat.S_ISCHR(device.lstat().st_mode)


def test_the_output_never_gets_setuid_setgid_or_sticky_bits(tmp_path, text_file):
    text_file.chmod(0o7755)
    assert_ok(run(["-1", "a.txt"], tmp_path))
    assert stat.S_IMODE((tmp_path / "a.txt.smx").stat().st_mode) == 0o755
    text_file.unlink()
    (tmp_path / "a.txt.smx").chmod(0o6750)
    assert_ok(run(["-d", "a.txt.smx"], tmp_path))
    assert stat.S_IMODE(text_file.stat().st_mode) == 0o750


@needs_root
def test_the_output_gets_the_inputs_owner(tmp_path, text_file):
    os.chown(text_file, 65534, 65534)
    text_file.chmod(0o4777)
    assert_ok(run(["-1", "a.txt"], tmp_path))
    info = (tmp_path / "a.txt.smx").stat()
    assert (info.st_uid, info.st_gid, stat.S_IMODE(info.st_mode)) == (65534, 65534, 0o777)


def test_an_output_named_through_a_symbolic_link_replaces_the_file_it_names(tmp_path, text_file):
    (tmp_path / "real.smx").write_bytes(b"old")
    os.symlink("real.smx", tmp_path / "link.smx")
    check_error(tmp_path, ["-o", "link.smx", "a.txt"], "exists")
    assert_ok(run(["-1", "-f", "-o", "link.smx", "a.txt"], tmp_path))
    assert os.readlink(tmp_path / "link.smx") == "real.smx"
    assert statemix.decompress((tmp_path / "real.smx").read_bytes()) == TEXT


@pytest.mark.parametrize("closed", [0, 1], ids=["stdin", "stdout"])
def test_a_closed_standard_stream_is_one_line(tmp_path, text_file, closed):
    args = ["-c", "a.txt"] if closed == 1 else ["-"]
    result = subprocess.run([*CLI, *args], cwd=tmp_path, stderr=subprocess.PIPE, timeout=120,
                            preexec_fn=lambda: os.close(closed))
    assert_one_error(result, "(stdin)" if closed == 0 else "(stdout)", "not open")


@pytest.mark.skipif(not os.path.exists("/proc/self/mem"), reason="needs /proc/self/mem (reading it fails)")
def test_list_of_a_file_that_cannot_be_read_is_one_line(tmp_path):
    result = run(["-l", "/proc/self/mem"], tmp_path)
    assert "Traceback" not in result.stderr.decode() and result.returncode == 1
    assert result.stderr.decode().count("\n") == 1


def test_decompression_refuses_to_read_a_terminal(tmp_path):
    pty = pytest.importorskip("pty")
    leader, follower = pty.openpty()
    try:
        for args in (["-d"], ["-t"], ["-d", "-o", "out"]):
            before = snapshot(tmp_path)
            result = subprocess.run([*CLI, *args], cwd=tmp_path, stdin=follower, stdout=subprocess.PIPE,
                                    stderr=subprocess.PIPE, timeout=120)
            assert_one_error(result, "terminal")
            assert snapshot(tmp_path) == before
    finally:
        os.close(leader)
        os.close(follower)


def _wait_until_it_waits_for_a_partner(pid: int) -> None:
    """Until the process waits in open() of a FIFO (Linux's /proc/PID/wchan names that wait
    "wait_for_partner", or "fifo_open"; it reads "0" while the process runs), at most 60 s; where
    /proc does not tell, 3 s."""
    wchan = Path(f"/proc/{pid}/wchan")
    if not wchan.exists():
        time.sleep(3)
        return
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and not any(word in wchan.read_text() for word in ("partner", "fifo")):
        time.sleep(0.05)


@pytest.mark.parametrize("args", [["-1", "fifo"], ["-1", "-o", "fifo", "a.txt"]], ids=["input", "output"])
def test_a_signal_interrupts_opening_a_fifo_nobody_opens(tmp_path, text_file, args):
    os.mkfifo(tmp_path / "fifo")
    proc = subprocess.Popen([*CLI, *args], cwd=tmp_path, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE)
    try:
        _wait_until_it_waits_for_a_partner(proc.pid)
        proc.send_signal(signal.SIGTERM)
        _, err = proc.communicate(timeout=30)
    finally:
        proc.kill()  # a command that ignored the signal waits for ever
    assert proc.returncode == 1 and b"interrupted" in err and b"Traceback" not in err, err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a.txt", "fifo"]


@pytest.mark.parametrize("args", [["-1", "-c", "a.txt"], ["-1", "-c", "-"]], ids=["named", "stdin"])
def test_standard_output_that_is_the_input_is_refused(tmp_path, text_file, args):
    """`statemix -c a.txt >> a.txt` (or `< a.txt >> a.txt`) would read what it writes, for ever."""
    before = snapshot(tmp_path)
    with open(text_file, "ab") as same, open(text_file, "rb") as source:
        result = subprocess.run([*CLI, *args], cwd=tmp_path, stdin=source, stdout=same, stderr=subprocess.PIPE,
                                timeout=120)
    assert_one_error(result, "(stdout)", "input file")
    assert snapshot(tmp_path) == before


def test_diagnose_stops_on_ctrl_c(tmp_path):
    proc = subprocess.Popen([*CLI, "diagnose", "-"], cwd=tmp_path, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE)
    try:
        time.sleep(3)  # importing, or waiting for standard input: either way it must stop
        proc.send_signal(signal.SIGINT)
        _, err = proc.communicate(timeout=60)
    finally:
        proc.kill()
    assert proc.returncode == 1 and b"interrupted" in err and b"Traceback" not in err, err


def test_the_input_is_removed_only_while_it_is_the_file_that_was_read(tmp_path, text_file, monkeypatch):
    """--rm removes the input's name only if it still names the file that was read."""
    from statemix_cli import main as cli_main

    other = tmp_path / "other.txt"
    other.write_bytes(b"not the input")
    real_stat = os.stat

    def stat_after_compressing(path, *args, **kwargs):  # the name is given to another file meanwhile
        if str(path) == "a.txt" and (tmp_path / "a.txt.smx").exists():
            return real_stat(other, *args, **kwargs)
        return real_stat(path, *args, **kwargs)

    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(cli_main.os, "stat", stat_after_compressing)
    opts = dict(mode="compress", stdout=False, output=None, remove=True, force=False, verbose=False, threads=1,
                suffix=".smx", level=1, model=None, memory=None, segment_size=None, progress=False)
    with pytest.raises(cli_main.Problem, match="not the file that was read"):
        cli_main._process("a.txt", opts)
    assert text_file.read_bytes() == TEXT


def test_an_output_device_replaced_by_a_file_is_not_truncated(tmp_path, monkeypatch):
    """The node seen as a device may be a regular file by the time it is opened: never truncated."""
    from statemix import _output

    victim = tmp_path / "victim"
    victim.write_bytes(b"precious")
    device = os.stat("/dev/null")
    monkeypatch.setattr(_output.os, "stat", lambda path, *a, **k: device)
    with pytest.raises(_output.OutputError, match="regular file"):
        with _output.output_file(str(victim), False, None):
            pass
    assert victim.read_bytes() == b"precious"


def test_without_the_inputs_group_group_and_others_get_what_both_had(tmp_path, monkeypatch):
    from statemix import _output

    source = tmp_path / "in"
    source.write_bytes(b"x")
    source.chmod(0o654)
    like = source.stat()

    def refuse(*args):
        raise PermissionError

    monkeypatch.setattr(_output.os, "fchown", refuse)
    with _output.output_file(str(tmp_path / "out"), False, like) as out:
        out.write(b"y")
    assert stat.S_IMODE((tmp_path / "out").stat().st_mode) == 0o644  # group r-x and others r-- share r--
