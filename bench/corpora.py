"""statemix against zstd -19 and xz -9e on every file of the Canterbury and Calgary corpora.

Usage: python bench/corpora.py [--shared ../shared/data] [--level N] [--text] [--zpaq PATH] [--files F ...]
Every statemix stream is decompressed and compared before its size counts.  Prints a markdown table
(bytes, and statemix's margin over zstd -19 and xz -9e) and checks the two promises of the
robustness issue: never more than zstd -19's output + 64 bytes, and smaller than xz -9e on text.
``--text``: the text files only.  ``--zpaq``: a zpaq 7.15 binary built beside the project (see
bench/structure.py); adds zpaq -m5's archive size per file and lists the files where statemix is not
smaller (issue 12's promise on text).  ``--files``: these files instead of the corpora, all counted as
text (issue 12's set of text that is not enwik8: bench/text_set.py builds it).
"""

from __future__ import annotations

import argparse
import lzma
import sys
import time
from pathlib import Path

import zstandard

import statemix

sys.path.insert(0, str(Path(__file__).resolve().parent))  # bench/'s own modules, also under python -P
from structure import zpaq_m5  # noqa: E402

TEXT_SUFFIXES = {".txt", ".html", ".c", ".lsp", ".1"}
TEXT_NAMES = {"bib", "book1", "book2", "news", "paper1", "paper2", "paper3", "paper4", "paper5", "paper6",
              "progc", "progl", "progp", "trans", "E.coli", "bible.txt", "world192.txt"}


def is_text(path: Path) -> bool:
    return path.suffix in TEXT_SUFFIXES or path.name in TEXT_NAMES


def measure(path: Path, level: int | None, zpaq: Path | None, text: bool) -> dict:
    data = path.read_bytes()
    started = time.perf_counter()
    stream = statemix.compress(data, level=level)
    seconds = time.perf_counter() - started
    assert statemix.decompress(stream) == data, f"{path}: round trip differs"
    return {
        "file": f"{path.parent.name}/{path.name}",
        "bytes": len(data),
        "statemix": len(stream),
        "zstd19": len(zstandard.ZstdCompressor(level=19).compress(data)),
        "xz9e": len(lzma.compress(data, preset=9 | lzma.PRESET_EXTREME)),
        "zpaq": zpaq_m5(zpaq, path.name, data) if zpaq else None,
        "text": text,
        "seconds": seconds,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--shared", type=Path, default=Path(__file__).resolve().parents[2] / "shared" / "data")
    parser.add_argument("--level", type=int)
    parser.add_argument("--text", action="store_true", help="the text files only")
    parser.add_argument("--zpaq", type=Path, help="a zpaq 7.15 binary: add zpaq -m5's sizes")
    parser.add_argument("--files", type=Path, nargs="+", help="these files (all text) instead of the corpora")
    args = parser.parse_args()
    if args.files:
        files = args.files
    else:
        files = sorted(p for p in (args.shared / "corpora").rglob("*") if p.is_file() and (is_text(p) or not args.text))
    if not files:
        raise SystemExit(f"no corpus files under {args.shared / 'corpora'} (use --shared)")
    rows = [measure(p, args.level, args.zpaq, bool(args.files) or is_text(p)) for p in files]
    zpaq_head = (" zpaq -m5 | vs zpaq |", " ---: | ---: |") if args.zpaq else ("", "")
    print(f"| file | bytes | statemix | bpb | zstd -19 | xz -9e |{zpaq_head[0]} vs zstd | vs xz | s |")
    print(f"| --- | ---: | ---: | ---: | ---: | ---: |{zpaq_head[1]} ---: | ---: | ---: |")
    for r in rows:
        zpaq = f" {r['zpaq']:,} | {100 * (r['statemix'] / r['zpaq'] - 1):+.1f}% |" if args.zpaq else ""
        print(f"| {r['file']}{' (text)' if r['text'] else ''} | {r['bytes']:,} | {r['statemix']:,} | "
              f"{8 * r['statemix'] / r['bytes']:.3f} | {r['zstd19']:,} | {r['xz9e']:,} |{zpaq} "
              f"{100 * (r['statemix'] / r['zstd19'] - 1):+.1f}% | {100 * (r['statemix'] / r['xz9e'] - 1):+.1f}% | "
              f"{r['seconds']:.1f} |")
    total = {k: sum(r[k] for r in rows) for k in ("bytes", "statemix", "zstd19", "xz9e")}
    zpaq_total = f" {sum(r['zpaq'] for r in rows):,} | |" if args.zpaq else ""
    print(f"| total | {total['bytes']:,} | {total['statemix']:,} | {8 * total['statemix'] / total['bytes']:.3f} | "
          f"{total['zstd19']:,} | {total['xz9e']:,} |{zpaq_total} | | |")
    bad_zstd = [r["file"] for r in rows if r["statemix"] > r["zstd19"] + 64]
    bad_xz = [r["file"] for r in rows if r["text"] and r["statemix"] >= r["xz9e"]]
    print(f"\nlarger than zstd -19 + 64 bytes: {bad_zstd or 'none'}; text not smaller than xz -9e: {bad_xz or 'none'}")
    if args.zpaq:
        bad_zpaq = [r["file"] for r in rows if r["text"] and r["statemix"] >= r["zpaq"]]
        print(f"text not smaller than zpaq -m5: {bad_zpaq or 'none'}")


if __name__ == "__main__":
    main()
