"""Make statemix's general BPE vocabulary (data/general-v1.vocab) from public-domain texts.

The vocabulary is trained with :func:`statemix.tokenizer.train` on the concatenation, in the order
below, of three public-domain texts from the Canterbury large corpus and the Canterbury corpus.  None
of them is, or contains any part of, enwik8 (the benchmark).  Each input's SHA-256 is checked first,
so the result is reproducible bit for bit; the output's SHA-256 and the provenance are written to
data/general-v1.json beside it.  Because merges are ranked by frequency, every prefix of the merge
list is itself a vocabulary (``Vocabulary.prefix(n)``), so one file serves several sizes.

Usage (from the project root; the corpora are in ../shared/data/corpora on developer machines)::

    python bench/make_vocabulary.py [--corpora DIR] [--merges 32768] [--out data/general-v1.vocab]

Takes about 10-20 s and 0.7 GB of memory on the project's 2-core machine.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from statemix import tokenizer  # noqa: E402

#: (path under the corpora directory, SHA-256, what it is, why it may be redistributed)
SOURCES = [
    ("canterbury_large/bible.txt",
     "4e0a7e8dff7d9c82dbded57305c0ca3cdd3c4ca014db27121782fe9710f4723f",
     "The King James Bible (1611), Canterbury large corpus copy",
     "public domain (outside the United Kingdom, where the text is under Crown letters patent)"),
    ("canterbury_large/world192.txt",
     "1aebdc97d29904b25791da9aa32be90b69d7da6dc0ac9b95512ed27ed40d2112",
     "The CIA World Factbook 1992, Project Gutenberg edition, Canterbury large corpus copy",
     "public domain (a work of the United States government)"),
    ("canterbury/plrabn12.txt",
     "07e2e0b461af78c7c647cb53dab39de560198e16f799b4516eccf0fbd69f764c",
     "John Milton, Paradise Lost (1667), Project Gutenberg release of 1992, Canterbury corpus copy",
     "public domain"),
]

DEFAULT_MERGES = 32768


def load_corpus(corpora: Path) -> bytes:
    parts = []
    for name, digest, _, _ in SOURCES:
        raw = (corpora / name).read_bytes()
        actual = hashlib.sha256(raw).hexdigest()
        if actual != digest:
            raise SystemExit(f"{name}: SHA-256 {actual} differs from the recorded {digest}")
        parts.append(raw)
    return b"".join(parts)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--corpora", type=Path, default=ROOT.parent / "shared" / "data" / "corpora")
    parser.add_argument("--merges", type=int, default=DEFAULT_MERGES)
    parser.add_argument("--out", type=Path, default=ROOT / "data" / "general-v1.vocab")
    args = parser.parse_args(argv)

    corpus = load_corpus(args.corpora)
    start = time.perf_counter()
    vocab = tokenizer.train(corpus, args.merges)
    seconds = time.perf_counter() - start
    raw = vocab.to_bytes()
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_bytes(raw)
    meta = {
        "file": args.out.name,
        "format": "statemix.tokenizer.Vocabulary.to_bytes, format 1 (no base)",
        "merges": vocab.n_merges,
        "tokens": vocab.size,
        "bytes": len(raw),
        "sha256": hashlib.sha256(raw).hexdigest(),
        "merge_list_crc32": vocab.crc(),
        "made_by": f"python bench/make_vocabulary.py --merges {args.merges}",
        "training": "statemix.tokenizer.train(corpus, merges) with min_count=2, no pre-split, "
                    "on the concatenation of the sources in this order",
        "training_bytes": len(corpus),
        "sources": [
            {"corpus_path": name, "sha256": digest, "work": work, "status": status}
            for name, digest, work, status in SOURCES
        ],
        "license": "The vocabulary (a ranked list of byte-pair merges derived from the public-domain "
                   "sources) is distributed with statemix under its MIT license.",
        "excludes": "no part of enwik8 (statemix's benchmark) was used",
    }
    args.out.with_suffix(".json").write_text(json.dumps(meta, indent=2) + "\n")
    print(f"{args.out}: {vocab.n_merges} merges from {len(corpus):,} bytes in {seconds:.1f} s, "
          f"{len(raw):,} bytes, sha256 {meta['sha256']}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
