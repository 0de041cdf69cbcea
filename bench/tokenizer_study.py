"""Study of vocabulary strategies for statemix's token model: which BPE vocabulary by default?

For each input and strategy this measures, all sizes in bytes:

- ``tok/B``: tokens per input byte (fewer means fewer, richer model steps);
- ``ids``: distinct token ids the input uses, of ``V`` in the vocabulary;
- ``vocab hdr``: bytes of the serialized vocabulary stored in the stream (0 for the shipped one);
- ``set rice`` / ``set adapt``: what storing the used-id set would cost: Rice-coded gaps with the
  best parameter (the reference's method) and an adaptive binary code per id whose context is the id's
  rank bucket (bit length of the merge rank), as ideal code lengths.  The proxies below need neither:
  they code a token's first occurrence by an escape (see there);
- ``o0``/``o1``/``o2``: **a proxy, not a compressed size**: the ideal code length of the token
  sequence under adaptive PPM-C-style count models of order 0, 1 and 2 (each order backs off by an
  escape, probability d / (n + d) for a context seen n times with d distinct successors, without
  exclusion; a token never seen before costs an escape plus log2 of the number of unseen ids), in bits
  per input byte, with the vocabulary header added.  Computed in numpy from running counts;
- ``enc``/``dec``: encode and decode speed in MB/s (10**6 input bytes per second, best of 3), and
  ``train``: training time in seconds (per-input strategies); ``tokenizer MB/s`` counts train +
  serialize + encode, the whole compression-side cost;
- ``mem``: peak working memory of the encode kernel per input byte (1 MiB blocks).

Strategies: ``bytes`` (no merges); ``G<k>``: the first k merges of the shipped general vocabulary
(data/general-v1.vocab, trained on public-domain texts, no enwik8); ``P<k>``: k merges trained on
the input itself (in canonical order), stored in the stream; ``P<k>/split``: the same with the word
pre-split rule; ``G16k+P<k>``: the general vocabulary extended by k merges trained on the input
(only the extension is stored); ``auto``: ``P<default_merges(n)>/split``, the recommended default.

Usage (from the project root)::

    python bench/tokenizer_study.py [--quick] [--markdown FILE]

Takes about 2-4 minutes on the project's 2-core machine (``--quick``: enwik8_1M and alice29.txt only).
Timings on a shared machine deserve skepticism: they are best-of-3 wall times.
"""

from __future__ import annotations

import argparse
import math
import random
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from statemix import tokenizer  # noqa: E402

SHARED = ROOT.parent / "shared" / "data"
INPUTS = {
    "enwik8_1M": SHARED / "enwik8" / "enwik8_1M",
    "enwik8_3M": SHARED / "enwik8" / "enwik8_3M",
    "alice29.txt": SHARED / "corpora" / "canterbury" / "alice29.txt",
    "book1": SHARED / "corpora" / "calgary" / "book1",
    "obj2 (binary)": SHARED / "corpora" / "calgary" / "obj2",
    "random 256 KiB": None,
}
GENERAL = ROOT / "data" / "general-v1.vocab"


# ----------------------------------------------------------------------------------------------------
# Proxies (numpy, from running counts)


def _running_counts(keys: np.ndarray) -> np.ndarray:
    """For each i, how many j < i have keys[j] == keys[i]."""
    order = np.argsort(keys, kind="stable")
    sorted_keys = keys[order]
    starts = np.r_[True, sorted_keys[1:] != sorted_keys[:-1]]
    group_start = np.maximum.accumulate(np.where(starts, np.arange(len(keys)), 0))
    counts = np.empty(len(keys), dtype=np.int64)
    counts[order] = np.arange(len(keys)) - group_start
    return counts


def _running_distinct(ctx: np.ndarray, first: np.ndarray) -> np.ndarray:
    """For each i, how many j < i with ctx[j] == ctx[i] were first occurrences (first[j])."""
    order = np.argsort(ctx, kind="stable")
    sorted_ctx = ctx[order]
    f = first[order].astype(np.int64)
    cum = np.cumsum(f) - f  # exclusive
    starts = np.r_[True, sorted_ctx[1:] != sorted_ctx[:-1]]
    base = np.maximum.accumulate(np.where(starts, np.arange(len(ctx)), 0))
    out = np.empty(len(ctx), dtype=np.int64)
    out[order] = cum - cum[base]
    return out


