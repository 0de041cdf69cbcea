"""Read the structure of statemix streams (for ``statemix --list``) without decoding any data."""

from __future__ import annotations

from dataclasses import dataclass, field

from . import container
from ._errors import StatemixError
from .container import NeedMore
from .models import ModelSpec

_CHUNK = 1 << 16


@dataclass
class BlockInfo:
    kind: str
    raw_length: int
    payload_length: int


@dataclass
class StreamInfo:
    """One stream of a file: its model record, blocks, sizes (bytes, headers included) and CRC32."""

    model: ModelSpec
    version: int = container.FORMAT_VERSION  # format version (see statemix.container)
    blocks: list[BlockInfo] = field(default_factory=list)
    compressed_size: int = 0
    uncompressed_size: int = 0
    crc32: int = 0
    indexed: bool = False  # listed by the seek index of a segmented file (statemix.segments)
    offset: int = 0  # where the stream starts in the file (bytes)
    index_size: int = 0  # bytes of the seek index frame right after this stream, if one follows it


class _Input:
    """Forward-only reader that parses from a small window and skips payloads."""

    def __init__(self, fp):
        self._fp = fp
        self.window = bytearray()
        self.consumed = 0

    def parse(self, parser):
        while True:
            try:
                return parser(self.window)
            except NeedMore:
                more = self._fp.read(_CHUNK)
                if not more:
                    raise StatemixError("truncated stream") from None
                self.window += more

    def skip(self, n: int) -> None:
        self.consumed += n
        take = min(n, len(self.window))
        del self.window[:take]
        n -= take
        while n > 0:
            got = self._fp.read(min(n, _CHUNK))
            if not got:
                raise StatemixError("truncated stream")
            n -= len(got)

    def at_end(self) -> bool:
        if not self.window:
            self.window += self._fp.read(_CHUNK)
        return not self.window


def read_info(fp) -> list[StreamInfo]:
    """Return the streams of the binary file object ``fp``, checking structure but not contents."""
    source = _Input(fp)
    streams = []
    group = []  # the streams since the last seek index
    if source.at_end():
        raise StatemixError("empty input: not a statemix stream")
    while not source.at_end():
        if bytes(source.window[:4]) == container.INDEX_MAGIC[: len(source.window[:4])]:
            _check_index(source, group)
            group = []
            continue
        start = source.consumed
        spec, version, used = source.parse(lambda buf: _header_at(buf, start, bool(streams)))
        source.skip(used)
        stream = StreamInfo(spec, version, offset=start)
        while True:
            header = source.parse(lambda buf: container.read_block_header(buf, 0, version))
            if header is None:
                break
            source.skip(header.size + header.payload_length)
            stream.blocks.append(BlockInfo(container.KIND_NAMES[header.kind], header.raw_length,
                                           header.payload_length))
        length, crc, used = source.parse(lambda buf: container.read_trailer(buf, 0))
        source.skip(used)
        if length != sum(block.raw_length for block in stream.blocks):
            raise StatemixError("corrupt stream: block lengths do not add up to the stream length")
        stream.uncompressed_size, stream.crc32 = length, crc
        stream.compressed_size = source.consumed - start
        streams.append(stream)
        group.append(stream)
    if not streams:
        raise StatemixError("empty input: not a statemix stream")
    return streams


def _header_at(buf, offset: int, after_a_stream: bool):
    """A stream header (:func:`.container.read_versioned_header`); bytes that are not one after a
    stream are named as what follows the data, with their offset."""
    try:
        return container.read_versioned_header(buf, 0)
    except StatemixError as exc:
        if after_a_stream and "bad magic" in str(exc):
            raise StatemixError(f"{trailing_junk(offset)}") from None
        raise


def trailing_junk(offset: int) -> str:
    """The message for bytes at ``offset`` after the last stream that start no stream nor index."""
    return (f"trailing data at byte {offset:,} (after the last stream) is not a statemix stream "
            "(bad magic bytes)")


def _check_index(source: _Input, streams: list[StreamInfo]) -> None:
    """Parse the seek index at the reader's position; it must list ``streams`` (the streams since
    the previous index or the start: :func:`.container.index_lists`)."""
    segments, used = source.parse(lambda buf: container.read_index(buf, 0))
    source.skip(used)
    if streams:
        streams[-1].index_size = used
    listed = [container.Segment(s.compressed_size, s.uncompressed_size, s.crc32) for s in streams]
    if not container.index_lists(segments, listed):
        raise StatemixError("corrupt stream: the seek index does not match the streams")
    for stream in streams:
        stream.indexed = True
