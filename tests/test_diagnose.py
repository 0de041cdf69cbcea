"""Diagnostics: calibration metrics against hand-computed values, and the report end to end."""

from __future__ import annotations

import inspect
import json
import math
from dataclasses import asdict
import subprocess
import sys

import numpy as np
import pytest

import statemix
from statemix.diagnose import calibration, diagnose, hindsight_temperature

from conftest import text_sample

# one worker: the SSM's traced kernels compile once for every test here
pytestmark = pytest.mark.xdist_group("diagnose")


def test_metrics_by_hand():
    p1 = np.array([0.9, 0.9, 0.2, 0.6])
    bits = np.array([1, 0, 0, 1])
    cal = calibration(p1, bits, bins=10)
    p_true = [0.9, 0.1, 0.8, 0.6]
    assert cal.nll_bits == pytest.approx(-sum(math.log2(p) for p in p_true) / 4)
    h = lambda p: -(p * math.log2(p) + (1 - p) * math.log2(1 - p))  # noqa: E731
    assert cal.entropy_bits == pytest.approx((h(0.9) * 2 + h(0.2) + h(0.6)) / 4)
    assert cal.brier == pytest.approx((2 * 0.01 + 2 * 0.81 + 2 * 0.04 + 2 * 0.16) / 4)
    # top-1 confidences: 0.9 (right), 0.9 (wrong), 0.8 (right), 0.6 (right); bins of width 0.1
    ece = (2 / 4) * abs(0.5 - 0.9) + (1 / 4) * abs(1 - 0.8) + (1 / 4) * abs(1 - 0.6)
    assert cal.ece == pytest.approx(ece)
    # class 1: p = .9 .9 .2 .6 (is 1: 1 0 0 1); class 0: p = .1 .1 .8 .4 (is 0: 0 1 1 0)
    class1 = (2 / 4) * abs(0.5 - 0.9) + (1 / 4) * abs(0 - 0.2) + (1 / 4) * abs(1 - 0.6)
    class0 = (2 / 4) * abs(0.5 - 0.1) + (1 / 4) * abs(1 - 0.8) + (1 / 4) * abs(0 - 0.4)
    assert cal.classwise_ece == pytest.approx((class1 + class0) / 2)


def test_perfectly_calibrated_predictions_have_small_ece():
    rng = np.random.default_rng(1)
    p1 = rng.uniform(0.01, 0.99, 200_000)
    bits = (rng.uniform(size=p1.size) < p1).astype(np.int8)
    cal = calibration(p1, bits)
    assert cal.ece < 0.01
    assert cal.best_temperature == pytest.approx(1.0, abs=0.03)


def test_hindsight_temperature_matches_direct_search():
    rng = np.random.default_rng(2)
    true_p = rng.uniform(0.05, 0.95, 20_000)
    bits = (rng.uniform(size=true_p.size) < true_p).astype(np.int8)
    logit = np.log(true_p / (1 - true_p))
    overconfident = 1 / (1 + np.exp(-2.0 * logit))  # logits doubled: best T should be near 2
    temperature, saved = hindsight_temperature(overconfident, bits)

    def code_length(t):
        p = 1 / (1 + np.exp(-np.log(overconfident / (1 - overconfident)) / t))
        return -np.log2(np.where(bits == 1, p, 1 - p)).sum()

    grid = np.linspace(1.0, 3.0, 2001)
    best = grid[np.argmin([code_length(t) for t in grid])]
    assert temperature == pytest.approx(best, abs=0.002)
    assert saved == pytest.approx(code_length(1.0) - code_length(temperature), rel=1e-6)
    assert 1.8 < temperature < 2.2