def ppm_bits(ids: np.ndarray, vocab_size: int, max_order: int) -> float:
    """Ideal code length in bits of ``ids`` under PPM-C orders max_order..0, escapes, no exclusion."""
    t = ids.astype(np.int64)
    n = len(t)
    if n == 0:
        return 0.0
    shift = np.int64(tokenizer.ID_BITS)
    pad = np.int64(vocab_size)  # a context id for "before the start"
    log_p = np.zeros(n)
    pending = np.ones(n, dtype=bool)  # positions not yet coded by a higher order
    for order in range(max_order, -1, -1):
        ctx = np.zeros(n, dtype=np.int64)
        for k in range(1, order + 1):
            prev = np.r_[np.full(k, pad), t[:-k]]
            ctx = (ctx << shift) | prev
        key = (ctx << shift) | t
        c = _running_counts(key)
        tot = _running_counts(ctx)
        d = _running_distinct(ctx, c == 0)
        hit = pending & (c > 0)
        log_p[hit] += np.log2(c[hit] / (tot[hit] + d[hit]))
        esc = pending & (c == 0) & (tot > 0)
        log_p[esc] += np.log2(d[esc] / (tot[esc] + d[esc]))
        pending &= c == 0
    # order -1: uniform over the ids not seen so far
    seen_before = np.cumsum(np.r_[0, (_running_counts(t) == 0)[:-1].astype(np.int64)])
    log_p[pending] -= np.log2(vocab_size - seen_before[pending])
    return float(-log_p.sum())


def set_costs(ids: np.ndarray, vocab_size: int) -> tuple[int, int]:
    """(Rice-coded gaps, adaptive per-rank-bucket code) bytes to store the used-id set."""
    used = np.unique(ids)
    gaps = np.diff(np.r_[-1, used])
    best = min(int(np.sum(1 + k + ((gaps - 1) >> k))) for k in range(0, 16))
    flags = np.zeros(vocab_size, dtype=bool)
    flags[used] = True
    ranks = np.arange(vocab_size) - 255
    bucket = np.where(ranks <= 0, 0, np.floor(np.log2(np.maximum(ranks, 1))).astype(int) + 1)
    bits = 0.0
    for b in np.unique(bucket):
        sel = flags[bucket == b]
        n1, n = int(sel.sum()), len(sel)
        # Krichevsky-Trofimov code length of n1 ones among n
        bits -= (math.lgamma(n1 + 0.5) + math.lgamma(n - n1 + 0.5) - math.lgamma(n + 1)
                 - math.log(math.pi)) / math.log(2)
    return (best + 7) // 8, int(math.ceil(bits / 8))


# ----------------------------------------------------------------------------------------------------


def best_time(fn, repeats: int = 3) -> tuple[float, object]:
    best, result = float("inf"), None
    for _ in range(repeats):
        start = time.perf_counter()
        result = fn()
        best = min(best, time.perf_counter() - start)
    return best, result


def merge_count(text: str) -> int:
    """'256' -> 256, '4k' -> 4096."""
    return int(text[:-1]) * 1024 if text.endswith("k") else int(text)


def strategy_vocabulary(strategy: str, data: bytes, general: tokenizer.Vocabulary | None):
    """(vocabulary, header bytes, strategy with ``auto`` resolved) of a strategy name (see above)."""
    if strategy == "auto":
        strategy = f"P{tokenizer.default_merges(len(data))}/split"
    if strategy == "bytes":
        return tokenizer.Vocabulary(np.zeros((0, 2), dtype=np.int32)), 0, strategy
    if strategy.startswith("G") and "+" not in strategy:
        return general.prefix(merge_count(strategy[1:])), 1, strategy  # 1 byte: which shipped one
    split = tokenizer.SPLIT_WORDS if strategy.endswith("/split") else tokenizer.SPLIT_NONE
    core = strategy.split("/")[0]
    base = None
    if "+" in core:
        base = general.prefix(merge_count(core[1 : core.index("+")]))
        core = core[core.index("+") + 1 :]
    vocab = tokenizer.train(data, merge_count(core[1:]), base=base, split=split)
    return vocab, len(vocab.to_bytes()) + (1 if base is not None else 0), strategy


