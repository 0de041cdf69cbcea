"""StatemixFile and open(): statemix streams as file objects, in the manner of lzma.LZMAFile.

Reading wraps a :class:`_DecompressReader` (a raw stream over a Decompressor that moves on to the next
concatenated stream) in io.BufferedReader; writing feeds a Compressor.  A stream that ends early raises
EOFError from the reader, as LZMAFile does; every other problem is a StatemixError.

Like BZ2File, a StatemixFile may be shared between threads: one lock serialises every operation, so
concurrent writes land whole and in some order, and concurrent reads each get a distinct part of the
data.  Seeking follows LZMAFile: in read mode ``seek()`` moves forward by decoding and backward by
rewinding the underlying file to the start (so it needs a seekable file) and decoding forward again;
seeking past the end stops at the end.  In a segmented file with a seek index (statemix.segments) it
jumps to the segment that holds the target and decodes only from there.  Positions are offsets into the uncompressed data.  Neither the
file nor the codec objects can be pickled (they hold an open file and a model's live state).
"""

from __future__ import annotations

import bisect
import builtins
import codecs
import io
import itertools
import os
import threading

from . import container
from ._errors import StatemixError
from .codec import StreamsDecompressor, Unpicklable, check_options
from .compressor import Compressor
from .segments import read_spans

_READ_CHUNK = 1 << 16


class _DecompressReader(io.RawIOBase):
    """A raw, read-only stream of the data decompressed from ``fp`` (all its streams in turn)."""

    def __init__(self, fp, threads: int | None = None, memory_limit=None, legacy: bool = False):
        self._fp = fp
        self._options = dict(threads=threads, memory_limit=memory_limit, legacy=legacy)
        self._decompressor = StreamsDecompressor(**self._options)
        self._more_ready = False  # the decompressor may hold output without more input
        self._at_end = False
        self._position = 0  # uncompressed bytes returned so far
        self._size = -1  # total uncompressed bytes, once the end was reached
        self._segments = None  # the seek index, read when first needed
        self._checked = 0  # entries of the index whose streams' trailers were checked

    def readable(self) -> bool:
        return True

    def seekable(self) -> bool:
        return self._fp.seekable()

    def readinto(self, buffer) -> int:
        with memoryview(buffer) as view, view.cast("B") as target:
            data = self.read(len(target))
            target[: len(data)] = data
        return len(data)

    def read(self, size: int = -1) -> bytes:
        if size < 0:
            return self.readall()
        if size == 0 or self._at_end:
            return b""
        while True:
            chunk = b"" if self._more_ready else self._fp.read(_READ_CHUNK)
            if not chunk and not self._more_ready:
                self._check_end()
                return b""
            data = self._decompressor.decompress(chunk, size)
            self._more_ready = len(data) == size  # else all input so far is decoded
            if data:
                self._position += len(data)
                return data

    def _check_end(self) -> None:
        try:
            self._decompressor.check_end()
        except StatemixError as exc:
            if str(exc).startswith(("truncated", "empty")):
                raise EOFError("compressed file ended before the end-of-stream marker was reached") from None
            raise
        self._at_end = True
        self._size = self._position

    def _rewind(self, segment: int = 0) -> None:
        """Start decoding again at the start of the file, or of ``segment`` of its seek index."""
        segments = self._index()[:segment]
        start = sum(s.compressed for s in segments)
        if segment:
            self._check_index_through(segment)
        self._fp.seek(start)
        self._decompressor = StreamsDecompressor(preceding=segments, **self._options)
        self._more_ready = False
        self._at_end = False
        self._position = sum(s.uncompressed for s in segments)

    def _check_index_through(self, segment: int) -> None:
        """Check that the streams of the index's entries up to ``segment`` end with the trailers it
        expects (their lengths and CRCs; each entry once): the entries before a segment are taken as
        read when decoding starts there, so an entry that lied would shift every byte after it."""
        entries = self._index()
        at = sum(s.compressed for s in entries[: self._checked])
        for entry in entries[self._checked : segment + 1]:
            trailer = container.write_trailer(entry.uncompressed, entry.crc)
            self._fp.seek(at + entry.compressed - len(trailer))
            if self._fp.read(len(trailer)) != trailer:
                raise StatemixError("corrupt stream: the seek index does not match the streams")
            at += entry.compressed
        self._checked = max(self._checked, segment + 1)

    def _index(self) -> list:
        """The segments of the file's seek index ([] when it has none, or a damaged one)."""
        if self._segments is None:
            here = self._fp.tell()
            try:
                self._segments = read_spans(self._fp, scan=False)[1] or []
            finally:
                self._fp.seek(here)
        return self._segments

    def _segment_of(self, offset: int) -> int:
        """The segment whose data holds ``offset`` (0 without an index)."""
        starts = list(itertools.accumulate((s.uncompressed for s in self._index()), initial=0))
        return max(0, min(bisect.bisect_right(starts, offset) - 1, len(self._index()) - 1))

    def seek(self, offset: int, whence: int = io.SEEK_SET) -> int:
        if whence == io.SEEK_SET:
            pass
        elif whence == io.SEEK_CUR:
            offset += self._position
        elif whence == io.SEEK_END:
            if self._size < 0 and self._index():
                self._size = sum(s.uncompressed for s in self._index())
            if self._size < 0:
                while self.read(io.DEFAULT_BUFFER_SIZE):
                    pass
            offset += self._size
        else:
            raise ValueError(f"invalid whence ({whence}, should be {io.SEEK_SET}, {io.SEEK_CUR} or {io.SEEK_END})")
        segment = self._segment_of(offset)
        if offset < self._position or segment > self._segment_of(self._position):
            self._rewind(segment)  # with a seek index, at the segment that holds offset
        offset -= self._position
        while offset > 0:  # decode forward, dropping the data
            data = self.read(min(io.DEFAULT_BUFFER_SIZE, offset))
            if not data:
                break
            offset -= len(data)
        return self._position

    def tell(self) -> int:
        return self._position


