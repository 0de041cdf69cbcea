"""The statemix stream format, version 3, byte by byte.

A stream is a header, any number of blocks, an end block and a trailer.  Streams may be concatenated;
they decode to the concatenation of their contents.  Integers marked *varint* are unsigned LEB128
(7 bits per byte, least significant first, high bit set on all but the last byte, at most 9 bytes).
CRC32 is zlib's (ISO-HDLC polynomial), stored little-endian.

Header::

    magic               4 bytes   89 53 4D 58  ("\\x89SMX")
    format version      1 byte    3 (1 and 2 are still read; see "Older versions" below)
    arithmetic version  1 byte    1: the exact integer/float arithmetic of the models; a stream whose
                                  version this build does not reproduce is refused
    model record length 1 byte    n (1..255)
    model record        n bytes   model id (1 byte) then that model's parameters: every option that
                                  changes the compressed bytes (see statemix.models)
    header CRC32        4 bytes   of all the header bytes above

Block::

    kind                1 byte    1 modelled, 2 stored, 3 zstandard, 4 modelled x86, 5 zstandard
                                  learned, 6 zstandard learned x86, 7 stored learned, 8 stored learned
                                  x86 (0 ends the blocks, see below)
    raw length          varint    bytes of original data in the block, 1..MAX_BLOCK (1 MiB: every
                                  writer cuts its blocks there)
    payload length      varint    all but the stored kinds (2, 7, 8), which carry raw length bytes;
                                  never more than raw length
    header CRC32        4 bytes   of the block header bytes before it, so a damaged length is caught
                                  before any work is spent on it
    CRC32               4 bytes   of the block's original data
    payload             bytes     modelled: the range coder's code word (statemix.coder), whole:
                                  its trailing zero bytes are written too;
                                  stored: the data itself; zstandard: one zstandard frame;
                                  modelled x86: the code word of the block after the x86 branch
                                  address transform (statemix.x86; its offset: the stream position
                                  of the block's first byte), which the decoder undoes;
                                  learned kinds: as stored or zstandard (see below)

End block and trailer::

    kind                1 byte    0
    original length     varint    total bytes of original data in the stream
    CRC32               4 bytes   of all the original data of the stream

Blocks and the model: the model's state runs on across modelled blocks, so a block boundary changes
nothing but where a code word ends.  A stored or zstandard block (kinds 2, 3) never reaches the
model: the model continues from the end of the previous modelled block as if the block were not
there, so decoding it costs no model work.  A learned block (kinds 5-8) is one the model coded but
lost to zstandard or storing: its data is written as kind 3 or 2 would write it, and the model
learned it (the decoder replays it through the model's learn pass after checking its CRC; "x86": the
model learned the block after the x86 transform, as for kind 4).  So the compressor keeps one copy
of the model, not a second one to roll back to.

What a payload can hold (:func:`max_raw_length`).  A reader refuses, before any model or zstandard
work, every block whose raw length exceeds what its payload of P bytes can encode, so the work a
stream can ask for is proportional to its size, never to the lengths it claims:

- stored kinds: the raw length is P (the payload is the data).
- zstandard kinds: a frame is a header of at least 6 bytes (magic, descriptor, window or size) and
  blocks of at least 4 bytes (3 of block header and one of content: an RLE block), each of at most
  128 KiB (ZSTD_BLOCK_MAX), so raw <= (P // 4) * 128 KiB, 32,768 bytes per payload byte; a frame that
  declares its content size must declare the raw length.
- modelled kinds: the coder's probability floor.  Coding a symbol of frequency f out of 2**t
  multiplies the coder's range by at most f / 2**t, and each byte of code word written lets the
  range grow by 2**8 at most, from at most 2**56 down to at least 2**48 (statemix.coder), so a code
  word of P bytes (untrimmed, as version 3 writes it) holds at most 8 P bits of cost, the sum of
  -log2(f / 2**t) over its symbols.  The cm model codes bits with :func:`statemix.quantize.binary_frequency`,
  which clamps f to [1, 65535] of 2**16: each bit costs at least -log2(65535/65536) > 2**-16 / ln 2
  bits, so a byte costs more than 8 * 2**-16 / ln 2 and raw <= P * 65536 ln 2 < P * 45,427
  (CM_BYTES_PER_PAYLOAD_BYTE).  From cm's model revision 8 (levels 2 and 3) the clamp is [16, 65520]:
  a bit costs more than 2**-12 / ln 2 bits and raw < P * 2,840 (CM_COARSE_BYTES_PER_PAYLOAD_BYTE).
  The ssm model codes tokens with :func:`statemix.quantize.quantize_logits` over V symbols of a
  total 2**tb, each symbol at least ``least``: a token costs at least -log2(1 - (V-1) least / 2**tb)
  bits.  Under its coarse floor (``Config.floor`` 1) (V-1) least >= 2**(tb-9), so a token costs more
  than 2**-9 / ln 2 bits and a code word holds fewer than P * 2,840 tokens
  (SSM_COARSE_TOKENS_PER_PAYLOAD_BYTE); under the first floor (least 1, records written before the
  floor) at most 8 P 2**tb ln 2 / (V-1), over 23 million per byte for bytes.  Each token is at most
  the vocabulary's longest in bytes (the model's ``max_raw_length``; its BPE token count is checked
  again against the code word once its vocabulary is read, before any token is decoded).
- learned kinds: their payload is stored or zstandard, bounded as above; the model then learns at
  most that many bytes.  From cm's model revision 8, and under the ssm model's coarse floor, a
  learned block also holds no more than a code word of its payload's length could (the model's
  ``max_learned_length``, in bytes): the encoder writes the model's code word instead of a
  zstandard frame too short for its block, so learning costs no more model work per payload byte
  than decoding.

The floor is what an adversary who runs the model can reach; a payload that does not follow the
model's most probable path runs out sooner.  A decoder of a whole code word of P bytes reads at most
P + 6 bytes (7 at the start, then one for each byte the encoder wrote after its first), so a format 3
decoder stops with an error, within one model step (about 0.1 s), once it has read more: a forged
block costs at most the model work its payload pays for, never the length it claims.

Older versions.  Version 2 has a 1-byte header check (the low byte of the CRC32 of the header
bytes before it) where version 3 has the CRC32, and trims the trailing zero bytes of its code words
(the decoder reads 0 past the end), so a modelled block's payload bounds nothing and only the
stored, zstandard and block size bounds apply.  Version 1 is version 2's layout, but the model
learned every stored and zstandard block (the decoder replays them through it).  Every writer cut
its blocks at 1 MiB, so longer blocks are refused in every version.

Streams read only on request.  A stream whose size does not bound its decoding work is refused
before its model is built, with one error (:data:`UNBOUNDED`), unless the reader is asked for legacy
streams (``legacy=True``, the command line's ``--legacy``): those of versions 1 and 2 (a trimmed code
word bounds nothing: 1 MiB of 0xFF bytes codes to no byte at all at level 2, so a 47-byte stream
asks a full block of level-2 model work) and, in version 3, cm's records before model revision 8
(a code word byte holds 45,427 bytes) and the ssm model's first floor (23 million tokens).  A cm
record of level 1's shape is read in every version: its loop takes about a microsecond a byte, and
a block holds at most 1 MiB.  Each model decides (``decoding_bounded`` in statemix.models).

Seek index (written after the last stream of a segmented file, see statemix.segments; readers skip
it between streams, and check it against the streams they decoded: it lists the streams since the
previous index or the start, :func:`index_lists`, so files appended after it still decode)::

    magic               4 bytes   89 53 4D 49  ("\x89SMI")
    payload length      varint
    payload             varint n (segments), then per segment: compressed bytes (varint: the whole
                        stream), uncompressed bytes (varint), CRC32 of its data (4 bytes)
    CRC32               4 bytes   of magic .. payload
    frame length        4 bytes   of the whole frame, magic to end magic, little-endian
    end magic           4 bytes   "SMXI": a reader finds the index from the end of the file

An index's count n is refused before anything is read for its entries when its payload cannot hold
n entries of 6 bytes (the smallest: two 1-byte varints and a CRC32).

Writers cut block ``i`` (0, 1, ...) of a stream at ``block_limit(i)`` bytes of input: FIRST_BLOCK
(16 KiB) doubling up to BLOCK_SIZE (1 MiB), so the first bytes of a stream can be verified and
released after little model work, and the output does not depend on how the input was fed in.
An empty stream is 17 bytes plus the model record (18 bytes for the default cm level: 35 bytes); data
that cannot be compressed grows by that much plus 12 bytes per block (the first six blocks
cover 1,008 KiB, then one block per MiB).
"""

