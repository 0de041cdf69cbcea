"""The incremental compressor of the public API: one stream, or a segmented file.

:class:`Compressor` checks its options and picks its engine once: a
:class:`statemix.codec.StreamCompressor` (one stream, its blocks coded one after another) or, given
``segment_size``, a :class:`statemix.segments.SegmentWriter` (independent streams of that many bytes,
coded by ``threads`` workers, and a seek index).  Both take input in any pieces and hand back
compressed bytes as they are ready; this class adds the checks every codec object of the standard
library makes (bytes-like input, no use after :meth:`Compressor.flush`).
"""

from __future__ import annotations

import operator

from .codec import StreamCompressor, Unpicklable, check_options
from .segments import SegmentWriter


class Compressor(Unpicklable):
    """Compress data incrementally into one statemix stream (like lzma.LZMACompressor).

    ``model`` ("cm", the default, or "ssm") and ``level`` (1-3) select the model (they change the
    output and are recorded in the stream).  ``size_hint``, the total input length when known, lets
    small inputs use smaller tables (changes the output; recorded).  ``segment_size`` (bytes) makes
    a segmented file (``statemix.segments``: independent streams of that many bytes each, coded by
    ``threads`` workers, and a seek index).  ``threads`` and ``progress`` only change speed and
    reporting.
    """

    def __init__(self, *, level: int | None = None, model: str | None = None,
                 size_hint: int | None = None, threads: int | None = None, segment_size: int | None = None,
                 progress=None):
        check_options(level=level, model=model, threads=threads, segment_size=segment_size)
        if size_hint is not None:
            size_hint = operator.index(size_hint)
        if segment_size is None:
            self._engine = StreamCompressor(level=level, model=model, size_hint=size_hint, threads=threads,
                                            progress=progress)
        else:
            self._engine = SegmentWriter(segment_size, level=level, model=model, threads=threads or 1,
                                         progress=progress)
        self._finished = False

    def compress(self, data) -> bytes:
        """Take more input; return whatever compressed bytes are ready."""
        if self._finished:
            raise ValueError("compressor already flushed")
        return self._engine.compress(memoryview(data).cast("B"))

    def flush(self) -> bytes:
        """End the stream; return the remaining compressed bytes.  The object cannot be used after."""
        if self._finished:
            raise ValueError("repeated call to flush()")
        self._finished = True
        return self._engine.flush()
