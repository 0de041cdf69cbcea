"""The public API, layer by layer, in the manner of CPython's test_lzma.

Objects (Compressor, Decompressor), then the one-shot functions, then StatemixFile / open() and
read_info(); then corrupt and foreign input, and golden streams whose exact bytes pin the format and
the model arithmetic.  Inputs are small (a few KiB at most) so that ``size_hint`` keeps the model
tables small and the whole file runs in seconds.
"""

from __future__ import annotations

import array
import functools
import gc
import io
import os
import pathlib
import random
import struct
import threading
import zlib

import pytest
import zstandard

import statemix
from statemix import Compressor, Decompressor, StatemixError, StatemixFile, container
from statemix.models import spec_for_level

from conftest import EVERY_MODEL, text_sample

# ---------------------------------------------------------------------------------------------------
# Inputs and their streams (computed once, lazily, so that collection does not load the kernels)

TEXT = text_sample(3000, seed=5)
RANDOM = random.Random(11).randbytes(2000)
ALL_BYTES = bytes(range(256))
INVALID_UTF8 = b"\xff\xfe\xc3\x28\xa0\xa1\xe2\x28\xa1\xf0\x28\x8c\xbc\xf8\xa1\xa1\xa1\xa1\xed\xa0\x80\xc0\xaf"
REPEATED_RANDOM = random.Random(3).randbytes(40) * 3
GOLDEN_INPUT = b"statemix golden stream\n" * 20

#: statemix.compress(b"").  To renew after a deliberate change of format or model (then also think
#: about FORMAT_VERSION / ARITHMETIC_VERSION, and keep the old stream below as one that must still
#: decode):  python -c "import statemix; print(statemix.compress(b'').hex()); print(statemix.compress(
#: b'statemix golden stream\n' * 20).hex())"
GOLDEN_EMPTY = bytes.fromhex(
    "89534d58"  # magic
    "03"  # format version
    "01"  # arithmetic version
    "12"  # model record length
    "01" "0004" "08" "0e10" "0905" "08" "d5efffffffffff1f" "c1"  # model record, as GOLDEN_EMPTY_V2's below
    #       but at model revision 8 (the coded probability kept 2**-12 from 0 and 1)
    "5f02e87c"  # header CRC32
    "00"  # end block
    "00"  # original length 0
    "00000000"  # CRC32 of no data
)
#: statemix.compress(GOLDEN_INPUT): one modelled block of 460 bytes coded in 22 bytes
GOLDEN_TEXT = bytes.fromhex(
    "89534d580301" "12" "01000408" "0e100905" "08" "d5efffffffffff1f" "c1" "5f02e87c"  # header, as above
    "01" "cc03" "16" "cf31b4de" "5877534f"  # modelled block: raw length 460, payload 22, header CRC32, CRC32
    "8234c696d0fcdc28ca1c0f48b5fe8fff38d9e2296e6a"  # the range coder's code word (whole)
    "00" "cc03" "5877534f"  # end block: length 460, CRC32
)
#: The same at model revision 7 (format 3; the coded probability's floor 2**-16): it must decode as it did.
GOLDEN_EMPTY_MODEL_REVISION_7 = bytes.fromhex(
    "89534d580301" "12" "01000407" "0e100905" "08" "d5efffffffffff1f" "c1" "c2c16028" "00" "00" "00000000")
GOLDEN_TEXT_MODEL_REVISION_7 = bytes.fromhex(
    "89534d580301" "12" "01000407" "0e100905" "08" "d5efffffffffff1f" "c1" "c2c16028" "01cc0316cf31b4de5877534f"
    "8234c696d0fcdc28ca1c0f48b5fe8fff38d9e2296e6a" "00cc035877534f"
)
#: statemix.compress(b"") in format 2 (the model record explained): it must decode as it did.
GOLDEN_EMPTY_V2 = bytes.fromhex(
    "89534d58"  # magic
    "02"  # format version
    "01"  # arithmetic version
    "12"  # model record length
    "01" "0004" "07" "0e10" "0905" "08" "d5efffffffffff1f" "c1"  # model record: cm (id 1), component set
    #       with a model revision: revision 7 (the small text contexts' regions as the others', the
    #       source's buckets of 16 slots; revision 6's mixer 3 by the source's byte, the byte
    #       histories' cap; revision 5's small text regions; revision 4's final mixer's weight sets by word position
    #       and APMs' share of the coded probability; revision 3's mixer rates per weight set; revision
    #       2's APM training of both buckets and match length input), table_bits, hist_bits, 9 mixers,
    #       5 APMs, 8 bytes of mask of context kinds (0, 2, 4, 6-11, 13-60), byte-distribution source 1
    #       with bits 7-6 set (11): the record detector's revision 2 (it finds no short record in text,
    #       and finds the rows of 8-bit images); bit 5 clear: no byte histories (an input under 512 KiB
    #       has none)
    "5c42bab7"  # header CRC32
    "00"  # end block
    "00"  # original length 0
    "00000000"  # CRC32 of no data
)
#: statemix.compress(GOLDEN_INPUT) in format 2 (its block header check one byte): it must decode as it did
GOLDEN_TEXT_V2 = bytes.fromhex(
    "89534d580201" "12" "01000407" "0e100905" "08" "d5efffffffffff1f" "c1" "5c42bab7"  # header, as above
    "01" "cc03" "16" "cf" "5877534f"  # modelled block: raw length 460, payload 22, check, CRC32
    "8234c696d0fcdc28ca1c0f48b5fe8fff38d9e2296e6a"  # the range coder's code word
    "00" "cc03" "5877534f"  # end block: length 460, CRC32
)
#: The same, written by level 2 at model revision 6 (kinds to 60): it must decode as it did.
GOLDEN_EMPTY_KINDS_TO_60 = bytes.fromhex(
    "89534d5802011201000406" "0e10090508d5efffffffffff1fc1" "b499410e" "00" "00" "00000000")
GOLDEN_TEXT_KINDS_TO_60 = bytes.fromhex(
    "89534d5802011201000406" "0e10090508d5efffffffffff1fc1" "b499410e" "01cc0316cf5877534f"
    "8234c696d0fcdc28ca1c0f48b9429403c795edba2ce3" "00cc035877534f"
)
#: The same at model revision 5 (kinds to 56): it must decode as it did.
GOLDEN_EMPTY_KINDS_TO_56 = bytes.fromhex(
    "89534d5802011201000405" "0e10090508d5efffffffffff01c1" "12cc7dcb" "00" "00" "00000000")
GOLDEN_TEXT_KINDS_TO_56 = bytes.fromhex(
    "89534d5802011201000405" "0e10090508d5efffffffffff01c1" "12cc7dcb" "01cc0316cf5877534f"
    "82ca34510b5d4807c9b0e47b51f6396c3f07ec4ce6fd" "00cc035877534f"
)
#: The same, written by level 2 before kinds 52-56 and model revision 5: it must decode as it did.
GOLDEN_EMPTY_KINDS_TO_51 = bytes.fromhex(
    "89534d5802011101000404" "0e10090507d5efffffffff0fc1" "9f3efd34" "00" "00" "00000000")
GOLDEN_TEXT_KINDS_TO_51 = bytes.fromhex(
    "89534d5802011101000404" "0e10090507d5efffffffff0fc1" "9f3efd34" "01cc0316cf5877534f"
    "839d8280bde3947120a2a428c998a1e59d3ab624d425" "00cc035877534f"
)
#: The same, written by level 2 without the shape contexts (kinds 44-51): it must decode as it did.
GOLDEN_EMPTY_KINDS_TO_43 = bytes.fromhex(
    "89534d5802011001000404" "0e10090506d5efffffff0fc1" "59d6e1bf" "00" "00" "00000000")
GOLDEN_TEXT_KINDS_TO_43 = bytes.fromhex(
    "89534d5802011001000404" "0e10090506d5efffffff0fc1" "59d6e1bf" "01cc0316cf5877534f"
    "8557fd3b26899c4cdd005c644b123c5d0c52498d11b4" "00cc035877534f"
)
#: The same, written by level 2 without the last word, token, sentence, next word and emphasis
#: contexts (kinds 39-43): it must decode as it did.
GOLDEN_EMPTY_KINDS_TO_38 = bytes.fromhex(
    "89534d5802010f01000404" "0e10090505d5efffff7fc1" "110ba720" "00" "00" "00000000")
GOLDEN_TEXT_KINDS_TO_38 = bytes.fromhex(
    "89534d5802010f01000404" "0e10090505d5efffff7fc1" "110ba720" "01cc0317595877534f"
    "86956581d51b6f5a588716d14b07245a48cd05c1d7018c" "00cc035877534f"
)
#: The same, written by level 2 without the word in markup and name position contexts (kinds 37, 38):
#: it must decode as it did.
GOLDEN_EMPTY_KINDS_TO_36 = bytes.fromhex(
    "89534d5802010f01000404" "0e10090505d5efffff1fc1" "b6605a45" "00" "00" "00000000")
GOLDEN_TEXT_KINDS_TO_36 = bytes.fromhex(
    "89534d5802010f01000404" "0e10090505d5efffff1fc1" "b6605a45" "01cc0317595877534f"
    "87346b87e6ba0ff790ce79a356b66221c5293ebf648363" "00cc035877534f"
)
#: The same, written by level 2 with model revision 3 and 4 APMs: it must decode as it did.
GOLDEN_EMPTY_MODEL_REVISION_3 = bytes.fromhex(
    "89534d5802010f01000403" "0e10090405d5efffff1fc1" "a78968fd" "00" "00" "00000000")
GOLDEN_TEXT_MODEL_REVISION_3 = bytes.fromhex(
    "89534d5802010f01000403" "0e10090405d5efffff1fc1" "a78968fd" "01cc0317595877534f"
    "87334d7799381669aa92798850202b859fc8eb33c362ca" "00cc035877534f"
)
#: The same, written by level 2 with orders 3, 5 and 6 where letters, word opener and markup name
#: are now (kinds 0-11, 13-33): it must decode as it did.
GOLDEN_EMPTY_ORDERS_3_5_6 = bytes.fromhex(
    "89534d5802010f01000403" "0e10090405ffefffff03c1" "aaf228bd" "00" "00" "00000000")