from __future__ import annotations

import struct
import zlib
from dataclasses import dataclass

from . import _varint
from ._errors import StatemixError
from ._varint import encode_varint
from .models import ModelSpec

MAGIC = b"\x89SMX"
INDEX_MAGIC = b"\x89SMI"
INDEX_END = b"SMXI"
INDEX_TAIL = 8  # frame length + end magic
MAX_INDEX = 1 << 26  # bytes of index payload at most (over 4 million segments)
FORMAT_VERSION = 3
READ_VERSIONS = (1, 2, 3)
ARITHMETIC_VERSION = 1
FIRST_BLOCK = 1 << 14
BLOCK_SIZE = 1 << 20
MAX_BLOCK = 1 << 20  # every writer cut its blocks at BLOCK_SIZE (1 MiB): longer ones are refused
ZSTD_BLOCK_MAX = 1 << 17  # a zstandard block holds at most 128 KiB and takes at least 4 bytes
CM_BYTES_PER_PAYLOAD_BYTE = 45_427  # > 65536 ln 2: see "What a payload can hold"
CM_COARSE_BYTES_PER_PAYLOAD_BYTE = 2_840  # > 4096 ln 2: the same, from cm's model revision 8
#: tokens, under the ssm model's coarse floor: a token costs what a revision-8 cm byte does, > 2**-9 / ln 2 bits
SSM_COARSE_TOKENS_PER_PAYLOAD_BYTE = CM_COARSE_BYTES_PER_PAYLOAD_BYTE
#: the error for a stream read only on request (see "Streams read only on request")
UNBOUNDED = ("stream of format {version} written by an older statemix: its size does not bound the work "
             "of decoding it, so it is read only on request (--legacy; Python: legacy=True), if you trust it")
