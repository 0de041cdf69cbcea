"""Binary and mixed data: never more than zstd -19's output + 64 bytes; text smaller than xz -9e.

The Canterbury and Calgary files run by default, the large Canterbury set with STATEMIX_SLOW=1;
bench/corpora.py prints the full table with round trips.
"""

from __future__ import annotations

import io
import lzma
import random
import sys

import pytest
import zstandard

import statemix

from conftest import ROOT, SHARED_DATA, text_sample

sys.path.insert(0, str(ROOT / "bench"))
from corpora import is_text  # noqa: E402


def _files(folder):
    return sorted(p for p in (SHARED_DATA / "corpora" / folder).glob("*") if p.is_file()) or [None]


def _check(path):
    if path is None:
        pytest.skip("../shared/data/corpora not available")
    data = path.read_bytes()
    size = len(statemix.compress(data))
    assert size <= len(zstandard.ZstdCompressor(level=19).compress(data)) + 64
    if is_text(path):
        assert size < len(lzma.compress(data, preset=9 | lzma.PRESET_EXTREME))


@pytest.mark.parametrize("path", _files("canterbury") + _files("calgary"), ids=lambda p: p.name if p else "absent")
def test_small_corpora(path):
    _check(path)


@pytest.mark.slow
@pytest.mark.parametrize("path", _files("canterbury_large"), ids=lambda p: p.name if p else "absent")
def test_large_corpora(path):
    _check(path)


def test_mixed_data_larger_than_a_block():
    # text, random bytes, a random chunk repeated (zstd's best case), text: seven blocks of mixed kinds,
    # each coded on its own, against zstd -19 over the whole file at once
    rng = random.Random(8)
    data = (text_sample(1_100_000, seed=2) + rng.randbytes(300_000) + rng.randbytes(4096) * 64
            + text_sample(200_000, seed=3))
    stream = statemix.compress(data, level=1)
    assert len(statemix.read_info(io.BytesIO(stream))[0].blocks) > 1
    assert len(stream) <= len(zstandard.ZstdCompressor(level=19).compress(data)) + 64
    assert statemix.decompress(stream) == data
