#!/usr/bin/env python3
"""Benchmark statemix against the standard compressors on enwik8 prefixes.

Usage
-----
    python bench/enwik8.py PATH [--sizes 1e6 3e6] [--large] [--level N] [--threads N]
                           [--statemix "CMD"] [--extra NAME=TEMPLATE] [--extra-d NAME=TEMPLATE]
                           [--skip NAME] [--timeout SECONDS] [--json PATH] [--md5 HEX]

PATH is enwik8 (the first 10^8 bytes of an English Wikipedia dump, the Hutter Prize file) or any
other file.  This script never downloads anything; get enwik8 from
http://mattmahoney.net/dc/enwik8.zip and unzip it (md5 of enwik8: a1fa5ffddb56f4953e226637dabbb36a).

For every prefix size it copies the first SIZE bytes of PATH into a temporary directory and, for
statemix and every standard tool found on PATH (xz -9e -T1, zstd --ultra -22 --long=27, bzip2 -9,
gzip -9 -n, brotli -q 11 -w 24, 7-Zip PPMd order 10, zpaq -m5) plus any --extra tool, compresses it,
decompresses it and compares the result with the prefix byte for byte.  A size counts only if it
round-trips; anything else is marked FAILED in the table.  Missing tools are skipped with a note.

Size rule: the sizes asked for (default 1e6 and 3e6; --large adds 1e7 and 1e8; "whole" means the
whole file) are prefixes of PATH.  A size larger than the file is clipped to the whole file, and
duplicates are benchmarked once; so `enwik8_1M` with the default sizes gives one 1,000,000-byte
run, and any file smaller than 1 MB is benchmarked whole.  Sizes accept 1e6, 1000000, 1M, 1MB,
10M, 100M (decimal: M = 10^6 bytes).

Published StateSMix figures (Tacconelli 2026, arXiv 2605.02904; not measured here) are shown as
their own rows when the prefix is a known enwik8 prefix: its md5 matches the known 1 MB or 3 MB
prefix, or PATH itself is the full enwik8 (then the 10 MB and 100 MB figures apply too).  They
follow the statemix row, so --skip statemix hides them.

Table columns (stdout, markdown)
--------------------------------
input bytes       size of the prefix, bytes
compressor        tool and settings (statemix shows its --level / -T)
compressed bytes  size of the compressed file, bytes (headers included), blank when not verified
bpb               bits per input byte = 8 * compressed bytes / input bytes
comp s            wall-clock seconds of the compressing process (time.perf_counter, fork to reap)
decomp s          wall-clock seconds of the decompressing process
comp B/s          input bytes / comp s (throughput in uncompressed bytes per second)
decomp B/s        input bytes / decomp s (uncompressed bytes restored per second)
comp MiB          peak resident memory (max RSS) of the compressing process, MiB (2^20 bytes),
                  from os.wait4 on that one process (for a tool that spawns helpers: the largest
                  single process it waited for).  "<=X" means the peak is at or below X, the
                  measurement floor (see LAUNCHER below: a forked child starts with its parent's
                  resident pages counted, about 6 MB for the small Python launcher used)
decomp MiB        the same for the decompressing process
status            ok, FAILED: reason, UNVERIFIED (no decompressor given), or published

The same numbers, plus exact command lines, tool versions, md5s and CPU seconds, are written as
JSON (default bench/results/enwik8-<timestamp>.json next to this script; --json PATH overrides).
A tqdm progress bar runs on stderr.  Exit status: 0 when every statemix run round-trips, 1 for a
usage or input error, 2 when a statemix run failed (the table and JSON are still written).

Tool templates (--extra / --extra-d)
------------------------------------
    --extra  NAME=COMPRESS_TEMPLATE     e.g. --extra "lz4=lz4 -12 -c {in}"
    --extra-d NAME=DECOMPRESS_TEMPLATE  e.g. --extra-d "lz4=lz4 -d -c {in}"
Templates are split like a shell command (shlex), never run through a shell.  {in} is replaced by
the input file's path (the prefix when compressing, the compressed file when decompressing) and
{out} by the path the tool must write.  Without {in} the input is fed on stdin; without {out} the
tool's stdout is the output.  An --extra without a matching --extra-d is reported UNVERIFIED.
The output file must be exactly {out} (a tool that appends its own suffix needs a wrapper).
"""
from __future__ import annotations

import argparse
import contextlib
import datetime as _dt
import hashlib
import json
import os
import platform
import re
import shlex
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import asdict, dataclass
from pathlib import Path

