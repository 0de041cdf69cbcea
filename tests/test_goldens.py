"""Every model record a stream can carry, pinned by a stream whose input makes its components act.

test_api's goldens pin each record over 460 bytes of one repeated line, where the record, image and
x86 contexts and most text contexts never act, so many share one code word.  The goldens here
(tests/goldens/, written by tests/goldens/renew.py) code 9,843 bytes of markup, binary records, an
8-bit image and x86 code under each record: each stream's code words differ from every other's, and
each must still decode to the input.
"""

from __future__ import annotations

import functools
import importlib.util
from pathlib import Path

import pytest

import statemix
from conftest import EVERY_MODEL
from statemix import container

HERE = Path(__file__).resolve().parent / "goldens"
INPUT = HERE / "input.bin"
GOLDENS = sorted(HERE.glob("*.smx"))

#: the level-3 and ssm records compile the SSM: shared with the worker that compiles every model
pytestmark = EVERY_MODEL


@functools.cache
def renew_module():
    spec = importlib.util.spec_from_file_location("renew_goldens", HERE / "renew.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def record_and_blocks(stream: bytes) -> tuple[bytes, tuple[tuple[int, bytes], ...]]:
    """The stream's model record and its blocks' kinds and payloads (code words, when modelled)."""
    _, version, pos = container.read_versioned_header(stream)
    blocks = []
    while (header := container.read_block_header(stream, pos, version)) is not None:
        blocks.append((header.kind, stream[pos + header.size : pos + header.size + header.payload_length]))
        pos += header.size + header.payload_length
    return stream[7 : 7 + stream[6]], tuple(blocks)


#: the goldens whose size bounds their decoding work (statemix.container, "Streams read only on
#: request"): level 1's shape, cm from model revision 8, the ssm model under its coarse floor
BOUNDED = {"level1", "model-revision-8", "level3-model-revision-8", "ssm-floor"}


@pytest.mark.parametrize("path", GOLDENS, ids=[path.stem for path in GOLDENS])
def test_revision_golden_decodes(path):
    stream = path.read_bytes()
    assert statemix.decompress(stream, legacy=True) == INPUT.read_bytes()
    if path.stem in BOUNDED:
        assert statemix.decompress(stream) == INPUT.read_bytes()
    else:
        with pytest.raises(statemix.StatemixError, match="read only on request"):
            statemix.decompress(stream)


def test_revision_goldens_are_the_listed_records_and_their_code_words_differ():
    records = renew_module().RECORDS
    assert set(records) == {path.stem for path in GOLDENS}
    by_code_words = {}
    for path in GOLDENS:
        record, blocks = record_and_blocks(path.read_bytes())
        assert record.hex() == records[path.stem]
        assert [kind for kind, _ in blocks] == [container.MODELLED, container.MODELLED_X86], path.stem
        by_code_words.setdefault(blocks, []).append(path.stem)
    assert [names for names in by_code_words.values() if len(names) > 1] == []


def test_every_record_that_test_api_pins_has_a_revision_golden():
    import test_api

    pinned = {value[7 : 7 + value[6]].hex() for name, value in vars(test_api).items()
              if name.startswith("GOLDEN_") and isinstance(value, bytes) and value[:4] == container.MAGIC}
    assert pinned - set(renew_module().RECORDS.values()) == set()


def test_the_input_is_the_one_renew_builds():
    first, code = renew_module().golden_input()
    assert first + code == INPUT.read_bytes()
