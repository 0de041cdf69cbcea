"""Compress large files on a dask.distributed cluster (``pip install "statemix[dask]"``).

Each segment of a file is one task: the client reads ``segment_size`` bytes, a worker compresses
them exactly as ``statemix.compress(segment, level=..., model=...)`` does (a complete stream whose
model starts fresh), and the client writes the results in input order, then the seek index.  The
output is byte-identical to ``statemix.compress(data, segment_size=...)`` and to
``statemix --segment-size``, and any statemix reader decodes it.

- Memory: at most ``in_flight`` segments (default: two per worker thread) are read and not yet
  written; a worker holds one segment, its stream and one model (see statemix.codec).
- Failures: a task whose worker dies is run again elsewhere (dask's ``allowed_failures``); the
  result cannot differ, since a segment's stream is a pure function of its bytes.  The output is
  written to a file with no name in the target's folder where the OS allows (else a hidden temporary
  file) and linked into place only when complete: a failed run leaves nothing behind.
- A real cluster: ``Client("tcp://scheduler:8786")`` instead of ``Client(LocalCluster(...))``; the
  workers need statemix installed (the same version: the model arithmetic must match).

Example::

    from dask.distributed import Client, LocalCluster
    import statemix.distributed

    with Client(LocalCluster(n_workers=2, threads_per_worker=1)) as client:
        statemix.distributed.compress_file(client, "dump.xml", "dump.xml.smx", segment_size=4 << 20)
"""

from __future__ import annotations

import os
from collections import deque
from pathlib import Path

from . import container
from ._output import output_file
from .codec import check_options
from .segments import DEFAULT_SEGMENT


def _compress_task(data: bytes, level, model) -> bytes:
    """What a worker runs: one segment to one complete stream (as statemix.compress)."""
    import statemix

    return statemix.compress(data, level=level, model=model)


def compress_file(client, source, target=None, *, segment_size: int = DEFAULT_SEGMENT, level=None,
                  model=None, in_flight: int | None = None, force: bool = False) -> int:
    """Compress the file ``source`` into ``target`` (default: source + ".smx") on ``client``'s
    cluster; return the compressed size.  Refuses to replace an existing target unless ``force``."""
    check_options(level=level, model=model, segment_size=segment_size)
    source = Path(source)
    target = Path(target) if target is not None else source.with_name(source.name + ".smx")
    if in_flight is None:
        in_flight = 2 * max(1, sum(client.nthreads().values()))
    info = os.stat(source)
    written = 0
    with open(source, "rb") as src, output_file(str(target), force, info) as out:
        jobs: deque = deque()
        index: list[container.Segment] = []

        def write_oldest() -> None:
            nonlocal written
            future, entry = jobs.popleft()
            stream = future.result()
            out.write(stream)
            written += len(stream)
            index.append(container.Segment(len(stream), entry.uncompressed, entry.crc))
            future.release()

        first = True
        while (data := src.read(segment_size)) or first:
            first = False
            entry = container.Segment(0, len(data), container.crc32(data))
            jobs.append((client.submit(_compress_task, data, level, model, pure=False), entry))
            if len(jobs) >= in_flight:
                write_oldest()
        while jobs:
            write_oldest()
        tail = container.write_index(index)
        out.write(tail)
    return written + len(tail)


def compress_directory(client, directory, **options) -> dict[str, int]:
    """Compress every regular file below ``directory`` (not .smx files) next to itself; return
    {path: compressed size}."""
    sizes = {}
    for path in sorted(Path(directory).rglob("*")):
        if path.is_file() and not path.is_symlink() and not path.name.endswith(".smx"):
            sizes[str(path)] = compress_file(client, path, **options)
    return sizes
