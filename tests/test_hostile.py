"""Hostile streams (issue 50): lengths forged so that they pass their checks, maximal claims at every
level and model, blocks over the size every writer cut at, index counts their bytes cannot hold.
Each is refused, or ends, within a time bound, and a forged length costs time in proportion to the
stream, not to the length it claims (statemix/container.py: "What a payload can hold")."""

from __future__ import annotations

import functools
import io
import random
import resource
import struct
import subprocess
import sys
import time
import zlib

import pytest
import zstandard

import statemix
from statemix import StatemixError, container
from statemix.models import memory_needed, spec_for_level

from conftest import shared_file, text_sample

MODELS = [("cm", 1), ("cm", 2), ("cm", 3), ("ssm", 1), ("ssm", 2), ("ssm", 3)]
IDS = [f"{model}-{level}" for model, level in MODELS]
#: bytes a code word byte can hold at each cm level: level 1 is model revision 0, levels 2 and 3
#: revision 8, whose coded probabilities keep 2**-12 from 0 and 1 (statemix.container)
CM_BOUND = {1: container.CM_BYTES_PER_PAYLOAD_BYTE, 2: container.CM_COARSE_BYTES_PER_PAYLOAD_BYTE,
            3: container.CM_COARSE_BYTES_PER_PAYLOAD_BYTE}


def block(kind: int, claim: int, payload: bytes, version: int = 3, crc: int = 0) -> bytes:
    """A block header that passes its check (a CRC32 in format 3, its low byte before), claiming
    ``claim`` bytes, then ``payload``."""
    head = bytes([kind]) + container.encode_varint(claim)
    if kind not in container.STORED_KINDS:
        head += container.encode_varint(len(payload))
    check = struct.pack("<I", zlib.crc32(head)) if version >= 3 else bytes([zlib.crc32(head) & 0xFF])
    return head + check + struct.pack("<I", crc) + payload


def header(model: str, level: int, version: int = 3, record: bytes | None = None) -> bytes:
    """The header of ``model`` at ``level`` (or of the model ``record``) in format ``version``."""
    spec = spec_for_level(level, None, model) if record is None else statemix.models.ModelSpec.from_bytes(record)
    head = bytearray(container.write_header(spec))
    head[4] = version
    head[-4:] = struct.pack("<I", zlib.crc32(bytes(head[:-4])))
    return bytes(head)


def stream(model: str, level: int, *blocks: bytes, version: int = 3, length: int = 0) -> bytes:
    """A stream of ``blocks``; its trailer says ``length`` bytes (a reader that checks the structure
    first, as the command line does, then gets to the blocks)."""
    return header(model, level, version) + b"".join(blocks) + container.write_trailer(length, 0)


def noise(size: int, seed: int = 0) -> bytes:
    return random.Random(seed).randbytes(size)


def refused_within(data: bytes, seconds: float, match: str | None = None, legacy: bool = False) -> float:
    started = time.perf_counter()
    with pytest.raises(StatemixError, match=match):
        statemix.decompress(data, legacy=legacy)
    took = time.perf_counter() - started
    assert took < seconds, f"refused after {took:.2f} s"
    return took


@pytest.fixture
def no_model_work(monkeypatch):
    """Make any model work (decoding or learning a block) fail the test."""
    from statemix.models import cm, ssm

    def forbidden(self, *args, **kwargs):
        raise AssertionError("the model ran on a block that should have been refused first")

    for model in (cm.Model, ssm.Model):
        monkeypatch.setattr(model, "decode", forbidden)
        monkeypatch.setattr(model, "learn", forbidden)


@functools.cache
def warm(model: str, level: int) -> None:
    """Decode one small valid stream of this model and level, so that the timings below do not
    include compiling its kernels (a first run compiles them once)."""
    data = text_sample(300, seed=level)
    assert statemix.decompress(statemix.compress(data, level=level, model=model)) == data


# ---------------------------------------------------------------------------------------------------
# Refused before any model work


@pytest.mark.parametrize("model,level", MODELS, ids=IDS)
def test_claims_beyond_every_writer_block_size_are_refused_before_model_work(model, level, no_model_work):
    for kind in (container.MODELLED, container.MODELLED_X86, container.ZSTANDARD_LEARNED, container.STORED_LEARNED):
        for claim in (container.MAX_BLOCK + 1, 1 << 24, (1 << 63) - 1):
            payload = noise(16) if kind not in container.STORED_KINDS else b""
            refused_within(stream(model, level, block(kind, claim, payload)), 5, "out of range")