def measure(name: str, data: bytes, strategy: str, general: tokenizer.Vocabulary | None) -> dict:
    n = len(data)
    auto = strategy == "auto"
    strategy_vocabulary(strategy, data[:2000], general)  # compile
    start = time.perf_counter()
    vocab, header, strategy = strategy_vocabulary(strategy, data, general)
    train_s = time.perf_counter() - start
    tokenizer.encode(vocab, data[:1000])  # compile
    stats: dict = {}
    enc_s, ids = best_time(lambda: tokenizer.encode(vocab, data, stats=stats))
    dec_s, back = best_time(lambda: tokenizer.decode(vocab, ids))
    assert back == data, f"round trip failed for {name} / {strategy}"
    rice, adaptive = set_costs(ids, vocab.size)
    row = {
        "input": name, "strategy": f"auto={strategy}" if auto else strategy, "bytes": n,
        "V": vocab.size,
        "merges": vocab.n_merges - vocab.base,
        "tok/B": len(ids) / n, "ids": int(len(np.unique(ids))), "hdr": header,
        "rice": rice, "adapt": adaptive,
        "enc": n / enc_s / 1e6, "dec": n / dec_s / 1e6, "train": train_s,
        "tokenizer": n / (train_s + enc_s) / 1e6,
        "mem": stats["peak_bytes"] / min(n, tokenizer.BLOCK_SIZE),
    }
    for order in (0, 1, 2):
        row[f"o{order}"] = (ppm_bits(ids, vocab.size, order) + 8 * header) / n
    return row


COLUMNS = [
    ("input", "{}"), ("strategy", "{}"), ("V", "{:,}"), ("tok/B", "{:.4f}"), ("ids", "{:,}"),
    ("hdr", "{:,}"), ("rice", "{:,}"), ("adapt", "{:,}"), ("o0", "{:.3f}"), ("o1", "{:.3f}"),
    ("o2", "{:.3f}"), ("train", "{:.2f}"), ("enc", "{:.1f}"), ("dec", "{:.0f}"),
    ("tokenizer", "{:.1f}"), ("mem", "{:.1f}"),
]
HEADINGS = {
    "V": "V", "tok/B": "tok/B", "ids": "ids used", "hdr": "vocab hdr B", "rice": "set rice B",
    "adapt": "set adapt B", "o0": "o0 bpb*", "o1": "o1 bpb*", "o2": "o2 bpb*", "train": "train s",
    "enc": "enc MB/s", "dec": "dec MB/s", "tokenizer": "tok'zer MB/s", "mem": "mem B/B",
}


def markdown(rows: list[dict]) -> str:
    lines = ["| " + " | ".join(HEADINGS.get(c, c) for c, _ in COLUMNS) + " |",
             "|" + "---|" * len(COLUMNS)]
    for row in rows:
        lines.append("| " + " | ".join(fmt.format(row[c]) for c, fmt in COLUMNS) + " |")
    lines.append("")
    lines.append("\\* proxy, not a compressed size: adaptive PPM-C order-k code length over tokens "
                 "(escapes for first occurrences, so no used-id set) plus the vocabulary header, in "
                 "bits per input byte.")
    return "\n".join(lines)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="enwik8_1M and alice29.txt only")
    parser.add_argument("--markdown", type=Path, help="also write the table to this file")
    parser.add_argument("--strategies",
                        default="bytes,G2k,G16k,G32k,P1k,P4k,P16k,P1k/split,P4k/split,G16k+P1k,auto")
    args = parser.parse_args(argv)

    general = tokenizer.Vocabulary.from_bytes(GENERAL.read_bytes()) if GENERAL.is_file() else None
    strategies = [s for s in args.strategies.split(",") if general is not None or "G" not in s]
    names = ["enwik8_1M", "alice29.txt"] if args.quick else list(INPUTS)
    rows = []
    for name in names:
        path = INPUTS[name]
        if path is None:
            data = random.Random(1).randbytes(1 << 18)
        elif path.is_file():
            data = path.read_bytes()
        else:
            print(f"skipping {name}: {path} not available", file=sys.stderr)
            continue
        chosen = strategies if "(" not in name and "random" not in name else ["bytes", "G16k", "auto"]
        for strategy in chosen:
            row = measure(name, data, strategy, general)
            rows.append(row)
            print(" ".join(f"{c}={fmt.format(row[c])}" for c, fmt in COLUMNS), file=sys.stderr,
                  flush=True)
    table = markdown(rows)
    print(table)
    if args.markdown:
        args.markdown.write_text(table + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