try:
    from tqdm import tqdm
except ImportError:  # tqdm is a project dependency; the benchmark still runs without it
    tqdm = None

ENWIK8_URL = "http://mattmahoney.net/dc/enwik8.zip"
ENWIK8_SIZE = 100_000_000
ENWIK8_MD5 = "a1fa5ffddb56f4953e226637dabbb36a"
KNOWN_PREFIX_MD5 = {
    1_000_000: "83a2cefd8ca00049e0445542dabd25a0",
    3_000_000: "a3bf17ae9205c633352d94b5cf106184",
    ENWIK8_SIZE: ENWIK8_MD5,
}
PUBLISHED_STATESMIX = {  # bytes, headers included
    1_000_000: 265_370,
    3_000_000: 805_926,
    10_000_000: 2_702_498,
    100_000_000: 26_622_640,
}
PUBLISHED_SOURCE = "StateSMix, Tacconelli 2026, arXiv 2605.02904 (paper and README)"
DEFAULT_SIZES = ("1e6", "3e6")
LARGE_SIZES = ("1e7", "1e8")
BENCH_DIR = Path(__file__).resolve().parent
MIB = 1024 * 1024
CHUNK = 1 << 20


# ----------------------------------------------------------------------------------------------
# Tool descriptions

@dataclass
class Tool:
    """How to run one compressor.  Templates use {in}, {out} and {src} (see module docstring)."""

    name: str
    compress: list[str]
    decompress: list[str] | None
    suffix: str = ".cmp"
    in_workdir: bool = False  # run inside the work dir with bare file names (archivers store names)
    version_argv: list[str] | None = None
    is_statemix: bool = False
    version: str | None = None


def find_executable(*names: str) -> str | None:
    """First of names found on PATH, as a full path."""
    for name in names:
        path = shutil.which(name)
        if path:
            return path
    return None


def standard_tools() -> tuple[list[Tool], list[str]]:
    """The standard compressors found on this machine, and notes for the missing ones."""
    specs = [
        (("xz",), lambda x: Tool(
            "xz -9e", [x, "-9e", "-T1", "-k", "-c", "{in}"], [x, "-d", "-c", "{in}"],
            version_argv=[x, "--version"])),
        (("zstd",), lambda x: Tool(
            "zstd --ultra -22 --long=27", [x, "--ultra", "-22", "--long=27", "-c", "{in}"],
            [x, "-d", "--long=27", "-c", "{in}"], version_argv=[x, "--version"])),
        (("bzip2",), lambda x: Tool(
            "bzip2 -9", [x, "-9", "-c", "{in}"], [x, "-d", "-c", "{in}"],
            version_argv=[x, "--version"])),
        (("gzip",), lambda x: Tool(
            "gzip -9", [x, "-9", "-n", "-c", "{in}"], [x, "-d", "-c", "{in}"],
            version_argv=[x, "--version"])),
        (("brotli",), lambda x: Tool(
            "brotli -q 11 -w 24", [x, "-q", "11", "-w", "24", "-c", "{in}"],
            [x, "-d", "-c", "{in}"], version_argv=[x, "--version"])),
        (("7z", "7za", "7zz", "7zr"), lambda x: Tool(
            "7z PPMd o=10", [x, "a", "-t7z", "-m0=PPMd:mem=256m:o=10", "-bd", "-y", "{out}", "{in}"],
            [x, "e", "-so", "-y", "{in}"], suffix=".7z", in_workdir=True, version_argv=[x])),
        (("zpaq",), lambda x: Tool(
            "zpaq -m5", [x, "a", "{out}", "{in}", "-m5"],
            [x, "x", "{in}", "{src}", "-to", "{out}", "-force"],
            suffix=".zpaq", in_workdir=True, version_argv=[x])),
    ]
    tools, missing = [], []
    for names, make in specs:
        exe = find_executable(*names)
        if exe:
            tools.append(make(exe))
        else:
            missing.append("/".join(names))
    return tools, missing


def default_statemix_command() -> list[str]:
    """`statemix` when it is on PATH, else `python -m statemix_cli` with this interpreter."""
    exe = shutil.which("statemix")
    return [exe] if exe else [sys.executable, "-m", "statemix_cli"]


def statemix_tool(command: list[str], level: int | None, threads: int | None) -> Tool:
    """statemix -c [--level N] [-T N] FILE > FILE.smx ; statemix -d -c [-T N] FILE.smx > FILE.out"""
    level_args = ["--level", str(level)] if level is not None else []
    thread_args = ["-T", str(threads)] if threads is not None else []
    name = " ".join(["statemix", *level_args, *thread_args])
    return Tool(
        name,
        [*command, "-c", *level_args, *thread_args, "{in}"],
        [*command, "-d", "-c", *thread_args, "{in}"],
        suffix=".smx", version_argv=[*command, "--version"], is_statemix=True)


