"""What each of cm's components costs in bytes and in time: the preset with one component taken out
of its record (or one option changed), coded side by side with the preset itself in one process.

    python bench/component_costs.py FILE [--level 2] [--only NAME ...] [--ssm] [--repeat-every 8]

Unlike ``statemix diagnose --ablation`` (which switches a component's mixer input off while it
still learns, and reports ideal code lengths), each variant here is a model built without the
component, so its time is saved too: the figures are the cm code word's bytes (no container, no
header) and the wall seconds of ``Model.encode`` on one thread, with the preset's tables sized to
FILE as ``statemix.compress`` sizes them.  The preset runs first, again every ``--repeat-every``
variants and last; each variant's time is given against the median of the preset's runs.  The
preset's code word is decoded and compared (a variant's is not: each is a size of a model the
product does not write).  ``--ssm`` adds level 3's SSM source (compiles the SSM, several minutes).
"""

from __future__ import annotations

import argparse
import dataclasses
import statistics
import time

import statemix._jit  # noqa: F401  (sets numba's environment before numba is imported)

from statemix._jit import set_threads
from statemix.models import cm, presets
from statemix.models.bit import contexts, distribution, instructions

#: the SSM source of the strongest level (its share on top of a level without it: issue 12)
LEVEL3_SOURCE = presets.CM_LEVELS[3]["source"]


def variants(base: cm.Config, with_ssm: bool) -> dict[str, dict]:
    """Name: the fields of ``base`` to change."""
    kinds = base.context_kinds
    text = [k for k in kinds if not contexts.can_idle(k)]
    out = {}
    for kind in text:
        out[f"without {contexts.NAMES[kind]}"] = dict(kinds=tuple(k for k in kinds if k != kind))
    for group, test in (("structure contexts", contexts.is_structure), ("x86 contexts", instructions.is_instruction)):
        if any(map(test, kinds)):
            out[f"without the {group}"] = dict(kinds=tuple(k for k in kinds if not test(k)))
    if base.source:
        out[f"without the {distribution.NAMES[base.source]}"] = dict(source=distribution.SOURCE_NONE)
    if base.apms > 1:
        out["1 APM"] = dict(apms=1)
    if base.mixers > 1:
        out["1 mixer"] = dict(mixers=1)
        out[f"{base.mixers - 1} mixers (not {base.mixers})"] = dict(mixers=base.mixers - 1)
    if base.revision > 2:
        out["model revision 2 (one rate boost for the stream, not per weight set)"] = dict(revision=2)
    if base.revision > 1:
        out["model revision 1 (APMs train one bucket, no match length input)"] = dict(revision=1)
    if base.revision > 0:
        out["model revision 0 (the first weights and rates)"] = dict(revision=0)
    out["with byte histories" if not base.byte_histories else "without byte histories"] = dict(
        byte_histories=not base.byte_histories)
    if with_ssm and base.source != LEVEL3_SOURCE:
        out["with the SSM source (level 3's)"] = dict(source=LEVEL3_SOURCE)
    for name, change in out.items():
        if "kinds" in change:
            change["contexts"] = len(change["kinds"])
    return out


def code(config: cm.Config, data: bytes, verify: bool) -> tuple[int, float]:
    model = cm.Model(config)
    start = time.perf_counter()
    word = model.encode(data, 2 * len(data) + 64)
    seconds = time.perf_counter() - start
    if verify and cm.Model(config).decode(word, len(data)) != data:
        raise SystemExit(f"{config}: the code word does not decode to the input")
    return len(word), seconds


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("file")
    parser.add_argument("--level", type=int, default=presets.DEFAULT_LEVEL)
    parser.add_argument("--only", nargs="*", help="variant names to run (default: all)")
    parser.add_argument("--ssm", action="store_true", help="also the SSM source")
    parser.add_argument("--repeat-every", type=int, default=8)
    args = parser.parse_args()
    set_threads(1)
    with open(args.file, "rb") as handle:
        data = handle.read()
    base = cm.config_for_level(args.level, len(data))
    chosen = {name: change for name, change in variants(base, args.ssm).items()
              if not args.only or name in args.only}
    cm.Model(base).encode(data[:5000], 20000)  # compile (or load) before timing
    if any(change.get("source") == LEVEL3_SOURCE for change in chosen.values()):
        cm.Model(dataclasses.replace(base, source=LEVEL3_SOURCE)).encode(data[:5000], 20000)

    preset_runs = [code(base, data, verify=True)]
    print(f"{args.file}: {len(data):,} B, level {args.level}: {base.describe()}", flush=True)
    print(f"preset: {preset_runs[0][0]:,} B in {preset_runs[0][1]:.1f} s (decoded and compared)", flush=True)
    rows = []
    for done, (name, change) in enumerate(chosen.items(), 1):
        size, seconds = code(dataclasses.replace(base, **change), data, verify=False)
        rows.append((name, size, seconds))
        print(f"{name}: {size:,} B in {seconds:.1f} s", flush=True)
        if done % args.repeat_every == 0 and done < len(chosen):
            preset_runs.append(code(base, data, verify=False))
            print(f"preset: {preset_runs[-1][0]:,} B in {preset_runs[-1][1]:.1f} s", flush=True)
    preset_runs.append(code(base, data, verify=False))
    size = preset_runs[0][0]
    seconds = statistics.median(s for _, s in preset_runs)
    print(f"\npreset: {size:,} B; {len(preset_runs)} runs, median {seconds:.1f} s "
          f"({', '.join(f'{s:.1f}' for _, s in preset_runs)})\n")
    print("| variant | bytes | change | seconds | time against the preset |")
    print("|---|---:|---:|---:|---:|")
    for name, variant_size, variant_seconds in sorted(rows, key=lambda row: row[1] - size, reverse=True):
        print(f"| {name} | {variant_size:,} | {100 * (variant_size - size) / size:+.2f}% | {variant_seconds:.1f} "
              f"| {variant_seconds / seconds:.2f}x |")


if __name__ == "__main__":
    main()
