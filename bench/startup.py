"""Start-up cost of the command line: --help, the first run (cold numba cache), later runs (warm).

Usage: python bench/startup.py [--runs N]
Prints a markdown table of wall-clock seconds (median of N runs, default 5), each run a fresh
process compressing a 1 KB file to standard output.  The cold run uses an empty cache directory
(STATEMIX_CACHE_DIR), so every kernel is compiled; warm runs load them from that cache.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

COMMAND = [sys.executable, "-m", "statemix_cli"]


def timed(args: list[str], env: dict) -> float:
    start = time.perf_counter()
    subprocess.run(COMMAND + args, env=env, check=True, stdout=subprocess.DEVNULL)
    return time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5)
    runs = parser.parse_args().runs
    with tempfile.TemporaryDirectory() as scratch:
        sample = Path(scratch) / "sample.txt"
        sample.write_bytes((b"statemix start-up sample line. " * 40)[:1000])
        env = dict(os.environ, STATEMIX_CACHE_DIR=str(Path(scratch) / "cache"))
        rows = {
            "statemix --help": [timed(["--help"], env) for _ in range(runs)],
            "compress 1 KB, cold cache (first run)": [timed(["-c", str(sample)], env)],
            "compress 1 KB, warm cache": [timed(["-c", str(sample)], env) for _ in range(runs)],
            "decompress 1 KB, warm cache": [],
        }
        packed = Path(scratch) / "sample.txt.smx"
        subprocess.run(COMMAND + [str(sample)], env=env, check=True)
        rows["decompress 1 KB, warm cache"] = [timed(["-d", "-c", str(packed)], env) for _ in range(runs)]
    print("| what | seconds (median) | runs |")
    print("| --- | ---: | ---: |")
    for name, times in rows.items():
        print(f"| {name} | {statistics.median(times):.2f} | {len(times)} |")


if __name__ == "__main__":
    main()
