"""The pretrained SSM weights (issue 49, experiment): the weight file format round-trips, and a shipped
weight file matches its provenance record in data/."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import numpy as np
import pytest

from statemix.models.bit.distribution import SOURCE_WIDE_SSM, source_config
from statemix.models.nn import pretrained
from statemix.models.nn.layout import init_params

ROOT = Path(__file__).resolve().parent.parent
PROVENANCE = ROOT / "data" / "pretrained-provenance.json"


def test_weight_file_round_trip(tmp_path):
    config = source_config(SOURCE_WIDE_SSM, 20)
    P = init_params(config)
    pretrained.save(tmp_path / "f.bin", config, P, pretrained.Q_FLOAT32)
    assert np.array_equal(pretrained.load(tmp_path / "f.bin", config), P)
    pretrained.save(tmp_path / "q.bin", config, P, pretrained.Q_INT8)
    Q = pretrained.load(tmp_path / "q.bin", config)
    assert np.max(np.abs(Q - P)) <= np.max(np.abs(P)) / 127 + 1e-6
    with pytest.raises(ValueError):
        pretrained.load(tmp_path / "q.bin", source_config(2, 20))  # d_model 32: another architecture


@pytest.mark.skipif(not PROVENANCE.exists(), reason="no pretrained weights recorded")
def test_shipped_weights_match_their_provenance():
    record = json.loads(PROVENANCE.read_text())
    path = ROOT / record["weights"]
    raw = path.read_bytes()
    assert len(raw) == record["weights_bytes"]
    assert hashlib.sha256(raw).hexdigest() == record["weights_sha256"]
    corpus = json.loads((ROOT / "data" / "corpus-sources.json").read_text())["corpus"]
    assert record["corpus_sha256"] == corpus["sha256"]
    P = pretrained.load(path, source_config(SOURCE_WIDE_SSM, 20))
    assert np.all(np.isfinite(P))