GOLDEN_TEXT_ORDERS_3_5_6 = bytes.fromhex(
    "89534d5802010f01000403" "0e10090405ffefffff03c1" "aaf228bd" "01cc0317595877534f"
    "87334d7799381669aa922954ab1c74fc1a3d87c58b12aa" "00cc035877534f"
)
#: The same, written by level 2 with model revision 2: it must decode as it did.
GOLDEN_EMPTY_MODEL_REVISION_2 = bytes.fromhex(
    "89534d5802010f01000402" "0e10090405ffefffff03c1" "c5be8d26" "00" "00" "00000000")
GOLDEN_TEXT_MODEL_REVISION_2 = bytes.fromhex(
    "89534d5802010f01000402" "0e10090405ffefffff03c1" "c5be8d26" "01cc0317595877534f"
    "872f4742332ee692525bf68931062447a8c4a16fd6eb1d" "00cc035877534f"
)
#: The same, written by level 2 with model revision 1 and eight mixers: it must decode as it did.
GOLDEN_EMPTY_MODEL_REVISION_1 = bytes.fromhex(
    "89534d5802010f01000401" "0e10080405ffefffff03c1" "76786846" "00" "00" "00000000")
GOLDEN_TEXT_MODEL_REVISION_1 = bytes.fromhex(
    "89534d5802010f01000401" "0e10080405ffefffff03c1" "76786846" "01cc0317595877534f"
    "872a8c85b763acf775f1d7ca03192a1b19b5f22f59f4f4" "00cc035877534f"
)
#: The same, written by level 2 before model revision 1 and its eighth mixer (a ``00 03`` record: the
#: mixers' first learning rates, 7 mixers): it must decode as it did.
GOLDEN_EMPTY_FIRST_RATES = bytes.fromhex("89534d5802010e0100030e10070405ffefffff03c1beceba19" "00" "00" "00000000")
GOLDEN_TEXT_FIRST_RATES = bytes.fromhex(
    "89534d5802010e0100030e10070405ffefffff03c1beceba19"  # header
    "01cc0318c85877534f" "80056eb4a76c921721eeab4bb675edd4956ab6a80723fe46" "00cc035877534f"
)
#: The same, written by level 2 while it had byte histories at every input size (bit 5 of the
#: record's last byte: e1); today only a level 2 for 512 KiB or more, or of unknown size, has them
GOLDEN_EMPTY_BYTE_HISTORIES = bytes.fromhex(
    "89534d5802010e0100030e10070405ffefffff03e1" "76eed422" "00" "00" "00000000")
GOLDEN_TEXT_BYTE_HISTORIES = bytes.fromhex(
    "89534d5802010e0100030e10070405ffefffff03e1" "76eed422"  # header, as above
    "01" "cc03" "19" "5e" "5877534f"  # modelled block: raw length 460, payload 25, check, CRC32
    "80056eb4a76c921721eeab4bb675edd484fa5f58a935d4de03"  # the range coder's code word
    "00" "cc03" "5877534f"  # end block: length 460, CRC32
)
#: The same, written by level 2 before word trio, column, sparse 2 and line start joined it (29
#: contexts: kinds 0-9, 11, 14-18, 21-33; the code word as before the record contexts, since the
#: detector finds no record in this text and the x86 instruction contexts are idle outside x86 blocks)
GOLDEN_EMPTY_29_CONTEXTS = bytes.fromhex(
    "89534d5802010e0100030e10070405ffcbe7ff03c10a3856b8" "00" "00" "00000000")
GOLDEN_TEXT_29_CONTEXTS = bytes.fromhex(
    "89534d5802010e0100030e10070405ffcbe7ff03c10a3856b8" "01cc0318c85877534f"
    "801782ef10140833a2661990ab3885b601250fc4586656ff" "00cc035877534f"
)
#: The same, written by level 2 before the x86 instruction contexts (a ``00 02`` record: kinds 0-31).
GOLDEN_EMPTY_32_KINDS = bytes.fromhex("89534d5802010c0100020e100704ffcbe7ffc1a068ae76" "00" "00" "00000000")
GOLDEN_TEXT_32_KINDS = bytes.fromhex(
    "89534d5802010c0100020e100704ffcbe7ffc1a068ae76" "01cc0318c85877534f"
    "801782ef10140833a2661990ab3885b601250fc4586656ff" "00cc035877534f"
)
#: The same, written by level 2 with revision 1 of the record detector (``81``: bit 7, no 8-bit image
#: contexts): streams of older builds must decode as they did.
GOLDEN_EMPTY_REVISION_1 = bytes.fromhex("89534d5802010c0100020e100704ffcbe71f81dcda0c5e" "00" "00" "00000000")
GOLDEN_TEXT_REVISION_1 = bytes.fromhex(
    "89534d5802010c0100020e100704ffcbe71f81dcda0c5e"  # header: mask 0-9, 11, 14-18, 21-28; source byte 81
    "01" "cc03" "18" "c8" "5877534f"  # modelled block: raw length 460, payload 24, check, CRC32
    "801782ef10140833a2661990ab3885b601250fc4586656ff"  # the range coder's code word
    "00" "cc03" "5877534f"  # end block: length 460, CRC32
)
#: The same, written by level 2 with the first record detector (revision 0, blind to text; its
#: records in text are pinned by test_structure's FIRST_DETECTOR_STREAM): streams of older builds must
#: decode as they did.
GOLDEN_EMPTY_UNGATED = bytes.fromhex(
    "89534d58"  # magic
    "02"  # format version
    "01"  # arithmetic version
    "0c"  # model record length
    "01" "0002" "0e10" "0704" "ffcbe71f" "01"  # model record: cm (id 1), component set: table_bits,
    #       hist_bits, mixers, APMs, mask of context kinds (0-9, 11, 14-18, 21-28), byte-distribution source
    "fc59b4b3"  # header CRC32
    "00"  # end block
    "00"  # original length 0
    "00000000"  # CRC32 of no data
)
GOLDEN_TEXT_UNGATED = bytes.fromhex(
    "89534d580201" "0c" "010002" "0e100704" "ffcbe71f" "01" "fc59b4b3"  # header, as above
    "01" "cc03" "17" "59" "5877534f"  # modelled block: raw length 460, payload 23, check, CRC32
    "801782ef10140833a2661990ab3885b601250fc4586657"  # the range coder's code word
    "00" "cc03" "5877534f"  # end block: length 460, CRC32
)
#: The same, written by level 2 before its record contexts (issue 14: 16 contexts, kinds 0-9, 11,
#: 14-18): streams of older builds must decode as they did.
GOLDEN_EMPTY_16_CONTEXTS = bytes.fromhex("89534d5802010c0100020e100704ffcb070001c2870cd7" "00" "00" "00000000")
GOLDEN_TEXT_16_CONTEXTS = bytes.fromhex(
    "89534d5802010c0100020e100704ffcb070001c2870cd7"  # header
    "01" "cc03" "18" "c8" "5877534f"  # modelled block: raw length 460, payload 24, check, CRC32
    "801782ef10140833a2661990ab3885b601250fc4586656ff"  # the range coder's code word
    "00" "cc03" "5877534f"  # end block: length 460, CRC32
)
#: The same, written by level 2 before its text contexts (first record: 10 contexts, 3 mixers, 2
#: APMs): streams of older builds must decode as they did.
GOLDEN_EMPTY_10_CONTEXTS = bytes.fromhex("89534d58020106010e100a030295e33cb9" "00" "00" "00000000")
GOLDEN_TEXT_10_CONTEXTS = bytes.fromhex(
    "89534d58020106010e100a030295e33cb9"  # header
    "01" "cc03" "16" "cf" "5877534f"  # modelled block: raw length 460, payload 22, check, CRC32
    "80e0cb40ccd60ba77686eda57c83541525e3d396bb97"  # the range coder's code word
    "00" "cc03" "5877534f"  # end block: length 460, CRC32
)


@functools.cache
def stream(data: bytes) -> bytes:
    """``statemix.compress(data)`` with the real block size, whichever test asks first (the cache
    must not keep a stream made under the small_blocks fixture)."""
    return _compress_in_blocks_of(REAL_BLOCK_SIZE, data)


def _compress_in_blocks_of(size: int, data: bytes) -> bytes:
    saved = container.BLOCK_SIZE
    container.BLOCK_SIZE = size
    try:
        return statemix.compress(data)
    finally:
        container.BLOCK_SIZE = saved


def text_stream() -> bytes:
    return stream(TEXT)


def golden_input_stream() -> bytes:
    """The stream of GOLDEN_INPUT made by this build (tests other than the golden ones use it)."""
    return stream(GOLDEN_INPUT)


def block_kinds(data: bytes) -> list[str]:
    return [block.kind for s in statemix.read_info(io.BytesIO(data)) for block in s.blocks]


SMALL_BLOCK = 32
REAL_BLOCK_SIZE = container.BLOCK_SIZE  # as imported, before any test patches it
#: four blocks of SMALL_BLOCK bytes; the third is random, so it is stored
MULTI_BLOCK_INPUT = text_sample(60, seed=3) + random.Random(5).randbytes(48) + text_sample(20, seed=4)


@pytest.fixture
def small_blocks(monkeypatch):
    """Make writers cut a block every SMALL_BLOCK bytes, so small inputs give multi-block streams."""
    monkeypatch.setattr(container, "BLOCK_SIZE", SMALL_BLOCK)
    return SMALL_BLOCK


@functools.cache
def multi_block_stream() -> bytes:
    data = _compress_in_blocks_of(SMALL_BLOCK, MULTI_BLOCK_INPUT)
    kinds = block_kinds(data)
    assert len(kinds) == 4, "the BLOCK_SIZE hook no longer makes multi-block streams"
    assert kinds[2] == "stored"
    return data


@functools.cache
def zstandard_stream(data: bytes) -> bytes:
    """A stream whose one block is a zstandard frame, made by hand from the format's parts.

    (The model now beats zstandard on every small input, so the writer itself rarely makes one.)
    """
    payload = zstandard.ZstdCompressor(level=19, write_content_size=False).compress(data)
    assert len(payload) < len(data)
    return (container.write_header(spec_for_level(None, len(data)))
            + container.write_block(container.ZSTANDARD, data, payload)
            + container.write_trailer(len(data), zlib.crc32(data)))


