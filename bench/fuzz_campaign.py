"""Mutation campaign over valid statemix streams: every case must end in the exact original data or
in StatemixError (EOFError for a file reader's truncated input), within a time bound, and never
crash.

Usage: python bench/fuzz_campaign.py [--streams N] [--flips N] [--seed S] [--minutes M]
Streams: cm at levels 1-3, ``--model ssm`` at levels 1 and 2 (small inputs: the SSM is slow), and
segmented files with a seek index (70 or 140 KB in 64 KiB segments at level 1: random data, whose
segments are stored, with every case; text, whose segments are modelled, with a tenth of the flips
and every 997th truncation, as each case takes about a second).  Cases per stream: truncation at every byte offset; random
single-bit flips; random byte overwrites; headers spliced onto another stream's blocks and vice
versa; blocks of another stream appended or inserted; for segmented files also segments swapped,
duplicated or dropped and the index damaged.  Every case is decoded three ways: one-shot
``decompress``, a StreamsDecompressor fed random pieces, and StatemixFile reads of random sizes.
Prints the number of cases of each kind and their outcomes.
"""

from __future__ import annotations

import argparse
import random
import signal
import time
from collections import Counter


def mutations(stream: bytes, other: bytes, rng: random.Random, flips: int, truncation_step: int = 1):
    """Yield (kind, damaged stream) cases made from ``stream`` (and a different stream ``other``);
    truncations at every ``truncation_step``-th byte offset."""
    for cut in range(0, len(stream), truncation_step):
        yield "truncate", stream[:cut]
    for _ in range(flips):
        damaged = bytearray(stream)
        position = rng.randrange(len(damaged))
        damaged[position] ^= 1 << rng.randrange(8)
        yield "bit flip", bytes(damaged)
    for _ in range(flips // 4):
        damaged = bytearray(stream)
        damaged[rng.randrange(len(damaged))] = rng.randrange(256)
        yield "byte overwrite", bytes(damaged)
    header, other_header = 11 + stream[6] + 4, 11 + other[6] + 4
    yield "splice header", other[:other_header] + stream[header:]
    yield "splice header", stream[:header] + other[other_header:]
    yield "append foreign", stream + other[other_header:]
    yield "insert foreign", stream[:header] + other[other_header:-6] + stream[header:]
    yield "garbage after", stream + bytes(rng.randrange(256) for _ in range(rng.randrange(1, 40)))


def segment_mutations(stream: bytes, rng: random.Random):
    """Cases that only a segmented file has: segments reordered, duplicated, dropped; index damaged."""
    import io

    from statemix import segments

    spans, _ = segments.read_spans(io.BytesIO(stream))
    pieces = [stream[offset : offset + length] for offset, length in spans]
    index = stream[sum(map(len, pieces)):]
    if len(pieces) > 1:
        i, j = rng.sample(range(len(pieces)), 2)
        swapped = list(pieces)
        swapped[i], swapped[j] = swapped[j], swapped[i]
        yield "segments swapped", b"".join(swapped) + index
    k = rng.randrange(len(pieces))
    yield "segment duplicated", b"".join(pieces[: k + 1] + pieces[k:]) + index
    yield "segment dropped", b"".join(pieces[:k] + pieces[k + 1 :]) + index
    yield "index dropped", b"".join(pieces)
    for _ in range(8):
        damaged = bytearray(index)
        damaged[rng.randrange(len(damaged))] ^= 1 << rng.randrange(8)
        yield "index damaged", b"".join(pieces) + bytes(damaged)


class _Timeout(Exception):
    pass


def _alarm(signum, frame):
    raise _Timeout


def _in_pieces(damaged: bytes, rng: random.Random) -> bytes:
    import statemix

    decompressor = statemix.StreamsDecompressor()
    out, at = bytearray(), 0
    while at < len(damaged):
        step = rng.randrange(1, 200)
        out += decompressor.decompress(damaged[at : at + step], rng.choice([-1, 1, 100, 5000]))
        at += step
    while piece := decompressor.decompress(b""):
        out += piece
    decompressor.check_end()
    return bytes(out)


def _through_file(damaged: bytes, rng: random.Random) -> bytes:
    import io

    import statemix

    out = bytearray()
    with statemix.open(io.BytesIO(damaged)) as f:
        while piece := f.read(rng.choice([1, 7, 4096, -1])):
            out += piece
    return bytes(out)


def run_case(case, original: bytes, seconds: float, rng: random.Random) -> str:
    """Decompress a case three ways; return "original" or "error"; raise on anything else."""
    import statemix

    kind, damaged = case
    outcomes = set()
    for reader in (statemix.decompress, lambda d: _in_pieces(d, rng), lambda d: _through_file(d, rng)):
        outcomes.add(_run_one(reader, kind, damaged, original, seconds))
    if len(outcomes) != 1:
        raise AssertionError(f"{kind}: the readers disagree ({outcomes})")
    return outcomes.pop()


def _run_one(reader, kind: str, damaged: bytes, original: bytes, seconds: float) -> str:
    import statemix

    previous = signal.signal(signal.SIGALRM, _alarm)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        result = reader(damaged)
    except (statemix.StatemixError, EOFError):
        return "error"
    except _Timeout:
        raise AssertionError(f"{kind}: no answer within {seconds} s") from None
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)
    if result != original:
        raise AssertionError(f"{kind}: decoded to different data without an error")
    return "original"