class StatemixFile(Unpicklable, io.BufferedIOBase):
    """A file object giving access to a statemix-compressed file (mode "r", "w", "x" or "a").

    ``level`` and ``model`` choose the model when writing (an error in read mode); ``threads`` only
    changes speed; ``memory_limit`` (bytes, reading) refuses streams whose model needs more;
    ``legacy`` (reading) reads streams whose size does not bound their decoding work too
    (:func:`statemix.decompress`).
    """

    def __init__(self, filename, mode: str = "r", *, level: int | None = None,
                 model: str | None = None, threads: int | None = None, memory_limit=None,
                 legacy: bool = False):
        self._fp = None
        self._close_fp = False
        self._mode = None
        self._lock = threading.RLock()
        if mode in ("r", "rb"):
            mode_code = "r"
            if level is not None or model is not None:
                raise ValueError("level and model can only be given when writing")
        elif mode in ("w", "wb", "x", "xb", "a", "ab"):
            mode_code = mode[0]
            if memory_limit is not None or legacy:
                raise ValueError("memory_limit and legacy can only be given when reading")
        else:
            raise ValueError(f"invalid mode: {mode!r}")
        if not isinstance(filename, (str, bytes, os.PathLike)) and not (
            hasattr(filename, "read") or hasattr(filename, "write")
        ):
            raise TypeError("filename must be a str, bytes, os.PathLike or file object")
        # options are checked (by building the codec) before any file is opened or truncated
        check_options(level=level, model=model, threads=threads, memory_limit=memory_limit)
        if mode_code != "r":
            compressor = Compressor(level=level, model=model, threads=threads)
        if isinstance(filename, (str, bytes, os.PathLike)):
            self._fp = builtins.open(filename, mode_code + "b")
            self._close_fp = True
        else:
            self._fp = filename
        if mode_code == "r":
            self._buffer = io.BufferedReader(_DecompressReader(self._fp, threads, memory_limit, legacy))
            self._mode = "r"
        else:
            self._compressor = compressor
            self._mode = "w"
        self._position = 0  # uncompressed bytes written

    def close(self) -> None:
        with self._lock:
            if self._mode is None:
                return
            try:
                if self._mode == "r":
                    self._buffer.close()
                    self._buffer = None
                else:
                    self._fp.write(self._compressor.flush())
                    self._compressor = None
            finally:
                try:
                    if self._close_fp:
                        self._fp.close()
                finally:
                    self._fp = None
                    self._close_fp = False
                    self._mode = None

    @property
    def closed(self) -> bool:
        return self._mode is None

    def fileno(self) -> int:
        self._check_open()
        return self._fp.fileno()

    def readable(self) -> bool:
        self._check_open()
        return self._mode == "r"

    def writable(self) -> bool:
        self._check_open()
        return self._mode == "w"

    def seekable(self) -> bool:
        """True in read mode when the underlying file can seek (as LZMAFile)."""
        return self.readable() and self._buffer.seekable()

    def read(self, size: int | None = -1) -> bytes:
        with self._lock:
            self._check_mode("r")
            return self._buffer.read(-1 if size is None else size)

    def read1(self, size: int = -1) -> bytes:
        with self._lock:
            self._check_mode("r")
            return self._buffer.read1(size if size >= 0 else _READ_CHUNK)

    def readinto(self, buffer) -> int:
        with self._lock:
            self._check_mode("r")
            return self._buffer.readinto(buffer)

    def readline(self, size: int | None = -1) -> bytes:
        with self._lock:
            self._check_mode("r")
            return self._buffer.readline(-1 if size is None else size)

    def peek(self, size: int = -1) -> bytes:
        with self._lock:
            self._check_mode("r")
            return self._buffer.peek(size)

    def write(self, data) -> int:
        with self._lock:
            self._check_mode("w")
            with memoryview(data) as view:
                length = view.nbytes
                self._fp.write(self._compressor.compress(view))
            self._position += length
            return length

    def seek(self, offset: int, whence: int = io.SEEK_SET) -> int:
        """Move to ``offset`` bytes of uncompressed data (read mode only; may be slow, see above)."""
        with self._lock:
            self._check_mode("r", "seeking")
            if not self._buffer.seekable():
                raise io.UnsupportedOperation("the underlying file object does not support seeking")
            return self._buffer.seek(offset, whence)

    def tell(self) -> int:
        with self._lock:
            self._check_open()
            return self._buffer.tell() if self._mode == "r" else self._position

    def _check_open(self) -> None:
        if self._mode is None:
            raise ValueError("I/O operation on closed file")

    def _check_mode(self, mode: str, action: str | None = None) -> None:
        self._check_open()
        if self._mode != mode:
            action = action or ("reading" if mode == "r" else "writing")
            raise io.UnsupportedOperation(f"file not open for {action}")