def parse_named_templates(items: list[str], option: str) -> dict[str, list[str]]:
    """['NAME=TEMPLATE', ...] -> {NAME: argv template}; argparse-style error on bad items."""
    templates: dict[str, list[str]] = {}
    for item in items:
        name, sep, template = item.partition("=")
        name = name.strip()
        if not sep or not name or not template.strip():
            fail(f"{option} expects NAME=COMMAND_TEMPLATE, got {item!r}")
        templates[name] = shlex.split(template)
    return templates


def extra_tools(extras: list[str], extras_d: list[str]) -> list[Tool]:
    """Tools given with --extra, paired with their --extra-d decompressor when there is one."""
    compress = parse_named_templates(extras, "--extra")
    decompress = parse_named_templates(extras_d, "--extra-d")
    orphans = sorted(set(decompress) - set(compress))
    if orphans:
        fail(f"--extra-d given without --extra for: {', '.join(orphans)}")
    return [Tool(name, argv, decompress.get(name)) for name, argv in compress.items()]


def probe_version(argv: list[str] | None) -> str | None:
    """First non-empty output line of a version command, or None."""
    if not argv:
        return None
    try:
        proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                stderr=subprocess.STDOUT, start_new_session=hasattr(os, "fork"))
    except OSError:
        return None
    try:
        output = proc.communicate(timeout=20)[0]
    except subprocess.TimeoutExpired:
        kill_group(proc)
        return None
    for line in output.decode("utf-8", "replace").splitlines():
        if line.strip():
            return line.strip()[:160]
    return None


# ----------------------------------------------------------------------------------------------
# Input, sizes, identity

def parse_size(text: str) -> int | None:
    """'1e6', '1000000', '1M', '3MB', '500k' -> bytes (decimal units); 'whole' -> None."""
    t = text.strip().lower().replace("_", "")
    if t in ("whole", "all", "full"):
        return None
    multiplier = 1
    for suffix, factor in (("kb", 10**3), ("mb", 10**6), ("gb", 10**9),
                           ("k", 10**3), ("m", 10**6), ("g", 10**9), ("b", 1)):
        if t.endswith(suffix):
            t, multiplier = t[: -len(suffix)], factor
            break
    try:
        value = float(t) * multiplier
    except ValueError:
        fail(f"cannot read size {text!r} (try 1e6, 3000000, 10M or whole)")
    if value < 1 or value != int(value):
        fail(f"size {text!r} must be a whole number of bytes >= 1")
    return int(value)


def requested_sizes(items: list[str] | None, large: bool) -> list[int | None]:
    """Sizes from --sizes (space or comma separated) and --large, in order; None = whole file."""
    words = [w for item in (items or DEFAULT_SIZES) for w in item.split(",") if w.strip()]
    if large:
        words += LARGE_SIZES
    return [parse_size(w) for w in words]


def plan_sizes(requested: list[int | None], file_size: int) -> tuple[list[int], list[str]]:
    """Apply the size rule: clip to the file, drop duplicates, sort.  Returns sizes and notes."""
    sizes: list[int] = []
    notes: list[str] = []
    for want in requested:
        size = file_size if want is None or want > file_size else want
        if want is not None and want > file_size:
            notes.append(f"requested {want:,} bytes but the file has {file_size:,}: "
                         f"benchmarked the whole file instead")
        if size not in sizes:
            sizes.append(size)
    return sorted(sizes), notes


def enwik8_help() -> str:
    return (f"get enwik8 from the Hutter Prize: {ENWIK8_URL} (unzip it; enwik8 is "
            f"{ENWIK8_SIZE:,} bytes with md5 {ENWIK8_MD5}); this script never downloads anything")


def file_md5(path: Path) -> str:
    digest = hashlib.md5()
    with open(path, "rb") as f:
        while chunk := f.read(CHUNK):
            digest.update(chunk)
    return digest.hexdigest()


