"""Incremental compressor and decompressor objects: the container format driven by a model.

:class:`StreamCompressor` cuts its input into blocks (``container.block_limit``: 16 KiB, doubling up to
1 MiB, so a reader gets its first verified bytes after little work) and codes each with the stream's
model and with zstandard (level 19); the smallest of the model's code word, the zstandard frame and
the data itself is written.  So no block costs more than zstd -19 or storing.  A block that
zstandard level 1 cannot shrink by 2% is not modelled at all, and is written stored or zstandard
(kinds 2, 3): it never reaches the model, and decoding it costs what zstandard costs.  A block the
model coded but lost is written stored or zstandard as a *learned* kind (5-8): the model has learned
it, and the decoder's model learns it too, after checking its CRC (a model pass, as long as the
coding pass was).  So the compressor never copies its model to roll a block back.  (Version 1
streams, whose models learned every block, are still read: their decoder replays every stored and
zstandard block through the model.)  A block that :func:`statemix.x86.pays` takes for x86 code is
modelled after the x86 transform (block kind "modelled x86", or a learned x86 kind); the model then
learns the transformed bytes.

:class:`Decompressor` reads one stream, in any pieces, and releases a block's data only after its
CRC32 matched.  Before building a model it checks the model's memory bound against ``memory_limit``,
and that the stream's size bounds its decoding work (or that the caller asked for ``legacy`` streams);
before decoding a block, that its payload can hold the length it claims (``container.max_raw_length``:
format 3 checks modelled blocks against the model's bound too, and stops a model whose decoder reads
past the end of its code word within a step), so a forged length costs work in proportion to the
bytes of the stream, never to the length it claims.

Both take ``progress``, a callable given the number of uncompressed bytes processed so far; the model
calls it between steps of at most about 0.1 s, so a progress bar moves and an exception raised from it
(an interruption) takes effect promptly.  Such an exception leaves the object unusable.

Memory: the model's bound (``statemix.models.memory_needed``) plus, for a StreamCompressor, at most one
block of input (and its zstandard frame); for a Decompressor one block of input and its output.  Neither
object is thread-safe: use one per thread (two objects in two threads are independent and give the
same bytes as alone), and neither can be pickled.
"""

from __future__ import annotations

import operator
from concurrent.futures import ThreadPoolExecutor

import zstandard

from . import container
from ._errors import StatemixError
from .container import NeedMore
from .models import LEVELS, MODELS, build_model, decoding_bounded, spec_for_level

ZSTD_LEVEL = 19  # every block is also compressed by zstandard; the smallest of the three is kept
PROBE_LEVEL = 1  # zstandard level of the quick test that decides whether a block is worth modelling
PROBE_RATIO = 0.98  # a block that the probe cannot shrink below this fraction is not modelled
#: default ``memory_limit`` of decoders (bytes): above every preset's model (see README, Memory)
DEFAULT_MEMORY_LIMIT = 3 << 29  # 1.5 GiB


MIN_SEGMENT = 1 << 16  # bytes: the smallest segment_size


def check_options(*, level=None, model=None, threads=None, memory_limit=None, segment_size=None) -> None:
    """Raise TypeError or ValueError for an option a codec object would not accept."""
    for name, value, low in (("level", level, None), ("threads", threads, 1), ("memory_limit", memory_limit, 1),
                             ("segment_size", segment_size, MIN_SEGMENT)):
        if value is None:
            continue
        if isinstance(value, bool) or not isinstance(value, int):
            raise TypeError(f"{name} must be an integer, not {type(value).__name__}")
        if name == "level" and value not in LEVELS:
            raise ValueError(f"level must be one of {', '.join(map(str, LEVELS))}, not {value}")
        if low is not None and value < low:
            raise ValueError(f"{name} must be at least {low}, not {value}")
    if model is not None:
        if not isinstance(model, str):
            raise TypeError(f"model must be a str, not {type(model).__name__}")
        if model not in MODELS:
            raise ValueError(f"model must be one of {', '.join(MODELS)}, not {model!r}")


def _set_threads(threads: int | None) -> None:
    if threads is not None:
        from ._jit import set_threads

        set_threads(threads)


def _reporter(progress, base: int):
    """Progress within a block, as a count for the whole stream (or None)."""
    if progress is None:
        return None
    return lambda done: progress(base + done)


def _within_code_word(model, length: int, report):
    """``report``, checking first, after every model step, that the decoder has not read past the end
    of a whole code word of ``length`` bytes (format 3): its coder reads at most ``length + 6`` bytes
    (7 at the start, then one for each byte the encoder wrote after its first), so a code word that
    ran out is corrupt, and the decoder stops within a step (about 0.1 s) instead of decoding the
    rest of the block from zeros.  Models keep their coder state as ``rc`` (statemix.coder)."""
    from .coder import POS

    state = getattr(model, "rc", None)
    if state is None:
        return report

    def checked(done: int) -> None:
        if state[POS] > length + 6:
            raise StatemixError("corrupt stream: a modelled block's code word ended before its data")
        if report is not None:
            report(done)
    return checked


