"""Segmented files: independent streams coded by parallel workers, and a seek index.

A segmented file is the concatenation of complete statemix streams, one per ``segment_size`` bytes
of input (the last may be shorter), followed by a seek index frame (``statemix.container``) that
lists each segment's compressed bytes, uncompressed bytes and CRC32.  Every segment's model starts
fresh, with tables sized to the segment, so a segment is exactly ``statemix.compress(segment)`` and
the output depends on the segment size, never on the number of workers.  Any statemix reader decodes
the file (it is a sequence of streams; readers check the index against the streams they decoded).

Workers are threads: the model kernels release the GIL, so ``threads`` workers use ``threads``
cores.  Each worker runs its kernels on one numba thread.  At most ``threads`` segments are in
flight, so memory is bounded by ``threads`` times (segment + output + the model, see
statemix.codec).  Decompression in parallel (:func:`decompress_segments`) reads the index, or scans
the streams' structure when there is none, and decodes ``threads`` segments at a time in order.

Progress: workers count their bytes into one shared tally; only the calling thread calls the user's
``progress`` (every 0.1 s while it waits), and an exception raised there stops every worker at its
next step.
"""

from __future__ import annotations

import threading
from collections import deque
from concurrent.futures import FIRST_EXCEPTION, ThreadPoolExecutor, wait

from . import container
from ._errors import StatemixError
from .codec import StreamCompressor, StreamsDecompressor

POLL_SECONDS = 0.1
#: the segment size the command line's bare --segment-size and statemix.distributed use (bytes): 1%
#: larger than one stream on 18.6 MB of mixed text, against 5% at 1 MiB and 0.3% at 16 MiB
DEFAULT_SEGMENT = 4 << 20


class _Cancelled(Exception):
    """A worker stopped because the caller's progress callback raised."""


class _Tally:
    """Bytes done per segment, written by workers and read by the caller (under a lock)."""

    def __init__(self):
        self._lock = threading.Lock()
        self._done = {}
        self.finished = 0  # bytes of segments already handed back
        self.cancelled = False

    def reporter(self, number: int):
        def report(done: int) -> None:
            if self.cancelled:
                raise _Cancelled
            with self._lock:
                self._done[number] = done
        return report

    def retire(self, number: int, size: int) -> None:
        with self._lock:
            self._done.pop(number, None)
            self.finished += size

    def total(self) -> int:
        with self._lock:
            return self.finished + sum(self._done.values())


def _single_threaded(work, *args):
    from ._jit import set_threads

    set_threads(1)  # numba's thread count is per Python thread
    return work(*args)


class _OrderedPool:
    """Run jobs on ``threads`` threads; hand back their results in submission order."""

    def __init__(self, threads: int, progress):
        self._threads = threads
        self._pool = ThreadPoolExecutor(threads)
        self._jobs: deque = deque()
        self._progress = progress
        self.tally = _Tally()
        self._submitted = 0

    def submit(self, work, size: int | None, *args) -> None:
        """Run ``work(*args, report)``; ``size``: the bytes the job counts for progress when it is
        done (None: the length of its result)."""
        number = self._submitted
        self._submitted += 1
        future = self._pool.submit(_single_threaded, work, *args, self.tally.reporter(number))
        self._jobs.append((number, size, future))

    def ready(self, block: bool) -> list:
        """Results of the finished jobs at the head of the queue; with ``block``, first wait while
        ``threads`` jobs are in flight."""
        out = []
        while self._jobs:
            number, size, future = self._jobs[0]
            if not future.done():
                if not (block and len(self._jobs) >= self._threads):
                    break
                self._wait(future)
            self._jobs.popleft()
            if future.exception() is not None:
                self.close()
                raise future.exception()
            result = future.result()
            out.append(result)
            self.tally.retire(number, len(result) if size is None else size)
            self._report()
        return out

    def drain(self) -> list:
        out = []
        while self._jobs:
            self._wait(self._jobs[0][2])
            out += self.ready(block=False)
        return out

    def _wait(self, future) -> None:
        while not future.done():
            wait([future, *(job[2] for job in self._jobs)], timeout=POLL_SECONDS, return_when=FIRST_EXCEPTION)
            for job in self._jobs:
                if job[2].done() and job[2].exception() is not None:
                    self.close()
                    raise job[2].exception()
            self._report()

    def _report(self) -> None:
        if self._progress is not None:
            try:
                self._progress(self.tally.total())
            except BaseException:
                self.close()
                raise

    def close(self) -> None:
        self.tally.cancelled = True
        self._pool.shutdown(wait=True, cancel_futures=True)


def _compress_segment(data: bytes, level, model, report) -> bytes:
    compressor = StreamCompressor(level=level, model=model, size_hint=len(data), progress=report)
    return compressor.compress(data) + compressor.flush()