def _check_text_arguments(encoding, errors, newline) -> None:
    """Raise what io.TextIOWrapper would raise for these arguments, before any file is touched."""
    if encoding is not None:
        if not isinstance(encoding, str):
            raise TypeError(f"open() argument 'encoding' must be str or None, not {type(encoding).__name__}")
        codecs.lookup(encoding)  # LookupError: unknown encoding
    if errors is not None:
        if not isinstance(errors, str):
            raise TypeError(f"open() argument 'errors' must be str or None, not {type(errors).__name__}")
        codecs.lookup_error(errors)  # LookupError: unknown error handler
    if newline is not None:
        if not isinstance(newline, str):
            raise TypeError(f"open() argument 'newline' must be str or None, not {type(newline).__name__}")
        if newline not in ("", "\n", "\r", "\r\n"):
            raise ValueError(f"illegal newline value: {newline!r}")


def open(file, mode: str = "rb", *, level: int | None = None, model: str | None = None,
         threads: int | None = None, memory_limit=None, legacy: bool = False, encoding: str | None = None,
         errors: str | None = None, newline: str | None = None):
    """Open a statemix-compressed file in binary or text mode, like lzma.open()."""
    if "t" in mode:
        if "b" in mode:
            raise ValueError(f"invalid mode: {mode!r}")
        _check_text_arguments(encoding, errors, newline)  # before the file is opened (or truncated)
    else:
        if encoding is not None:
            raise ValueError("argument 'encoding' not supported in binary mode")
        if errors is not None:
            raise ValueError("argument 'errors' not supported in binary mode")
        if newline is not None:
            raise ValueError("argument 'newline' not supported in binary mode")
    binary = StatemixFile(file, mode.replace("t", ""), level=level, model=model, threads=threads,
                          memory_limit=memory_limit, legacy=legacy)
    if "t" in mode:
        return io.TextIOWrapper(binary, encoding=io.text_encoding(encoding), errors=errors, newline=newline)
    return binary


__all__ = ["StatemixFile", "open", "StatemixError"]