def test_report_on_text_matches_compression():
    data = text_sample(12_000)
    report = diagnose(data, curve_points=4, ablation=True)
    assert report.compressed_bytes == len(statemix.compress(data))
    assert report.calibration.events == 8 * len(data)
    assert 0 <= report.coder_overhead < 0.001
    assert report.ideal_bits / 8 < report.compressed_bytes
    assert len(report.learning_curve) == 4 and report.learning_curve[-1][1] == len(data)
    assert report.learning_curve[0][2] > report.learning_curve[-1][2]  # it learns
    assert set(report.ablation) >= {"order 2", "match", "APMs"}
    assert report.ablation["word"] > 0 and report.ablation["APMs"] > 0  # text of words: the word context pays
    # the reported temperature and gain against a direct grid search (not the function under test)
    p_coded = np.concatenate([t.p_coded for t in _traces(data)])
    bits = np.unpackbits(np.frombuffer(data, dtype=np.uint8))
    p1 = np.clip(np.where(bits == 1, p_coded, 1 - p_coded), 1e-12, 1 - 1e-12)
    logit = np.log(p1 / (1 - p1))

    def code_length(t):
        p = 1 / (1 + np.exp(-logit / t))
        return -np.log2(np.where(bits == 1, p, 1 - p)).sum()

    grid = np.linspace(0.5, 2.0, 1501)
    lengths = [code_length(t) for t in grid]
    best = grid[int(np.argmin(lengths))]
    assert report.calibration.best_temperature == pytest.approx(best, abs=0.002)
    assert report.calibration.temperature_gain_bits == pytest.approx(code_length(1.0) - min(lengths), abs=0.5)


def _traces(data, model=None):
    from statemix.diagnose import _traced_compress

    return _traced_compress(data, None, model)[2]


@pytest.mark.parametrize("level", [1, 2])
def test_report_for_the_ssm_model(level):
    data = text_sample(3_000, seed=2)
    report = diagnose(data, model="ssm", level=level, curve_points=3, ablation=True)
    assert report.compressed_bytes == len(statemix.compress(data, model="ssm", level=level))
    assert report.model.startswith(f"ssm level {level}")
    assert report.calibration.events == 8 * len(data)  # byte tokens: 8 binary decisions each
    assert 0 <= report.coder_overhead < 0.01
    assert report.ideal_bits / 8 < report.compressed_bytes
    assert ("SSM" in report.ablation) == (level == 2) and "count models" in report.ablation



def test_ssm_trace_splits_tokens_into_exact_binary_decisions():
    from statemix.models import build_model, spec_for_level

    data = text_sample(2_000, seed=3)
    model = build_model(spec_for_level(2, len(data), "ssm"))
    blocks = []
    model.trace(blocks.append)
    tokens = np.zeros((len(data), 2))
    model.encode(data, len(data), tokens)
    (block,) = blocks
    assert np.array_equal(block.bits, np.unpackbits(np.frombuffer(data, dtype=np.uint8)))
    # the 8 decisions of a byte multiply back to its coded probability, the SSM's to the SSM's
    assert np.allclose(block.p_coded.reshape(-1, 8).prod(axis=1), tokens[:, 0], rtol=1e-9)
    assert np.allclose(block.components["SSM"].reshape(-1, 8).prod(axis=1), tokens[:, 1], rtol=1e-5)


STAGE_KEYS = {"ece", "ece_equal_mass", "classwise_ece", "brier", "entropy_bits", "nll_bits", "top1", "top5",
              "best_temperature", "temperature_gain_bits", "reliability"}


@pytest.mark.parametrize("model,level", [("cm", 1), ("cm", 2), ("ssm", 1), ("ssm", 2)])
def test_stages_are_measured_over_the_same_positions_and_change_nothing(model, level):
    data = text_sample(6_000, seed=4)
    report = diagnose(data, model=model, level=level, curve_points=3)
    assert report.compressed_bytes == len(statemix.compress(data, model=model, level=level))
    names = [stage.name for stage in report.stages]
    if model == "cm":
        assert names[-2:] == ["cm mixer (implied)", "cm coded (implied)"]
        assert (level == 2) == any("count models" in name for name in names)
    else:
        assert names[-1] == "quantized (coded)" and (level == 2) == ("SSM softmax" in names)
    for stage in report.stages:
        cal = stage.calibration
        assert cal.symbols == len(data) and cal.classes == 256 and stage.bytes == len(data)
        assert STAGE_KEYS <= set(asdict(cal)) and 0 <= cal.ece <= 1 and 0 <= cal.brier <= 2
        assert stage.learning_curve[-1][1] == len(data)
    coded = report.stages[-1]
    if model == "ssm":  # the quantized stage is exactly what was coded
        assert coded.bits_per_byte * len(data) == pytest.approx(report.ideal_bits, rel=1e-6)
    else:  # learning frozen for the byte: close to what was coded
        assert coded.bits_per_byte * len(data) == pytest.approx(report.ideal_bits, rel=0.01)


