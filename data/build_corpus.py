"""Build the pretraining corpus of issue 49 from named packages (Debian and PyPI), deterministically.

    python data/build_corpus.py [--out /work/corpus/corpus-v1.bin] [--cache DIR]

Every source is a package at a pinned version, downloaded with its ordinary client (``apt-get
download NAME=VERSION`` then ``dpkg-deb -x``; ``pip download --no-deps --no-binary :all:
NAME==VERSION``), checked or recorded by the SHA-256 of its archive.  From each, the text files
under the listed folders are taken in a fixed pseudo-random order (SHA-256 of the path) until the
source's byte budget is reached (a file longer than ``MAX_FILE`` keeps its first ``MAX_FILE``
bytes); the files of all sources are then concatenated in the order of SHA-256(source, path), so
the kinds of text are interleaved.  The corpus is not committed: this script rebuilds it, and
``data/corpus-sources.json`` records every source (package, version, licence, archive SHA-256, files
and bytes taken) and the corpus's SHA-256.

Excluded (issue 49), so that every benchmark stays honest: Wikipedia/enwik text, the Calgary,
Canterbury and Silesia corpora and any text by their authors (the King James Bible, Shakespeare,
Milton, Carroll, Dickens, Hardy, Webster's 1913 dictionary and derivatives such as GCIDE), CPython's
standard-library sources, and every file of a test, bench or testdata folder.  Filters: path
components, names and content markers (:data:`EXCLUDED_PARTS`, :data:`EXCLUDED_NAMES`,
:data:`EXCLUDED_TEXT`), and a line-overlap check against every file of /work/shared/data (a file
sharing more than a few long lines with a benchmark file is dropped).  Binary files (a NUL byte, or
not UTF-8) are skipped: this first corpus is text.
"""

from __future__ import annotations

import argparse
import gzip
import hashlib
import json
import os
import re
import subprocess
import sys
import tarfile
from pathlib import Path

MAX_FILE = 200_000

#: (kind, name, version, licence, folders inside the package, byte budget, file-name pattern)
SOURCES = [
    ("deb", "postgresql-doc-15", "15.20-0+deb12u1", "PostgreSQL (BSD-like)",
     ["usr/share/doc/postgresql-doc-15/html"], 4_000_000, r"\.html$"),
    ("deb", "sqlite3-doc", "3.40.1-2+deb12u2", "public domain", ["usr/share/doc/sqlite3"], 2_000_000,
     r"\.(html|txt)$"),
    ("deb", "python-django-doc", "3:3.2.25-0+deb12u7", "BSD-3-Clause",
     ["usr/share/doc/python-django-doc/html"], 2_500_000, r"\.html$"),
    ("deb", "sphinx-doc", "5.3.0-4", "BSD-2-Clause", ["usr/share/doc/sphinx-doc/html"], 1_000_000,
     r"\.(html|txt)$"),
    ("deb", "libssl-doc", "3.0.22-1~deb12u2", "Apache-2.0", ["usr/share/man"], 1_500_000, r"\.gz$"),
    ("deb", "nodejs-doc", "18.20.4+dfsg-1~deb12u3", "MIT", ["usr/share/doc/nodejs/api"], 3_000_000,
     r"\.(json|md|html)$"),
    ("deb", "rust-doc", "1.63.0+dfsg1-2", "MIT OR Apache-2.0", ["usr/share/doc/rust-doc/html"], 2_000_000,
     r"\.(html|md)$"),
    ("deb", "golang-1.19-src", "1.19.8-2", "BSD-3-Clause", ["usr/share/go-1.19/src"], 3_500_000,
     r"(?<!_test)\.(go|s|c|h)$"),
    ("deb", "python3-django", "3:3.2.25-0+deb12u7", "BSD-3-Clause", ["usr/lib/python3/dist-packages/django"],
     3_500_000, r"\.(py|po|html|js|css|txt|json|xml)$"),
    ("deb", "node-typescript", "4.8.4+ds1-2", "Apache-2.0", ["usr/share/nodejs/typescript/lib"], 2_000_000,
     r"\.(js|ts|json)$"),
    ("deb", "unicode-cldr-core", "41-0.1", "Unicode-DFS-2016", ["usr/share/unicode/cldr/common"], 3_000_000,
     r"\.xml$"),
    ("deb", "unicode-data", "15.0.0-1", "Unicode-DFS-2016", ["usr/share/unicode"], 1_500_000, r"\.txt$"),
    ("deb", "nginx-common", "1.22.1-9+deb12u12", "BSD-2-Clause", ["etc", "usr/share"], 300_000, r""),
    ("deb", "tzdata", "2026f-0+deb12u1", "public domain", ["usr/share/zoneinfo"], 200_000, r"\.(tab|zi)$"),
    ("deb", "libsqlite3-dev", "3.40.1-2+deb12u2", "public domain", ["usr/include"], 800_000, r"\.h$"),
    ("pypi", "zstandard", "0.23.0", "BSD-3-Clause (python-zstandard and zstd)", [""], 3_000_000,
     r"\.(c|h|py|rst|txt|toml|cfg)$"),
]

