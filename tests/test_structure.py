"""The structure components of the cm model: record detection and the record and long-order contexts."""

from __future__ import annotations

import numpy as np
import pytest

from statemix.models import cm
from statemix.models.bit import record

from conftest import text_sample


def detected_lengths(data: bytes) -> list[int]:
    """The record length the detector reports after each byte, written plainly (see .bit.record)."""
    last, gap, votes = {}, {}, [0] * record.MAX_RECORD
    best, lengths, length, total = 0, [], 0, 0
    for pos, byte in enumerate(data):
        if byte in last:
            distance = pos - last[byte]
            before = gap.get(byte, 0)
            gap[byte] = min(distance, record.MAX_RECORD)
            if distance == before and record.MIN_RECORD <= distance < record.MAX_RECORD:
                votes[distance] += 1
                total += 1
                if distance != best and votes[distance] * distance.bit_length() > votes[best] * best.bit_length():
                    best = distance
                if votes[distance] >= record.VOTE_LIMIT:
                    votes = [v >> 1 for v in votes]
                    total = sum(votes)
                length = best if votes[best] >= record.MIN_VOTES and votes[best] * record.MIN_SHARE >= total else 0
        last[byte] = pos
        lengths.append(length)
    return lengths


def kernel_lengths(data: bytes) -> list[int]:
    """The same, read from a cm model's state after each byte."""
    model = cm.Model(cm.Config(12, 16, 1, 1, 1, kinds=(0,)))
    lengths = []
    for byte in data:
        model.learn(bytes([byte]))
        lengths.append(int(model.state[cm.RECORD + record.LENGTH]))
    return lengths


def table(width: int, rows: int, seed: int) -> bytes:
    """Rows of ``width`` bytes, like a binary table: a row counter, then columns of which every third
    is noise (16 values) and the others a value of the column, then an end mark."""
    rng = np.random.default_rng(seed)
    out = bytearray()
    for row in range(rows):
        fields = bytearray([0x41, row & 0xFF, (row >> 8) & 0xFF, 0x00])
        fields += bytes(int(rng.integers(16)) if column % 3 == 0 else (column * 7) & 0xFF
                        for column in range(width - 6)) + b"\xfe\xff"
        out += fields[:width]
    return bytes(out)


@pytest.mark.parametrize("width", [7, 216])
def test_the_detector_finds_the_record_length_of_a_table(width):
    data = table(width, 4000 // width + 30, seed=width)
    lengths = kernel_lengths(data)
    assert lengths == detected_lengths(data)
    assert lengths[-1] == width


def test_the_detector_follows_a_new_structure_and_reports_nothing_on_noise():
    rng = np.random.default_rng(3)
    noise = bytes(rng.integers(0, 256, 3000).astype(np.uint8))
    data = noise + table(12, 400, seed=1) + table(40, 1200, seed=2)
    lengths = kernel_lengths(data)
    assert lengths == detected_lengths(data)
    assert lengths[len(noise) - 1] == 0
    assert lengths[len(noise) + 12 * 400 - 1] == 12
    assert lengths[-1] == 40


def test_record_contexts_pay_on_a_table_and_round_trip():
    data = table(53, 600, seed=5)
    plain = cm.Config(16, 16, 3, 5, 2, kinds=(0, 1, 2))
    with_records = cm.Config(16, 16, 6, 5, 2, kinds=(0, 1, 2, 21, 22, 24))
    coded = cm.Model(with_records).encode(data, len(data))
    assert cm.Model(with_records).decode(coded, len(data)) == data
    assert len(coded) < 0.95 * len(cm.Model(plain).encode(data, len(data)))  # of 7,050 bytes of noise


