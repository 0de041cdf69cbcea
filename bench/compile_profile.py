"""Where the first run's compiling goes: numba's compile time per kernel, and its LLVM finalize time.

    STATEMIX_CACHE_DIR=$(mktemp -d) python bench/compile_profile.py FILE [--model ssm] [--level 2] [--bytes 5000]

Compresses the first ``--bytes`` of FILE once (give an empty cache directory, or nothing compiles)
and prints, per kernel, its compile time including the kernels it compiled (``incl``), without them
(``excl``) and how many signatures it compiled; then the time numba spent finalizing each library
(linking its callees' modules into its own, optimizing the whole and emitting machine code), the
largest first.  Seconds of wall-clock time.
"""

from __future__ import annotations

import argparse
import time

import statemix._jit  # noqa: F401  (sets numba's environment before numba is imported)
from numba.core import codegen, event

import statemix


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("file")
    parser.add_argument("--model", default="cm")
    parser.add_argument("--level", type=int, default=2)
    parser.add_argument("--bytes", type=int, default=5000)
    parser.add_argument("--top", type=int, default=25)
    args = parser.parse_args()

    finalized = []  # (seconds, library name)
    finalize = codegen.CPUCodeLibrary.finalize

    def timed_finalize(library):
        start = time.perf_counter()
        finalize(library)
        finalized.append((time.perf_counter() - start, library.name))

    codegen.CPUCodeLibrary.finalize = timed_finalize
    stack, per_kernel = [], {}  # name: [inclusive s, exclusive s, compiles]

    class Listener(event.Listener):
        def on_start(self, ev):
            stack.append((time.perf_counter(), ev.data["dispatcher"], [0.0]))

        def on_end(self, ev):
            start, dispatcher, children = stack.pop()
            seconds = time.perf_counter() - start
            if stack:
                stack[-1][2][0] += seconds
            name = dispatcher.py_func.__module__.split(".")[-1] + "." + dispatcher.py_func.__qualname__
            row = per_kernel.setdefault(name, [0.0, 0.0, 0])
            row[0] += seconds
            row[1] += seconds - children[0]
            row[2] += 1

    event.register("numba:compile", Listener())
    with open(args.file, "rb") as handle:
        data = handle.read(args.bytes)
    start = time.perf_counter()
    stream = statemix.compress(data, model=args.model, level=args.level)
    assert statemix.decompress(stream) == data
    print(f"first compress and decompress: {time.perf_counter() - start:.1f} s, stream {len(stream)} B")
    print(f"{'incl s':>8} {'excl s':>8} {'n':>3}  kernel")
    for name, (inclusive, exclusive, count) in sorted(per_kernel.items(), key=lambda kv: -kv[1][1])[:args.top]:
        print(f"{inclusive:8.1f} {exclusive:8.1f} {count:3d}  {name}")
    print(f"finalize: {sum(s for s, _ in finalized):.1f} s over {len(finalized)} libraries; the largest:")
    for seconds, name in sorted(finalized, reverse=True)[:args.top // 2]:
        print(f"{seconds:8.1f}  {name[:100]}")


if __name__ == "__main__":
    main()