class Unpicklable:
    """Objects holding an open file or a model's live state refuse pickling, as the standard
    library's codec objects do."""

    def __reduce__(self):
        raise TypeError(f"cannot pickle {type(self).__name__!r} object")


class StreamCompressor(Unpicklable):
    """Compress data incrementally into one statemix stream: what :class:`statemix.Compressor` runs
    for an unsegmented stream, and for each segment of a segmented file (:mod:`statemix.segments`).

    ``level``, ``model``, ``size_hint``, ``threads`` and ``progress`` as statemix.Compressor takes
    them (already checked).
    """

    def __init__(self, *, level: int | None = None, model: str | None = None,
                 size_hint: int | None = None, threads: int | None = None, progress=None):
        self._spec = spec_for_level(level, size_hint, model)
        self._threads = threads or 1
        _set_threads(threads)
        self._coder = BlockCoder(build_model(self._spec), self._threads)
        self._progress = progress
        self._pending = bytearray()
        self._blocks = 0
        self._length = 0
        self._crc = 0
        self._started = False

    def compress(self, data) -> bytes:
        """Take more input (a bytes-like object of bytes); return whatever compressed bytes are ready."""
        self._pending += data
        out = bytearray(self._start())
        while len(self._pending) >= (limit := container.block_limit(self._blocks)):
            out += self._block(bytes(self._pending[:limit]))
            del self._pending[:limit]
        return bytes(out)

    def flush(self) -> bytes:
        """End the stream; return the remaining compressed bytes.  The object cannot be used after."""
        out = bytearray(self._start())
        if self._pending:
            out += self._block(bytes(self._pending))
            self._pending.clear()
        out += container.write_trailer(self._length, self._crc)
        return bytes(out)

    def _start(self) -> bytes:
        if self._started:
            return b""
        self._started = True
        return container.write_header(self._spec)

    def _block(self, raw: bytes) -> bytes:
        report = _reporter(self._progress, self._length)
        self._blocks += 1
        self._length += len(raw)
        self._crc = container.crc32(raw, self._crc)
        return self._coder.block(raw, report, offset=self._length - len(raw))


class BlockCoder:
    """Code one block at a time with ``model``: the model's code word, zstandard or the data itself,
    whichever is smallest; a block the model coded is learned whichever is kept (a learned kind).

    What StreamCompressor writes, and what statemix.diagnose replays with a traced model.
    """

    def __init__(self, model, threads: int = 1):
        self.model = model
        self._threads = threads

    def block(self, raw: bytes, report=None, *, offset: int = 0) -> bytes:
        """The block (header and payload) for ``raw``, which starts at byte ``offset`` of the stream.

        The model codes x86 code after the branch address transform (:mod:`statemix.x86`), chosen by
        its estimate (:func:`statemix.x86.pays`) and recorded as the block's kind.
        """
        from . import x86

        compress_zstd = zstandard.ZstdCompressor(level=ZSTD_LEVEL, write_content_size=False).compress
        probe = zstandard.ZstdCompressor(level=PROBE_LEVEL, write_content_size=False).compress(raw)
        coded = None
        modelled = len(probe) < PROBE_RATIO * len(raw)
        transformed = modelled and x86.pays(raw)
        if modelled:
            source = x86.encode(raw, offset) if transformed else raw
            if self._threads > 1:  # zstandard runs beside the model
                with ThreadPoolExecutor(1) as pool:
                    zstd_job = pool.submit(compress_zstd, raw)
                    coded = self.model.encode(source, len(raw) - 1, progress=report, x86=transformed)
                    zstd_payload = zstd_job.result()
            else:
                coded = self.model.encode(source, len(raw) - 1, progress=report, x86=transformed)
                zstd_payload = compress_zstd(raw)
        else:
            zstd_payload = compress_zstd(raw)
        zstd_fits = len(zstd_payload) < len(raw) and (not modelled or self._may_learn(raw, zstd_payload))
        if coded is not None and (len(coded) <= len(zstd_payload) or not zstd_fits):
            return container.write_block(container.MODELLED_X86 if transformed else container.MODELLED, raw, coded)
        if report is not None:
            report(len(raw))
        kind, payload = (container.ZSTANDARD, zstd_payload) if zstd_fits else (container.STORED, raw)
        # a block the model coded and lost: the model has learned it, and the decoder's model will too
        return container.write_block(container.learned_kind(kind, transformed) if modelled else kind, raw, payload)

    def _may_learn(self, raw: bytes, frame: bytes) -> bool:
        """Whether ``raw`` may be written as a learned zstandard block of ``frame``: what a reader
        checks (statemix.container.max_raw_length, with the model's ``max_learned_length``)."""
        limit = container.max_raw_length(container.ZSTANDARD_LEARNED, len(frame),
                                         getattr(self.model, "max_learned_length", None))
        return len(raw) <= limit


