"""The structure components of the cm model: record detection and the record and long-order contexts."""

from __future__ import annotations

import random

import numpy as np
import pytest

from statemix.models import cm
from statemix.models.bit import record


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


def drifting_table(width: int, rows: int, seed: int) -> bytes:
    """Rows of ``width`` random bytes, each the row before with 3 bytes changed."""
    rng = np.random.default_rng(seed)
    rows_out = [bytes(rng.integers(0, 256, width).astype(np.uint8))]
    for _ in range(rows - 1):
        row = bytearray(rows_out[-1])
        for _ in range(3):
            row[int(rng.integers(width))] = int(rng.integers(256))
        rows_out.append(bytes(row))
    return b"".join(rows_out)


def test_record_contexts_pay_on_a_table_and_round_trip():
    data = drifting_table(61, 500, seed=4)
    plain = cm.Config(16, 16, 3, 5, 2, kinds=(0, 1, 2))
    with_records = cm.Config(16, 16, 6, 5, 2, kinds=(0, 1, 2, 21, 22, 24))
    coded = cm.Model(with_records).encode(data, len(data))
    assert cm.Model(with_records).decode(coded, len(data)) == data
    plain_size = len(cm.Model(plain).encode(data, len(data)))
    assert len(coded) < 0.75 * plain_size  # measured: 3,201 against 5,077
    # the bytes one and two rows up alone (the column would predict this table too)
    rows = cm.Config(16, 16, 4, 5, 2, kinds=(0, 1, 2, 22))
    assert len(cm.Model(rows).encode(data, len(data))) < 0.75 * plain_size  # measured: 3,425




def reference_pixel(data: bytes, pos: int, width: int, bit: int, row: int, offset: int) -> int:
    """The pixel ``row`` rows up and ``offset`` columns right of bit ``bit`` of byte ``pos``, from
    the stream as one long bit string (rows of ``width`` bytes, most significant bit first)."""
    index = 8 * (pos - row * width) + bit + offset
    return 0 if index < 0 else (data[index >> 3] >> (7 - (index & 7))) & 1


def test_pixels_are_the_bits_around_the_current_one():
    from statemix.models.bit import image

    rng = np.random.default_rng(11)
    data = bytes(rng.integers(0, 256, 4096).astype(np.uint8))
    hist = np.frombuffer(data, dtype=np.uint8).copy()
    for _ in range(3000):
        width = int(rng.integers(2, 300))
        pos = int(rng.integers(0, 4096))
        bit = int(rng.integers(8))
        c0 = (data[pos] | 256) >> (8 - bit)  # the bits of byte pos before bit ``bit``
        c1 = data[pos - 1] if pos else 0
        row = int(rng.integers(4))
        offset = -int(rng.integers(1, 8)) if row == 0 else int(rng.integers(-3, 4))
        got = image._pixel(hist, 4095, pos, width, c0, c1, bit, row, offset)
        assert got == reference_pixel(data, pos, width, bit, row, offset), (pos, width, bit, row, offset)


def test_pixel_contexts_pay_on_a_one_bit_image_and_round_trip():
    import determinism_probe

    data = determinism_probe.bitmap(40, 400)
    plain = cm.Config(16, 16, 3, 5, 2, kinds=(0, 1, 2))
    with_pixels = cm.Config(16, 16, 5, 5, 2, kinds=(0, 1, 2, 27, 28))
    coded = cm.Model(with_pixels).encode(data, len(data))
    assert cm.Model(with_pixels).decode(coded, len(data)) == data
    assert len(coded) < 0.8 * len(cm.Model(plain).encode(data, len(data)))


def prose(size: int, seed: int) -> bytes:
    """Sentences of words drawn by Zipf's law from 3,000 random words of 1-11 letters (like text:
    conftest's text_sample has a few short words, so distance 4 has more than its share there)."""
    rng = random.Random(seed)
    vocabulary = ["".join(rng.choice("etaoinshrdlcumwfgypbvkjxqz"[: rng.randint(8, 26)])
                          for _ in range(rng.randint(1, 11))) for _ in range(3000)]
    weights = [1 / (rank + 1) for rank in range(len(vocabulary))]
    out, length = [], 0
    while length < size:
        out.append(" ".join(rng.choices(vocabulary, weights, k=rng.randint(5, 20))).capitalize() + ". ")
        length += len(out[-1])
    return "".join(out).encode()[:size]


def test_the_detector_finds_no_record_in_text():
    # text repeats bytes at short distances but spreads its votes: no distance has a quarter of
    # them (MIN_SHARE), so the record contexts stay idle
    data = prose(30000, seed=2)
    lengths = kernel_lengths(data)
    assert lengths == detected_lengths(data)
    assert not any(lengths)