def test_implied_byte_distribution_starts_from_the_coded_first_bit():
    """Before a byte's first bit nothing of the byte was learned: P(first bit = 1) implied by the
    stage equals what the coder used, exactly (to float32)."""
    from statemix.models import build_model, spec_for_level

    data = text_sample(3_000, seed=5)
    model = build_model(spec_for_level(2, len(data)))
    traces, steps = [], []
    model.trace(traces.append)
    model.trace_stages(steps.append)
    model.encode(data, len(data))
    implied = np.concatenate([step.stages["cm coded (implied)"] for step in steps])
    assert np.allclose(implied.sum(axis=1), 1.0, atol=1e-9)
    first_bit_1 = implied[:, 128:].sum(axis=1)
    p1 = traces[0].p1.reshape(-1, 8)[:, 0]
    assert np.abs(first_bit_1 - p1).max() < 1e-6


def test_stage_tracing_leaves_the_code_words_as_they_were():
    from statemix.models import build_model, spec_for_level

    data = text_sample(5_000, seed=6)
    for model_name in ("cm", "ssm"):
        spec = spec_for_level(2, len(data), model_name)
        plain, traced = build_model(spec), build_model(spec)
        traced.trace_stages(lambda step: None)
        for piece in (data[:2_000], data[2_000:]):
            assert plain.encode(piece, len(piece)) == traced.encode(piece, len(piece))


def test_ssm_command_has_the_same_json_keys(tmp_path):
    """The command's JSON has one shape for both models.  Run in this process (click's runner): the
    SSM's traced kernels are the ones the tests above compiled, not a second compile in a child."""
    from click.testing import CliRunner

    from statemix_cli.diagnose import diagnose as command

    separate = "mix_stderr" in inspect.signature(CliRunner).parameters  # click 8.1 mixes them by default
    runner = CliRunner(**({"mix_stderr": False} if separate else {}))  # the compile notices apart
    path = tmp_path / "sample.txt"
    path.write_bytes(text_sample(1_500))
    keys = []
    for model in ("cm", "ssm"):
        done = runner.invoke(command, [str(path), "--json", "--model", model], catch_exceptions=False)
        assert done.exit_code == 0
        report = json.loads(done.stdout)
        keys.append((sorted(report), sorted(report["calibration"]), sorted(report["stages"][-1]),
                     sorted(report["stages"][-1]["calibration"])))
        assert STAGE_KEYS <= set(report["stages"][-1]["calibration"])
    assert keys[0] == keys[1]


def test_command_prints_table_and_json(tmp_path):
    path = tmp_path / "sample.txt"
    path.write_bytes(text_sample(5_000))
    table = subprocess.run([sys.executable, "-m", "statemix_cli", "diagnose", str(path), "--points", "3"],
                           capture_output=True, text=True, check=True).stdout
    assert "hindsight temperature" in table and "ECE" in table and "learning curve" in table
    done = subprocess.run([sys.executable, "-m", "statemix_cli", "diagnose", str(path), "--json"],
                          capture_output=True, text=True, check=True)
    report = json.loads(done.stdout)
    assert report["input_bytes"] == 5_000 and "calibration" in report
    missing = subprocess.run([sys.executable, "-m", "statemix_cli", "diagnose", str(tmp_path / "nope")],
                             capture_output=True, text=True)
    assert missing.returncode == 1 and missing.stderr.count("\n") == 1 and "Traceback" not in missing.stderr


def test_plot_writes_a_png(tmp_path):
    pytest.importorskip("matplotlib")
    path = tmp_path / "sample.txt"
    path.write_bytes(text_sample(3_000))
    subprocess.run([sys.executable, "-m", "statemix_cli", "diagnose", str(path), "--plot", str(tmp_path / "d.png")],
                   capture_output=True, check=True)
    assert (tmp_path / "d.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_plot_without_matplotlib_says_how_to_get_it(tmp_path):
    path = tmp_path / "sample.txt"
    path.write_bytes(text_sample(2_000))
    script = ("import sys; sys.modules['matplotlib'] = None; from statemix_cli.main import run; "
              f"run(['diagnose', {str(path)!r}, '--plot', {str(tmp_path / 'd.png')!r}])")
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True)
    assert done.returncode == 1
    assert "pip install 'statemix[plot]'" in done.stderr and done.stderr.count("\n") == 1
    assert not (tmp_path / "d.png").exists()