def _keep_large_allocations_lazy() -> None:
    """Every case builds a model and frees it.  glibc raises its mmap threshold to the largest block
    freed so far, after which a model's large zeroed tables come from the heap and are cleared byte by
    byte (5 ms of a 5 ms case) instead of arriving as lazy zero pages, as they do in a one-shot
    process.  Fix the threshold at glibc's default (128 KiB) where glibc is the allocator."""
    import ctypes
    import ctypes.util

    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c"))
        libc.mallopt(-3, 128 * 1024)  # M_MMAP_THRESHOLD
    except (OSError, AttributeError):
        pass


def main() -> None:
    import statemix

    _keep_large_allocations_lazy()

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--streams", type=int, default=20)
    parser.add_argument("--flips", type=int, default=2000)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--minutes", type=float, default=None, help="stop after this long")
    args = parser.parse_args()
    rng = random.Random(args.seed)
    counts, outcomes, kinds = Counter(), Counter(), Counter()
    started = time.perf_counter()
    for n in range(args.streams):
        if args.minutes is not None and time.perf_counter() - started > 60 * args.minutes:
            break
        kind = ("cm", "cm", "segmented", "ssm")[n % 4]
        size = rng.choice([1, 10, 300, 3000]) if kind != "segmented" else rng.choice([70_000, 140_000])
        if kind == "ssm":
            size = min(size, 300)
        text = n % 3 != 0
        original = bytes(rng.choice(b"etaoin shrdlu\n<>[]") for _ in range(size)) if text else rng.randbytes(size)
        flips, truncation_step = args.flips, 1
        if kind == "segmented":
            stream = statemix.compress(original, level=1, segment_size=1 << 16)
            # a modelled segment takes about 0.3 s to decode three ways: fewer cases of those
            flips, truncation_step = (args.flips // 10, 997) if text else (args.flips, 13)
        elif kind == "ssm":
            stream = statemix.compress(original, model="ssm", level=rng.choice([1, 2]))
        else:
            stream = statemix.compress(original, level=rng.choice([1, 2, 3]))
        kinds[kind] += 1
        other = statemix.compress(rng.randbytes(200) + b"x" * 500)
        cases = mutations(stream, other, rng, flips, truncation_step)
        if kind == "segmented":
            cases = (*segment_mutations(stream, rng), *cases)
        for case in cases:
            counts[case[0]] += 1
            outcomes[run_case(case, original, seconds=60, rng=rng)] += 1
        print(f"stream {n + 1} ({kind}, {len(stream)} B): {sum(counts.values())} cases in "
              f"{time.perf_counter() - started:.0f} s", flush=True)
    print(f"{sum(counts.values())} cases in {time.perf_counter() - started:.0f} s, no crash, no hang, "
          f"no wrong output")
    for kind, n in counts.most_common():
        print(f"  {kind}: {n}")
    print(f"outcomes: {dict(outcomes)}; streams: {dict(kinds)}")


if __name__ == "__main__":
    main()
