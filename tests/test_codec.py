"""The codec objects' contract with the model: block schedule, blocks the model never sees, progress,
hostile model records and the memory limit.
"""

from __future__ import annotations

import io
import random
import struct
import subprocess
import sys
import zlib

import pytest
import zstandard

import statemix
from statemix import Compressor, Decompressor, StatemixError, codec, container
from statemix.models import spec_for_level

from conftest import text_sample

TEXT = text_sample(40_000, seed=12)
RANDOM = random.Random(13).randbytes(40_000)


def blocks(stream: bytes) -> list:
    return [b for s in statemix.read_info(io.BytesIO(stream)) for b in s.blocks]


def payloads(stream: bytes) -> list[bytes]:
    """The payload of every block of a one-stream ``stream``, in order."""
    _, pos = container.read_header(stream)
    out = []
    while (header := container.read_block_header(stream, pos)) is not None:
        out.append(stream[pos + header.size : pos + header.size + header.payload_length])
        pos += header.size + header.payload_length
    return out


def test_blocks_start_small_and_double():
    data = text_sample(100_000, seed=14)
    sizes = [b.raw_length for b in blocks(statemix.compress(data, level=1))]
    assert sizes == [16384, 32768, 100_000 - 49152]
    assert [container.block_limit(i) for i in range(8)] == [16 << 10, 32 << 10, 64 << 10, 128 << 10,
                                                         256 << 10, 512 << 10, 1 << 20, 1 << 20]


def test_first_block_is_released_before_the_rest_arrives():
    data = text_sample(100_000, seed=14)
    stream = statemix.compress(data, level=1)
    d = Decompressor()
    first = blocks(stream)[0]
    header_end = container.read_header(stream)[1]
    first_end = header_end + container.read_block_header(stream, header_end).size + first.payload_length
    assert d.decompress(stream[:first_end]) == data[:16384]
    assert d.decompress(stream[first_end:]) == data[16384:]


def test_blocks_the_model_did_not_code_leave_it_untouched(monkeypatch):
    # text | random | text with three equal blocks: the random block is stored, and the code word of
    # the last block is exactly what it is when the random block is not there at all
    monkeypatch.setattr(container, "FIRST_BLOCK", 1 << 20)
    monkeypatch.setattr(container, "BLOCK_SIZE", 20_000)
    first, last = TEXT[:20_000], TEXT[20_000:]
    with_random = statemix.compress(first + RANDOM[:20_000] + last, level=1)
    without = statemix.compress(first + last, level=1)
    assert [b.kind for b in blocks(with_random)] == ["modelled", "stored", "modelled"]
    assert payloads(with_random)[2] == payloads(without)[1]
    assert statemix.decompress(with_random) == first + RANDOM[:20_000] + last


ZEDS = (b"Z" * 15 + b"\xe8\x10\x00\x00\x00") * 1000  # calls, which the x86 transform changes


@pytest.mark.parametrize("transformed", [False, True], ids=["plain", "x86"])
@pytest.mark.parametrize("written", ["zstandard", "stored"])
def test_a_block_the_model_lost_is_learned_on_both_sides(monkeypatch, transformed, written):
    # text | ZEDS | text, and the model made to lose the Zs (it codes and learns them, then its
    # code word is refused): the block is written as zstandard or stored "learned", and the last
    # block's code word is the one of a stream in which the model kept the Zs (the decoder learns
    # them too: without that it would fail the checksum)
    from statemix import x86
    from statemix.models import cm

    monkeypatch.setattr(container, "FIRST_BLOCK", 1 << 20)
    monkeypatch.setattr(container, "BLOCK_SIZE", 20_000)
    if transformed:  # every block taken for x86 code: the model learns the transformed bytes
        monkeypatch.setattr(x86, "pays", lambda raw: True)
    data = TEXT[:20_000] + ZEDS + TEXT[20_000:]
    real_encode, real_zstd = cm.Model.encode, zstandard.ZstdCompressor

    def losing_encode(self, block, limit, **kwargs):
        coded = real_encode(self, block, limit, **kwargs)
        return None if block[:1] == b"Z" else coded

    class Useless:  # zstandard whose final frames are never shorter than the data (the probe is real)
        def __init__(self, level, write_content_size):
            self._real = real_zstd(level=level, write_content_size=write_content_size)
            self._final = level == codec.ZSTD_LEVEL

        def compress(self, raw):
            return raw + b"." if self._final else self._real.compress(raw)

    with monkeypatch.context() as patch:  # the model wins every block
        patch.setattr(codec.zstandard, "ZstdCompressor", Useless)
        all_modelled = statemix.compress(data, level=1)
    monkeypatch.setattr(cm.Model, "encode", losing_encode)
    if written == "stored":
        monkeypatch.setattr(codec.zstandard, "ZstdCompressor", Useless)
    lost = statemix.compress(data, level=1)
    modelled = "modelled x86" if transformed else "modelled"
    learned = f"{written} learned" + (" x86" if transformed else "")
    assert [b.kind for b in blocks(all_modelled)] == [modelled] * 3
    assert [b.kind for b in blocks(lost)] == [modelled, learned, modelled]
    assert payloads(lost)[2] == payloads(all_modelled)[2]
    assert statemix.decompress(lost) == data


