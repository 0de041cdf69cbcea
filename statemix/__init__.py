"""statemix: a lossless compressor whose model learns the file while it codes it.

The interface follows the standard library's lzma and bz2 modules: one-shot :func:`compress` and
:func:`decompress`, incremental :class:`Compressor` and :class:`Decompressor`, and :func:`open` /
:class:`StatemixFile` for files.  Every problem with the data is a :class:`StatemixError`.

Options that change the compressed bytes (``model``, ``level``) are recorded in the stream;
``threads`` changes only speed.
"""

from __future__ import annotations

from importlib.metadata import PackageNotFoundError, version as _version

from ._errors import StatemixError
from .codec import Decompressor, StreamsDecompressor, check_options
from .compressor import Compressor
from .file import StatemixFile, open
from .info import StreamInfo, read_info

try:
    __version__ = _version("statemix")
except PackageNotFoundError:  # running from a source tree
    __version__ = "0+unknown"

__all__ = [
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


def compress(data, /, *, level: int | None = None, model: str | None = None,
             threads: int | None = None, segment_size: int | None = None) -> bytes:
    """Compress ``data`` (any bytes-like object) into one statemix stream.

    ``model``: "cm" (default) or "ssm"; ``level``: 1-3 (default 2).  A bad option raises
    ValueError or TypeError, as the standard library's codecs do.
    """
    view = memoryview(data).cast("B")
    compressor = Compressor(level=level, model=model, size_hint=len(view), threads=threads,
                            segment_size=segment_size)
    return compressor.compress(view) + compressor.flush()


def decompress(data, /, *, threads: int | None = None, memory_limit: int | None = None,
               legacy: bool = False) -> bytes:
    """Decompress all the concatenated statemix streams in ``data``.

    Raises StatemixError if ``data`` is empty, truncated, corrupt, or followed by anything that is
    not another statemix stream, if a stream's model needs more memory than ``memory_limit``
    bytes (default: ``codec.DEFAULT_MEMORY_LIMIT``, 1.5 GiB), or if a stream's size does not bound
    the work of decoding it (streams of older formats and models) and ``legacy`` is false.
    """
    if threads is not None and threads > 1:  # the streams of a segmented file, in parallel
        import io

        from .segments import decompress_segments

        check_options(threads=threads, memory_limit=memory_limit)
        return b"".join(decompress_segments(io.BytesIO(data), threads=threads, memory_limit=memory_limit,
                                            legacy=legacy))
    decompressor = StreamsDecompressor(threads=threads, memory_limit=memory_limit, legacy=legacy)
    out = decompressor.decompress(data)
    decompressor.check_end()
    return out
