"""`statemix diagnose FILE`: print statemix.diagnose's report as a table, as JSON, or as a plot."""

from __future__ import annotations

import json
import sys

import click

from .messages import compile_notices


def _table(report) -> str:
    cal = report.calibration
    modelled = report.input_bytes - report.unmodelled_bytes
    rows = [
        ("input", f"{report.input_bytes:,} bytes"),
        ("model", report.model),
        ("compressed", f"{report.compressed_bytes:,} bytes ({report.bits_per_byte:.4f} bits per byte)"),
        ("header bytes", f"{report.header_bytes:,} (stream bytes outside block payloads)"),
        ("ideal code length", f"{report.ideal_bits / 8:,.1f} bytes (sum of -log2 p over coded events)"),
        ("coder overhead", f"{100 * report.coder_overhead:+.4f}% (modelled blocks, vs. ideal)"),
        ("events", f"{cal.events:,} binary decisions ({cal.events / max(modelled, 1):.1f} per modelled byte)"),
        ("not modelled", f"{report.unmodelled_bytes:,} bytes (stored or zstandard blocks: no events; the "
         "learning curve counts them at their cost)"),
        ("bits per event", f"{cal.nll_bits:.5f} cross-entropy, {cal.entropy_bits:.5f} predicted entropy"
         f" ({'over' if cal.entropy_bits < cal.nll_bits else 'under'}-confident by "
         f"{abs(cal.nll_bits - cal.entropy_bits):.5f})"),
        (f"ECE (top-1, {cal.bins} bins)", f"{cal.ece:.5f}"),
        ("classwise ECE", f"{cal.classwise_ece:.5f}"),
        ("Brier score", f"{cal.brier:.5f}"),
        ("hindsight temperature", f"T = {cal.best_temperature:.4f} would save {cal.temperature_gain_bits / 8:,.1f} bytes"),
    ]
    width = max(len(name) for name, _ in rows)
    lines = [f"{name:<{width}}  {value}" for name, value in rows]
    lines.append("")
    lines.append("reliability (confidence bin: mean confidence / accuracy / events)")
    for conf, acc, count in cal.reliability:
        lines.append(f"  {conf:.4f} / {acc:.4f} / {count:,}")
    lines.append("")
    lines.append("learning curve (bytes: bits per byte)")
    for start, end, bpb in report.learning_curve:
        lines.append(f"  {start:>12,}-{end:<12,} {bpb:.4f}  {'#' * int(round(bpb * 8))}")
    if report.stages:
        lines.append("")
        lines.append(_stage_table(report.stages))
    if report.ablation:
        lines.append("")
        lines.append("where the bits go (bytes the component saves; switching it off costs this much)")
        for name, bits in sorted(report.ablation.items(), key=lambda item: -item[1]):
            lines.append(f"  {name:<16} {bits / 8:>12,.1f}  ({100 * bits / report.ideal_bits:+.2f}%)")
    return "\n".join(lines)


def _stage_table(stages) -> str:
    """One row per stage (data-flow order): its code length and softmax calibration."""
    header = ("stage", "bits/byte", "bits/sym", "entropy", "top-1", "top-5", "ECE", "ECE mass", "classw.",
              "Brier", "best T", "T saves")
    rows = []
    for stage in stages:
        cal = stage.calibration
        saves = cal.temperature_gain_bits / 8
        share = saves / (stage.bits_per_byte * stage.bytes / 8) if stage.bits_per_byte else 0.0
        bound = "*" if cal.temperature_at_bound else ""
        rows.append((stage.name, f"{stage.bits_per_byte:.4f}", f"{cal.nll_bits:.4f}", f"{cal.entropy_bits:.4f}",
                     f"{cal.top1:.3f}", f"{cal.top5:.3f}", f"{cal.ece:.4f}", f"{cal.ece_equal_mass:.4f}",
                     f"{cal.classwise_ece:.5f}", f"{cal.brier:.4f}", f"{cal.best_temperature:.3f}{bound}",
                     f"{saves:,.0f} B ({100 * share:.2f}%)"))
    widths = [max(len(row[k]) for row in [header, *rows]) for k in range(len(header))]
    lines = [f"stages: distributions over {stages[0].calibration.classes} symbol values, "
             f"{stages[0].calibration.symbols:,} positions ({stages[0].calibration.bins} bins; "
             "T saves: bytes a hindsight temperature would save)"]
    for row in [header, *rows]:
        lines.append("  " + "  ".join(f"{cell:<{w}}" if k == 0 else f"{cell:>{w}}" for k, (cell, w) in
                                      enumerate(zip(row, widths))))
    if any(stage.calibration.temperature_at_bound for stage in stages):
        lines.append("  * at the edge of the searched temperatures (1/3 to 4)")
    return "\n".join(lines)


