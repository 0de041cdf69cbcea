"""statemix on the binary files of the corpora and on a tar of Calgary, beside xz -9e (issue 14).

Usage: python bench/structure.py [--shared ../shared/data] [--level N] [--only NAME ...]
                                 [--zpaq PATH] [--extra FILE ...]
Every statemix stream is decompressed and compared before its size counts.  With ``--zpaq`` (a zpaq
7.15 binary built beside the project from its public source: ``g++ -O3 zpaq.cpp libzpaq.cpp -pthread``)
zpaq -m5 runs on the same input in the same run (the archive's size, which includes the file's name);
without it the figures measured on this machine for issue 14 are printed, where there are some.
``--extra`` adds files outside the corpora (x86 executables, say: name them with their version and
checksum in RESULTS); the last column says how many blocks were coded after the x86 transform.
The tar is built in memory from the Calgary files in name order, as ``tar -cf calgary.tar calgary``
would, with fixed metadata, so it is the same bytes on every machine (3,266,560 B).
"""

from __future__ import annotations

import argparse
import io
import lzma
import subprocess
import tarfile
import tempfile
import time
from pathlib import Path

import statemix
from statemix import container

BINARY = ("calgary/geo", "calgary/obj1", "calgary/obj2", "calgary/pic", "canterbury/kennedy.xls",
          "canterbury/ptt5", "canterbury/sum", "canterbury_large/E.coli")
#: zpaq -m5 on this machine (bytes; issue 14), where measured
ZPAQ_M5 = {"calgary/geo": 47_011, "calgary/pic": 28_606, "canterbury/ptt5": 28_606, "canterbury/kennedy.xls": 16_869,
           "canterbury_large/E.coli": 1_114_286, "calgary.tar": 684_861}


def calgary_tar(calgary: Path) -> bytes:
    """A POSIX tar of the Calgary directory with fixed owner, mode and time (deterministic)."""
    out = io.BytesIO()
    with tarfile.open(fileobj=out, mode="w", format=tarfile.GNU_FORMAT) as tar:
        def add(path: Path, name: str) -> None:
            info = tarfile.TarInfo(name)
            info.mtime, info.uid, info.gid, info.uname, info.gname = 0, 0, 0, "", ""
            if path.is_dir():
                info.type, info.mode = tarfile.DIRTYPE, 0o755
                tar.addfile(info)
            else:
                info.mode, info.size = 0o644, path.stat().st_size
                with path.open("rb") as f:
                    tar.addfile(info, f)
        add(calgary, "calgary")
        for path in sorted(calgary.iterdir()):
            add(path, f"calgary/{path.name}")
    return out.getvalue()


def zpaq_m5(zpaq: Path, name: str, data: bytes) -> int:
    """Bytes of a zpaq -m5 archive of ``data`` (stored under the file's base name)."""
    with tempfile.TemporaryDirectory() as work:
        source = Path(work) / Path(name).name
        source.write_bytes(data)
        subprocess.run([str(zpaq), "a", "out.zpaq", source.name, "-m5"], cwd=work, check=True,
                       capture_output=True)
        return (Path(work) / "out.zpaq").stat().st_size


def x86_blocks(stream: bytes) -> int:
    x86 = container.KIND_NAMES[container.MODELLED_X86]
    return sum(block.kind == x86 for info in statemix.read_info(io.BytesIO(stream)) for block in info.blocks)


def measure(name: str, data: bytes, level: int | None, zpaq: Path | None) -> dict:
    started = time.perf_counter()
    stream = statemix.compress(data, level=level)
    seconds = time.perf_counter() - started
    assert statemix.decompress(stream) == data, f"{name}: round trip differs"
    return {"file": name, "bytes": len(data), "statemix": len(stream), "seconds": seconds,
            "xz9e": len(lzma.compress(data, preset=9 | lzma.PRESET_EXTREME)),
            "zpaq": zpaq_m5(zpaq, name, data) if zpaq else ZPAQ_M5.get(name), "x86": x86_blocks(stream)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--shared", type=Path, default=Path(__file__).resolve().parents[2] / "shared" / "data")
    parser.add_argument("--level", type=int)
    parser.add_argument("--only", nargs="*", help="names (e.g. calgary/pic, calgary.tar) to measure")
    parser.add_argument("--zpaq", type=Path, help="a zpaq binary to run -m5 with, side by side")
    parser.add_argument("--extra", type=Path, nargs="*", default=[], help="more files to measure")
    args = parser.parse_args()
    corpora = args.shared / "corpora"
    inputs = [(name, lambda name=name: (corpora / name).read_bytes()) for name in BINARY]
    inputs.append(("calgary.tar", lambda: calgary_tar(corpora / "calgary")))
    inputs += [(str(path), path.read_bytes) for path in args.extra]
    print("| file | bytes | statemix | bpb | xz -9e | zpaq -m5 | vs xz | vs zpaq | s | x86 blocks |")
    print("| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |", flush=True)
    for name, read in inputs:
        if args.only and name not in args.only:
            continue
        r = measure(name, read(), args.level, args.zpaq)
        zpaq = f"{r['zpaq']:,}" if r["zpaq"] else "-"
        vs_zpaq = f"{100 * (r['statemix'] / r['zpaq'] - 1):+.1f}%" if r["zpaq"] else "-"
        print(f"| {r['file']} | {r['bytes']:,} | {r['statemix']:,} | {8 * r['statemix'] / r['bytes']:.3f} | "
              f"{r['xz9e']:,} | {zpaq} | {100 * (r['statemix'] / r['xz9e'] - 1):+.1f}% | {vs_zpaq} | "
              f"{r['seconds']:.1f} | {r['x86']} |", flush=True)


if __name__ == "__main__":
    main()