class Decompressor(Unpicklable):
    """Decompress one statemix stream given in any pieces (like lzma.LZMADecompressor).

    After the stream's end, ``eof`` is True and any further bytes are in ``unused_data``.
    ``memory_limit`` (bytes; default ``DEFAULT_MEMORY_LIMIT``) refuses a stream whose model would
    need more memory, before anything is allocated.  A stream whose size does not bound its decoding
    work (older formats and models: statemix.container, "Streams read only on request") is refused
    unless ``legacy`` is true.
    """

    def __init__(self, *, threads: int | None = None, memory_limit: int | None = None, legacy: bool = False,
                 progress=None):
        check_options(threads=threads, memory_limit=memory_limit)
        _set_threads(threads)
        self._memory_limit = DEFAULT_MEMORY_LIMIT if memory_limit is None else memory_limit
        self._legacy = bool(legacy)
        self._progress = progress
        self._input = bytearray()
        self._output = bytearray()
        self._model = None
        self._learns_other_blocks = False
        self._version = container.FORMAT_VERSION
        self._length = 0
        self._crc = 0
        self._starved = True
        self.eof = False
        self.unused_data = b""
        self.needs_input = True

    @property
    def length(self) -> int:
        """Bytes of data decoded (and verified) so far."""
        return self._length

    @property
    def crc(self) -> int:
        """CRC32 of the data decoded so far."""
        return self._crc

    def decompress(self, data, max_length: int = -1) -> bytes:
        """Decompress ``data``; return at most ``max_length`` bytes (all there are if negative)."""
        max_length = operator.index(max_length)
        view = memoryview(data).cast("B")  # both arguments are checked before any state changes
        if self.eof:
            raise EOFError("already at end of stream")
        self._input += view
        self._starved = False
        while (max_length < 0 or len(self._output) < max_length) and not self.eof:
            if not self._step():
                self._starved = True
                break
        if max_length < 0:
            result = bytes(self._output)
            self._output.clear()
        else:
            result = bytes(self._output[:max_length])
            del self._output[:max_length]
        self.needs_input = not self.eof and not self._output and self._starved
        return result

    def _step(self) -> bool:
        """Decode one header, block or trailer from the input; False when more input is needed."""
        try:
            if self._model is None:
                spec, version, used = container.read_versioned_header(self._input)
                if not (self._legacy or decoding_bounded(spec, version)):
                    raise StatemixError(container.UNBOUNDED.format(version=version))
                self._model = build_model(spec, memory_limit=self._memory_limit)
                self._learns_other_blocks = version == 1
                self._version = version
                del self._input[:used]
                return True
            header = container.read_block_header(self._input, 0, self._version)
            if header is None:
                self._finish()
                return True
            if self._version >= 3 and header.kind in container.MODELLED_KINDS:
                container.check_block_bound(header, getattr(self._model, "max_raw_length", None))
            elif header.kind in container.LEARNED_KINDS:
                container.check_block_bound(header, getattr(self._model, "max_learned_length", None))
            end = header.size + header.payload_length
            if len(self._input) < end:
                return False
            payload = bytes(self._input[header.size : end])
            del self._input[:end]
        except NeedMore:
            return False
        report = _reporter(self._progress, self._length)
        raw = self._decode_block(header, payload, report)
        if container.crc32(raw) != header.crc:
            raise StatemixError("corrupt stream: block checksum mismatch")
        if header.kind in container.LEARNED_KINDS or (self._learns_other_blocks and header.kind not in
                                                      container.MODELLED_KINDS):
            self._learn(raw, header.kind in container.X86_KINDS, report)
        elif report is not None and header.kind not in container.MODELLED_KINDS:
            report(len(raw))
        self._length += len(raw)
        self._crc = container.crc32(raw, self._crc)
        self._output += raw
        return True

    def _decode_block(self, header: container.BlockHeader, payload: bytes, report) -> bytes:
        """The block's data (not yet checked against its CRC)."""
        if header.kind in container.MODELLED_KINDS:
            from . import x86

            if self._version >= 3:
                report = _within_code_word(self._model, len(payload), report)
            if header.kind == container.MODELLED:
                return self._model.decode(payload, header.raw_length, progress=report)
            return x86.decode(self._model.decode(payload, header.raw_length, progress=report, x86=True), self._length)
        if header.kind in container.STORED_KINDS:
            return payload
        try:
            # a frame may declare its own size, and zstandard would allocate that much (a damaged
            # header can declare exabytes): only the block's own length is accepted
            if zstandard.frame_content_size(payload) not in (-1, header.raw_length):
                raise StatemixError("corrupt stream: zstandard block declares another length")
            raw = zstandard.ZstdDecompressor().decompress(payload, max_output_size=header.raw_length)
        except zstandard.ZstdError as exc:
            raise StatemixError(f"corrupt stream: zstandard block: {exc}") from None
        if len(raw) != header.raw_length:
            raise StatemixError("corrupt stream: zstandard block has the wrong length")
        return raw

    def _learn(self, raw: bytes, transformed: bool, report) -> None:
        """Replay a block the encoder's model learned without coding it (``transformed``: as x86 code)."""
        if transformed:
            from . import x86

            self._model.learn(x86.encode(raw, self._length), progress=report, x86=True)
        else:
            self._model.learn(raw, progress=report)

    def _finish(self) -> None:
        length, crc, used = container.read_trailer(self._input, 0)
        if length != self._length or crc != self._crc:
            raise StatemixError("corrupt stream: length or checksum of the whole stream mismatch")
        self.unused_data = bytes(self._input[used:])
        self._input.clear()
        self.eof = True