def _wrap(name: str, width: int = 28) -> str:
    """A stage name on lines of at most about ``width`` characters (at its spaces)."""
    lines, line = [], ""
    for word in name.split():
        if line and len(line) + 1 + len(word) > width:
            lines.append(line)
            line = word
        else:
            line = f"{line} {word}".strip()
    return "\n".join([*lines, line])


def _plot(report, path: str) -> None:
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
        from matplotlib.ticker import NullFormatter
    except ImportError:
        raise click.ClickException("--plot needs matplotlib: pip install 'statemix[plot]'") from None
    panels = [("binary events", report.calibration.reliability, report.calibration.ece)]
    panels += [(stage.name, stage.calibration.reliability, stage.calibration.ece) for stage in report.stages]
    columns = len(panels)
    figure = plt.figure(figsize=(max(11, 3.2 * columns), 9))
    grid = figure.add_gridspec(3, columns, height_ratios=[3, 1, 3], hspace=0.45)
    for k, (name, reliability, ece) in enumerate(panels):
        top = figure.add_subplot(grid[0, k])
        counts = figure.add_subplot(grid[1, k], sharex=top)
        confidence = [c for c, _, _ in reliability]
        top.plot([0, 1], [0, 1], color="grey", linestyle="--", linewidth=1)
        top.plot(confidence, [a for _, a, _ in reliability], marker="o", markersize=3)
        top.set_xlim(0, 1)
        top.set_ylim(0, 1)
        top.set_title(f"{_wrap(name)}\nECE {ece:.4f}", fontsize=9)
        top.set_ylabel("accuracy" if k == 0 else "")
        bins = report.calibration.bins
        counts.bar(confidence, [n for _, _, n in reliability], width=0.8 / bins, color="tab:grey")
        counts.set_yscale("log")
        counts.yaxis.set_minor_formatter(NullFormatter())
        counts.tick_params(labelsize=7)
        counts.set_xlabel("confidence (top-1 probability)", fontsize=8)
        counts.set_ylabel("count" if k == 0 else "")
    curves = figure.add_subplot(grid[2, :])
    for name, curve in [("coded (binary events)", report.learning_curve)] + [(s.name, s.learning_curve)
                                                                             for s in report.stages]:
        curves.plot([(a + b) / 2 for a, b, _ in curve], [bpb for _, _, bpb in curve], marker=".", label=name)
    curves.set_xlabel("position in file (bytes)")
    curves.set_ylabel("bits per byte")
    curves.set_title("learning curves: every stage's code length over the same positions")
    curves.legend(fontsize=8)
    figure.suptitle(_wrap(f"statemix diagnose: {report.model}", 40 * columns), fontsize=10)
    figure.savefig(path, dpi=100, bbox_inches="tight")
    plt.close(figure)


@click.command(context_settings={"help_option_names": ["-h", "--help"]})
@click.argument("file", type=click.Path(dir_okay=False, allow_dash=True))
@click.option("--model", type=click.Choice(["cm", "ssm"]), help="Model family, as for compression (default cm).")
@click.option("--level", type=click.IntRange(1, 3), help="Model preset, as for compression.")
@click.option("--bins", type=click.IntRange(2, 1000), default=15, show_default=True, help="Calibration bins.")
@click.option("--points", type=click.IntRange(1, 10000), default=20, show_default=True,
              help="Windows of the learning curve.")
@click.option("--ablation", is_flag=True, help="Measure each component's share (one extra pass each).")
@click.option("--stages/--no-stages", default=True, show_default=True,
              help="Measure every stage's distribution over symbol values (cm: several times slower).")
@click.option("--json", "as_json", is_flag=True, help="Print the report as JSON.")
@click.option("--plot", type=click.Path(dir_okay=False),
              help="Write a PNG: per stage a reliability diagram with its bin counts, and every learning curve.")
def diagnose(file, model, level, bins, points, ablation, stages, as_json, plot):
    """Report where the bits of FILE go and how calibrated the model is.

    FILE is compressed exactly as 'statemix FILE' would, but nothing is written.
    """
    import statemix
    from statemix.diagnose import diagnose as run_diagnosis

    try:
        if file == "-":
            data = sys.stdin.buffer.read()
        else:
            with open(file, "rb") as handle:
                data = handle.read()
    except OSError as exc:
        raise click.ClickException(f"{file}: {exc.strerror}") from None
    try:
        with compile_notices(quiet=False, ticking=False):
            report = run_diagnosis(data, level=level, model=model, bins=bins, curve_points=points,
                                   ablation=ablation, stages=stages)
    except statemix.StatemixError as exc:
        raise click.ClickException(str(exc)) from None
    if plot:
        _plot(report, plot)
    click.echo(json.dumps(report.to_dict(), indent=2) if as_json else _table(report))
    return 0
