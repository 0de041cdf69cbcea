"""Mutation campaign over valid statemix streams: every case must end in the exact original data or
in StatemixError, within a time bound, and never crash.

Usage: python bench/fuzz_campaign.py [--streams N] [--flips N] [--seed S]
Cases per stream: truncation at every byte offset; random single-bit flips; random byte overwrites;
headers spliced onto another stream's blocks and vice versa; blocks of another stream appended or
inserted.  Prints the number of cases of each kind and their outcomes.
"""

from __future__ import annotations

import argparse
import random
import signal
import time
from collections import Counter


def mutations(stream: bytes, other: bytes, rng: random.Random, flips: int):
    """Yield (kind, damaged stream) cases made from ``stream`` (and a different stream ``other``)."""
    for cut in range(len(stream)):
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


class _Timeout(Exception):
    pass


def _alarm(signum, frame):
    raise _Timeout


def run_case(case, original: bytes, seconds: float) -> str:
    """Decompress a case; return "original" or "error"; raise on anything else."""
    import statemix

    kind, damaged = case
    previous = signal.signal(signal.SIGALRM, _alarm)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        result = statemix.decompress(damaged)
    except statemix.StatemixError:
        return "error"
    except _Timeout:
        raise AssertionError(f"{kind}: no answer within {seconds} s") from None
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)
    if result != original:
        raise AssertionError(f"{kind}: decoded to different data without an error")
    return "original"


def main() -> None:
    import statemix

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--streams", type=int, default=20)
    parser.add_argument("--flips", type=int, default=2000)
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args()
    rng = random.Random(args.seed)
    counts, outcomes = Counter(), Counter()
    started = time.perf_counter()
    for n in range(args.streams):
        size = rng.choice([1, 10, 300, 3000, 20000])
        original = bytes(rng.choice(b"etaoin shrdlu\n<>[]") for _ in range(size)) if n % 3 else rng.randbytes(size)
        stream = statemix.compress(original, level=rng.choice([1, 2, 3]))
        other = statemix.compress(rng.randbytes(200) + b"x" * 500)
        for case in mutations(stream, other, rng, args.flips):
            counts[case[0]] += 1
            outcomes[run_case(case, original, seconds=60)] += 1
    print(f"{sum(counts.values())} cases in {time.perf_counter() - started:.0f} s, no crash, no hang, "
          f"no wrong output")
    for kind, n in counts.most_common():
        print(f"  {kind}: {n}")
    print(f"outcomes: {dict(outcomes)}")


if __name__ == "__main__":
    main()