class StreamsDecompressor(Unpicklable):
    """Decompress any number of concatenated streams, given in any pieces, checking a seek index.

    What ``decompress()``, the file reader and the command line read: streams one after another, and
    the seek index of a segmented file (``statemix.segments``), whose every entry must match the
    stream decoded at its place.  Call :meth:`check_end` when the input is exhausted.
    """

    def __init__(self, *, preceding: list[container.Segment] = (), **options):
        """``preceding``: when the input starts at a segment of an indexed file, the index's entries
        of the segments before it (taken as read).  Other options: those of Decompressor."""
        self._options = options
        self._progress = options.pop("progress", None)
        self._input = bytearray()
        self._stream = None
        self._done = 0  # uncompressed bytes of the finished streams
        self._consumed = 0  # compressed bytes of the current stream so far
        self._offset = sum(s.compressed for s in preceding)  # bytes of the finished streams and indexes
        self._segments: list[container.Segment] = list(preceding)  # since the last seek index
        self.streams = 0

    def decompress(self, data, max_length: int = -1) -> bytes:
        """Decompress ``data``; return at most ``max_length`` bytes (all there are if negative)."""
        max_length = operator.index(max_length)
        self._input += memoryview(data).cast("B")
        out = bytearray()
        while max_length < 0 or len(out) < max_length:
            if self._stream is None and not self._start():
                break
            taken = len(self._input)
            self._consumed += taken
            want = -1 if max_length < 0 else max_length - len(out)
            piece = self._stream.decompress(bytes(self._input), want)
            self._input.clear()
            out += piece
            if self._stream.eof:
                self._end_of_stream()
            elif self._stream.needs_input:
                break
        return bytes(out)

    def _start(self) -> bool:
        """Begin the next stream, or take a seek index; False when more input is needed."""
        while self._input:
            if bytes(self._input[:4]) != container.INDEX_MAGIC[: len(self._input[:4])]:
                if self.streams and bytes(self._input[:4]) != container.MAGIC[: len(self._input[:4])]:
                    from .info import trailing_junk

                    raise StatemixError(trailing_junk(self._offset))
                done = self._done
                progress = None if self._progress is None else (lambda n: self._progress(done + n))
                self._stream = Decompressor(progress=progress, **self._options)
                self._consumed = 0
                self.streams += 1
                return True
            try:
                segments, used = container.read_index(self._input, 0)
            except NeedMore:
                return False
            if not container.index_lists(segments, self._segments):
                raise StatemixError("corrupt stream: the seek index does not match the streams")
            del self._input[:used]
            self._offset += used
            self._segments = []
        return False

    def _end_of_stream(self) -> None:
        rest = self._stream.unused_data
        self._segments.append(container.Segment(self._consumed - len(rest), self._stream.length, self._stream.crc))
        self._offset += self._consumed - len(rest)
        self._done += self._stream.length
        self._input += rest
        self._stream = None

    def check_end(self) -> None:
        """Raise StatemixError unless the input so far ends exactly after a stream (or its index)."""
        if self._stream is not None:
            raise StatemixError("truncated stream: the input ended before the end of the stream")
        if self._input:
            raise StatemixError("truncated stream: the input ended before the end of the stream")
        if not self.streams:
            raise StatemixError("empty input: not a statemix stream")
