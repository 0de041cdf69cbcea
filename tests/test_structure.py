"""The structure components of the cm model: record detection and the record and long-order contexts."""

from __future__ import annotations

import hashlib
import random
import zlib

import numpy as np
import pytest

import statemix
from statemix.models import cm
from statemix.models.bit import record


def detected_lengths(data: bytes, gated: bool = False) -> list[int]:
    """The record length the detector reports after each byte, written plainly (see .bit.record;
    ``gated``: revision 1, which reports no short or weak record in text)."""
    last, gap, votes = {}, {}, [0] * record.MAX_RECORD
    best, lengths, length, total, text = 0, [], 0, 0, 0
    for pos, byte in enumerate(data):
        if byte:  # NUL bytes (padding) leave the text share as it was
            printable = 32 <= byte < 127 or byte in b"\b\t\n\v\f\r\x1b"
            text += ((record.TEXT_ONE if printable else 0) - text) >> record.TEXT_SHIFT
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
        last[byte] = pos
        length = best if votes[best] >= record.MIN_VOTES and votes[best] * record.MIN_SHARE >= total else 0
        if gated and text >= record.TEXT_LEVEL and (best < record.MIN_TEXT_RECORD
                                                    or votes[best] * record.MIN_TEXT_SHARE < total):
            length = 0
        lengths.append(length)
    return lengths


def kernel_lengths(data: bytes, gated: bool = False) -> list[int]:
    """The same, read from a cm model's state after each byte."""
    model = cm.Model(cm.Config(12, 16, 1, 1, 1, kinds=(21,), detector=int(gated)))  # a model with the detector
    lengths = []
    for byte in data:
        model.learn(bytes([byte]))
        lengths.append(int(model.state[cm.loop.RECORD + record.LENGTH]))
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


def scores(count: int, seed: int) -> bytes:
    """Tennis scores in prose ("6-3, 2-6, "): text that repeats at a distance of 5."""
    rng = random.Random(seed)
    return b"".join(f"{rng.randint(0, 7)}-{rng.randint(0, 7)}, ".encode() for _ in range(count))


def text_table(rows: int, seed: int) -> bytes:
    """A fixed-width text table: lines of 40 characters."""
    rng = random.Random(seed)
    names = ["alpha", "beta", "gamma", "delta", "omega", "kappa"]
    return b"".join(f"{row:06d} {rng.choice(names):<10s} {rng.randint(0, 99999):>8d} {rng.random() * 1000:10.3f}"
                    f"  \n".encode() for row in range(rows))


def test_the_text_gate_ignores_short_repeats_in_text_and_finds_a_text_table():
    data = prose(2000, seed=5) + scores(600, seed=6) + prose(2000, seed=7) + text_table(200, seed=8)
    at_scores, at_table = slice(2000, 5000), slice(-40 * 50, None)  # the table is found 122 lines in
    blind, gated = kernel_lengths(data), kernel_lengths(data, gated=True)
    assert blind == detected_lengths(data) and gated == detected_lengths(data, gated=True)
    assert 5 in blind[at_scores]  # revision 0 takes the scores for records of 5 bytes
    assert not any(gated[: 7000])
    assert set(gated[at_table]) == {40}


def test_text_codes_as_without_record_contexts_when_the_gate_finds_none():
    data = prose(3000, seed=9) + scores(800, seed=10) + prose(3000, seed=11)
    assert not any(kernel_lengths(data, gated=True))
    without = cm.Config(16, 16, 3, 5, 2, kinds=(0, 1, 2))
    with_records = cm.Config(16, 16, 5, 5, 2, kinds=(0, 1, 2, 21, 22), detector=1)
    blind = cm.Config(16, 16, 5, 5, 2, kinds=(0, 1, 2, 21, 22))
    gated_size = len(cm.Model(with_records).encode(data, len(data)))
    assert gated_size <= len(cm.Model(without).encode(data, len(data))) + 2
    assert gated_size < len(cm.Model(blind).encode(data, len(data)))


