"""Segmented files: the size cost of each segment size, the speed-up of -T2, and seeking.

Usage: python bench/segments.py sizes INPUT [--segments 1MiB,4MiB,16MiB] [--level L]
       python bench/segments.py speed INPUT [--segment 4MiB] [--level L]
       python bench/segments.py seek INPUT [--mb 64] [--segment 4MiB] [--level L]
       python bench/segments.py dask INPUT [--segment 4MiB] [--level L]

``sizes``: INPUT as one stream and with each segment size, at -T1 (sizes do not depend on -T); every
stream decoded and compared.  ``speed``: compress and decompress INPUT with the segment size at -T1
and at -T2 through the command line (wall seconds, /usr/bin/time's peak), outputs compared.
``seek``: INPUT repeated to --mb megabytes, compressed with the segment size at -T2; then the time
to read 1 KiB at the middle through StatemixFile.seek() against decoding the whole stream (-T1).
``dask``: INPUT on a dask LocalCluster of 2 single-threaded worker processes
(statemix.distributed.compress_file) against the local segment mode at -T2 (the library in this
process): seconds and bytes, outputs compared.  Prints markdown rows for bench/RESULTS.md.
"""

from __future__ import annotations

import argparse
import filecmp
import subprocess
import sys
import tempfile
import time
from pathlib import Path

def cli(*args: str, stdout=None) -> tuple[float, int]:
    """Run the command line under /usr/bin/time; return (wall seconds, peak KiB)."""
    with tempfile.NamedTemporaryFile("r") as report:
        subprocess.run(["/usr/bin/time", "-f", "%e %M", "-o", report.name, sys.executable, "-m", "statemix_cli",
                        *args], stdout=stdout, check=True)
        seconds, peak = report.read().split()
    return float(seconds), int(peak)


def sizes(path: Path, segments: list[str], level: str) -> None:
    print("| segments | bytes | vs one stream | compress s (-T1) | peak MiB |")
    print("|---|---:|---:|---:|---:|")
    base = None
    with tempfile.TemporaryDirectory() as folder:
        for segment in ["none", *segments]:
            out = Path(folder) / f"{segment}.smx"
            options = [] if segment == "none" else ["--segment-size", segment]
            with open(out, "wb") as sink:
                seconds, peak = cli("-T1", "--level", level, *options, "-c", str(path), stdout=sink)
            back = Path(folder) / "back"
            with open(back, "wb") as sink:
                cli("-T2", "-dc", str(out), stdout=sink)
            assert filecmp.cmp(back, path, shallow=False), segment
            size = out.stat().st_size
            base = base or size
            print(f"| {segment} | {size:,} | {100 * (size / base - 1):+.2f}% | {seconds:.1f} | {peak / 1024:.0f} |")


def speed(path: Path, segment: str, level: str) -> None:
    rows, outputs = [], {}
    with tempfile.TemporaryDirectory() as folder:
        for threads in ("1", "2"):
            out = Path(folder) / f"T{threads}.smx"
            with open(out, "wb") as sink:
                compress = cli(f"-T{threads}", "--level", level, "--segment-size", segment, "-c", str(path),
                               stdout=sink)
            back = Path(folder) / f"T{threads}.out"
            with open(back, "wb") as sink:
                decompress = cli(f"-T{threads}", "-dc", str(out), stdout=sink)
            assert filecmp.cmp(back, path, shallow=False)
            outputs[threads] = out.read_bytes()
            rows.append((threads, len(outputs[threads]), compress, decompress))
    assert outputs["1"] == outputs["2"], "the output depends on -T"
    print("| -T | bytes | compress s | peak MiB | decompress s | peak MiB |")
    print("|---|---:|---:|---:|---:|---:|")
    for threads, size, (cs, cp), (ds, dp) in rows:
        print(f"| {threads} | {size:,} | {cs:.1f} | {cp / 1024:.0f} | {ds:.1f} | {dp / 1024:.0f} |")
    print(f"speed-up of -T2: compress {rows[0][2][0] / rows[1][2][0]:.2f}x, "
          f"decompress {rows[0][3][0] / rows[1][3][0]:.2f}x; outputs identical")


def seek(path: Path, megabytes: float, segment: str, level: str) -> None:
    import statemix

    data = path.read_bytes()
    total = int(megabytes * 1_000_000)
    with tempfile.TemporaryDirectory() as folder:
        big = Path(folder) / "big"
        with open(big, "wb") as sink:
            written = 0
            while written < total:
                piece = data[: total - written]
                sink.write(piece)
                written += len(piece)
        packed = Path(folder) / "big.smx"
        cli("-T2", "--level", level, "--segment-size", segment, str(big))
        started = time.perf_counter()
        with statemix.open(packed) as f:
            f.seek(total // 2)
            middle = f.read(1024)
        seek_seconds = time.perf_counter() - started
        with open(big, "rb") as source:
            source.seek(total // 2)
            assert middle == source.read(1024)
        whole_seconds, _ = cli("-T1", "-t", str(packed))
        packed_size = packed.stat().st_size
    print(f"{total:,} bytes in {segment} segments ({packed_size:,} B): "
          f"1 KiB at the middle in {seek_seconds:.2f} s; the whole stream (-T1 -t) in {whole_seconds:.1f} s: "
          f"{seek_seconds / whole_seconds:.3f} of it")


def dask_run(path: Path, segment: str, level: str) -> None:
    import statemix
    import statemix.distributed
    from distributed import Client, LocalCluster

    size = int(segment[:-3]) << {"KiB": 10, "MiB": 20}[segment[-3:]]
    data = path.read_bytes()
    started = time.perf_counter()
    local = statemix.compress(data, level=int(level), segment_size=size, threads=2)
    local_seconds = time.perf_counter() - started
    with tempfile.TemporaryDirectory() as folder:
        with Client(LocalCluster(n_workers=2, threads_per_worker=1, dashboard_address=None, host="127.0.0.1")) as client:
            client.run(lambda: __import__("statemix").compress(b"warm " * 100, level=int(level)))
            started = time.perf_counter()
            statemix.distributed.compress_file(client, path, Path(folder) / "out.smx", segment_size=size,
                                               level=int(level))
            dask_seconds = time.perf_counter() - started
        remote = (Path(folder) / "out.smx").read_bytes()
    assert remote == local and statemix.decompress(remote) == data
    print(f"{len(data):,} bytes, {segment} segments, level {level}: local -T2 {local_seconds:.1f} s, "
          f"dask 2 workers {dask_seconds:.1f} s, both {len(local):,} B, byte-identical")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("what", choices=["sizes", "speed", "seek", "dask"])
    parser.add_argument("input", type=Path)
    parser.add_argument("--segments", default="1MiB,4MiB,16MiB")
    parser.add_argument("--segment", default="4MiB")
    parser.add_argument("--level", default="2")
    parser.add_argument("--mb", type=float, default=64)
    args = parser.parse_args()
    if args.what == "sizes":
        sizes(args.input, args.segments.split(","), args.level)
    elif args.what == "speed":
        speed(args.input, args.segment, args.level)
    elif args.what == "seek":
        seek(args.input, args.mb, args.segment, args.level)
    else:
        dask_run(args.input, args.segment, args.level)


if __name__ == "__main__":
    main()