END, MODELLED, STORED, ZSTANDARD, MODELLED_X86 = 0, 1, 2, 3, 4
ZSTANDARD_LEARNED, ZSTANDARD_LEARNED_X86, STORED_LEARNED, STORED_LEARNED_X86 = 5, 6, 7, 8
KIND_NAMES = {MODELLED: "modelled", STORED: "stored", ZSTANDARD: "zstandard", MODELLED_X86: "modelled x86",
              ZSTANDARD_LEARNED: "zstandard learned", ZSTANDARD_LEARNED_X86: "zstandard learned x86",
              STORED_LEARNED: "stored learned", STORED_LEARNED_X86: "stored learned x86"}
MODELLED_KINDS = (MODELLED, MODELLED_X86)  # the blocks whose payload is the model's code word
STORED_KINDS = (STORED, STORED_LEARNED, STORED_LEARNED_X86)  # the blocks whose payload is the data itself
ZSTANDARD_KINDS = (ZSTANDARD, ZSTANDARD_LEARNED, ZSTANDARD_LEARNED_X86)  # one zstandard frame
LEARNED_KINDS = (ZSTANDARD_LEARNED, ZSTANDARD_LEARNED_X86, STORED_LEARNED, STORED_LEARNED_X86)
X86_KINDS = (MODELLED_X86, ZSTANDARD_LEARNED_X86, STORED_LEARNED_X86)  # the model saw the x86 transform


def learned_kind(kind: int, x86: bool) -> int:
    """The learned kind of a block written as ``kind`` (STORED or ZSTANDARD)."""
    if kind == STORED:
        return STORED_LEARNED_X86 if x86 else STORED_LEARNED
    return ZSTANDARD_LEARNED_X86 if x86 else ZSTANDARD_LEARNED
_MAX_VARINT_BYTES = 9


class NeedMore(Exception):
    """The buffer ends before the structure being parsed does (not an error while streaming)."""


def crc32(data: bytes, crc: int = 0) -> int:
    return zlib.crc32(data, crc)


def decode_varint(buf, pos: int) -> tuple[int, int]:
    """Return (value, position after it); raise NeedMore or StatemixError."""
    try:
        return _varint.decode_varint(buf, pos, _MAX_VARINT_BYTES)
    except _varint.Truncated:
        raise NeedMore from None
    except ValueError:
        raise StatemixError("corrupt stream: length field too long") from None


def block_limit(index: int) -> int:
    """Bytes of input in block ``index`` (from 0) of a stream, except the last block."""
    return min(BLOCK_SIZE, FIRST_BLOCK << min(index, 32))


def _need(buf, end: int) -> None:
    if len(buf) < end:
        raise NeedMore


def write_header(spec: ModelSpec) -> bytes:
    record = spec.to_bytes()
    head = MAGIC + bytes([FORMAT_VERSION, ARITHMETIC_VERSION, len(record)]) + record
    return head + struct.pack("<I", crc32(head))