@functools.cache
def learned_stream(data: bytes) -> bytes:
    """``data`` twice: a "zstandard learned" block (the model learned it, as the writer does with a
    block it coded and lost), then a modelled block coded by the model that learned the first."""
    spec = spec_for_level(None, 2 * len(data))
    model = statemix.models.build_model(spec)
    model.learn(data)
    coded = model.encode(data, len(data))
    payload = zstandard.ZstdCompressor(level=19, write_content_size=False).compress(data)
    return (container.write_header(spec) + container.write_block(container.ZSTANDARD_LEARNED, data, payload)
            + container.write_block(container.MODELLED, data, coded)
            + container.write_trailer(2 * len(data), zlib.crc32(data * 2)))


def patch_header(data: bytes, offset: int, value: int) -> bytes:
    """Set header byte ``offset`` to ``value`` and recompute the header CRC32 (see container.py)."""
    out = bytearray(data)
    out[offset] = value
    end = 7 + out[6]
    out[end : end + 4] = struct.pack("<I", zlib.crc32(bytes(out[:end])))
    return bytes(out)


# ---------------------------------------------------------------------------------------------------
# Public names


def test_public_names_are_pinned():
    assert sorted(statemix.__all__) == [
        "Compressor",
        "Decompressor",
        "StatemixError",
        "StatemixFile",
        "StreamInfo",
        "StreamsDecompressor",
        "compress",
        "decompress",
        "open",
        "read_info",
    ]
    for name in statemix.__all__:
        assert getattr(statemix, name) is not None
    namespace: dict = {}
    exec("from statemix import *", namespace)
    assert sorted(k for k in namespace if k != "__builtins__") == sorted(statemix.__all__)


def test_error_class_and_version():
    assert issubclass(StatemixError, Exception)
    assert isinstance(statemix.__version__, str) and statemix.__version__
    assert (pathlib.Path(statemix.__file__).parent / "py.typed").is_file()


# ---------------------------------------------------------------------------------------------------
# Compressor


def test_compressor_10_byte_slices_and_empty_chunks_equal_one_shot():
    compressor = Compressor(size_hint=len(TEXT))
    out = [compressor.compress(b"")]
    for i in range(0, len(TEXT), 10):
        out.append(compressor.compress(TEXT[i : i + 10]))
        out.append(compressor.compress(b""))
    out.append(compressor.flush())
    assert b"".join(out) == text_stream()


def test_compressor_one_chunk_equals_one_shot():
    compressor = Compressor(size_hint=len(TEXT))
    assert compressor.compress(TEXT) + compressor.flush() == text_stream()


def test_compressor_flush_only_is_the_empty_stream():
    assert Compressor(size_hint=0).flush() == GOLDEN_EMPTY


def test_compressor_accepts_bytes_like_objects():
    expected = stream(ALL_BYTES)
    for data in (bytearray(ALL_BYTES), memoryview(ALL_BYTES), array.array("B", ALL_BYTES)):
        compressor = Compressor(size_hint=len(ALL_BYTES))
        assert compressor.compress(data) + compressor.flush() == expected
    words = array.array("I", ALL_BYTES[:64])  # 64 four-byte items: 256 bytes
    compressor = Compressor(size_hint=words.itemsize * len(words))
    out = compressor.compress(words) + compressor.flush()
    assert statemix.decompress(out) == words.tobytes()


def test_compressor_rejects_str():
    with pytest.raises(TypeError):
        Compressor(size_hint=4).compress("text")


def test_compressor_flush_twice_raises_valueerror():
    compressor = Compressor(size_hint=3)
    compressor.compress(b"abc")
    compressor.flush()
    with pytest.raises(ValueError):
        compressor.flush()


def test_compressor_compress_after_flush_raises_valueerror():
    compressor = Compressor(size_hint=3)
    compressor.flush()
    with pytest.raises(ValueError):
        compressor.compress(b"abc")


@pytest.mark.parametrize("options", [dict(level=0), dict(level=4), dict(level=-1), dict(threads=0),
                                     dict(threads=-2)])
def test_compressor_bad_options_raise_valueerror(options):
    with pytest.raises(ValueError):
        Compressor(size_hint=10, **options)


def test_compressor_without_size_hint_round_trips():
    compressor = Compressor()
    data = GOLDEN_INPUT
    out = compressor.compress(data[:100]) + compressor.compress(data[100:]) + compressor.flush()
    assert statemix.decompress(out) == data


@EVERY_MODEL
@pytest.mark.parametrize("level", [1, 2, 3])
def test_levels_round_trip(level):
    out = statemix.compress(TEXT, level=level)
    assert statemix.decompress(out) == TEXT


def test_size_hint_is_recorded_and_streaming_equals_one_shot_only_when_it_matches():
    compressor = Compressor(size_hint=len(TEXT))
    assert compressor.compress(TEXT) + compressor.flush() == text_stream()
    other = Compressor(size_hint=1 << 20)
    different = other.compress(TEXT) + other.flush()
    assert different != text_stream()  # the tables differ, and the header says so
    assert statemix.decompress(different) == TEXT


def test_threads_never_change_the_output(side_jobs):
    data = TEXT[:1000] + RANDOM[:1000]  # the random half makes the compressor try zstandard as well
    one = statemix.compress(data, threads=1)
    assert side_jobs == []
    assert statemix.compress(data, threads=2) == one
    assert side_jobs and threading.get_ident() not in side_jobs  # zstandard ran beside the model
    compressor = Compressor(size_hint=len(data), threads=2)
    assert b"".join(compressor.compress(data[i : i + 10]) for i in range(0, len(data), 10)) + \
        compressor.flush() == one


def test_two_compressors_interleaved_are_independent():
    a, b = TEXT, GOLDEN_INPUT
    ca, cb = Compressor(size_hint=len(a)), Compressor(size_hint=len(b))
    out_a, out_b = [], []
    for i in range(0, max(len(a), len(b)), 10):
        out_a.append(ca.compress(a[i : i + 10]))
        out_b.append(cb.compress(b[i : i + 10]))
    out_a.append(ca.flush())
    out_b.append(cb.flush())
    assert b"".join(out_a) == text_stream()
    assert b"".join(out_b) == golden_input_stream()


def test_two_compressors_in_two_threads_give_the_same_bytes_as_alone():
    inputs = [TEXT, GOLDEN_INPUT, RANDOM]
    expected = [stream(data) for data in inputs]
    results: list = [None] * len(inputs)

    def work(k):
        results[k] = statemix.compress(inputs[k])

    threads = [threading.Thread(target=work, args=(k,)) for k in range(len(inputs))]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert results == expected