def check_input(path: Path, expected_md5: str | None) -> tuple[int, str, list[str]]:
    """Size, md5 and warnings for the input; exits with a one-line error when it is unusable."""
    if not path.exists():
        fail(f"input file {str(path)!r} not found; {enwik8_help()}")
    if not path.is_file():
        fail(f"input {str(path)!r} is not a regular file; {enwik8_help()}")
    size = path.stat().st_size
    if size == 0:
        fail(f"input file {str(path)!r} is empty")
    md5 = file_md5(path)
    if expected_md5 and md5 != expected_md5.lower():
        fail(f"md5 of {str(path)!r} is {md5}, expected {expected_md5.lower()}; {enwik8_help()}")
    warnings = []
    name = path.name.lower()
    expected = ENWIK8_MD5 if name == "enwik8" else KNOWN_PREFIX_MD5.get(size) if "enwik8" in name \
        else None
    if expected and md5 != expected:
        warnings.append(f"{path} ({size:,} bytes, md5 {md5}) is named like enwik8 but is not the "
                        f"genuine file or prefix (md5 {expected} expected): published figures "
                        f"are not shown; {enwik8_help()}")
    return size, md5, warnings


def is_enwik8_prefix(size: int, prefix_md5: str, source_md5: str) -> bool:
    """True when the prefix is known to be the first `size` bytes of enwik8."""
    return source_md5 == ENWIK8_MD5 or KNOWN_PREFIX_MD5.get(size) == prefix_md5


def write_prefix(source: Path, size: int, dest: Path) -> str:
    """Copy the first `size` bytes of source to dest; return their md5."""
    digest = hashlib.md5()
    remaining = size
    with open(source, "rb") as fin, open(dest, "wb") as fout:
        while remaining:
            chunk = fin.read(min(CHUNK, remaining))
            if not chunk:
                raise OSError(f"{source} ended before {size:,} bytes")
            digest.update(chunk)
            fout.write(chunk)
            remaining -= len(chunk)
    return digest.hexdigest()


# ----------------------------------------------------------------------------------------------
# Running one process

@dataclass
class ProcRun:
    """One child process: wall seconds, CPU seconds (user+sys), peak RSS and how it ended."""

    argv: list[str]
    seconds: float = 0.0
    cpu_seconds: float | None = None
    peak_rss_bytes: int | None = None
    rss_floor_bytes: int | None = None  # peaks at or below this are only known to be <= it
    returncode: int | None = None
    timed_out: bool = False
    error: str | None = None  # why it failed, for the status column
    log_tail: str | None = None  # end of its stderr when it failed

    @property
    def ok(self) -> bool:
        return self.error is None

    @property
    def peak_below_floor(self) -> bool:
        slack = 256 * 1024
        return (self.peak_rss_bytes is not None and self.rss_floor_bytes is not None
                and self.peak_rss_bytes <= self.rss_floor_bytes + slack)


# Why a launcher: on Linux a child's ru_maxrss starts at the peak RSS of the process it was
# forked from (exec records the old address space's high-water mark), so a tool spawned straight
# from this Python process could never report less than this process's own ~20-30 MB.  The
# launcher is a fresh, small, single-threaded Python that forks the tool, reaps it with os.wait4
# (the tool's own rusage, not the cumulative RUSAGE_CHILDREN) and writes the figures to a JSON
# file.  Its floor (~6 MB) is the max RSS it measures for `true`, spawned the same way.
LAUNCHER = r"""
import json, os, shutil, sys, time
report, argv = sys.argv[1], sys.argv[2:]
def spawn(path, args):
    pid = os.fork()
    if pid == 0:
        try:
            os.execv(path, args)
        except OSError as exc:
            os.write(2, ("cannot start %s: %s\n" % (args[0], exc.strerror)).encode())
        os._exit(127)
    return pid
path = argv[0] if os.sep in argv[0] else shutil.which(argv[0]) or argv[0]
true = shutil.which("true")  # far smaller than the floor, so its max RSS is the floor
floor = os.wait4(spawn(true, [true]), 0)[2].ru_maxrss if true else None
start = time.perf_counter()
_, status, usage = os.wait4(spawn(path, argv), 0)
seconds = time.perf_counter() - start
with open(report, "w") as f:
    json.dump({"seconds": seconds, "cpu_seconds": usage.ru_utime + usage.ru_stime,
               "maxrss": usage.ru_maxrss, "floor": floor,
               "returncode": os.waitstatus_to_exitcode(status)}, f)
"""
RSS_UNIT = 1 if sys.platform == "darwin" else 1024  # ru_maxrss: bytes on macOS, KiB elsewhere


def log_tail(path: Path, size: int = 2000) -> str:
    """The last `size` bytes of a log file as text ('' if unreadable)."""
    try:
        with open(path, "rb") as f:
            f.seek(max(0, path.stat().st_size - size))
            return f.read().decode("utf-8", "replace")
    except OSError:
        return ""


