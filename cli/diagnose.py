"""`statemix diagnose FILE`: print statemix.diagnose's report as a table, as JSON, or as a plot."""

from __future__ import annotations

import json
import sys

import click


def _table(report) -> str:
    cal = report.calibration
    rows = [
        ("input", f"{report.input_bytes:,} bytes"),
        ("model", report.model),
        ("compressed", f"{report.compressed_bytes:,} bytes ({report.bits_per_byte:.4f} bits per byte)"),
        ("header bytes", f"{report.header_bytes:,} (stream bytes outside block payloads)"),
        ("ideal code length", f"{report.ideal_bits / 8:,.1f} bytes (sum of -log2 p over coded events)"),
        ("coder overhead", f"{100 * report.coder_overhead:+.4f}% (modelled blocks, vs. ideal)"),
        ("events", f"{cal.events:,} binary decisions ({cal.events / max(report.input_bytes, 1):.1f} per byte)"),
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
    if report.ablation:
        lines.append("")
        lines.append("where the bits go (bytes the component saves; switching it off costs this much)")
        for name, bits in sorted(report.ablation.items(), key=lambda item: -item[1]):
            lines.append(f"  {name:<16} {bits / 8:>12,.1f}  ({100 * bits / report.ideal_bits:+.2f}%)")
    return "\n".join(lines)


def _plot(report, path: str) -> None:
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        raise click.ClickException("--plot needs matplotlib: pip install 'statemix[plot]'") from None
    figure, (left, right) = plt.subplots(1, 2, figsize=(11, 4.5))
    confidence = [c for c, _, _ in report.calibration.reliability]
    accuracy = [a for _, a, _ in report.calibration.reliability]
    left.plot([0.5, 1], [0.5, 1], color="grey", linestyle="--", label="perfect calibration")
    left.plot(confidence, accuracy, marker="o", label="statemix")
    left.set_xlabel("confidence (top-1 probability)")
    left.set_ylabel("accuracy")
    left.set_title(f"reliability, ECE {report.calibration.ece:.4f}")
    left.legend()
    middles = [(a + b) / 2 for a, b, _ in report.learning_curve]
    right.plot(middles, [bpb for _, _, bpb in report.learning_curve])
    right.set_xlabel("position in file (bytes)")
    right.set_ylabel("bits per byte")
    right.set_title("learning curve")
    figure.tight_layout()
    figure.savefig(path, dpi=100)
    plt.close(figure)


@click.command(context_settings={"help_option_names": ["-h", "--help"]})
@click.argument("file", type=click.Path(dir_okay=False, allow_dash=True))
@click.option("--model", type=click.Choice(["cm", "ssm"]), help="Model family, as for compression (default cm).")
@click.option("--level", type=click.IntRange(1, 3), help="Model preset, as for compression.")
@click.option("--bins", type=click.IntRange(2, 1000), default=15, show_default=True, help="Calibration bins.")
@click.option("--points", type=click.IntRange(1, 10000), default=20, show_default=True,
              help="Windows of the learning curve.")
@click.option("--ablation", is_flag=True, help="Measure each component's share (one extra pass each).")
@click.option("--json", "as_json", is_flag=True, help="Print the report as JSON.")
@click.option("--plot", type=click.Path(dir_okay=False), help="Write a reliability diagram and the learning curve (PNG).")
def diagnose(file, model, level, bins, points, ablation, as_json, plot):
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
        report = run_diagnosis(data, level=level, model=model, bins=bins, curve_points=points, ablation=ablation)
    except statemix.StatemixError as exc:
        raise click.ClickException(str(exc)) from None
    if plot:
        _plot(report, plot)
    click.echo(json.dumps(report.to_dict(), indent=2) if as_json else _table(report))
    return 0
