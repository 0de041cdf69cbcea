"""Incremental compressor and decompressor objects: the container format driven by a model.

:class:`Compressor` cuts its input into blocks of ``container.BLOCK_SIZE`` bytes and codes each with
the stream's model and with zstandard (level 19); the smallest of the model's code word, the
zstandard frame and the data itself is written (the model learns every block either way, and the
decoder replays a block that was not modelled).  So no block costs more than zstd -19 or storing.
:class:`Decompressor` reads one stream, in any pieces, and releases a block's data only after its
CRC32 matched.

Both objects hold a model whose memory is fixed by the stream's configuration (see
``statemix.models``); a Compressor additionally buffers at most one block of input and a
Decompressor at most one block of input and its output.  Neither object is thread-safe: use one per
thread (two objects in two threads are independent and give the same bytes as alone).
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

import zstandard

from . import container
from ._errors import StatemixError
from .container import NeedMore
from .models import build_model, spec_for_level

ZSTD_LEVEL = 19  # every block is also compressed by zstandard; the smallest of the three is kept


def _set_threads(threads: int | None) -> None:
    if threads is not None:
        if threads < 1:
            raise StatemixError(f"threads must be at least 1, not {threads}")
        from ._jit import set_threads

        set_threads(threads)


class Compressor:
    """Compress data incrementally into one statemix stream.

    ``model`` ("cm", the default, or the experimental "ssm") and ``level`` (1-3) select the
    model (they change the output and are recorded in the stream).  ``size_hint``, the total input
    length when known, lets small inputs use smaller tables (changes the output; recorded).
    ``threads`` only changes speed.
    """

    def __init__(self, *, level: int | None = None, model: str | None = None,
                 size_hint: int | None = None, threads: int | None = None):
        self._spec = spec_for_level(level, size_hint, model)
        self._threads = threads or 1
        _set_threads(threads)
        self._model = build_model(self._spec)
        self._pending = bytearray()
        self._length = 0
        self._crc = 0
        self._started = False
        self._finished = False

    def compress(self, data) -> bytes:
        """Take more input; return whatever compressed bytes are ready."""
        if self._finished:
            raise ValueError("compressor already flushed")
        self._pending += memoryview(data).cast("B")
        out = bytearray(self._start())
        while len(self._pending) >= container.BLOCK_SIZE:
            out += self._block(bytes(self._pending[: container.BLOCK_SIZE]))
            del self._pending[: container.BLOCK_SIZE]
        return bytes(out)

    def flush(self) -> bytes:
        """End the stream; return the remaining compressed bytes.  The object cannot be used after."""
        if self._finished:
            raise ValueError("repeated call to flush()")
        out = bytearray(self._start())
        if self._pending:
            out += self._block(bytes(self._pending))
            self._pending.clear()
        out += container.write_trailer(self._length, self._crc)
        self._finished = True
        return bytes(out)

    def _start(self) -> bytes:
        if self._started:
            return b""
        self._started = True
        return container.write_header(self._spec)

    def _block(self, raw: bytes) -> bytes:
        self._length += len(raw)
        self._crc = container.crc32(raw, self._crc)
        compress_zstd = zstandard.ZstdCompressor(level=ZSTD_LEVEL, write_content_size=False).compress
        if self._threads > 1:  # zstandard runs beside the model
            with ThreadPoolExecutor(1) as pool:
                zstd_job = pool.submit(compress_zstd, raw)
                coded = self._model.encode(raw, len(raw) - 1)
                zstd_payload = zstd_job.result()
        else:
            coded = self._model.encode(raw, len(raw) - 1)
            zstd_payload = compress_zstd(raw)
        kind, payload = container.STORED, raw
        if coded is not None:
            kind, payload = container.MODELLED, coded
        if len(zstd_payload) < len(payload):
            kind, payload = container.ZSTANDARD, zstd_payload
        return container.write_block(kind, raw, payload)


class Decompressor:
    """Decompress one statemix stream given in any pieces (like lzma.LZMADecompressor).

    After the stream's end, ``eof`` is True and any further bytes are in ``unused_data``.
    """

    def __init__(self, *, threads: int | None = None):
        _set_threads(threads)
        self._input = bytearray()
        self._output = bytearray()
        self._model = None
        self._length = 0
        self._crc = 0
        self._starved = True
        self.eof = False
        self.unused_data = b""
        self.needs_input = True

    def decompress(self, data, max_length: int = -1) -> bytes:
        """Decompress ``data``; return at most ``max_length`` bytes (all there are if negative)."""
        if self.eof:
            raise EOFError("already at end of stream")
        self._input += memoryview(data).cast("B")
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
                spec, used = container.read_header(self._input)
                self._model = build_model(spec)
                del self._input[:used]
                return True
            header = container.read_block_header(self._input, 0)
            if header is None:
                self._finish()
                return True
            end = header.size + header.payload_length
            if len(self._input) < end:
                return False
            payload = bytes(self._input[header.size : end])
            del self._input[:end]
        except NeedMore:
            return False
        raw = self._decode_block(header, payload)
        if container.crc32(raw) != header.crc:
            raise StatemixError("corrupt stream: block checksum mismatch")
        self._length += len(raw)
        self._crc = container.crc32(raw, self._crc)
        self._output += raw
        return True

    def _decode_block(self, header: container.BlockHeader, payload: bytes) -> bytes:
        if header.kind == container.MODELLED:
            return self._model.decode(payload, header.raw_length)
        if header.kind == container.STORED:
            raw = payload
        else:
            try:
                raw = zstandard.ZstdDecompressor().decompress(payload, max_output_size=header.raw_length)
            except zstandard.ZstdError as exc:
                raise StatemixError(f"corrupt stream: zstandard block: {exc}") from None
            if len(raw) != header.raw_length:
                raise StatemixError("corrupt stream: zstandard block has the wrong length")
        self._model.learn(raw)
        return raw

    def _finish(self) -> None:
        length, crc, used = container.read_trailer(self._input, 0)
        if length != self._length or crc != self._crc:
            raise StatemixError("corrupt stream: length or checksum of the whole stream mismatch")
        self.unused_data = bytes(self._input[used:])
        self._input.clear()
        self.eof = True