def last_line(text: str, limit: int = 100) -> str:
    """Last non-empty line, shortened, for the status column."""
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    return lines[-1][:limit] if lines else ""


def kill_group(proc: subprocess.Popen) -> None:
    """Kill proc and everything in its process group (it was started in a new session)."""
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except (AttributeError, ProcessLookupError, PermissionError):
        proc.kill()
    proc.communicate()


def wait_or_kill(proc: subprocess.Popen, timeout: float | None) -> bool:
    """Wait for proc; on timeout or Ctrl-C kill its whole process group.  True if timed out."""
    try:
        proc.wait(timeout=timeout)
        return False
    except subprocess.TimeoutExpired:
        kill_group(proc)
        return True
    except BaseException:
        kill_group(proc)
        raise


def run_process(argv: list[str], stdin_path: Path | None, stdout_path: Path | None,
                log_path: Path, cwd: Path | None, timeout: float | None) -> ProcRun:
    """Run argv (no shell) through the launcher; stdin/stdout are files (None: /dev/null, log)."""
    run = ProcRun(argv)
    report = log_path.with_name(log_path.name + ".json")
    report.unlink(missing_ok=True)
    has_fork = hasattr(os, "fork")
    command = [sys.executable, "-I", "-S", "-c", LAUNCHER, str(report), *argv] if has_fork else argv
    with contextlib.ExitStack() as files:
        fin = files.enter_context(open(stdin_path or os.devnull, "rb"))
        flog = files.enter_context(open(log_path, "wb"))
        fout = files.enter_context(open(stdout_path, "wb")) if stdout_path else flog
        start = time.perf_counter()
        try:
            proc = subprocess.Popen(command, stdin=fin, stdout=fout, stderr=flog, cwd=cwd,
                                    start_new_session=has_fork)
        except OSError as exc:
            run.error = f"cannot start {command[0]}: {exc.strerror or exc}"
            return run
        run.timed_out = wait_or_kill(proc, timeout)
        run.seconds = time.perf_counter() - start
    run.returncode = proc.returncode
    if has_fork and report.is_file():
        figures = json.loads(report.read_text())
        run.seconds, run.cpu_seconds = figures["seconds"], figures["cpu_seconds"]
        run.peak_rss_bytes = figures["maxrss"] * RSS_UNIT
        run.rss_floor_bytes = figures["floor"] and figures["floor"] * RSS_UNIT
        run.returncode = figures["returncode"]
    if run.timed_out:
        run.error = f"timed out after {timeout:g} s"
    elif run.returncode != 0:
        run.log_tail = log_tail(log_path)
        run.error = f"exit {run.returncode}: {last_line(run.log_tail)}".rstrip(": ")
    return run


def fill_template(template: list[str], mapping: dict[str, str]) -> list[str]:
    """Replace {in}, {out}, {src} inside each argument."""
    argv = []
    for arg in template:
        for key, value in mapping.items():
            arg = arg.replace("{" + key + "}", value)
        argv.append(arg)
    return argv


def run_template(tool: Tool, template: list[str], workdir: Path, files: dict[str, Path],
                 log_path: Path, timeout: float | None) -> ProcRun:
    """Run one compress/decompress template; files maps in/out/src to paths in workdir."""
    if tool.in_workdir:
        mapping = {key: path.name for key, path in files.items()}
        cwd = workdir
    else:
        mapping = {key: str(path) for key, path in files.items()}
        cwd = None
    joined = " ".join(template)
    stdin_path = None if "{in}" in joined else files["in"]
    stdout_path = None if "{out}" in joined else files["out"]
    return run_process(fill_template(template, mapping), stdin_path, stdout_path,
                       log_path, cwd, timeout)


def first_difference(a: Path, b: Path) -> int | None:
    """Offset of the first byte where the files differ (or where the shorter ends); None if equal."""
    offset = 0
    with open(a, "rb") as fa, open(b, "rb") as fb:
        while True:
            ca, cb = fa.read(CHUNK), fb.read(CHUNK)
            if ca != cb:
                n = min(len(ca), len(cb))
                return offset + next((i for i in range(n) if ca[i] != cb[i]), n)
            if not ca:
                return None
            offset += len(ca)


# ----------------------------------------------------------------------------------------------
# One benchmark row