def read_header(buf, pos: int = 0) -> tuple[ModelSpec, int]:
    """Parse a header at ``pos``; return (model spec, position after it)."""
    spec, _, end = read_versioned_header(buf, pos)
    return spec, end


def read_versioned_header(buf, pos: int = 0) -> tuple[ModelSpec, int, int]:
    """Parse a header at ``pos``; return (model spec, format version, position after it)."""
    _need(buf, pos + 1)
    available = bytes(buf[pos : pos + 4])
    if not MAGIC.startswith(available):
        raise StatemixError("not a statemix stream (bad magic bytes)")
    _need(buf, pos + 7)
    version, arithmetic, length = buf[pos + 4], buf[pos + 5], buf[pos + 6]
    if version not in READ_VERSIONS:
        raise StatemixError(
            f"unsupported format version {version} (this statemix reads versions "
            f"{', '.join(map(str, READ_VERSIONS))})"
        )
    if arithmetic != ARITHMETIC_VERSION:
        raise StatemixError(
            f"stream needs arithmetic version {arithmetic}; this build reproduces only "
            f"version {ARITHMETIC_VERSION}"
        )
    if length == 0:
        raise StatemixError("corrupt stream: empty model record")
    end = pos + 7 + length
    _need(buf, end + 4)
    (stored_crc,) = struct.unpack_from("<I", buf, end)
    if crc32(bytes(buf[pos:end])) != stored_crc:
        raise StatemixError("corrupt stream: header checksum mismatch")
    return ModelSpec.from_bytes(bytes(buf[pos + 7 : end])), version, end + 4


@dataclass(frozen=True)
class BlockHeader:
    kind: int
    raw_length: int
    payload_length: int
    crc: int
    size: int  # bytes of the block header itself


def write_block(kind: int, raw: bytes, payload: bytes, version: int = FORMAT_VERSION) -> bytes:
    head = bytes([kind]) + encode_varint(len(raw))
    if kind not in STORED_KINDS:
        head += encode_varint(len(payload))
    check = struct.pack("<I", crc32(head)) if version >= 3 else bytes([crc32(head) & 0xFF])
    return head + check + struct.pack("<I", crc32(raw)) + payload