#: sha256 of statemix.compress(GATE_INPUT) by the build before the text gate (3822725: level 2 with
#: the first record detector, revision 0, which finds records of 5 bytes in the scores)
FIRST_DETECTOR_STREAM = "e31ae07bdf09bfa116d4d0a338347d00125f2d469b4a0e58921cdc629192b681"


def as_format_2(stream: bytes) -> bytes:
    """``stream`` (format 3) framed as format 2 wrote it: version byte 2, a 1-byte block header
    check, code words without their trailing zero bytes; the model's bytes are the same."""
    import struct

    from statemix import container

    _, version, pos = container.read_versioned_header(stream)
    assert version == 3
    head = bytearray(stream[:pos])
    head[4] = 2
    head[-4:] = struct.pack("<I", zlib.crc32(bytes(head[:-4])))
    out = bytes(head)
    while (block := container.read_block_header(stream, pos)) is not None:
        payload = stream[pos + block.size : pos + block.size + block.payload_length]
        pos += block.size + block.payload_length
        if block.kind in container.MODELLED_KINDS:
            payload = payload.rstrip(b"\0")
        fields = bytes([block.kind]) + container.encode_varint(block.raw_length)
        if block.kind not in container.STORED_KINDS:
            fields += container.encode_varint(len(payload))
        out += fields + bytes([zlib.crc32(fields) & 0xFF]) + struct.pack("<I", block.crc) + payload
    return out + stream[pos:]


def test_revision_0_of_the_detector_writes_what_the_first_build_wrote():
    # streams of that build name revision 0 (``00 02`` records): this build must decode them as it did,
    # which it does if it writes them bit for bit
    from statemix import codec, container
    from statemix.models import ModelSpec, build_model, presets
    from statemix.models.bit import image

    data = prose(2000, seed=5) + scores(600, seed=6) + prose(2000, seed=7)
    preset = presets.cm_sized(2, presets.cm_fit(len(data)))
    preset["kinds"] = (*range(10), 11, *range(14, 19), *range(21, image.FIRST_GRAY_KIND))  # that build's
    preset["contexts"] = len(preset["kinds"])
    preset["byte_histories"] = False  # (nor byte histories)
    preset["mixers"], preset["revision"] = 7, 0  # (nor the eighth mixer and model revision 1)
    preset["apms"] = 4  # (nor the fifth APM of model revision 4)
    streams = {}
    for detector in (0, 1):
        spec = ModelSpec(cm.MODEL_ID, cm.Config(**{**preset, "detector": detector}).to_bytes())
        streams[detector] = (container.write_header(spec) + codec.BlockCoder(build_model(spec)).block(data)
                             + container.write_trailer(len(data), container.crc32(data)))
    assert hashlib.sha256(as_format_2(streams[0])).hexdigest() == FIRST_DETECTOR_STREAM
    assert streams[1] != streams[0]
    assert statemix.decompress(streams[0], legacy=True) == statemix.decompress(streams[1], legacy=True) == data


def detected_images(data: bytes) -> list[tuple[int, int, int]]:
    """(record length, image row, pixel) after each byte by revision 2 of the detector, written
    plainly (see .bit.record: the votes of detected_lengths, and sums of byte differences)."""
    lengths = detected_lengths(data, gated=True)
    sums = [0] * record.MAX_RECORD
    samples, image, pixel, text, out = 0, 0, 0, 0, []
    for pos, byte in enumerate(data):
        if byte:
            printable = 32 <= byte < 127 or byte in b"\b\t\n\v\f\r\x1b"
            text += ((record.TEXT_ONE if printable else 0) - text) >> record.TEXT_SHIFT
        exact = lengths[pos]
        if pos % record.SAMPLE_STEP == 0 and pos >= record.MAX_RECORD:
            samples += 1
            halve = samples >= record.SMOOTH_LIMIT
            samples >>= halve
            sums = [(s + abs(byte - data[pos - d])) >> halve if d else 0 for d, s in enumerate(sums)]
            mean_times = sum(sums)  # the mean, times MAX_RECORD - 1
            row = min(range(record.MIN_IMAGE_ROW, record.MAX_RECORD), key=lambda d: (sums[d], d))
            step = min(range(1, record.MAX_PIXEL + 1), key=lambda d: (sums[d], d))
            found = samples >= record.MIN_SAMPLES and sums[row] * record.IMAGE_RATIO * (record.MAX_RECORD - 1) <= mean_times
            image = row if found else 0
            gray = (found and row >= record.MIN_IMAGE_PIXELS * step and row != exact
                    and sums[row] <= record.ROW_PIXEL * sums[step]
                    and sums[step] * record.PIXEL_RATIO * (record.MAX_RECORD - 1) <= mean_times)
            pixel = step if gray else 0
        stand_in = image if pixel or text < record.TEXT_LEVEL else 0
        out.append((exact or stand_in, image, pixel))
    return out