class SegmentWriter:
    """The engine of ``statemix.Compressor(segment_size=...)``: cut, compress in parallel, index."""

    def __init__(self, segment_size: int, *, level, model, threads: int, progress):
        self._segment_size = segment_size
        self._level, self._model = level, model
        self._pool = _OrderedPool(threads, progress)
        self._pending = bytearray()
        self._index: list[container.Segment] = []
        self._written = 0  # segments whose streams were handed back

    def compress(self, view) -> bytes:
        self._pending += view
        done = []
        while len(self._pending) >= self._segment_size:
            self._submit(bytes(self._pending[: self._segment_size]))
            del self._pending[: self._segment_size]
            done += self._pool.ready(block=True)  # at most ``threads`` segments in flight
        return self._collect(done + self._pool.ready(block=False))

    def flush(self) -> bytes:
        try:
            if self._pending or not self._index:
                self._submit(bytes(self._pending))
                self._pending.clear()
            out = self._collect(self._pool.drain())
        finally:
            self._pool.close()
        return out + container.write_index(self._index)

    def _submit(self, data: bytes) -> None:
        self._pool.submit(_compress_segment, len(data), data, self._level, self._model)
        self._index.append(container.Segment(0, len(data), container.crc32(data)))

    def _collect(self, streams: list[bytes]) -> bytes:
        for stream in streams:
            entry = self._index[self._written]
            self._index[self._written] = container.Segment(len(stream), entry.uncompressed, entry.crc)
            self._written += 1
        return b"".join(streams)


def _decompress_stream(stream: bytes, memory_limit, legacy: bool, report) -> bytes:
    decompressor = StreamsDecompressor(memory_limit=memory_limit, legacy=legacy, progress=report)
    out = decompressor.decompress(stream)
    decompressor.check_end()
    return out


def read_spans(fp, scan: bool = True) -> tuple[list[tuple[int, int]], list[container.Segment] | None]:
    """(offset, compressed bytes) of every stream of the seekable binary file ``fp``, and its index.

    From the seek index when the file ends with an intact one whose entries add up to the file, else
    from a scan of the streams' structure (headers and block headers; payloads are skipped), which
    raises StatemixError on anything damaged (no scan, and no spans, with ``scan=False``).  ``fp``
    is left at its start.
    """
    from .info import read_info

    size = fp.seek(0, 2)
    tail_length = min(size, container.INDEX_TAIL)
    fp.seek(size - tail_length)
    frame = container.index_at_end(fp.read(tail_length))
    if frame is not None and frame <= size:
        fp.seek(size - frame)
        try:
            segments, _ = container.read_index(fp.read(frame), 0)
        except (StatemixError, container.NeedMore):
            segments = None  # damaged: scan instead
        if segments and sum(s.compressed for s in segments) == size - frame:
            fp.seek(0)
            return _offsets([s.compressed for s in segments]), segments
    fp.seek(0)
    if not scan:
        return [], None
    spans = [(info.offset, info.compressed_size) for info in read_info(fp)]  # seek indexes between them skipped
    fp.seek(0)
    return spans, None


def _offsets(lengths: list[int]) -> list[tuple[int, int]]:
    spans, at = [], 0
    for length in lengths:
        spans.append((at, length))
        at += length
    return spans


def decompress_segments(fp, *, threads: int, memory_limit=None, legacy: bool = False, progress=None):
    """Yield the data of every stream of the seekable file ``fp`` in order, ``threads`` at a time
    (``memory_limit`` and ``legacy``: as :class:`statemix.codec.Decompressor` takes them).

    Every segment is checked against the index when there is one (its length and CRC32), so damaged,
    reordered or duplicated segments give a StatemixError, never a wrong byte.
    """
    spans, segments = read_spans(fp)
    if len(spans) == 1 or threads == 1:  # nothing to share out: the model's own threads
        decompressor = StreamsDecompressor(threads=threads, memory_limit=memory_limit, legacy=legacy,
                                           progress=progress)
        while chunk := fp.read(1 << 20):
            yield decompressor.decompress(chunk)
        decompressor.check_end()
        return
    pool = _OrderedPool(threads, progress)
    number = 0

    def checked(pieces):
        nonlocal number
        for data in pieces:
            if segments is not None and (len(data), container.crc32(data)) != (segments[number].uncompressed,
                                                                                segments[number].crc):
                raise StatemixError("corrupt stream: the seek index does not match the streams")
            number += 1
            yield data

    try:
        for offset, length in spans:
            fp.seek(offset)
            pool.submit(_decompress_stream, None, fp.read(length), memory_limit, legacy)
            yield from checked(pool.ready(block=True))
        yield from checked(pool.drain())
    finally:
        pool.close()