@pytest.mark.parametrize("level", [1, 2, 3])
def test_a_cm_block_claiming_more_than_its_code_word_can_hold_is_refused_before_model_work(level, no_model_work):
    for size in (0, 1, 16, 23):
        for kind in (container.MODELLED, container.MODELLED_X86):
            data = stream("cm", level, block(kind, size * CM_BOUND[level] + 1, noise(size, size)))
            refused_within(data, 5, "more than its .*payload can hold")
    # what the payload can hold is not refused by the bound
    assert container.max_raw_length(container.MODELLED, 23, statemix.models.build_model(
        spec_for_level(level, None)).max_raw_length) == 23 * CM_BOUND[level]


@pytest.mark.parametrize("model,level", MODELS, ids=IDS)
@pytest.mark.parametrize("kind", [container.ZSTANDARD, container.ZSTANDARD_LEARNED, container.ZSTANDARD_LEARNED_X86])
def test_a_zstandard_block_claiming_more_than_its_frame_can_hold_is_refused(model, level, kind, no_model_work):
    frame = zstandard.ZstdCompressor(level=19, write_content_size=False).compress(bytes(1 << 20))
    bound = (len(frame) // 4) * container.ZSTD_BLOCK_MAX
    assert bound >= 1 << 20  # the bound holds for what zstandard writes
    for payload in (frame, frame[:11], b"\x28\xb5\x2f\xfd"):
        claim = min((len(payload) // 4) * container.ZSTD_BLOCK_MAX + 1, container.MAX_BLOCK)
        if claim <= (len(payload) // 4) * container.ZSTD_BLOCK_MAX:
            continue
        refused_within(stream(model, level, block(kind, claim, payload)), 5, "can hold")


#: the models and levels whose learned blocks are bounded as code words (cm from model revision 8,
#: the ssm model under its coarse floor), and what a payload byte can hold there
LEARNED_BOUND = {("cm", 2): CM_BOUND[2], ("cm", 3): CM_BOUND[3],
                 ("ssm", 1): container.SSM_COARSE_TOKENS_PER_PAYLOAD_BYTE,
                 ("ssm", 2): container.SSM_COARSE_TOKENS_PER_PAYLOAD_BYTE}


@pytest.mark.parametrize("model,level", list(LEARNED_BOUND), ids=[f"{m}-{n}" for m, n in LEARNED_BOUND])
def test_a_learned_block_claiming_more_than_a_code_word_could_hold_is_refused(model, level, no_model_work):
    """A learned block holds no more than a code word of its payload's length: 1 MiB of zeros in a
    40-byte zstandard frame (which zstandard's own bound lets through) would make the decoder's
    model learn 1 MiB for 40 bytes."""
    frame = zstandard.ZstdCompressor(level=19, write_content_size=False).compress(bytes(1 << 20))
    bound = LEARNED_BOUND[model, level]
    assert (len(frame) // 4) * container.ZSTD_BLOCK_MAX >= 1 << 20 > len(frame) * bound
    for kind in (container.ZSTANDARD_LEARNED, container.ZSTANDARD_LEARNED_X86):
        refused_within(stream(model, level, block(kind, 1 << 20, frame)), 5, "can hold")
    assert container.max_raw_length(container.ZSTANDARD_LEARNED, 40, statemix.models.build_model(
        spec_for_level(level, None, model)).max_learned_length) == 40 * bound


@pytest.mark.parametrize("model,level", [("cm", 2), ("ssm", 1)])
def test_the_encoder_writes_a_code_word_where_a_learned_frame_would_hold_too_much(model, level):
    """zstandard writes 64 KiB of zeros in a frame shorter than the model's code word, yet too short
    for a learned block of 64 KiB (a learned block of P bytes holds at most P * 2,840 bytes): the
    encoder writes the code word.  (Before cm's model revision 8 and the ssm model's coarse floor
    it wrote the frame.)"""
    data = bytes(16_384 + 32_768 + 65_536)  # blocks of 16 KiB, doubling
    frame = zstandard.ZstdCompressor(level=19, write_content_size=False).compress(bytes(1 << 16))
    assert len(frame) * LEARNED_BOUND[model, level] < 1 << 16
    stream_ = statemix.compress(data, level=level, model=model)
    (info,) = statemix.read_info(io.BytesIO(stream_))
    second = info.blocks[-1]
    assert (second.kind, second.raw_length) == ("modelled", 1 << 16) and second.payload_length > len(frame)
    assert statemix.decompress(stream_) == data


@pytest.mark.parametrize("level", [2, 3])
def test_the_most_a_64_byte_stream_can_hold_decodes_within_10_s(level):
    """The most model work a stream of at most 64 bytes can ask for: its payload's room (64 bytes less
    the header, one block header and the trailer) times what a payload byte can hold, decoded from
    an honest code word of zeros, which follows the model's most probable path all along (each bit
    near the probability floor)."""
    warm("cm", level)
    room = 64 - len(stream("cm", level, block(container.MODELLED, 1 << 20, b""), length=1 << 20))
    data = bytes(room * CM_BOUND[level])
    coded = statemix.models.build_model(spec_for_level(level, None)).encode(data, len(data))
    honest = stream("cm", level, container.write_block(container.MODELLED, data, coded), length=len(data))
    honest = honest[:-4] + struct.pack("<I", zlib.crc32(data))
    started = time.perf_counter()
    assert statemix.decompress(honest) == data
    assert time.perf_counter() - started < 10


@pytest.mark.parametrize("level", [1, 2, 3])
def test_the_most_a_short_ssm_stream_can_hold_decodes_within_10_s(level):
    """The same for the ssm model, whose header alone takes 79 bytes: a frame of 112 bytes, its
    payload's room times the tokens a payload byte can hold under the coarse floor, of zeros (a
    payload byte costs at most 2,840 tokens of work: bench/RESULTS.md times 128-byte frames)."""
    warm("ssm", level)
    room = 112 - len(stream("ssm", level, block(container.MODELLED, 1 << 20, b""), length=1 << 20))
    data = bytes(room * container.SSM_COARSE_TOKENS_PER_PAYLOAD_BYTE)
    coded = statemix.models.build_model(spec_for_level(level, None, "ssm")).encode(data, len(data))
    assert len(coded) >= room  # the floor holds: no code word is denser than the bound
    honest = stream("ssm", level, container.write_block(container.MODELLED, data, coded), length=len(data))
    honest = honest[:-4] + struct.pack("<I", zlib.crc32(data))
    started = time.perf_counter()
    assert statemix.decompress(honest) == data
    assert time.perf_counter() - started < 10


def test_blocks_of_formats_1_and_2_over_1_mib_are_refused(no_model_work):
    zeros = bytes(1 << 24)
    frame = zstandard.ZstdCompressor(level=19, write_content_size=False).compress(zeros)
    for version in (1, 2):
        for kind in (container.ZSTANDARD, container.ZSTANDARD_LEARNED):
            data = stream("cm", 2, *[block(kind, len(zeros), frame, version=version, crc=zlib.crc32(zeros))] * 4,
                          version=version)
            assert len(data) < 4096
            refused_within(data, 5, "out of range", legacy=True)


def test_the_version_1_bomb_ends_within_5_s(tmp_path):
    """../shared/data/hostile/bomb-v1.smx: 2 KB of version 1, four 16 MiB zstandard blocks of zeros
    that version 1 replays through the model (178 s before: every writer cut blocks at 1 MiB).  A
    level-2 stream of version 1 is read only on request; asked to, the reader refuses its blocks."""
    path = shared_file("hostile", "bomb-v1.smx")
    refused_within(path.read_bytes(), 5, "read only on request")
    refused_within(path.read_bytes(), 5, "out of range", legacy=True)
    for legacy in ([], ["--legacy"]):  # the command line checks the file's structure first
        started = time.perf_counter()
        result = subprocess.run([sys.executable, "-m", "statemix_cli", "-t", *legacy, str(path)],
                                capture_output=True, timeout=60)
        assert result.returncode == 1 and b"out of range" in result.stderr and len(result.stderr.splitlines()) == 1
        assert time.perf_counter() - started < 5


@pytest.mark.parametrize("version,revision", [(2, 8), (3, 7), (3, 6)])
def test_streams_their_size_does_not_bound_are_read_only_on_request(version, revision, no_model_work):
    """A 47-byte stream of format 2 holds 1 MiB of 0xFF bytes at level 2 (a trimmed code word of no
    byte: 20 s of model work); a 64-byte stream of format 3 at cm's revision 7 holds 1.6 MB (12 s at
    level 2, 42 s at level 3).  Without ``legacy`` such streams are refused before any model is
    built; with it, the model runs."""
    record = bytearray(spec_for_level(2, None).to_bytes())
    assert record[1:3] == b"\x00\x04" and record[3] == 8
    record[3] = revision
    head = header("cm", 2, version, bytes(record))
    room = 64 - len(head) - len(block(container.MODELLED, container.MAX_BLOCK, b"", version)) - 8
    claim = container.MAX_BLOCK if version < 3 else min(container.MAX_BLOCK, room * container.CM_BYTES_PER_PAYLOAD_BYTE)
    data = head + block(container.MODELLED, claim, noise(room), version) + container.write_trailer(claim, 0)
    assert len(data) <= 64
    refused_within(data, 1, "read only on request")
    with pytest.raises(AssertionError, match="the model ran"):
        statemix.decompress(data, legacy=True)


def test_level_1_streams_of_every_format_are_read_without_request():
    """Level 1's loop costs about a microsecond a byte: its streams of formats 1 and 2 (at most
    1 MiB of work a block) are read as they were."""
    from test_api import GOLDEN_INPUT, GOLDEN_TEXT_LEVEL1_V2

    warm("cm", 1)
    assert statemix.decompress(GOLDEN_TEXT_LEVEL1_V2) == GOLDEN_INPUT


def test_a_seek_index_counting_more_entries_than_its_bytes_hold_is_refused_at_once():
    payload = container.encode_varint((1 << 62) - 1) + bytes(12)
    body = container.INDEX_MAGIC + container.encode_varint(len(payload)) + payload
    body += struct.pack("<I", zlib.crc32(body))
    frame = body + struct.pack("<I", len(body) + container.INDEX_TAIL) + container.INDEX_END
    started = time.perf_counter()
    with pytest.raises(StatemixError, match="seek index damaged"):
        container.read_index(frame, 0)
    with pytest.raises(StatemixError):
        statemix.decompress(statemix.compress(b"x", level=1) + frame)
    assert time.perf_counter() - started < 5


# ---------------------------------------------------------------------------------------------------
# Claims the bound lets through: the model runs, and stops where the code word runs out


@pytest.mark.parametrize("model,level", MODELS, ids=IDS)
def test_maximal_claims_end_within_10_s_at_every_level_and_model(model, level):
    warm(model, level)
    for size in (1, 16, 200):
        for kind in (container.MODELLED, container.MODELLED_X86):
            claim = container.MAX_BLOCK if model == "ssm" else min(container.MAX_BLOCK, size * CM_BOUND[level])
            refused_within(stream(model, level, block(kind, claim, noise(size, size))), 10)


def test_a_forged_length_costs_time_by_the_stream_size_not_the_claim():
    """The same forged 100-byte stream claiming 16 KiB and claiming 1 MiB (64 times as much: both
    pass the bound) is refused in about the same time; decoding 1 MiB honestly takes far longer."""
    warm("cm", 1)
    times = {}
    for claim in (1 << 14, 1 << 20):
        data = stream("cm", 1, block(container.MODELLED, claim, noise(64, 5)))
        times[claim] = min(refused_within(data, 10) for _ in range(3))
    honest_data = text_sample(1 << 20, seed=9)
    honest = statemix.compress(honest_data, level=1)
    started = time.perf_counter()
    assert statemix.decompress(honest) == honest_data
    honest_time = time.perf_counter() - started
    assert times[1 << 20] < 3 * times[1 << 14] + 0.05, times
    assert times[1 << 20] < honest_time / 10, (times, honest_time)


def test_an_honest_code_word_under_a_false_crc_costs_what_it_encodes():
    """A real code word (64 KiB of zeros) whose data CRC is forged: decoded, then refused by the CRC,
    in the time its 64 KiB take (the payload truly holds them)."""
    warm("cm", 1)
    model = statemix.models.build_model(spec_for_level(1, None))
    coded = model.encode(bytes(1 << 16), 1 << 16)
    assert coded is not None and len(coded) < 100
    refused_within(stream("cm", 1, block(container.MODELLED, 1 << 16, coded, crc=1)), 10, "block checksum")


# ---------------------------------------------------------------------------------------------------
# Every small stream built from a valid header


def test_short_forged_streams_end_in_time_and_memory(tmp_path):
    """200 streams of at most 64 bytes: a valid level-1 header, then a block header with a valid
    CRC32 whose kind, lengths and payload are random: each is refused or decoded within 2 s; and one
    of them, run by the command line, stays within the model's memory bound."""
    warm("cm", 1)
    rng = random.Random(50)
    head = header("cm", 1)
    for case in range(200):
        kind = rng.choice(list(container.KIND_NAMES))
        room = 64 - len(head) - 6 - 14
        payload = rng.randbytes(rng.randrange(0, room + 1))
        claim = rng.choice([1, len(payload) or 1, rng.randrange(1, container.MAX_BLOCK + 1), container.MAX_BLOCK,
                            max(1, len(payload)) * CM_BOUND[1]])
        data = head + block(kind, claim, payload, crc=rng.getrandbits(32)) + container.write_trailer(claim, 0)
        started = time.perf_counter()
        try:
            statemix.decompress(data[:64] if len(data) > 64 else data)
        except StatemixError:
            pass
        assert time.perf_counter() - started < 2, (case, data.hex())
    forged = stream("cm", 1, block(container.MODELLED, container.MAX_BLOCK, noise(24)), length=container.MAX_BLOCK)
    (tmp_path / "forged.smx").write_bytes(forged)
    limit = memory_needed(spec_for_level(1, None)) + (200 << 20)
    before = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
    result = subprocess.run([sys.executable, "-m", "statemix_cli", "-t", "forged.smx"], cwd=tmp_path,
                            capture_output=True, timeout=120)
    assert result.returncode == 1 and b"code word ended" in result.stderr, result.stderr
    peak = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss * 1024
    assert before * 1024 >= limit or peak < limit, (peak, limit)