@dataclass
class Result:
    """One table row: a measured tool run on one prefix, or a published figure."""

    size: int
    compressor: str
    kind: str  # "measured" or "published"
    status: str
    compressed_bytes: int | None = None  # counted only when verified (or published)
    output_bytes: int | None = None  # what the compressor wrote, verified or not
    verified: bool = False
    is_statemix: bool = False
    compress: ProcRun | None = None
    decompress: ProcRun | None = None
    source: str | None = None

    @property
    def bits_per_byte(self) -> float | None:
        return 8 * self.compressed_bytes / self.size if self.compressed_bytes is not None else None

    def to_json(self) -> dict:
        data = asdict(self)
        for phase in ("compress", "decompress"):
            run = getattr(self, phase)
            if run is not None:
                data[phase]["peak_rss_below_floor"] = run.peak_below_floor
        data["bits_per_byte"] = self.bits_per_byte
        data["compress_input_bytes_per_second"] = speed(self.size, self.compress)
        data["decompress_input_bytes_per_second"] = speed(self.size, self.decompress)
        return data


def speed(size: int, run: ProcRun | None) -> float | None:
    return size / run.seconds if run and run.ok and run.seconds > 0 else None


def slug(name: str) -> str:
    return re.sub(r"[^A-Za-z0-9]+", "-", name).strip("-") or "tool"


def bench_tool(tool: Tool, prefix: Path, size: int, timeout: float | None, progress) -> Result:
    """Compress, decompress and compare one tool on one prefix; temp files are removed after."""
    workdir = prefix.parent
    base = workdir / slug(tool.name)
    packed, restored = base.with_name(base.name + tool.suffix), base.with_name(base.name + ".out")
    result = Result(size, tool.name, "measured", "FAILED", is_statemix=tool.is_statemix)
    try:
        progress.phase(f"{size:,} {tool.name}: compress")
        result.compress = run_template(tool, tool.compress, workdir,
                                       {"in": prefix, "out": packed, "src": prefix},
                                       base.with_name(base.name + ".c.log"), timeout)
        progress.step()
        if not result.compress.ok or not packed.is_file():
            result.status = f"FAILED: compress {result.compress.error or 'wrote no output file'}"
            progress.step()
            return result
        packed_size = result.output_bytes = packed.stat().st_size
        if tool.decompress is None:
            result.compressed_bytes = packed_size
            result.status = "UNVERIFIED (no decompressor given)"
            progress.step()
            return result
        progress.phase(f"{size:,} {tool.name}: decompress")
        result.decompress = run_template(tool, tool.decompress, workdir,
                                         {"in": packed, "out": restored, "src": prefix},
                                         base.with_name(base.name + ".d.log"), timeout)
        progress.step()
        result.status = round_trip_status(result.decompress, prefix, restored)
        if result.status == "ok":
            result.compressed_bytes, result.verified = packed_size, True
        return result
    finally:
        for path in (packed, restored):
            path.unlink(missing_ok=True)


def round_trip_status(run: ProcRun, prefix: Path, restored: Path) -> str:
    if not run.ok:
        return f"FAILED: decompress {run.error}"
    if not restored.is_file():
        return "FAILED: decompress wrote no output file"
    diff = first_difference(prefix, restored)
    if diff is not None:
        return (f"FAILED: round trip differs at byte {diff:,} "
                f"(restored {restored.stat().st_size:,} of {prefix.stat().st_size:,} bytes)")
    return "ok"


def published_row(size: int) -> Result | None:
    published = PUBLISHED_STATESMIX.get(size)
    if published is None:
        return None
    return Result(size, "StateSMix (published)", "published", "published, not measured",
                  compressed_bytes=published, source=PUBLISHED_SOURCE)


# ----------------------------------------------------------------------------------------------
# Progress on stderr

class Progress:
    """tqdm bar counting compress/decompress phases, refreshed every second during long runs."""

    def __init__(self, total: int, enabled: bool):
        self.bar = tqdm(total=total, unit="step", file=sys.stderr, dynamic_ncols=True,
                        disable=None if enabled else True) if tqdm else None
        self._stop = threading.Event()
        self._ticker = None
        if self.bar is not None and not self.bar.disable:
            self._ticker = threading.Thread(target=self._tick, daemon=True)
            self._ticker.start()

    def _tick(self) -> None:
        while not self._stop.wait(1.0):
            self.bar.refresh()

    def phase(self, text: str) -> None:
        if self.bar is not None:
            self.bar.set_description_str(text)

    def step(self) -> None:
        if self.bar is not None:
            self.bar.update(1)

    def close(self) -> None:
        self._stop.set()
        if self.bar is not None:
            self.bar.close()


# ----------------------------------------------------------------------------------------------
# Report