#: path components that exclude a file (test and benchmark data of the packages themselves)
EXCLUDED_PARTS = {"test", "tests", "testdata", "testing", "bench", "benchmark", "benchmarks", "fixtures",
                  "corpus", "corpora", "calgary", "canterbury", "silesia", "enwik8", "enwik9", "wikipedia"}
#: substrings of a lower-cased path that exclude a file
EXCLUDED_NAMES = ("alice29", "asyoulik", "plrabn", "lcet10", "book1", "book2", "bible", "shakespeare",
                  "kjv", "gcide", "webster", "milton", "dickens", "hardy", "carroll", "enwik", "wiki", "paper1",
                  "paper2", "world192", "e.coli", "dickens", "mozilla", "samba", "osdb", "reymont",
                  "nci", "ooffice", "x-ray", "xml.tar", "sao", "mr")
_EXACT_NAMES = {"sao", "mr", "nci", "osdb", "xml", "x-ray"}
#: lower-case content markers that exclude a file
EXCLUDED_TEXT = ("alice was beginning to get very tired", "in the beginning god created", "project gutenberg",
                 "to be, or not to be", "down the rabbit-hole", "webster's revised unabridged",
                 "collaborative international dictionary", "<mediawiki", "wikipedia, the free encyclopedia",
                 "lewis carroll", "king james", "paradise lost", "thomas hardy", "charles dickens",
                 "william shakespeare")
SHARED_DATA = Path("/work/shared/data")


