"""StatemixFile and open(): statemix streams as file objects, in the manner of lzma.LZMAFile.

Reading wraps a :class:`_DecompressReader` (a raw stream over a Decompressor that moves on to the next
concatenated stream) in io.BufferedReader; writing feeds a Compressor.  A stream that ends early raises
EOFError from the reader, as LZMAFile does; every other problem is a StatemixError.
"""

from __future__ import annotations

import builtins
import io
import os

from ._errors import StatemixError
from .codec import Compressor, Decompressor

_READ_CHUNK = 1 << 16


class _DecompressReader(io.RawIOBase):
    """A raw, read-only stream of the data decompressed from ``fp`` (all its streams in turn)."""

    def __init__(self, fp, threads: int | None = None):
        self._fp = fp
        self._threads = threads
        self._decompressor = Decompressor(threads=threads)
        self._at_end = False

    def readable(self) -> bool:
        return True

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
            if self._decompressor.eof:
                rest = self._decompressor.unused_data or self._fp.read(_READ_CHUNK)
                if not rest:
                    self._at_end = True
                    return b""
                self._decompressor = Decompressor(threads=self._threads)  # a concatenated stream
            elif self._decompressor.needs_input:
                rest = self._fp.read(_READ_CHUNK)
                if not rest:
                    raise EOFError("compressed file ended before the end-of-stream marker was reached")
            else:
                rest = b""
            data = self._decompressor.decompress(rest, size)
            if data:
                return data


class StatemixFile(io.BufferedIOBase):
    """A file object giving access to a statemix-compressed file (mode "r", "w", "x" or "a")."""

    def __init__(self, filename, mode: str = "r", *, level: int | None = None,
                 model: str | None = None, threads: int | None = None):
        self._fp = None
        self._close_fp = False
        self._mode = None
        if mode in ("r", "rb"):
            mode_code = "r"
        elif mode in ("w", "wb", "x", "xb", "a", "ab"):
            mode_code = mode[0]
        else:
            raise ValueError(f"invalid mode: {mode!r}")
        if not isinstance(filename, (str, bytes, os.PathLike)) and not (
            hasattr(filename, "read") or hasattr(filename, "write")
        ):
            raise TypeError("filename must be a str, bytes, os.PathLike or file object")
        # options are checked (by building the codec) before any file is opened or truncated
        if mode_code == "r":
            Decompressor(threads=threads)
        else:
            compressor = Compressor(level=level, model=model, threads=threads)
        if isinstance(filename, (str, bytes, os.PathLike)):
            self._fp = builtins.open(filename, mode_code + "b")
            self._close_fp = True
        else:
            self._fp = filename
        if mode_code == "r":
            self._buffer = io.BufferedReader(_DecompressReader(self._fp, threads))
            self._mode = "r"
        else:
            self._compressor = compressor
            self._mode = "w"
        self._position = 0

    def close(self) -> None:
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
        return False

    def read(self, size: int | None = -1) -> bytes:
        self._check_mode("r")
        data = self._buffer.read(-1 if size is None else size)
        self._position += len(data)
        return data

    def read1(self, size: int = -1) -> bytes:
        self._check_mode("r")
        data = self._buffer.read1(size if size >= 0 else _READ_CHUNK)
        self._position += len(data)
        return data

    def readinto(self, buffer) -> int:
        self._check_mode("r")
        n = self._buffer.readinto(buffer)
        self._position += n
        return n

    def readline(self, size: int | None = -1) -> bytes:
        self._check_mode("r")
        line = self._buffer.readline(-1 if size is None else size)
        self._position += len(line)
        return line

    def peek(self, size: int = -1) -> bytes:
        self._check_mode("r")
        return self._buffer.peek(size)

    def write(self, data) -> int:
        self._check_mode("w")
        with memoryview(data) as view:
            length = view.nbytes
            self._fp.write(self._compressor.compress(view))
        self._position += length
        return length

    def tell(self) -> int:
        self._check_open()
        return self._position

    def _check_open(self) -> None:
        if self._mode is None:
            raise ValueError("I/O operation on closed file")

    def _check_mode(self, mode: str) -> None:
        self._check_open()
        if self._mode != mode:
            raise io.UnsupportedOperation(f"file not open for {'reading' if mode == 'r' else 'writing'}")


def open(file, mode: str = "rb", *, level: int | None = None, model: str | None = None,
         threads: int | None = None, encoding: str | None = None, errors: str | None = None,
         newline: str | None = None):
    """Open a statemix-compressed file in binary or text mode, like lzma.open()."""
    if "t" in mode:
        if "b" in mode:
            raise ValueError(f"invalid mode: {mode!r}")
    else:
        if encoding is not None:
            raise ValueError("argument 'encoding' not supported in binary mode")
        if errors is not None:
            raise ValueError("argument 'errors' not supported in binary mode")
        if newline is not None:
            raise ValueError("argument 'newline' not supported in binary mode")
    binary = StatemixFile(file, mode.replace("t", ""), level=level, model=model, threads=threads)
    if "t" in mode:
        return io.TextIOWrapper(binary, encoding=io.text_encoding(encoding), errors=errors, newline=newline)
    return binary


__all__ = ["StatemixFile", "open", "StatemixError"]