def kernel_images(data: bytes) -> list[tuple[int, int, int]]:
    """The same, read from a cm model's state after each byte."""
    model = cm.Model(cm.Config(12, 16, 1, 1, 1, kinds=(29,), detector=2))
    out = []
    for byte in data:
        model.learn(bytes([byte]))
        st = model.state[cm.loop.RECORD:]
        out.append((int(st[record.LENGTH]), int(st[record.IMAGE]), int(st[record.PIXEL])))
    return out


def test_the_detector_finds_the_rows_and_pixels_of_8_bit_images():
    from conftest import photo_like

    # (the text is shorter than MAX_RECORD: the first sample is in the image; text after an image
    # would delay the next one, see test_revision_2_codes_text_as_revision_1 for text alone)
    start = prose(3000, seed=12)
    gray, rgb = photo_like(96, 120, seed=1), photo_like(64, 80, seed=2, channels=3)
    data = start + gray + rgb
    found = kernel_images(data)
    assert found == detected_images(data)
    assert not any(any(f) for f in found[: len(start)])
    assert found[len(start) + len(gray) - 1] == (96, 96, 1)  # gray: one byte per pixel
    assert found[-1][1:] == (3 * 64, 3)  # RGB: three (the votes find its channels: records of 3 bytes)


def test_8_bit_image_contexts_pay_on_a_photograph_and_round_trip():
    from conftest import photo_like

    data = photo_like(128, 160, seed=3)
    # both with a record context, so both have the record selectors (mixer 4, APM 0), which the
    # image row alone already keys
    plain = cm.Config(16, 16, 4, 5, 2, kinds=(0, 1, 2, 21), detector=2)
    gray = cm.Config(16, 16, 7, 5, 2, kinds=(0, 1, 2, 21, 29, 30, 31), detector=2)
    coded = cm.Model(gray).encode(data, len(data))
    assert cm.Model(gray).decode(coded, len(data)) == data
    assert len(coded) < 0.985 * len(cm.Model(plain).encode(data, len(data)))  # measured: 9,053 against 9,270


def test_revision_2_codes_text_as_revision_1():
    # the image rows are never smooth enough in prose and text tables: bit for bit as revision 1
    kinds = (0, 1, 2, 21, 22, 29, 30, 31)
    data = prose(6000, seed=13) + text_table(150, seed=15) + prose(3000, seed=16)
    coded = [cm.Model(cm.Config(16, 16, len(kinds), 5, 2, kinds=kinds, detector=revision)).encode(data, len(data))
             for revision in (1, 2)]
    assert coded[0] == coded[1]
    # runs of digits (tennis scores) are: for a few hundred bytes they look like an 8-bit image of
    # 2-byte pixels, at a cost of about a byte (measured: 4,206 B against 4,205)
    data = prose(3000, seed=13) + scores(800, seed=14) + text_table(150, seed=15) + prose(3000, seed=16)
    sizes = [len(cm.Model(cm.Config(16, 16, len(kinds), 5, 2, kinds=kinds, detector=revision)).encode(data, len(data)))
             for revision in (1, 2)]
    assert sizes[1] <= sizes[0] * 1.001