def sha256_file(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def download(kind: str, name: str, version: str, cache: Path) -> Path:
    """The package archive in ``cache`` (downloaded once)."""
    folder = cache / "archives"
    folder.mkdir(parents=True, exist_ok=True)
    if kind == "deb":
        bare = version.split(":", 1)[-1]
        found = sorted(folder.glob(f"{name}_*{bare.replace('+', '*').replace('~', '*')}*.deb"))
        if not found:
            subprocess.run(["apt-get", "download", f"{name}={version}"], cwd=folder, check=True,
                           stdout=subprocess.DEVNULL)
            found = sorted(folder.glob(f"{name}_*.deb"))
        return found[-1]
    found = sorted(folder.glob(f"{name}-{version}.tar.gz"))
    if not found:
        subprocess.run([sys.executable, "-m", "pip", "download", "--no-deps", "--no-binary", ":all:", "-q",
                        "-d", str(folder), f"{name}=={version}"], check=True)
        found = sorted(folder.glob(f"{name}-{version}.tar.gz"))
    return found[0]


def extract(kind: str, archive: Path, cache: Path) -> Path:
    target = cache / "trees" / archive.name
    if not target.exists():
        part = target.with_name(target.name + ".part")
        subprocess.run(["rm", "-rf", str(part)], check=True)
        part.mkdir(parents=True)
        if kind == "deb":
            subprocess.run(["dpkg-deb", "-x", str(archive), str(part)], check=True)
        else:
            with tarfile.open(archive) as tar:
                tar.extractall(part, filter="data")
            (top,) = list(part.iterdir())
            for child in top.iterdir():
                child.rename(part / child.name)
            top.rmdir()
        part.rename(target)
    return target


def benchmark_lines() -> set[bytes]:
    """Every stripped line of 40+ bytes of every file of the shared benchmark data."""
    lines = set()
    if SHARED_DATA.exists():
        for path in sorted(SHARED_DATA.rglob("*")):
            if path.is_file():
                for line in path.read_bytes().split(b"\n"):
                    line = line.strip()
                    if len(line) >= 40:
                        lines.add(line)
    return lines


def excluded(rel: str) -> str | None:
    """Why the path ``rel`` is excluded (None: not)."""
    parts = rel.lower().split("/")
    if any(p in EXCLUDED_PARTS for p in parts[:-1]):
        return "test/bench folder"
    stem = parts[-1].split(".")[0]
    if stem in _EXACT_NAMES:
        return "benchmark name"
    low = parts[-1]
    if any(n in low for n in EXCLUDED_NAMES if n not in _EXACT_NAMES):
        return "benchmark name"
    return None


def read_text(path: Path) -> bytes | None:
    raw = path.read_bytes()
    if path.suffix == ".gz":
        try:
            raw = gzip.decompress(raw)
        except OSError:
            return None
    if b"\0" in raw[:MAX_FILE]:
        return None
    raw = raw[:MAX_FILE]
    try:
        raw.decode("utf-8")
    except UnicodeDecodeError as error:
        if error.start < len(raw) - 4:  # a character cut at MAX_FILE is fine
            return None
    return raw


def select(tree: Path, folders, budget: int, pattern: str, bench_lines: set[bytes], skipped: dict):
    """(relative path, bytes) of the files taken from ``tree``."""
    rx = re.compile(pattern)
    candidates = []
    for folder in folders:
        root = tree / folder if folder else tree
        for path in root.rglob("*"):
            if path.is_file() and not path.is_symlink() and rx.search(path.name):
                candidates.append(str(path.relative_to(tree)))
    candidates.sort(key=lambda rel: hashlib.sha256(rel.encode()).digest())
    taken, total = [], 0
    for rel in candidates:
        if total >= budget:
            break
        why = excluded(rel)
        if why:
            skipped[why] = skipped.get(why, 0) + 1
            continue
        raw = read_text(tree / rel)
        if raw is None:
            skipped["binary"] = skipped.get("binary", 0) + 1
            continue
        low = raw.lower()
        if any(marker.encode() in low for marker in EXCLUDED_TEXT):
            skipped["excluded content"] = skipped.get("excluded content", 0) + 1
            continue
        shared = sum(1 for line in raw.split(b"\n") if len(line.strip()) >= 40 and line.strip() in bench_lines)
        if shared > 3:
            skipped["shares lines with benchmark data"] = skipped.get("shares lines with benchmark data", 0) + 1
            continue
        raw = raw[:budget - total] if total + len(raw) > budget else raw
        taken.append((rel, raw))
        total += len(raw)
    return taken


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--out", default="/work/corpus/corpus-v1.bin")
    parser.add_argument("--cache", default=os.path.expanduser("~/.cache/statemix-corpus"))
    parser.add_argument("--record", default=str(Path(__file__).with_name("corpus-sources.json")))
    args = parser.parse_args()
    cache = Path(args.cache)
    bench_lines = benchmark_lines()
    known = {}
    if Path(args.record).exists():
        known = {s["package"]: s["archive_sha256"] for s in json.loads(Path(args.record).read_text())["sources"]}
    records, files = [], []
    for kind, name, version, licence, folders, budget, pattern in SOURCES:
        archive = download(kind, name, version, cache)
        digest = sha256_file(archive)
        if name in known and known[name] != digest:
            raise SystemExit(f"{name}: archive {archive.name} has SHA-256 {digest}, the record says {known[name]}")
        tree = extract(kind, archive, cache)
        skipped: dict = {}
        taken = select(tree, folders, budget, pattern, bench_lines, skipped)
        size = sum(len(raw) for _, raw in taken)
        print(f"{name:22s} {version:28s} {len(taken):5d} files {size:10,d} bytes  skipped {skipped}", flush=True)
        records.append(dict(package=name, kind=kind, version=version, licence=licence, archive=archive.name,
                            archive_sha256=digest, folders=folders, pattern=pattern, budget=budget,
                            files=len(taken), bytes=size, skipped=skipped))
        files += [(hashlib.sha256(f"{name}/{rel}".encode()).digest(), raw) for rel, raw in taken]
    files.sort(key=lambda item: item[0])
    corpus = b"".join(raw if raw.endswith(b"\n") else raw + b"\n" for _, raw in files)
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_bytes(corpus)
    digest = hashlib.sha256(corpus).hexdigest()
    record = dict(corpus=dict(file=out.name, bytes=len(corpus), files=len(files), sha256=digest,
                              made_by="python data/build_corpus.py", max_file=MAX_FILE),
                  sources=records)
    Path(args.record).write_text(json.dumps(record, indent=1) + "\n")
    print(f"corpus {out}: {len(corpus):,d} bytes, {len(files)} files, sha256 {digest}")


if __name__ == "__main__":
    main()