def max_raw_length(kind: int, payload_length: int, model_bound=None) -> int | None:
    """The most bytes of data a block of ``kind`` can hold in ``payload_length`` bytes of payload
    (see "What a payload can hold"); None where nothing is known.  ``model_bound``: the model's bound,
    a function of the payload length (None, or returning None, where there is none): for the modelled
    kinds its code word's (none in versions 1 and 2: their code words are trimmed), for the learned
    kinds the one its record promises them."""
    if kind in STORED_KINDS:
        own = payload_length
    elif kind in ZSTANDARD_KINDS:
        own = (payload_length // 4) * ZSTD_BLOCK_MAX  # 4 bytes at least per block of at most 128 KiB
    else:
        own = None
    model = None if model_bound is None else model_bound(payload_length)
    return model if own is None else own if model is None else min(own, model)


def check_block_bound(header: "BlockHeader", model_bound=None) -> None:
    """Raise StatemixError if ``header`` claims more data than its payload can hold."""
    limit = max_raw_length(header.kind, header.payload_length, model_bound)
    if limit is not None and header.raw_length > limit:
        raise StatemixError(
            f"corrupt stream: {KIND_NAMES[header.kind]} block claims {header.raw_length} bytes, more than "
            f"its {header.payload_length}-byte payload can hold (at most {limit})")


def read_block_header(buf, pos: int, version: int = FORMAT_VERSION) -> BlockHeader | None:
    """Parse a block header at ``pos`` of a stream of format ``version``; return None at the end block
    (kind 0).  The stored and zstandard kinds' bounds are checked here; the modelled kinds' need the
    model (:func:`check_block_bound`)."""
    _need(buf, pos + 1)
    kind = buf[pos]
    if kind == END:
        return None
    if kind not in KIND_NAMES:
        raise StatemixError(f"corrupt stream: unknown block kind {kind} (or one of a newer statemix)")
    raw_length, at = decode_varint(buf, pos + 1)
    if not 1 <= raw_length <= MAX_BLOCK:
        raise StatemixError(f"corrupt stream: block length {raw_length} out of range (1 to {MAX_BLOCK})")
    payload_length = raw_length
    if kind not in STORED_KINDS:
        payload_length, at = decode_varint(buf, at)
        if payload_length > raw_length:
            raise StatemixError("corrupt stream: block payload longer than its data")
    check = 4 if version >= 3 else 1
    _need(buf, at + check + 4)
    if version >= 3:
        if struct.unpack_from("<I", buf, at)[0] != crc32(bytes(buf[pos:at])):
            raise StatemixError("corrupt stream: block header checksum mismatch")
    elif buf[at] != crc32(bytes(buf[pos:at])) & 0xFF:
        raise StatemixError("corrupt stream: block header check mismatch")
    (crc,) = struct.unpack_from("<I", buf, at + check)
    header = BlockHeader(kind, raw_length, payload_length, crc, at + check + 4 - pos)
    check_block_bound(header)
    return header


def write_trailer(length: int, crc: int) -> bytes:
    return bytes([END]) + encode_varint(length) + struct.pack("<I", crc)


def read_trailer(buf, pos: int) -> tuple[int, int, int]:
    """Parse the end block at ``pos``; return (original length, CRC32, position after it)."""
    _need(buf, pos + 1)
    if buf[pos] != END:
        raise StatemixError("corrupt stream: expected the end of the stream")
    length, at = decode_varint(buf, pos + 1)
    _need(buf, at + 4)
    (crc,) = struct.unpack_from("<I", buf, at)
    return length, crc, at + 4


@dataclass(frozen=True)
class Segment:
    """One stream of a segmented file, as its seek index records it."""

    compressed: int  # bytes of the whole stream
    uncompressed: int  # bytes of data
    crc: int  # CRC32 of the data


def index_lists(index: list[Segment], streams: list[Segment]) -> bool:
    """Whether a seek index lists ``streams``: the streams since the previous index, or since the
    start.  Streams may follow an index (a file appended to a segmented one, or a second segmented
    file), but a stream in front of a segmented file's is refused: it could as well be a segment
    duplicated by damage."""
    return len(index) > 0 and index == streams


def write_index(segments: list[Segment]) -> bytes:
    payload = encode_varint(len(segments)) + b"".join(
        encode_varint(s.compressed) + encode_varint(s.uncompressed) + struct.pack("<I", s.crc) for s in segments)
    body = INDEX_MAGIC + encode_varint(len(payload)) + payload
    body += struct.pack("<I", crc32(body))
    return body + struct.pack("<I", len(body) + INDEX_TAIL) + INDEX_END


def read_index(buf, pos: int) -> tuple[list[Segment], int]:
    """Parse a seek index frame at ``pos``; return (segments, position after it)."""
    _need(buf, pos + 4)
    if bytes(buf[pos : pos + 4]) != INDEX_MAGIC:
        raise StatemixError("not a seek index")
    length, at = decode_varint(buf, pos + 4)
    if length > MAX_INDEX:
        raise StatemixError("corrupt stream: seek index too long")
    end = at + length
    _need(buf, end + 4 + INDEX_TAIL)
    (stored_crc,) = struct.unpack_from("<I", buf, end)
    (frame_length,) = struct.unpack_from("<I", buf, end + 4)
    if (crc32(bytes(buf[pos:end])) != stored_crc or frame_length != end + 4 + INDEX_TAIL - pos
            or bytes(buf[end + 8 : end + 12]) != INDEX_END):
        raise StatemixError("corrupt stream: seek index damaged")
    payload = bytes(buf[at:end])
    try:
        count, i = _varint.decode_varint(payload, 0, _MAX_VARINT_BYTES)
        if count > (len(payload) - i) // 6:  # an entry takes at least 6 bytes
            raise ValueError
        segments = []
        for _ in range(count):
            compressed, i = _varint.decode_varint(payload, i, _MAX_VARINT_BYTES)
            uncompressed, i = _varint.decode_varint(payload, i, _MAX_VARINT_BYTES)
            if i + 4 > len(payload):
                raise ValueError
            segments.append(Segment(compressed, uncompressed, struct.unpack_from("<I", payload, i)[0]))
            i += 4
    except (_varint.Truncated, ValueError):
        raise StatemixError("corrupt stream: seek index damaged") from None
    if i != len(payload):
        raise StatemixError("corrupt stream: seek index damaged")
    return segments, end + 4 + INDEX_TAIL


def index_at_end(tail: bytes) -> int | None:
    """The length of the seek index frame that ``tail`` (the last bytes of a file) ends with, if any."""
    if len(tail) < INDEX_TAIL or tail[-4:] != INDEX_END:
        return None
    return struct.unpack_from("<I", tail, len(tail) - INDEX_TAIL)[0]
