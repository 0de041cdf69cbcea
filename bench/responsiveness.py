"""Responsiveness and hostile input: the figures behind the command line's promises.

Usage: python bench/responsiveness.py [--input ../shared/data/enwik8/enwik8_3M] [--statemix CMD]
                                      [--levels 1,2] [--skip-signal]

Measures, with the installed command line (or --statemix) and the library:

- SIGINT latency: the command compresses --input; a SIGINT is sent when it has used 1.5 s of CPU;
  the time from the signal to the process's end, and whether anything was left in the folder.
- First bytes: the seconds from opening a stream (``statemix.open``) to the first byte of
  ``read(1)``, at each level, on the first MB of --input.
- Block schedule: the size cost of the growing first blocks (16 KiB doubling to 1 MiB) against
  1 MiB blocks from the start, on the first MB of --input, every stream decoded and compared.
- zstandard blocks: decoding a hand-made stream of four zstandard blocks of 16 MiB of zeros.
- A hostile model record (cm, 2**26-byte tables, 2**28 bytes of history): refused, and the peak
  resident memory of the process that refused it.
Prints markdown lines for bench/RESULTS.md.
"""

from __future__ import annotations

import argparse
import os
import resource
import shlex
import signal
import subprocess
import sys
import tempfile
import time
import zlib
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from enwik8 import default_statemix_command  # noqa: E402

HOSTILE = """
import statemix
from statemix import container
from statemix.models import ModelSpec
stream = container.write_header(ModelSpec.from_bytes(bytes([1, 26, 28, 10, 3, 2]))) + container.write_trailer(0, 0)
try:
    statemix.decompress(stream)
    print("accepted")
except statemix.StatemixError as exc:
    print("refused:", exc)
# VmHWM: this process's own peak (ru_maxrss would include the parent's from before exec)
print(next(line.split()[1] for line in open("/proc/self/status") if line.startswith("VmHWM:")))
"""


def cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def signal_latency(command: list[str], source: Path) -> str:
    with tempfile.TemporaryDirectory() as folder:
        target = Path(folder) / source.name
        target.write_bytes(source.read_bytes())
        proc = subprocess.Popen([*command, "-T1", source.name], cwd=folder, stdin=subprocess.DEVNULL,
                                stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        while cpu_seconds(proc.pid) < 1.5 and proc.poll() is None:
            time.sleep(0.01)
        sent = time.monotonic()
        proc.send_signal(signal.SIGINT)
        _, err = proc.communicate()
        latency = time.monotonic() - sent
        left = sorted(p.name for p in Path(folder).iterdir() if p.name != source.name)
    return (f"- SIGINT 1.5 s of CPU into `statemix -T1 {source.name}`: ended {latency:.2f} s after the "
            f"signal, exit {proc.returncode}, left behind: {left or 'nothing'}; stderr: {err.decode().strip()!r}")


def first_bytes(data: bytes, levels: list[int]) -> list[str]:
    import io

    import statemix

    lines = []
    for level in levels:
        stream = statemix.compress(data, level=level)
        started = time.perf_counter()
        with statemix.open(io.BytesIO(stream)) as f:
            first = f.read(1)
            elapsed = time.perf_counter() - started
            rest = f.read()
        assert first + rest == data
        lines.append(f"- first byte of `read(1)`, level {level}: {elapsed:.2f} s (whole MB: stream of {len(stream):,} B)")
    return lines


def block_schedule(data: bytes, levels: list[int]) -> list[str]:
    import statemix
    from statemix import container

    lines = []
    for level in levels:
        growing = statemix.compress(data, level=level)
        saved = container.FIRST_BLOCK
        container.FIRST_BLOCK = container.BLOCK_SIZE
        try:
            flat = statemix.compress(data, level=level)
        finally:
            container.FIRST_BLOCK = saved
        assert statemix.decompress(growing) == data and statemix.decompress(flat) == data
        lines.append(f"- level {level}, {len(data):,} B: growing blocks {len(growing):,} B, 1 MiB blocks "
                     f"{len(flat):,} B: +{len(growing) - len(flat)} B ({100 * (len(growing) / len(flat) - 1):+.3f}%)")
    return lines


def zstd_zeros() -> str:
    import zstandard

    import statemix
    from statemix import container
    from statemix.models import spec_for_level

    zeros = bytes(container.MAX_BLOCK)  # 1 MiB: readers refuse longer blocks
    payload = zstandard.ZstdCompressor(level=19, write_content_size=False).compress(zeros)
    stream = (container.write_header(spec_for_level(None, None))
              + container.write_block(container.ZSTANDARD, zeros, payload) * 64
              + container.write_trailer(64 * len(zeros), zlib.crc32(zeros * 64)))
    started = time.perf_counter()
    assert statemix.decompress(stream) == zeros * 64
    return (f"- 64 zstandard blocks of 1 MiB of zeros ({len(stream):,} B stream): decoded in "
            f"{time.perf_counter() - started:.2f} s")


def hostile() -> str:
    done = subprocess.run([sys.executable, "-c", HOSTILE], capture_output=True, text=True, check=True)
    verdict, peak = done.stdout.splitlines()
    return f"- hostile cm record (table_bits 26, hist_bits 28): {verdict}; peak {int(peak) / 1024:.0f} MiB"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--input", type=Path,
                        default=Path(__file__).resolve().parents[2] / "shared" / "data" / "enwik8" / "enwik8_3M")
    parser.add_argument("--statemix", help="statemix command, split with shlex (default: as bench/enwik8.py)")
    parser.add_argument("--levels", default="1,2")
    parser.add_argument("--skip-signal", action="store_true")
    args = parser.parse_args()
    command = shlex.split(args.statemix) if args.statemix else default_statemix_command()
    levels = [int(level) for level in args.levels.split(",")]
    data = args.input.read_bytes()[:1_000_000]
    lines = [] if args.skip_signal else [signal_latency(command, args.input)]
    lines += first_bytes(data, levels)
    lines += block_schedule(data, levels)
    lines += [zstd_zeros(), hostile()]
    print("\n".join(lines))
    print(f"(peak of this process: {resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024:.0f} MiB)")


if __name__ == "__main__":
    main()