COLUMNS = ("input bytes", "compressor", "compressed bytes", "bpb", "comp s", "decomp s",
           "comp B/s", "decomp B/s", "comp MiB", "decomp MiB", "status")


def fmt_int(value: float | None) -> str:
    return f"{value:,.0f}" if value is not None else ""


def fmt_seconds(run: ProcRun | None) -> str:
    return f"{run.seconds:.2f}" if run and run.ok else ""


def fmt_mib(run: ProcRun | None) -> str:
    if not (run and run.ok and run.peak_rss_bytes):
        return ""
    if run.peak_below_floor:
        return f"<={run.rss_floor_bytes / MIB:.1f}"
    return f"{run.peak_rss_bytes / MIB:.1f}"


def table_row(r: Result) -> list[str]:
    bpb = r.bits_per_byte
    return [f"{r.size:,}", r.compressor, fmt_int(r.compressed_bytes),
            f"{bpb:.3f}" if bpb is not None else "", fmt_seconds(r.compress),
            fmt_seconds(r.decompress), fmt_int(speed(r.size, r.compress)),
            fmt_int(speed(r.size, r.decompress)), fmt_mib(r.compress), fmt_mib(r.decompress),
            r.status]


def markdown_table(results: list[Result]) -> str:
    def line(cells) -> str:
        return "| " + " | ".join(str(c).replace("|", "\\|") for c in cells) + " |"

    right = {"input bytes", "compressed bytes", "bpb", "comp s", "decomp s", "comp B/s",
             "decomp B/s", "comp MiB", "decomp MiB"}
    rule = ["---:" if c in right else "---" for c in COLUMNS]
    return "\n".join([line(COLUMNS), line(rule), *(line(table_row(r)) for r in results)])


def default_json_path() -> Path:
    stamp = _dt.datetime.now().strftime("%Y%m%d-%H%M%S")
    return BENCH_DIR / "results" / f"enwik8-{stamp}.json"


def git_revision() -> str | None:
    try:
        done = subprocess.run(["git", "-C", str(BENCH_DIR), "describe", "--always", "--dirty"],
                              capture_output=True, text=True, timeout=10)
    except (OSError, subprocess.SubprocessError):
        return None
    return done.stdout.strip() or None


def write_json(path: Path, report: dict) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(json.dumps(report, indent=2) + "\n")
    tmp.replace(path)


# ----------------------------------------------------------------------------------------------
# Main

def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(
        description="Benchmark statemix against standard compressors on enwik8 prefixes "
                    "(see the module docstring for columns and units).")
    p.add_argument("input", nargs="?", default="enwik8",
                   help="path of enwik8 or any file (default: ./enwik8)")
    p.add_argument("--sizes", nargs="+", metavar="SIZE",
                   help="prefix sizes: 1e6 3e6 (default), 1M, 10M, 1e8 or whole; "
                        "sizes above the file size are clipped to the whole file")
    p.add_argument("--large", action="store_true", help="also run 1e7 and 1e8 bytes")
    p.add_argument("--statemix", metavar="CMD",
                   help="statemix command, split with shlex (default: statemix on PATH, "
                        "else python -m statemix_cli)")
    p.add_argument("--level", type=int, help="passed to statemix as --level N")
    p.add_argument("--threads", type=int, help="passed to statemix as -T N")
    p.add_argument("--extra", action="append", default=[], metavar="NAME=TEMPLATE",
                   help="another compressor, e.g. 'lz4=lz4 -12 -c {in}' (repeatable)")
    p.add_argument("--extra-d", action="append", default=[], metavar="NAME=TEMPLATE",
                   help="its decompressor, e.g. 'lz4=lz4 -d -c {in}' (repeatable)")
    p.add_argument("--skip", action="append", default=[], metavar="NAME",
                   help="skip a tool by the first word of its name (e.g. statemix, xz, 7z)")
    p.add_argument("--timeout", type=float, metavar="SECONDS",
                   help="kill any single compress or decompress run after this long")
    p.add_argument("--json", type=Path, metavar="PATH",
                   help="JSON output (default: bench/results/enwik8-<timestamp>.json)")
    p.add_argument("--md5", metavar="HEX", help="fail unless the input file has this md5")
    p.add_argument("--tmpdir", type=Path, help="where to make the temporary work directory")
    p.add_argument("--no-progress", action="store_true", help="no progress bar")
    return p.parse_args(argv)


def fail(message: str) -> None:
    print(f"{Path(sys.argv[0]).name}: error: {message}", file=sys.stderr)
    raise SystemExit(1)