def test_compressor_cuts_blocks_independently_of_how_the_input_is_fed(small_blocks):
    data = MULTI_BLOCK_INPUT
    one_shot = statemix.compress(data)
    assert one_shot == multi_block_stream()
    assert len(block_kinds(one_shot)) == -(-len(data) // small_blocks)
    for step in (1, 10, small_blocks - 1, small_blocks, small_blocks + 1, 1000):
        compressor = Compressor(size_hint=len(data))
        out = b"".join(compressor.compress(data[i : i + step]) for i in range(0, len(data), step))
        assert out + compressor.flush() == one_shot, step
    assert statemix.decompress(one_shot) == data


def test_zstandard_block_round_trips():
    data = REPEATED_RANDOM
    assert block_kinds(zstandard_stream(data)) == ["zstandard"]
    assert statemix.decompress(zstandard_stream(data)) == data
    # the model learned the block: a modelled block after it decodes as well
    assert statemix.decompress(zstandard_stream(data) + stream(data)) == data * 2
    with statemix.open(io.BytesIO(zstandard_stream(data))) as f:
        assert f.read() == data


def test_incompressible_block_is_stored():
    assert block_kinds(stream(RANDOM)) == ["stored"]
    assert statemix.decompress(stream(RANDOM)) == RANDOM


# ---------------------------------------------------------------------------------------------------
# Decompressor


def test_decompressor_initial_state():
    decompressor = Decompressor()
    assert decompressor.eof is False
    assert decompressor.needs_input is True
    assert decompressor.unused_data == b""


def test_decompressor_10_byte_slices_and_empty_chunks():
    data = text_stream()
    decompressor = Decompressor()
    out = [decompressor.decompress(b"")]
    assert decompressor.needs_input
    for i in range(0, len(data), 10):
        assert not decompressor.eof
        out.append(decompressor.decompress(data[i : i + 10]))
        if not decompressor.eof:
            out.append(decompressor.decompress(b""))
    assert decompressor.eof
    assert decompressor.needs_input is False
    assert decompressor.unused_data == b""
    assert b"".join(out) == TEXT


def test_decompressor_one_byte_at_a_time(small_blocks):
    data = multi_block_stream()
    decompressor = Decompressor()
    out = bytearray()
    for i in range(len(data)):
        assert not decompressor.eof
        out += decompressor.decompress(data[i : i + 1])
    assert decompressor.eof
    assert bytes(out) == MULTI_BLOCK_INPUT


def test_decompressor_max_length():
    decompressor = Decompressor()
    first = decompressor.decompress(text_stream(), max_length=100)
    assert first == TEXT[:100]
    assert decompressor.needs_input is False  # output is still buffered
    assert decompressor.eof is False
    out = [first]
    while not decompressor.eof:
        piece = decompressor.decompress(b"", max_length=100)
        assert len(piece) <= 100
        out.append(piece)
    assert b"".join(out) == TEXT
    assert decompressor.unused_data == b""


def test_decompressor_max_length_zero_and_one():
    decompressor = Decompressor()
    assert decompressor.decompress(text_stream(), max_length=0) == b""
    assert not decompressor.eof
    assert decompressor.decompress(b"", max_length=1) == TEXT[:1]
    assert decompressor.decompress(b"") == TEXT[1:]
    assert decompressor.eof


@pytest.mark.parametrize("max_length", [1, 7, SMALL_BLOCK, 1000])
def test_decompressor_max_length_with_chunked_input(max_length, small_blocks):
    # the loop of the stdlib's DecompressReader: feed input only when needs_input says so
    data = multi_block_stream()
    decompressor = Decompressor()
    pos = 0
    out = []
    while not decompressor.eof:
        if decompressor.needs_input:
            chunk = data[pos : pos + 10]
            assert chunk, "needs_input while the whole stream was given"
            pos += 10
        else:
            chunk = b""
        piece = decompressor.decompress(chunk, max_length)
        assert len(piece) <= max_length
        out.append(piece)
    assert pos >= len(data)
    assert b"".join(out) == MULTI_BLOCK_INPUT


def test_decompressor_eof_and_unused_data():
    decompressor = Decompressor()
    assert decompressor.decompress(text_stream() + b"trailing data") == TEXT
    assert decompressor.eof
    assert decompressor.needs_input is False
    assert decompressor.unused_data == b"trailing data"


def test_decompressor_stops_at_the_end_of_one_stream():
    second = stream(GOLDEN_INPUT)
    decompressor = Decompressor()
    assert decompressor.decompress(text_stream() + second) == TEXT
    assert decompressor.eof
    assert decompressor.unused_data == second


def test_decompressor_unused_data_split_across_calls():
    data = text_stream() + b"xyz"
    decompressor = Decompressor()
    out = decompressor.decompress(data[:-5]) + decompressor.decompress(data[-5:])
    assert out == TEXT
    assert decompressor.unused_data == b"xyz"


def test_decompressor_raises_eoferror_after_eof():
    decompressor = Decompressor()
    decompressor.decompress(GOLDEN_EMPTY)
    assert decompressor.eof
    with pytest.raises(EOFError):
        decompressor.decompress(b"")
    with pytest.raises(EOFError):
        decompressor.decompress(GOLDEN_EMPTY)


def test_decompressor_truncated_input_is_not_an_error_until_the_caller_says_so():
    decompressor = Decompressor()
    assert decompressor.decompress(text_stream()[:-1]) == TEXT  # the block itself was complete
    assert not decompressor.eof
    assert decompressor.needs_input


def test_decompressor_foreign_input_raises():
    with pytest.raises(StatemixError):
        Decompressor().decompress(b"this is not a statemix stream")
    with pytest.raises(StatemixError):
        Decompressor().decompress(zlib.compress(TEXT))


def test_decompressor_bad_threads_raise():
    with pytest.raises(ValueError):
        Decompressor(threads=0)


# ---------------------------------------------------------------------------------------------------
# One-shot compress() and decompress()

ROUND_TRIP_INPUTS = {
    "empty": b"",
    "one byte": b"\x00",
    "one letter": b"a",
    "all byte values": ALL_BYTES,
    "all byte values reversed, twice": ALL_BYTES[::-1] * 2,
    "invalid utf-8": INVALID_UTF8,
    "zeros": bytes(5000),
    "text": TEXT,
    "random": RANDOM,
    "repeated random": REPEATED_RANDOM,
    "golden": GOLDEN_INPUT,
}


@pytest.mark.parametrize("name", list(ROUND_TRIP_INPUTS))
def test_round_trip(name):
    data = ROUND_TRIP_INPUTS[name]
    compressed = statemix.compress(data)
    assert isinstance(compressed, bytes)
    assert statemix.decompress(compressed) == data


def test_compress_accepts_bytes_like_objects():
    expected = stream(INVALID_UTF8)
    assert statemix.compress(bytearray(INVALID_UTF8)) == expected
    assert statemix.compress(memoryview(INVALID_UTF8)) == expected
    assert statemix.decompress(bytearray(expected)) == INVALID_UTF8
    assert statemix.decompress(memoryview(expected)) == INVALID_UTF8


def test_compress_and_decompress_reject_str():
    with pytest.raises(TypeError):
        statemix.compress("text")
    with pytest.raises(TypeError):
        statemix.decompress("text")


def test_options_are_keyword_only():
    with pytest.raises(TypeError):
        statemix.compress(b"abc", 2)  # type: ignore[misc]
    with pytest.raises(TypeError):
        Compressor(2)  # type: ignore[misc]


@pytest.mark.parametrize("size", [0, 1, 100, 2000])
def test_random_input_grows_by_at_most_64_bytes(size):
    data = RANDOM[:size]
    compressed = statemix.compress(data)
    assert len(compressed) <= len(data) + 64
    assert statemix.decompress(compressed) == data


def test_compressible_input_shrinks():
    assert len(stream(bytes(5000))) < 100
    assert len(text_stream()) < len(TEXT) // 2


def test_decompress_concatenated_streams():
    parts = [TEXT, b"", GOLDEN_INPUT, RANDOM[:50], b""]
    data = b"".join(stream(part) for part in parts)
    assert statemix.decompress(data) == b"".join(parts)


def test_decompress_concatenation_of_empty_streams():
    assert statemix.decompress(GOLDEN_EMPTY * 3) == b""


def test_decompress_empty_input_raises():
    with pytest.raises(StatemixError, match="empty"):
        statemix.decompress(b"")


@pytest.mark.parametrize("garbage", [b"\x00", b"junk", b"\x89", b"\x89SMX", b"\x89SMX\x01\x01",
                                     GOLDEN_EMPTY[:-1], bytes(100)])
def test_decompress_trailing_garbage_raises(garbage):
    with pytest.raises(StatemixError):
        statemix.decompress(text_stream() + garbage)


def test_decompress_foreign_data_raises():
    for data in (b"x", TEXT, zlib.compress(TEXT), b"\x89PNG\r\n\x1a\n"):
        with pytest.raises(StatemixError):
            statemix.decompress(data)


# ---------------------------------------------------------------------------------------------------
# StatemixFile and open()


def write_file(target, data: bytes, mode: str = "wb", **kwargs) -> None:
    with statemix.open(target, mode, **kwargs) as f:
        assert f.write(data) == len(data)


def test_file_write_then_read_through_file_objects():
    buffer = io.BytesIO()
    with StatemixFile(buffer, "w") as f:
        assert f.writable() and not f.readable() and not f.seekable()
        for i in range(0, len(GOLDEN_INPUT), 10):
            f.write(GOLDEN_INPUT[i : i + 10])
        assert f.tell() == len(GOLDEN_INPUT)
    assert not buffer.closed  # a file object given by the caller stays open
    assert statemix.decompress(buffer.getvalue()) == GOLDEN_INPUT
    buffer.seek(0)
    with StatemixFile(buffer) as f:
        assert f.readable() and not f.writable() and f.seekable()
        assert f.read() == GOLDEN_INPUT
        assert f.read() == b""
        assert f.tell() == len(GOLDEN_INPUT)
    assert not buffer.closed


@pytest.mark.parametrize("kind", [str, bytes, pathlib.Path])
def test_file_by_path(tmp_path, kind):
    path = tmp_path / "data.smx"
    name = kind(os.fsencode(path)) if kind is bytes else kind(path)
    write_file(name, GOLDEN_INPUT)
    assert statemix.decompress(path.read_bytes()) == GOLDEN_INPUT
    with statemix.open(name) as f:
        assert isinstance(f, StatemixFile)
        assert isinstance(f.fileno(), int)
        assert f.read() == GOLDEN_INPUT


def test_file_reads_streams_from_the_one_shot_function(tmp_path):
    path = tmp_path / "data.smx"
    path.write_bytes(text_stream())
    with statemix.open(path, "r") as f:
        assert f.read() == TEXT


def test_file_modes(tmp_path):
    path = tmp_path / "m.smx"
    for mode in ("x", "xb"):
        path.unlink(missing_ok=True)
        write_file(path, b"first", mode)
        with pytest.raises(FileExistsError):
            statemix.open(path, mode)
    for mode in ("w", "wb"):
        write_file(path, b"second", mode)
        with statemix.open(path, "rb") as f:
            assert f.read() == b"second"
    for mode in ("a", "ab"):
        write_file(path, b"+more", mode)
    for mode in ("r", "rb"):
        with statemix.open(path, mode) as f:
            assert f.read() == b"second+more+more"
    assert statemix.decompress(path.read_bytes()) == b"second+more+more"


@pytest.mark.parametrize("mode", ["", "rw", "wr", "rb+", "U", "wbt", "z"])
def test_file_invalid_modes(mode):
    with pytest.raises(ValueError):
        StatemixFile(io.BytesIO(), mode)


@pytest.mark.parametrize("mode", ["rbt", "wtb", "z", "r+"])
def test_open_invalid_modes(mode):
    with pytest.raises(ValueError):
        statemix.open(io.BytesIO(), mode)


def test_file_rejects_objects_that_are_not_files():
    with pytest.raises(TypeError):
        StatemixFile(42)
    with pytest.raises(TypeError):
        statemix.open(None)


@pytest.mark.parametrize("option", ["encoding", "errors", "newline"])
def test_open_binary_mode_rejects_text_options(option):
    with pytest.raises(ValueError):
        statemix.open(io.BytesIO(), "wb", **{option: "utf-8" if option != "newline" else "\n"})


@pytest.mark.parametrize("encoding", ["utf-8", "latin-1", "utf-16-le"])
def test_open_text_mode_with_encoding(tmp_path, encoding):
    text = "Grüße, café\nzweite Zeile\n"
    path = tmp_path / "t.smx"
    with statemix.open(path, "wt", encoding=encoding) as f:
        f.write(text)
    # (not "utf-16": TextIOWrapper writes its BOM only to seekable files, so a non-seekable writer
    # cannot round-trip it; lzma.open has the same limitation)
    assert statemix.decompress(path.read_bytes()).decode(encoding) == text
    with statemix.open(path, "rt", encoding=encoding) as f:
        assert f.readlines() == text.splitlines(keepends=True)


def test_open_text_mode_newline_and_errors(tmp_path):
    path = tmp_path / "t.smx"
    with statemix.open(path, "wt", encoding="ascii", errors="replace", newline="\r\n") as f:
        f.write("a\u00e9\nb\n")
    assert statemix.decompress(path.read_bytes()) == b"a?\r\nb\r\n"
    with statemix.open(path, "rt", encoding="ascii", newline="") as f:
        assert f.read() == "a?\r\nb\r\n"
    with statemix.open(path, "rt", encoding="ascii") as f:
        assert f.read() == "a?\nb\n"


def open_descriptors() -> int:
    return len(os.listdir("/proc/self/fd"))


@pytest.mark.skipif(not os.path.isdir("/proc/self/fd"), reason="needs /proc/self/fd")
def test_file_close_twice_is_safe_and_closes_paths(tmp_path):
    before = open_descriptors()
    f = statemix.open(tmp_path / "c.smx", "wb")
    assert open_descriptors() == before + 1
    f.write(b"abc")
    f.close()
    assert f.closed
    assert open_descriptors() == before
    f.close()
    assert f.closed
    f = statemix.open(tmp_path / "c.smx")
    assert open_descriptors() == before + 1
    f.close()
    f.close()
    assert f.closed
    assert open_descriptors() == before
    with statemix.open(tmp_path / "c.smx") as f:
        assert f.read() == b"abc"
    assert f.closed
    assert open_descriptors() == before


def test_file_operations_after_close_raise_valueerror(tmp_path):
    path = tmp_path / "c.smx"
    write_file(path, b"abc")
    reader = statemix.open(path)
    reader.close()
    writer = statemix.open(io.BytesIO(), "wb")
    writer.close()
    for call in (reader.read, reader.read1, reader.readline, reader.peek, reader.tell, reader.fileno,
                 reader.readable, lambda: writer.write(b"x"), writer.tell, writer.writable):
        with pytest.raises(ValueError):
            call()
    with pytest.raises(ValueError):
        with reader:
            pass


def test_file_context_manager_closes_on_error():
    buffer = io.BytesIO()
    with pytest.raises(RuntimeError):
        with statemix.open(buffer, "wb") as f:
            f.write(GOLDEN_INPUT)
            raise RuntimeError
    assert f.closed
    assert statemix.decompress(buffer.getvalue()) == GOLDEN_INPUT


def test_file_wrong_direction_raises_unsupported_operation():
    with statemix.open(io.BytesIO(), "wb") as f:
        with pytest.raises(io.UnsupportedOperation):
            f.read()
        with pytest.raises(io.UnsupportedOperation):
            f.readline()
    with statemix.open(io.BytesIO(GOLDEN_EMPTY)) as f:
        with pytest.raises(io.UnsupportedOperation):
            f.write(b"x")


def test_file_read_sizes_read1_readline_peek_readinto():
    data = b"line one\nline two\n\nlast line without newline"
    with statemix.open(io.BytesIO(stream(data))) as f:
        assert f.read(0) == b""
        peeked = f.peek(4)
        assert data.startswith(peeked) and len(peeked) >= 4
        assert f.tell() == 0  # peek does not advance
        assert f.read(5) == b"line "
        chunk = f.read1(3)
        assert 1 <= len(chunk) <= 3 and data[5:].startswith(chunk)
        rest_of_line = f.readline()
        assert (b"line " + chunk + rest_of_line) == b"line one\n"
        assert f.readline(4) == b"line"
        assert f.readline() == b" two\n"
        assert f.readline() == b"\n"
        target = bytearray(4)
        assert f.readinto(target) == 4 and target == b"last"
        assert f.tell() == len(data) - len(b" line without newline")
        assert f.read1() == b" line without newline"
        assert f.readline() == b"" and f.read1() == b"" and f.read(10) == b"" and f.peek() == b""
        assert f.tell() == len(data)


def test_file_iteration_and_readlines():
    data = b"".join(b"line %d\n" % i for i in range(50))
    with statemix.open(io.BytesIO(stream(data))) as f:
        assert list(f) == data.splitlines(keepends=True)
    with statemix.open(io.BytesIO(stream(data))) as f:
        assert f.readlines() == data.splitlines(keepends=True)


def test_file_reads_concatenated_streams():
    parts = [TEXT[:500], b"", GOLDEN_INPUT]
    data = b"".join(stream(part) for part in parts)
    with statemix.open(io.BytesIO(data)) as f:
        assert f.read() == b"".join(parts)
    with statemix.open(io.BytesIO(data)) as f:  # small reads across the stream boundaries
        out = bytearray()
        while piece := f.read(7):
            out += piece
        assert bytes(out) == b"".join(parts)


def test_file_reads_multi_block_streams_in_small_pieces(small_blocks):
    with statemix.open(io.BytesIO(multi_block_stream())) as f:
        out = bytearray()
        while piece := f.read1(5):
            out += piece
    assert bytes(out) == MULTI_BLOCK_INPUT


def test_file_read_truncated_file_raises_eoferror(tmp_path):
    data = stream(GOLDEN_INPUT)
    for cut in range(len(data)):  # every prefix, the empty file included
        with statemix.open(io.BytesIO(data[:cut])) as f:
            with pytest.raises(EOFError):
                f.read()
    path = tmp_path / "truncated.smx"
    path.write_bytes(data[:-3])
    with statemix.open(path) as f:
        assert f.read(len(GOLDEN_INPUT)) == GOLDEN_INPUT  # the block itself is complete
        with pytest.raises(EOFError):
            f.read(1)


def test_file_read_truncated_second_stream_raises_eoferror():
    data = stream(TEXT) + stream(GOLDEN_INPUT)[:-1]
    with statemix.open(io.BytesIO(data)) as f:
        with pytest.raises(EOFError):
            f.read()


@pytest.mark.parametrize("garbage", [b"\x00", b"junk", bytes(20)])
def test_file_read_trailing_garbage_raises_statemixerror(garbage):
    with statemix.open(io.BytesIO(text_stream() + garbage)) as f:
        with pytest.raises(StatemixError):
            f.read()


def test_file_read_corrupt_data_raises_statemixerror():
    data = bytearray(text_stream())
    data[len(data) // 2] ^= 0xFF
    with statemix.open(io.BytesIO(bytes(data))) as f:
        with pytest.raises(StatemixError):
            f.read()


def test_file_write_empty_gives_the_empty_stream():
    buffer = io.BytesIO()
    with statemix.open(buffer, "wb"):
        pass
    assert statemix.decompress(buffer.getvalue()) == b""
    with statemix.open(io.BytesIO(buffer.getvalue())) as f:
        assert f.read() == b""


def test_file_write_accepts_bytes_like_objects():
    buffer = io.BytesIO()
    with statemix.open(buffer, "wb") as f:
        assert f.write(bytearray(b"ab")) == 2
        assert f.write(memoryview(b"cd")) == 2
        assert f.write(array.array("H", [0x6665])) == 2
        assert f.tell() == 6
    assert statemix.decompress(buffer.getvalue()) == b"abcd" + array.array("H", [0x6665]).tobytes()


@pytest.mark.parametrize("options", [dict(level=9), dict(threads=0)])
def test_file_invalid_options_leave_an_existing_file_alone(tmp_path, options):
    # like LZMAFile, options are checked before the file is opened (and truncated) for writing
    path = tmp_path / "precious.smx"
    path.write_bytes(GOLDEN_TEXT)
    with pytest.raises(ValueError):
        statemix.open(path, "wb", **options)
    gc.collect()
    assert path.read_bytes() == GOLDEN_TEXT


@pytest.mark.parametrize("mode,options", [("wb", dict(level=9)), ("wb", dict(threads=0)),
                                          ("rb", dict(threads=0))])
def test_file_failed_construction_can_still_be_closed(tmp_path, mode, options):
    # IOBase.__del__ calls close() on the half-built object (and hides what it raises unless
    # python -X dev); close() must work on it and release the file it opened
    path = tmp_path / "data.smx"
    path.write_bytes(GOLDEN_TEXT)
    f = StatemixFile.__new__(StatemixFile)
    with pytest.raises(ValueError):
        f.__init__(path, mode, **options)
    f.close()
    assert f.closed


@EVERY_MODEL
def test_file_level_is_recorded_in_the_stream():
    outputs = []
    for level in (1, 3):
        buffer = io.BytesIO()
        write_file(buffer, GOLDEN_INPUT, level=level)
        outputs.append(buffer.getvalue())
        assert statemix.decompress(buffer.getvalue()) == GOLDEN_INPUT
    assert statemix.read_info(io.BytesIO(outputs[0]))[0].model != \
        statemix.read_info(io.BytesIO(outputs[1]))[0].model


# ---------------------------------------------------------------------------------------------------
# read_info()


def test_read_info_one_stream():
    (info,) = statemix.read_info(io.BytesIO(text_stream()))
    assert isinstance(info, statemix.StreamInfo)
    assert info.compressed_size == len(text_stream())
    assert info.uncompressed_size == len(TEXT)
    assert info.crc32 == zlib.crc32(TEXT)
    assert [(b.kind, b.raw_length) for b in info.blocks] == [("modelled", len(TEXT))]
    assert 0 < info.blocks[0].payload_length < len(TEXT)
    assert info.model.model_id == 1


def test_read_info_empty_stream():
    (info,) = statemix.read_info(io.BytesIO(GOLDEN_EMPTY))
    assert info.blocks == []
    assert info.compressed_size == len(GOLDEN_EMPTY) == 35
    assert info.uncompressed_size == 0
    assert info.crc32 == 0


def test_read_info_concatenated_and_multi_block_streams(small_blocks):
    parts = [multi_block_stream(), GOLDEN_EMPTY, zstandard_stream(REPEATED_RANDOM), stream(RANDOM)]
    infos = statemix.read_info(io.BytesIO(b"".join(parts)))
    assert [i.compressed_size for i in infos] == [len(p) for p in parts]
    assert [i.uncompressed_size for i in infos] == [len(MULTI_BLOCK_INPUT), 0, len(REPEATED_RANDOM),
                                                     len(RANDOM)]
    assert [len(i.blocks) for i in infos] == [4, 0, 1, 1]
    assert [b.kind for b in infos[2].blocks + infos[3].blocks] == ["zstandard", "stored"]
    assert infos[3].blocks[0].payload_length == len(RANDOM)


def test_read_info_checks_structure_not_contents():
    data = bytearray(golden_input_stream())
    data[-10] ^= 0xFF  # inside the code word (the end block takes 7 bytes): only decoding can tell
    (info,) = statemix.read_info(io.BytesIO(bytes(data)))
    assert info.uncompressed_size == len(GOLDEN_INPUT)
    with pytest.raises(StatemixError):
        statemix.decompress(bytes(data))


def test_read_info_errors():
    with pytest.raises(StatemixError, match="empty"):
        statemix.read_info(io.BytesIO(b""))
    with pytest.raises(StatemixError):
        statemix.read_info(io.BytesIO(b"not a statemix stream"))
    with pytest.raises(StatemixError):
        statemix.read_info(io.BytesIO(golden_input_stream() + b"junk"))
    data = golden_input_stream()
    for cut in range(1, len(data)):
        with pytest.raises(StatemixError):
            statemix.read_info(io.BytesIO(data[:cut]))


# ---------------------------------------------------------------------------------------------------
# Corrupt, truncated and foreign streams


def corruption_cases() -> dict[str, tuple[bytes, bytes]]:
    """name -> (stream, original): every block kind, the empty stream and a multi-block stream."""
    return {
        "empty": (GOLDEN_EMPTY, b""),
        "modelled": (golden_input_stream(), GOLDEN_INPUT),
        "stored": (stream(RANDOM[:24]), RANDOM[:24]),
        "zstandard": (zstandard_stream(REPEATED_RANDOM), REPEATED_RANDOM),
        "learned": (learned_stream(REPEATED_RANDOM), REPEATED_RANDOM * 2),
        "multi-block": (multi_block_stream(), MULTI_BLOCK_INPUT),
    }


CORRUPTION_CASES = ["empty", "modelled", "stored", "zstandard", "learned", "multi-block"]


@pytest.mark.parametrize("name", CORRUPTION_CASES)
def test_truncation_at_every_offset_raises_statemixerror(name):
    data, original = corruption_cases()[name]
    assert statemix.decompress(data) == original
    for cut in range(len(data)):
        try:
            statemix.decompress(data[:cut])
        except StatemixError:
            pass
        else:
            pytest.fail(f"no error for the stream truncated to {cut} of {len(data)} bytes")
    decompressor = Decompressor()  # incrementally, a truncated stream is only "not at eof yet"
    out = bytearray()
    for cut in range(len(data)):
        assert not decompressor.eof
        out += decompressor.decompress(data[cut : cut + 1])
    assert decompressor.eof and bytes(out) == original


@pytest.mark.parametrize("name", CORRUPTION_CASES)
@pytest.mark.parametrize("mask", [0x01, 0xFF])
def test_every_flipped_byte_raises_statemixerror_or_gives_the_original(name, mask):
    data, original = corruption_cases()[name]
    for offset in range(len(data)):
        corrupt = bytearray(data)
        corrupt[offset] ^= mask
        try:
            out = statemix.decompress(bytes(corrupt))
        except StatemixError:
            continue
        # only the slack in the last byte of a code word can be changed without effect
        assert out == original, f"wrong data, not an error, for byte {offset} ^ {mask:#x}"


@pytest.mark.parametrize("value", [0, 4, 255])
def test_unknown_format_version(value):
    data = patch_header(GOLDEN_TEXT, 4, value)
    with pytest.raises(StatemixError, match=rf"format version {value}\b"):
        statemix.decompress(data)
    with pytest.raises(StatemixError, match=rf"format version {value}\b"):
        Decompressor().decompress(data)
    with pytest.raises(StatemixError, match=rf"format version {value}\b"):
        statemix.read_info(io.BytesIO(data))
    with pytest.raises(StatemixError, match=rf"format version {value}\b"):
        with statemix.open(io.BytesIO(data)) as f:
            f.read()


@pytest.mark.parametrize("value", [0, 2, 255])
def test_unknown_arithmetic_version(value):
    data = patch_header(GOLDEN_TEXT, 5, value)
    with pytest.raises(StatemixError, match=rf"arithmetic version {value}\b"):
        statemix.decompress(data)
    with pytest.raises(StatemixError, match=rf"arithmetic version {value}\b"):
        statemix.read_info(io.BytesIO(data))


def test_patch_header_helper_keeps_a_valid_stream_valid():
    assert patch_header(GOLDEN_TEXT, 4, 3) == GOLDEN_TEXT
    assert patch_header(GOLDEN_TEXT, 5, 1) == GOLDEN_TEXT
    assert patch_header(GOLDEN_TEXT_V2, 4, 2) == GOLDEN_TEXT_V2


def test_unknown_model_id():
    data = patch_header(GOLDEN_TEXT, 7, 99)
    with pytest.raises(StatemixError, match="model id 99"):
        statemix.decompress(data)


@pytest.mark.parametrize("table_bits,hist_bits", [(0, 0), (11, 16), (255, 16), (14, 15), (14, 255)])
def test_model_configuration_out_of_range(table_bits, hist_bits):
    data = patch_header(patch_header(GOLDEN_TEXT, 8, table_bits), 9, hist_bits)
    with pytest.raises(StatemixError, match="corrupt"):
        statemix.decompress(data)


def test_header_checksum_is_checked():
    data = bytearray(GOLDEN_TEXT)
    data[8] += 1  # table_bits 13, without fixing the CRC32
    with pytest.raises(StatemixError, match="checksum"):
        statemix.decompress(bytes(data))


# ---------------------------------------------------------------------------------------------------
# Golden streams: any change of the format or of the model arithmetic must show up here


def test_golden_empty_stream():
    assert statemix.compress(b"") == GOLDEN_EMPTY
    assert statemix.decompress(GOLDEN_EMPTY) == b""


def test_golden_text_stream():
    assert statemix.compress(GOLDEN_INPUT) == GOLDEN_TEXT
    assert statemix.decompress(GOLDEN_TEXT) == GOLDEN_INPUT


def test_golden_streams_of_format_2_still_decode():
    # the same model and code words, framed as format 2 wrote them (1-byte block header check)
    assert statemix.decompress(GOLDEN_EMPTY_V2, legacy=True) == b""
    assert statemix.decompress(GOLDEN_TEXT_V2, legacy=True) == GOLDEN_INPUT
    assert statemix.decompress(GOLDEN_TEXT_LEVEL1_V2, legacy=True) == GOLDEN_INPUT
    assert statemix.decompress(GOLDEN_TEXT_LEVEL3_V2, legacy=True) == GOLDEN_INPUT
    for golden in (GOLDEN_EMPTY_V2, GOLDEN_TEXT_V2, GOLDEN_TEXT_LEVEL1_V2, GOLDEN_TEXT_LEVEL3_V2):
        assert [s.version for s in statemix.read_info(io.BytesIO(golden))] == [2]


def test_streams_their_size_does_not_bound_are_read_only_on_request_by_every_reader(tmp_path):
    """Format 2 at level 2 (statemix.container, "Streams read only on request"): refused by every
    reader with one message, read by each with ``legacy=True``; ``legacy`` is a reading option."""
    path = tmp_path / "old.smx"
    path.write_bytes(GOLDEN_TEXT_V2)
    readers = {"decompress": lambda **o: statemix.decompress(GOLDEN_TEXT_V2, **o),
               "Decompressor": lambda **o: statemix.Decompressor(**o).decompress(GOLDEN_TEXT_V2),
               "open": lambda **o: statemix.open(path, **o).read(),
               "open, threads": lambda **o: statemix.open(path, threads=2, **o).read()}
    for name, read in readers.items():
        with pytest.raises(StatemixError, match="read only on request"):
            read()
        assert read(legacy=True) == GOLDEN_INPUT, name
    with pytest.raises(StatemixError, match="read only on request"):  # two streams, decoded in parallel
        statemix.decompress(GOLDEN_TEXT_V2 * 2, threads=2)
    assert statemix.decompress(GOLDEN_TEXT_V2 * 2, threads=2, legacy=True) == GOLDEN_INPUT * 2
    with pytest.raises(ValueError, match="only be given when reading"):
        statemix.open(tmp_path / "new.smx", "wb", legacy=True)
    assert not (tmp_path / "new.smx").exists()


#: statemix.compress(GOLDEN_INPUT, model="ssm") before issue 13 took label smoothing out of the ssm
#: level-2 preset (the record says smoothing 0.12): it must decode as it did
GOLDEN_SSM_SMOOTHED = bytes.fromhex(
    "89534d580201430204ff0020021004022001080a0004140002106f12033b6666663f77be7f3f77cc2b320000a0408fc2"
    "f53d9a99993e6f12033b2a00000000000000000000020101000ce5ffb5ca01cc031cd15877534f72d4e0f56d4eab9a5e"
    "073b12c696a855ba4abff5d3d57674233d018d00cc035877534f"
)


@EVERY_MODEL
def test_golden_ssm_stream_with_label_smoothing_still_decodes():
    assert statemix.decompress(GOLDEN_SSM_SMOOTHED, legacy=True) == GOLDEN_INPUT
    assert statemix.compress(GOLDEN_INPUT, model="ssm") != GOLDEN_SSM_SMOOTHED


def test_golden_streams_of_the_first_level_2_still_decode():
    assert statemix.decompress(GOLDEN_EMPTY_10_CONTEXTS, legacy=True) == b""
    assert statemix.decompress(GOLDEN_TEXT_10_CONTEXTS, legacy=True) == GOLDEN_INPUT


def test_golden_stream_of_level_3_with_its_first_ssm_source_still_decodes():
    assert statemix.decompress(GOLDEN_TEXT_LEVEL3_SOURCE_2, legacy=True) == GOLDEN_INPUT


def test_golden_stream_of_level_3_with_the_ssm_from_random_weights_still_decodes():
    assert statemix.decompress(GOLDEN_TEXT_LEVEL3_SOURCE_3, legacy=True) == GOLDEN_INPUT


def test_golden_stream_of_level_3_with_the_first_pretrained_weights_still_decodes():
    assert statemix.decompress(GOLDEN_TEXT_LEVEL3_SOURCE_4, legacy=True) == GOLDEN_INPUT


def test_golden_streams_of_levels_2_and_3_at_model_revision_7_still_decode():
    assert statemix.decompress(GOLDEN_EMPTY_MODEL_REVISION_7, legacy=True) == b""
    assert statemix.decompress(GOLDEN_TEXT_MODEL_REVISION_7, legacy=True) == GOLDEN_INPUT
    assert statemix.decompress(GOLDEN_TEXT_LEVEL3_MODEL_REVISION_7, legacy=True) == GOLDEN_INPUT


def test_golden_streams_of_levels_2_and_3_at_model_revision_6_still_decode():
    assert statemix.decompress(GOLDEN_EMPTY_KINDS_TO_60, legacy=True) == b""
    assert statemix.decompress(GOLDEN_TEXT_KINDS_TO_60, legacy=True) == GOLDEN_INPUT
    assert statemix.decompress(GOLDEN_TEXT_LEVEL3_KINDS_TO_60, legacy=True) == GOLDEN_INPUT


def test_golden_streams_of_levels_2_and_3_at_model_revision_5_still_decode():
    assert statemix.decompress(GOLDEN_EMPTY_KINDS_TO_56, legacy=True) == b""
    assert statemix.decompress(GOLDEN_TEXT_KINDS_TO_56, legacy=True) == GOLDEN_INPUT
    assert statemix.decompress(GOLDEN_TEXT_LEVEL3_KINDS_TO_56, legacy=True) == GOLDEN_INPUT


def test_golden_streams_of_levels_2_and_3_before_kinds_52_to_56_still_decode():
    assert statemix.decompress(GOLDEN_EMPTY_KINDS_TO_51, legacy=True) == b""
    assert statemix.decompress(GOLDEN_TEXT_KINDS_TO_51, legacy=True) == GOLDEN_INPUT
    assert statemix.decompress(GOLDEN_TEXT_LEVEL3_KINDS_TO_51, legacy=True) == GOLDEN_INPUT


def test_golden_streams_of_levels_2_and_3_before_kinds_44_to_51_still_decode():
    assert statemix.decompress(GOLDEN_EMPTY_KINDS_TO_43, legacy=True) == b""
    assert statemix.decompress(GOLDEN_TEXT_KINDS_TO_43, legacy=True) == GOLDEN_INPUT
    assert statemix.decompress(GOLDEN_TEXT_LEVEL3_KINDS_TO_43, legacy=True) == GOLDEN_INPUT


def test_golden_streams_of_levels_2_and_3_before_kinds_39_to_43_still_decode():
    assert statemix.decompress(GOLDEN_EMPTY_KINDS_TO_38, legacy=True) == b""
    assert statemix.decompress(GOLDEN_TEXT_KINDS_TO_38, legacy=True) == GOLDEN_INPUT
    assert statemix.decompress(GOLDEN_TEXT_LEVEL3_KINDS_TO_38, legacy=True) == GOLDEN_INPUT


def test_golden_streams_of_levels_2_and_3_before_kinds_37_and_38_still_decode():
    assert statemix.decompress(GOLDEN_EMPTY_KINDS_TO_36, legacy=True) == b""
    assert statemix.decompress(GOLDEN_TEXT_KINDS_TO_36, legacy=True) == GOLDEN_INPUT
    assert statemix.decompress(GOLDEN_TEXT_LEVEL3_KINDS_TO_36, legacy=True) == GOLDEN_INPUT


def test_golden_streams_of_levels_2_and_3_with_model_revision_3_still_decode():
    assert statemix.decompress(GOLDEN_EMPTY_MODEL_REVISION_3, legacy=True) == b""
    assert statemix.decompress(GOLDEN_TEXT_MODEL_REVISION_3, legacy=True) == GOLDEN_INPUT
    assert statemix.decompress(GOLDEN_TEXT_LEVEL3_MODEL_REVISION_3, legacy=True) == GOLDEN_INPUT


def test_golden_streams_of_levels_2_and_3_with_orders_3_5_6_still_decode():
    assert statemix.decompress(GOLDEN_EMPTY_ORDERS_3_5_6, legacy=True) == b""
    assert statemix.decompress(GOLDEN_TEXT_ORDERS_3_5_6, legacy=True) == GOLDEN_INPUT
    assert statemix.decompress(GOLDEN_TEXT_LEVEL3_ORDERS_3_5_6, legacy=True) == GOLDEN_INPUT


def test_golden_streams_of_levels_2_and_3_with_model_revision_2_still_decode():
    assert statemix.decompress(GOLDEN_EMPTY_MODEL_REVISION_2, legacy=True) == b""
    assert statemix.decompress(GOLDEN_TEXT_MODEL_REVISION_2, legacy=True) == GOLDEN_INPUT
    assert statemix.decompress(GOLDEN_TEXT_LEVEL3_MODEL_REVISION_2, legacy=True) == GOLDEN_INPUT


def test_golden_streams_of_levels_2_and_3_with_model_revision_1_still_decode():
    assert statemix.decompress(GOLDEN_EMPTY_MODEL_REVISION_1, legacy=True) == b""
    assert statemix.decompress(GOLDEN_TEXT_MODEL_REVISION_1, legacy=True) == GOLDEN_INPUT
    assert statemix.decompress(GOLDEN_TEXT_LEVEL3_MODEL_REVISION_1, legacy=True) == GOLDEN_INPUT


def test_golden_streams_of_level_2_before_model_revision_1_still_decode():
    assert statemix.decompress(GOLDEN_EMPTY_FIRST_RATES, legacy=True) == b""
    assert statemix.decompress(GOLDEN_TEXT_FIRST_RATES, legacy=True) == GOLDEN_INPUT


def test_golden_streams_of_level_2_with_byte_histories_still_decode():
    assert statemix.decompress(GOLDEN_EMPTY_BYTE_HISTORIES, legacy=True) == b""
    assert statemix.decompress(GOLDEN_TEXT_BYTE_HISTORIES, legacy=True) == GOLDEN_INPUT


def test_golden_streams_of_level_2_before_its_last_text_contexts_still_decode():
    assert statemix.decompress(GOLDEN_EMPTY_29_CONTEXTS, legacy=True) == b""
    assert statemix.decompress(GOLDEN_TEXT_29_CONTEXTS, legacy=True) == GOLDEN_INPUT


def test_golden_streams_of_level_2_before_the_instruction_contexts_still_decode():
    assert statemix.decompress(GOLDEN_EMPTY_32_KINDS, legacy=True) == b""
    assert statemix.decompress(GOLDEN_TEXT_32_KINDS, legacy=True) == GOLDEN_INPUT


def test_golden_streams_of_level_2_with_revision_1_of_the_record_detector_still_decode():
    assert statemix.decompress(GOLDEN_EMPTY_REVISION_1, legacy=True) == b""
    assert statemix.decompress(GOLDEN_TEXT_REVISION_1, legacy=True) == GOLDEN_INPUT


def test_golden_streams_of_level_2_with_the_first_record_detector_still_decode():
    assert statemix.decompress(GOLDEN_EMPTY_UNGATED, legacy=True) == b""
    assert statemix.decompress(GOLDEN_TEXT_UNGATED, legacy=True) == GOLDEN_INPUT


def test_golden_streams_of_level_2_before_its_record_contexts_still_decode():
    assert statemix.decompress(GOLDEN_EMPTY_16_CONTEXTS, legacy=True) == b""
    assert statemix.decompress(GOLDEN_TEXT_16_CONTEXTS, legacy=True) == GOLDEN_INPUT


#: statemix.compress(GOLDEN_INPUT, level=1): 5 contexts, 2 mixers, 1 APM
GOLDEN_TEXT_LEVEL1 = bytes.fromhex(
    "89534d58030106010e1005020110d00925"  # header: level 1 model record (2 mixers), CRC32
    "01" "cc03" "15" "7560bd47" "5877534f"  # modelled block: raw length 460, payload 21, header CRC32, CRC32
    "8499cb96a2777040f2a5262f940a590f243164fe06"  # the range coder's code word
    "00" "cc03" "5877534f"  # end block: length 460, CRC32
)
#: The same in format 2: it must decode as it did.
GOLDEN_TEXT_LEVEL1_V2 = bytes.fromhex(
    "89534d58020106010e1005020153c47232"  # header: level 1 model record (2 mixers), CRC32
    "01" "cc03" "15" "75" "5877534f"  # modelled block: raw length 460, payload 21, check, CRC32
    "8499cb96a2777040f2a5262f940a590f243164fe06"  # the range coder's code word
    "00" "cc03" "5877534f"  # end block: length 460, CRC32
)
#: The same with level 1's first preset (1 mixer): it must decode as it did.
GOLDEN_TEXT_LEVEL1_ONE_MIXER = bytes.fromhex(
    "89534d58020106010e1005010190975f19"  # header: level 1 model record
    "01" "cc03" "15" "75" "5877534f"  # modelled block: raw length 460, payload 21, check, CRC32
    "84b868640487cf9bd0d8b3555e229a08f6f1cc529a"  # the range coder's code word
    "00" "cc03" "5877534f"  # end block: length 460, CRC32
)


#: statemix.compress(GOLDEN_INPUT, level=3): level 2's record but for its byte-distribution source,
#: the pretrained SSM (second weight file) with the count models (05); no byte histories (bit 5 of the
#: last byte clear: an input under 512 KiB has none)
GOLDEN_TEXT_LEVEL3 = bytes.fromhex(
    "89534d580301" "12" "01000408" "0e100905" "08" "d5efffffffffff1f" "c5" "46c6857b"  # header: level 3 record, CRC32
    "01" "cc03" "12" "d6f5d9d9" "5877534f"  # modelled block: raw length 460, payload 18, header CRC32, CRC32
    "75099760ed66f19f4856057e2393b397dafe"  # the range coder's code word
    "00" "cc03" "5877534f"  # end block: length 460, CRC32
)
#: The same at model revision 7 (the coded probability's floor 2**-16): it must decode as it did.
GOLDEN_TEXT_LEVEL3_MODEL_REVISION_7 = bytes.fromhex(
    "89534d580301" "12" "01000407" "0e100905" "08" "d5efffffffffff1f" "c5" "db050d2f" "01cc0312d6f5d9d95877534f"
    "75099760ed66f19f4856057e2393b397dafc" "00cc035877534f"
)
#: The same with level 3's source started from the first weight file (04): it must decode as it did.
GOLDEN_TEXT_LEVEL3_SOURCE_4 = bytes.fromhex(
    "89534d580301" "12" "01000407" "0e100905" "08" "d5efffffffffff1f" "c4" "4d350a58"  # header: level 3 record, CRC32
    "01" "cc03" "12" "d6f5d9d9" "5877534f"  # modelled block: raw length 460, payload 18, header CRC32, CRC32
    "7232e736fa1c266fd076e060ac307865b082"  # the range coder's code word
    "00" "cc03" "5877534f"  # end block: length 460, CRC32
)
#: The same with level 3's source before the pretrained SSM (03: the wide SSM from random weights): it
#: must decode as it did.
GOLDEN_TEXT_LEVEL3_SOURCE_3 = bytes.fromhex(
    "89534d580301" "12" "01000407" "0e100905" "08" "d5efffffffffff1f" "c3" "eea06ec6"  # header: level 3 record, CRC32
    "01" "cc03" "17" "5901b3a9" "5877534f"  # modelled block: raw length 460, payload 23, header CRC32, CRC32
    "81f5deb2e5291ec12beeae635f67bbae8820ebba32e5cf"  # the range coder's code word
    "00" "cc03" "5877534f"  # end block: length 460, CRC32
)
#: The same in format 2: it must decode as it did.
GOLDEN_TEXT_LEVEL3_V2 = bytes.fromhex(
    "89534d580201" "12" "01000407" "0e100905" "08" "d5efffffffffff1f" "c3" "7023b459"  # header: level 3 record, CRC32
    "01" "cc03" "17" "59" "5877534f"  # modelled block: raw length 460, payload 23, check, CRC32
    "81f5deb2e5291ec12beeae635f67bbae8820ebba32e5cf"  # the range coder's code word
    "00" "cc03" "5877534f"  # end block: length 460, CRC32
)
#: The same with level 3's first SSM source (02: d_model 32, label smoothing 0.12): it must decode as it did.
GOLDEN_TEXT_LEVEL3_SOURCE_2 = bytes.fromhex(
    "89534d5802011201000407" "0e10090508d5efffffffffff1fc2" "e613b32e" "01cc0317595877534f"
    "8234d2c285f8d536d27e5d728f215e5e6e52670c5eb1ae" "00cc035877534f"
)
#: The same at model revision 6 (kinds to 60): it must decode as it did.
GOLDEN_TEXT_LEVEL3_KINDS_TO_60 = bytes.fromhex(
    "89534d5802011201000406" "0e10090508d5efffffffffff1fc2" "0ec84897" "01cc0317595877534f"
    "8234d2c285f8d536d27e5d7291b4740b460aa1fd424c61" "00cc035877534f"
)
#: The same at model revision 5 (kinds to 56): it must decode as it did.
GOLDEN_TEXT_LEVEL3_KINDS_TO_56 = bytes.fromhex(
    "89534d5802011201000405" "0e10090508d5efffffffffff01c2" "a89d7452" "01cc0316cf5877534f"
    "82ca4624cc6bdde09b321625c2bcb96dc9f84af68cc1" "00cc035877534f"
)
#: The same before kinds 52-56 and model revision 5: it must decode as it did.
GOLDEN_TEXT_LEVEL3_KINDS_TO_51 = bytes.fromhex(
    "89534d5802011101000404" "0e10090507d5efffffffff0fc2" "256ff4ad" "01cc0316cf5877534f"
    "839d79a37077a14f5b7ce10b108bc8b9873f5072b4f8" "00cc035877534f"
)
#: The same without kinds 44-51: it must decode as it did.
GOLDEN_TEXT_LEVEL3_KINDS_TO_43 = bytes.fromhex(
    "89534d5802011001000404" "0e10090506d5efffffff0fc2" "e387e826" "01cc0316cf5877534f"
    "855a0c2ec84324d4448ab60938880d799de2c823515e" "00cc035877534f"
)
#: The same without kinds 39-43: it must decode as it did.
GOLDEN_TEXT_LEVEL3_KINDS_TO_38 = bytes.fromhex(
    "89534d5802010f01000404" "0e10090505d5efffff7fc2" "ab5aaeb9" "01cc0317595877534f"
    "8695c234380096b8173e3ffc34f000502a58747306a7dd" "00cc035877534f"
)
#: The same without kinds 37 and 38: it must decode as it did.
GOLDEN_TEXT_LEVEL3_KINDS_TO_36 = bytes.fromhex(
    "89534d5802010f01000404" "0e10090505d5efffff1fc2" "0c3153dc" "01cc0317595877534f"
    "8734d548c315b43edb6dc1cc80fe2b334255c59bcfbafb" "00cc035877534f"
)
#: The same with model revision 3 and 4 APMs: it must decode as it did.
GOLDEN_TEXT_LEVEL3_MODEL_REVISION_3 = bytes.fromhex(
    "89534d5802010f01000403" "0e10090405d5efffff1fc2" "1dd86164" "01cc0317595877534f"
    "8733b8f931e62b23ff9ab29e26c4d9aa0c44ef3b54a85f" "00cc035877534f"
)
#: The same with orders 3, 5 and 6 where letters, word opener and markup name are now: it must decode as it did.
GOLDEN_TEXT_LEVEL3_ORDERS_3_5_6 = bytes.fromhex(
    "89534d5802010f01000403" "0e10090405ffefffff03c2" "10a32124" "01cc0317595877534f"
    "8733b8f931e62b23ff9a5fa105f13a5ddc1383679573ee" "00cc035877534f"
)
#: The same with model revision 2: it must decode as it did.
GOLDEN_TEXT_LEVEL3_MODEL_REVISION_2 = bytes.fromhex(
    "89534d5802010f01000402" "0e10090405ffefffff03c2" "7fef84bf" "01cc0317595877534f"
    "87328eba77631a7fd50aaa9938d4c98cfcbf8d5c2ba88b" "00cc035877534f"
)
#: The same with model revision 1 and eight mixers: it must decode as it did.
GOLDEN_TEXT_LEVEL3_MODEL_REVISION_1 = bytes.fromhex(
    "89534d5802010f01000401" "0e10080405ffefffff03c2" "cc2961df" "01cc0317595877534f"
    "872af9695c4b4fa87358271b106f0053de6cdf0f97a127" "00cc035877534f"
)
#: The same before model revision 1 and its eighth mixer: it must decode as it did.
GOLDEN_TEXT_LEVEL3_FIRST_RATES = bytes.fromhex(
    "89534d5802010e0100030e10070405ffefffff03c2" "049fb380"
    "01cc0318c85877534f" "800571f6084a643e7d046e3c887cc9baea574a5ec04e30f0" "00cc035877534f"
)
#: The same while level 3 had byte histories at every input size (e2): it must decode as it did.
GOLDEN_TEXT_LEVEL3_BYTE_HISTORIES = bytes.fromhex(
    "89534d5802010e0100030e10070405ffefffff03e2" "ccbfddbb" "01cc03195e5877534f"
    "800571f6084a643e7d046e3c887cc9bad7d9b02b6e670b41dd" "00cc035877534f"
)
#: The same before word trio, column, sparse 2 and line start (29 contexts): it must decode as it did.
GOLDEN_TEXT_LEVEL3_29_CONTEXTS = bytes.fromhex(
    "89534d5802010e0100030e10070405ffcbe7ff03c2" "b0695f21"  # header: level 3 model record, CRC32
    "01" "cc03" "18" "c8" "5877534f"  # modelled block: raw length 460, payload 24, check, CRC32
    "80179106bbd6e438a386be8fd8ce647478b0e2fb17877016"  # the range coder's code word
    "00" "cc03" "5877534f"  # end block: length 460, CRC32
)
#: The same before the x86 instruction contexts (a ``00 02`` record): it must decode as it did.
GOLDEN_TEXT_LEVEL3_32_KINDS = bytes.fromhex(
    "89534d5802010c0100020e100704ffcbe7ffc2" "1a39a7ef"  # header: level 3 model record, CRC32
    "01" "cc03" "18" "c8" "5877534f"  # modelled block: raw length 460, payload 24, check, CRC32
    "80179106bbd6e438a386be8fd8ce647478b0e2fb17877016"  # the range coder's code word
    "00" "cc03" "5877534f"  # end block: length 460, CRC32
)
#: The same with revision 1 of the record detector: it must decode as it did.
GOLDEN_TEXT_LEVEL3_REVISION_1 = bytes.fromhex(
    "89534d5802010c0100020e100704ffcbe71f82" "668b05c7"  # header: level 3 model record, CRC32
    "01" "cc03" "18" "c8" "5877534f"  # modelled block: raw length 460, payload 24, check, CRC32
    "80179106bbd6e438a386be8fd8ce647478b0e2fb17877016"  # the range coder's code word
    "00" "cc03" "5877534f"  # end block: length 460, CRC32
)
#: The same with the first record detector (revision 0): it must decode as it did.
GOLDEN_TEXT_LEVEL3_UNGATED = bytes.fromhex(
    "89534d5802010c0100020e100704ffcbe71f02" "4608bd2a"  # header: level 3 model record, CRC32
    "01" "cc03" "18" "c8" "5877534f"  # modelled block: raw length 460, payload 24, check, CRC32
    "80179106bbd6e438a386be8fd8ce647478b0e2fb17877017"  # the range coder's code word
    "00" "cc03" "5877534f"  # end block: length 460, CRC32
)
#: The same before level 3 had its record contexts (issue 14): it must decode as it did.
GOLDEN_TEXT_LEVEL3_16_CONTEXTS = bytes.fromhex(
    "89534d5802010c0100020e100704ffcb070002" "78d6054e"  # header: level 3 model record, CRC32
    "01" "cc03" "18" "c8" "5877534f"  # modelled block: raw length 460, payload 24, check, CRC32
    "80179106bbd6e438a386be8fd8ce647478b0e2fb17877016"  # the range coder's code word
    "00" "cc03" "5877534f"  # end block: length 460, CRC32
)


@EVERY_MODEL
def test_golden_streams_at_every_level():
    # a small size_hint shrinks the tables of levels 2 and 3 to the same size: level 3 differs by its
    # byte-distribution source (the SSM), level 1 by everything
    assert statemix.compress(b"", level=2) == GOLDEN_EMPTY
    assert statemix.compress(GOLDEN_INPUT, level=2) == GOLDEN_TEXT
    for level, golden in ((1, GOLDEN_TEXT_LEVEL1), (3, GOLDEN_TEXT_LEVEL3)):
        assert statemix.compress(GOLDEN_INPUT, level=level) == golden
        assert statemix.decompress(golden) == GOLDEN_INPUT
    assert statemix.decompress(GOLDEN_TEXT_LEVEL1_ONE_MIXER, legacy=True) == GOLDEN_INPUT
    assert statemix.decompress(GOLDEN_TEXT_LEVEL3_16_CONTEXTS, legacy=True) == GOLDEN_INPUT
    assert statemix.decompress(GOLDEN_TEXT_LEVEL3_BYTE_HISTORIES, legacy=True) == GOLDEN_INPUT
    assert statemix.decompress(GOLDEN_TEXT_LEVEL3_29_CONTEXTS, legacy=True) == GOLDEN_INPUT
    assert statemix.decompress(GOLDEN_TEXT_LEVEL3_32_KINDS, legacy=True) == GOLDEN_INPUT
    assert statemix.decompress(GOLDEN_TEXT_LEVEL3_UNGATED, legacy=True) == GOLDEN_INPUT
    assert statemix.decompress(GOLDEN_TEXT_LEVEL3_REVISION_1, legacy=True) == GOLDEN_INPUT
    assert statemix.decompress(GOLDEN_TEXT_LEVEL3_FIRST_RATES, legacy=True) == GOLDEN_INPUT