def test_decoder_never_runs_the_model_on_stored_or_zstandard_blocks(monkeypatch):
    zeros = bytes(1 << 20)
    payload = zstandard.ZstdCompressor(level=19, write_content_size=False).compress(zeros)
    stream = (container.write_header(spec_for_level(None, None))
              + container.write_block(container.ZSTANDARD, zeros, payload) * 4
              + container.write_block(container.STORED, RANDOM, RANDOM)
              + container.write_trailer(4 * len(zeros) + len(RANDOM), zlib.crc32(RANDOM, zlib.crc32(zeros * 4))))
    from statemix.models import cm

    def forbidden(self, *args, **kwargs):
        raise AssertionError("the model ran on a block it did not code")

    monkeypatch.setattr(cm.Model, "learn", forbidden)
    monkeypatch.setattr(cm.Model, "decode", forbidden)
    assert statemix.decompress(stream) == zeros * 4 + RANDOM


def test_version_1_streams_still_decode():
    # a version-1 stream whose zstandard block the model learned, then a modelled block after it
    # (made by hand: the header's version byte and the v1 rule that the model learned the block)
    data = random.Random(3).randbytes(40) * 3
    spec = spec_for_level(None, 2 * len(data))
    model = statemix.models.build_model(spec)
    model.learn(data)
    coded = model.encode(data, len(data))
    head = bytearray(container.write_header(spec))
    head[4] = 1
    head[-4:] = struct.pack("<I", zlib.crc32(bytes(head[:-4])))
    payload = zstandard.ZstdCompressor(level=19, write_content_size=False).compress(data)
    stream = (bytes(head) + container.write_block(container.ZSTANDARD, data, payload, version=1)
              + container.write_block(container.MODELLED, data, coded.rstrip(b"\0"), version=1)
              + container.write_trailer(2 * len(data), zlib.crc32(data * 2)))
    assert statemix.decompress(stream, legacy=True) == data * 2
    assert statemix.read_info(io.BytesIO(stream))[0].version == 1


def test_incompressible_blocks_skip_the_model(monkeypatch):
    from statemix.models import cm

    def forbidden(self, *args, **kwargs):
        raise AssertionError("the model was asked to code random data")

    monkeypatch.setattr(cm.Model, "encode", forbidden)
    stream = statemix.compress(RANDOM)
    assert [b.kind for b in blocks(stream)] == ["stored", "stored"]
    assert statemix.decompress(stream) == RANDOM


# ---------------------------------------------------------------------------------------------------
# Progress


def test_progress_moves_within_a_block_and_ends_at_the_total():
    data = text_sample(200_000, seed=15)
    seen = []
    c = Compressor(level=1, size_hint=len(data), progress=seen.append)
    stream = c.compress(data) + c.flush()
    assert seen == sorted(seen) and seen[-1] == len(data)
    assert len(blocks(stream)) == 4
    assert len(set(seen)) > 8  # more than once per block
    decoded = []
    d = Decompressor(progress=decoded.append)
    assert d.decompress(stream) == data
    assert decoded == sorted(decoded) and decoded[-1] == len(data) and len(set(decoded)) > 8


def test_an_exception_from_progress_stops_the_work():
    class Stop(Exception):
        pass

    def stop_soon(done):
        if done > 20_000:
            raise Stop

    with pytest.raises(Stop):
        c = Compressor(level=1, progress=stop_soon)
        c.compress(text_sample(200_000, seed=15))
    stream = statemix.compress(text_sample(200_000, seed=15), level=1)
    with pytest.raises(Stop):
        Decompressor(progress=stop_soon).decompress(stream)


# ---------------------------------------------------------------------------------------------------
# Hostile model records and the memory limit

HOSTILE_PROBE = """
import sys, statemix
from statemix import container
from statemix.models import ModelSpec

def peak():  # this process's peak of virtual memory (KiB): every mapping counts, touched or not
    return int(next(line.split()[1] for line in open("/proc/self/status") if line.startswith("VmPeak:")))

record = bytes([1, 26, 28, 10, 3, 2])  # cm: 2**26-byte tables, 2**28 bytes of history
stream = container.write_header(ModelSpec.from_bytes(record)) + container.write_trailer(0, 0)
statemix.decompress(statemix.compress(b""))  # the codec's own start (a level-2 record is checked the same way)
before = peak()
try:
    statemix.decompress(stream)
except statemix.StatemixError as exc:
    print("refused:", exc)
print(peak() - before)
"""


def test_a_hostile_model_record_is_refused_before_any_allocation():
    """The model's tables (here over 3 GiB) are never mapped: calloc'd pages would not show in the
    resident peak until touched, so the probe watches the virtual peak."""
    done = subprocess.run([sys.executable, "-c", HOSTILE_PROBE], capture_output=True, text=True, check=True)
    *messages, growth_kib = done.stdout.splitlines()
    assert int(growth_kib) < 64 << 10, growth_kib  # under 64 MiB of new mappings
    assert messages and messages[0].startswith("refused: ")


def test_memory_limit_names_what_the_stream_needs():
    stream = statemix.compress(TEXT, level=1)
    with pytest.raises(StatemixError, match="MiB"):
        statemix.decompress(stream, memory_limit=1 << 20)
    with pytest.raises(StatemixError, match="MiB"):
        statemix.open(io.BytesIO(stream), memory_limit=1 << 20).read()
    assert statemix.decompress(stream, memory_limit=1 << 30) == TEXT
