"""The x86 branch address transform (statemix.x86) and the container's modelled-x86 blocks."""

from __future__ import annotations

import random

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import statemix
from statemix import container, x86

from conftest import x86_like


def transform_reference(data: bytes, offset: int, sign: int) -> bytes:
    """statemix.x86's transform written plainly (see its module docstring)."""
    out = bytearray(data)
    i = 0
    while i + 4 < len(out):
        if out[i] not in (0xE8, 0xE9):
            i += 1
            continue
        if out[i + 4] in (0x00, 0xFF):
            value = int.from_bytes(out[i + 1 : i + 4], "little") | ((out[i + 4] & 1) << 24)
            value = (value + sign * (offset + i + 5)) % (1 << 25)
            out[i + 1 : i + 4] = (value & 0xFFFFFF).to_bytes(3, "little")
            out[i + 4] = 0xFF if value >> 24 else 0x00
        i += 5
    return bytes(out)


def dense(raw: bytes) -> bytes:
    """Bytes with many E8s and 00/FF bytes, so that opcodes' operands overlap often."""
    return bytes(0xE8 if x < 60 else 0xE9 if x < 70 else 0xFF if x < 110 else 0x00 if x < 140 else x for x in raw)


@settings(max_examples=300, deadline=None)
@given(st.binary(max_size=3000).map(dense), st.integers(0, (1 << 40)))
def test_the_transform_matches_its_reference_and_is_undone(data, offset):
    encoded = x86.encode(data, offset)
    assert encoded == transform_reference(data, offset, 1)
    assert x86.decode(encoded, offset) == data
    assert transform_reference(encoded, offset, -1) == data


@pytest.mark.parametrize("data", [b"", b"\xe8", b"\xe8\xff\xff\xff", b"\xe8\xff\xff\xff\xff", b"\xe9" * 9,
                                  b"\xe8\x00\x00\x00\x00" * 3, bytes(range(256)) * 4])
def test_edge_cases_round_trip(data):
    for offset in (0, 1, (1 << 25) - 3, 123_456_789):
        assert x86.decode(x86.encode(data, offset), offset) == data


def test_calls_to_one_function_become_one_byte_string():
    data = x86_like(20_000, seed=1)
    encoded = x86.encode(data, 0)
    calls = [encoded[i + 1 : i + 5] for i in range(len(encoded) - 4) if encoded[i] == 0xE8]
    before = [data[i + 1 : i + 5] for i in range(len(data) - 4) if data[i] == 0xE8]
    assert len(set(calls)) < len(set(before)) / 4


def test_the_estimate_picks_code_and_not_other_data():
    assert x86.pays(x86_like(50_000, seed=2))
    assert not x86.pays(random.Random(4).randbytes(50_000))
    assert not x86.pays(b"The quick brown fox jumps over the lazy dog. " * 1000)
    assert not x86.pays(bytes(range(256)) * 200)  # E8s everywhere, but no repeated targets
    assert not x86.pays(b"")


def block_kinds(stream: bytes) -> list[int]:
    pos = container.read_header(stream)[1]
    kinds = []
    while (header := container.read_block_header(stream, pos)) is not None:
        kinds.append(header.kind)
        pos += header.size + header.payload_length
    return kinds


def test_code_is_coded_transformed_across_blocks_and_decodes(monkeypatch):
    data = x86_like(120_000, seed=3)  # four blocks (16, 32, 64 KiB, rest): offsets other than 0
    stream = statemix.compress(data, level=1)
    assert block_kinds(stream) == [container.MODELLED_X86] * 4
    assert statemix.decompress(stream) == data
    monkeypatch.setattr(x86, "pays", lambda raw: False)
    plain = statemix.compress(data, level=1)
    assert container.MODELLED_X86 not in block_kinds(plain)
    assert len(stream) < 0.9 * len(plain)


def test_a_transformed_block_read_as_untransformed_fails_its_checksum():
    data = x86_like(40_000, seed=5)
    stream = bytearray(statemix.compress(data, level=1))
    pos = container.read_header(bytes(stream))[1]
    first = container.read_block_header(bytes(stream), pos)
    stream[pos] = container.MODELLED  # the first block's kind: modelled without the transform
    stream[pos + first.size - 5] = container.crc32(bytes(stream[pos : pos + first.size - 5])) & 0xFF
    with pytest.raises(statemix.StatemixError, match="checksum"):
        statemix.decompress(bytes(stream))