def select_tools(args: argparse.Namespace) -> tuple[list[Tool], list[str]]:
    """statemix first, then the standard tools found, then extras; minus --skip."""
    command = shlex.split(args.statemix) if args.statemix else default_statemix_command()
    if not command:
        fail("--statemix is empty")
    standard, missing = standard_tools()
    tools = [statemix_tool(command, args.level, args.threads), *standard,
             *extra_tools(args.extra, args.extra_d)]
    names = [t.name for t in tools]
    duplicates = sorted({n for n in names if names.count(n) > 1})
    if duplicates:
        fail(f"two tools named {', '.join(duplicates)}; rename the --extra")
    skip = {s.lower() for s in args.skip}
    tools = [t for t in tools if t.name.split()[0].lower() not in skip and t.name.lower() not in skip]
    return tools, missing


def benchmark(source: Path, source_md5: str, sizes: list[int], tools: list[Tool],
              args: argparse.Namespace) -> tuple[list[Result], list[dict]]:
    """Run every tool on every prefix; published rows are added beside statemix."""
    results: list[Result] = []
    prefixes: list[dict] = []
    progress = Progress(len(sizes) * len(tools) * 2, enabled=not args.no_progress)
    try:
        with tempfile.TemporaryDirectory(prefix="statemix-bench-", dir=args.tmpdir) as tmp:
            for size in sizes:
                prefix = Path(tmp) / "data"
                progress.phase(f"{size:,}: writing prefix")
                prefix_md5 = write_prefix(source, size, prefix)
                enwik8 = is_enwik8_prefix(size, prefix_md5, source_md5)
                prefixes.append({"size": size, "md5": prefix_md5, "enwik8_prefix": enwik8})
                for tool in tools:
                    results.append(bench_tool(tool, prefix, size, args.timeout, progress))
                    if tool.is_statemix and enwik8 and (row := published_row(size)):
                        results.append(row)
                prefix.unlink()
    finally:
        progress.close()
    return results, prefixes


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    source = Path(args.input)
    file_size, source_md5, warnings = check_input(source, args.md5)
    sizes, notes = plan_sizes(requested_sizes(args.sizes, args.large), file_size)
    tools, missing = select_tools(args)
    for tool in tools:
        tool.version = probe_version(tool.version_argv)
    for warning in warnings:
        print(f"warning: {warning}", file=sys.stderr)

    started = _dt.datetime.now().astimezone()
    results, prefixes = benchmark(source, source_md5, sizes, tools, args)

    identity = ("enwik8 (md5 verified)" if source_md5 == ENWIK8_MD5
                else "enwik8 prefix (md5 verified)" if source_md5 in KNOWN_PREFIX_MD5.values()
                else "not a known enwik8 file")
    table = markdown_table(results)
    if missing:
        notes.append(f"not found on PATH, skipped: {', '.join(missing)}")
    if any(r.kind == "published" for r in results):
        notes.append(f"published rows: {PUBLISHED_SOURCE}; not measured on this machine")
    print(f"Input: {source} ({file_size:,} bytes, md5 {source_md5}, {identity})\n")
    print(table)
    if notes:
        print()
        print("\n".join(f"- {note}" for note in notes))

    json_path = args.json or default_json_path()
    write_json(json_path, {
        "schema": "statemix-bench-enwik8/1",
        "started": started.isoformat(timespec="seconds"),
        "finished": _dt.datetime.now().astimezone().isoformat(timespec="seconds"),
        "input": {"path": str(source.resolve()), "bytes": file_size, "md5": source_md5,
                  "identity": identity},
        "prefixes": prefixes,
        "machine": {"platform": platform.platform(), "python": platform.python_version(),
                    "cpus": os.cpu_count()},
        "project_revision": git_revision(),
        "options": {"sizes_requested": args.sizes or list(DEFAULT_SIZES), "large": args.large,
                    "sizes_run": sizes,
                    "level": args.level, "threads": args.threads, "timeout": args.timeout,
                    "skip": args.skip},
        "tools": [{"name": t.name, "compress": t.compress, "decompress": t.decompress,
                   "version": t.version} for t in tools],
        "missing_tools": missing,
        "notes": notes,
        "results": [r.to_json() for r in results],
        "table_markdown": table,
    })
    print(f"JSON written to {json_path}", file=sys.stderr)
    statemix_failed = any(r.is_statemix and not r.verified for r in results)
    return 2 if statemix_failed else 0


if __name__ == "__main__":
    sys.exit(main())
