"""The pretrained SSM weights: the weight file format round-trips, a shipped weight file matches its
provenance record in data/ and the source that names it, and a stream that needs weights this
installation lacks is one clear error."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import numpy as np
import pytest

import statemix
from statemix.models import presets
from statemix.models.bit import distribution
from statemix.models.bit.distribution import SOURCE_WIDE_SSM, source_config
from statemix.models.nn import pretrained
from statemix.models.nn.layout import init_params

from conftest import text_sample

ROOT = Path(__file__).resolve().parent.parent
#: the level's source, whose weight file a level-3 stream needs
LEVEL_3_SOURCE = presets.CM_LEVELS[3]["source"]


def provenance(source: int) -> dict:
    """The provenance record of ``source``'s weight file: data/NAME-provenance.json for NAME.bin."""
    name, _ = distribution.PRETRAINED[source]
    return json.loads((ROOT / "data" / f"{Path(name).stem}-provenance.json").read_text())


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


@pytest.mark.parametrize("source", sorted(distribution.PRETRAINED))
def test_shipped_weights_match_their_provenance(source):
    record = provenance(source)
    path = ROOT / record["weights"]
    raw = path.read_bytes()
    assert len(raw) == record["weights_bytes"]
    assert hashlib.sha256(raw).hexdigest() == record["weights_sha256"]
    corpora = {json.loads(path.read_text())["corpus"]["sha256"] for path in (ROOT / "data").glob("corpus-sources*.json")}
    assert record["stages"] and all(stage["corpus_sha256"] in corpora for stage in record["stages"])
    P = pretrained.load(path, source_config(SOURCE_WIDE_SSM, 20))
    assert np.all(np.isfinite(P))


@pytest.mark.parametrize("source", sorted(distribution.PRETRAINED))
def test_each_pretrained_source_names_its_shipped_file(source):
    record = provenance(source)
    name, sha256 = distribution.PRETRAINED[source]
    assert record["weights"] == f"statemix/models/pretrained/{name}" and record["weights_sha256"] == sha256
    weights = pretrained.shipped(name, sha256, source_config(source, 20))
    assert np.array_equal(weights, pretrained.load(ROOT / record["weights"], source_config(SOURCE_WIDE_SSM, 20)))


def test_the_shipped_weight_files_are_those_the_sources_name():
    assert sorted(path.name for path in pretrained.SHIPPED.glob("*.bin")) == sorted(
        name for name, _ in distribution.PRETRAINED.values())


@pytest.fixture
def move_weights(tmp_path, monkeypatch):
    """A function that moves the package's weight folder to an empty ``tmp_path`` (the loaded files
    forgotten); undone after the test."""
    def move():
        monkeypatch.setattr(pretrained, "SHIPPED", tmp_path)
        pretrained._shipped_bytes.cache_clear()
        return tmp_path

    yield move
    pretrained._shipped_bytes.cache_clear()


def test_a_stream_that_needs_missing_or_other_weights_is_one_clear_error(move_weights):
    data = text_sample(300)
    stream = statemix.compress(data, level=3)  # the pretrained source: it needs its weight file
    name, _ = distribution.PRETRAINED[LEVEL_3_SOURCE]
    shipped = (pretrained.SHIPPED / name).read_bytes()
    folder = move_weights()
    with pytest.raises(statemix.StatemixError, match=f"pretrained weights {name} .*not installed"):
        statemix.decompress(stream)
    (folder / name).write_bytes(shipped[:-1] + bytes([shipped[-1] ^ 1]))
    with pytest.raises(statemix.StatemixError, match=f"pretrained weights {name} installed are not those"):
        statemix.decompress(stream)
    with pytest.raises(statemix.StatemixError, match=name):
        statemix.compress(data, level=3)
    (folder / name).write_bytes(shipped)
    assert statemix.decompress(stream) == data


@pytest.mark.parametrize("level", [1, 2])
def test_levels_without_the_pretrained_ssm_never_read_the_file(move_weights, level):
    move_weights()
    data = text_sample(2_000)
    assert statemix.decompress(statemix.compress(data, level=level)) == data
