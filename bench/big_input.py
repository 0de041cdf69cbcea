"""Big inputs: time per MB and peak memory of streaming compression and decompression.

Usage: python bench/big_input.py [--mb 50] [--level 1] [--shared ../shared/data] [--tmpdir DIR]
                                [--statemix CMD]

Builds an input of --mb megabytes (10**6 bytes) by concatenating the files of ../shared/data
(enwik8 prefix, Canterbury, Calgary) over and over, then runs the installed command line on it at
--level, from a file (FILE -> FILE.smx) and from standard input to standard output, decompressing
each result and comparing it with the input.  It also runs the default preset on enwik8_4154394.
Prints a markdown table: seconds, seconds per MB, and the peak resident memory of each process.
"""

from __future__ import annotations

import argparse
import filecmp
import shlex
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from enwik8 import default_statemix_command, run_process  # noqa: E402


def build_input(shared: Path, size: int, dest: Path) -> None:
    sources = sorted(p for p in shared.rglob("*") if p.is_file() and p.name != "README.md")
    if not sources:
        raise SystemExit(f"no input files under {shared}")
    written = 0
    with open(dest, "wb") as out:
        while written < size:
            for source in sources:
                chunk = source.read_bytes()[: size - written]
                out.write(chunk)
                written += len(chunk)
                if written >= size:
                    break


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mb", type=float, default=50)
    parser.add_argument("--level", type=int, default=1)
    parser.add_argument("--shared", type=Path, default=Path(__file__).resolve().parents[2] / "shared" / "data")
    parser.add_argument("--tmpdir")
    parser.add_argument("--statemix", help="statemix command, split with shlex (default: as bench/enwik8.py)")
    args = parser.parse_args()
    statemix = shlex.split(args.statemix) if args.statemix else default_statemix_command()
    rows = []
    with tempfile.TemporaryDirectory(dir=args.tmpdir) as scratch:
        work = Path(scratch)
        big = work / "big.bin"
        build_input(args.shared, int(args.mb * 1e6), big)
        log = work / "log"

        def step(name, argv, stdin=None, stdout=None, size=None):
            run = run_process(argv, stdin, stdout, log, work, None)
            if not run.ok:
                raise SystemExit(f"{name}: {run.error}")
            mb = (size or big.stat().st_size) / 1e6
            rows.append((name, mb, run.seconds, run.seconds / mb, run.peak_rss_bytes / 2**20))

        level = [f"--level={args.level}"]
        step(f"compress file, level {args.level}", statemix + level + ["-f", str(big)])
        packed = big.with_name("big.bin.smx")
        step("decompress file to stdout", statemix + ["-d", "-c", str(packed)], stdout=work / "back1")
        assert filecmp.cmp(big, work / "back1", shallow=False), "file round trip differs"
        step(f"compress stdin to stdout, level {args.level}", statemix + level, stdin=big, stdout=work / "s.smx")
        step("decompress stdin to stdout", statemix + ["-d"], stdin=work / "s.smx", stdout=work / "back2")
        assert filecmp.cmp(big, work / "back2", shallow=False), "stdin round trip differs"
        sizes = {"file": packed.stat().st_size, "stdin": (work / "s.smx").stat().st_size}
        enwik = args.shared / "enwik8" / "enwik8_4154394"
        if enwik.is_file():
            copy = work / "enwik8_4154394"
            copy.write_bytes(enwik.read_bytes())
            step("compress enwik8_4154394, default level", statemix + [str(copy)], size=copy.stat().st_size)
            step("decompress enwik8_4154394", statemix + ["-d", "-c", str(copy) + ".smx"],
                 stdout=work / "back3", size=copy.stat().st_size)
            assert filecmp.cmp(copy, work / "back3", shallow=False), "enwik8 round trip differs"
            sizes["enwik8_4154394"] = Path(str(copy) + ".smx").stat().st_size
    print(f"input: {args.mb:g} MB built from {args.shared}; compressed sizes: {sizes}")
    print("| run | MB | seconds | s/MB | peak RSS MiB |")
    print("| --- | ---: | ---: | ---: | ---: |")
    for name, mb, seconds, per_mb, rss in rows:
        print(f"| {name} | {mb:.2f} | {seconds:.1f} | {per_mb:.2f} | {rss:.0f} |")


if __name__ == "__main__":
    main()
