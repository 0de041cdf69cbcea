"""Segmented files: independent streams coded in parallel, the seek index, and what guards them."""

from __future__ import annotations

import functools
import io
import threading
import time

import pytest

import statemix
from statemix import StatemixError, container, segments

from conftest import text_sample

SEGMENT = 1 << 16
DATA = text_sample(4 * SEGMENT + 5000, seed=21)  # four whole segments and a short one


@functools.cache
def compressed(threads=1) -> bytes:
    return statemix.compress(DATA, level=1, segment_size=SEGMENT, threads=threads)


def stream_slices(stream: bytes) -> list[bytes]:
    spans, _ = segments.read_spans(io.BytesIO(stream))
    return [stream[offset : offset + length] for offset, length in spans]


def test_a_segment_is_exactly_a_one_shot_stream_and_the_index_lists_them():
    stream = compressed()
    pieces = stream_slices(stream)
    assert pieces == [statemix.compress(DATA[i : i + SEGMENT], level=1) for i in range(0, len(DATA), SEGMENT)]
    index = stream[sum(map(len, pieces)):]
    assert container.read_index(index, 0)[0] == [
        container.Segment(len(p), len(statemix.decompress(p)), container.crc32(statemix.decompress(p))) for p in pieces]


def test_the_output_depends_on_the_segment_size_only():
    one = compressed(threads=1)
    assert compressed(threads=2) == one
    c = statemix.Compressor(level=1, segment_size=SEGMENT, threads=2)
    fed = b"".join(c.compress(DATA[i : i + 7777]) for i in range(0, len(DATA), 7777)) + c.flush()
    assert fed == one
    assert statemix.compress(DATA, level=1, segment_size=2 * SEGMENT) != one


def test_segments_are_really_compressed_in_parallel(monkeypatch):
    """Two segments' model work overlaps in time at -T 2: each segment's coding is timed as it runs
    (no pause added), and some two of the intervals intersect."""
    expected = compressed()
    intervals = []
    real = segments._compress_segment

    def timed(*args):
        start = time.perf_counter()
        try:
            return real(*args)
        finally:
            intervals.append((start, time.perf_counter()))

    monkeypatch.setattr(segments, "_compress_segment", timed)
    assert statemix.compress(DATA, level=1, segment_size=SEGMENT, threads=2) == expected
    assert len(intervals) == 5
    assert any(a_start < b_end and b_start < a_end
               for i, (a_start, a_end) in enumerate(intervals) for b_start, b_end in intervals[i + 1:])


@pytest.mark.parametrize("threads", [1, 2])
def test_every_reader_decodes_a_segmented_file(threads):
    stream = compressed()
    assert statemix.decompress(stream, threads=threads) == DATA
    with statemix.open(io.BytesIO(stream)) as f:
        assert f.read() == DATA
    d = statemix.StreamsDecompressor()
    assert b"".join(d.decompress(stream[i : i + 1000]) for i in range(0, len(stream), 1000)) == DATA
    d.check_end()
    infos = statemix.read_info(io.BytesIO(stream))
    assert len(infos) == 5 and all(info.indexed for info in infos)


def test_empty_input_is_one_empty_segment():
    stream = statemix.compress(b"", segment_size=SEGMENT)
    assert statemix.decompress(stream) == b"" == statemix.decompress(stream, threads=2)


def test_seek_decodes_only_the_segment_it_needs():
    stream = compressed()
    with statemix.open(io.BytesIO(stream)) as f:
        reader = f._buffer.raw
        assert f.seek(3 * SEGMENT + 100) == 3 * SEGMENT + 100
        assert f.read(50) == DATA[3 * SEGMENT + 100 : 3 * SEGMENT + 150]
        assert reader._decompressor.streams == 1  # segment 3 alone, not 0-3
        assert f.seek(10) == 10 and f.read(5) == DATA[10:15]
        assert f.seek(-3, io.SEEK_END) == len(DATA) - 3 and f.read() == DATA[-3:]
        f.seek(2 * SEGMENT - 2)
        assert f.read(4) == DATA[2 * SEGMENT - 2 : 2 * SEGMENT + 2]  # across a segment boundary


def test_without_its_index_a_file_still_decodes_and_seeks():
    stream = compressed()
    bare = b"".join(stream_slices(stream))
    assert statemix.decompress(bare, threads=2) == DATA
    with statemix.open(io.BytesIO(bare)) as f:
        f.seek(3 * SEGMENT + 7)
        assert f.read(9) == DATA[3 * SEGMENT + 7 : 3 * SEGMENT + 16]


def swapped(stream: bytes) -> bytes:
    pieces = stream_slices(stream)
    index = stream[sum(map(len, pieces)):]
    return pieces[1] + pieces[0] + b"".join(pieces[2:]) + index


@pytest.mark.parametrize("damage", ["swapped", "duplicated", "duplicated first", "dropped", "index byte", "index crc",
                                    "empty index"])
def test_a_damaged_index_or_reordered_segments_never_give_a_wrong_byte(damage):
    stream = compressed()
    pieces = stream_slices(stream)
    index = stream[sum(map(len, pieces)):]
    if damage == "swapped":
        bad = swapped(stream)
    elif damage == "duplicated":
        bad = b"".join(pieces) + pieces[-1] + index
    elif damage == "duplicated first":
        bad = pieces[0] + b"".join(pieces) + index
    elif damage == "empty index":
        bad = container.write_index([])
    elif damage == "dropped":
        bad = b"".join(pieces[1:]) + index
    else:
        at = 6 if damage == "index byte" else len(index) - 12
        broken = bytearray(index)
        broken[at] ^= 0x10
        bad = b"".join(pieces) + bytes(broken)
    for threads in (1, 2):
        with pytest.raises(StatemixError):
            statemix.decompress(bad, threads=threads)
    with pytest.raises(StatemixError):
        statemix.read_info(io.BytesIO(bad))
    with statemix.open(io.BytesIO(bad)) as f:
        with pytest.raises(StatemixError):
            f.seek(SEGMENT + 10)  # in the second segment: through the index, when it is intact
            f.read()


def test_an_index_entry_that_lies_about_a_length_never_shifts_a_seek():
    """A CRC-consistent index (a crafted file, or a writer's bug) whose first entry gives another
    length: seeking past it must fail, not return the bytes of another offset."""
    stream = compressed()
    pieces = stream_slices(stream)
    entries = [container.Segment(len(piece), SEGMENT, container.crc32(DATA[i * SEGMENT : (i + 1) * SEGMENT]))
               for i, piece in enumerate(pieces)]
    entries[-1] = container.Segment(len(pieces[-1]), 5000, container.crc32(DATA[4 * SEGMENT :]))
    assert b"".join(pieces) + container.write_index(entries) == stream  # the index rebuilt as written
    entries[0] = container.Segment(len(pieces[0]), SEGMENT - 5536, entries[0].crc)
    forged = b"".join(pieces) + container.write_index(entries)
    with statemix.open(io.BytesIO(forged)) as f:
        with pytest.raises(StatemixError, match="seek index"):
            f.seek(2 * SEGMENT)
            f.read(100)


PLAIN_DATA = text_sample(3000, seed=22)


@pytest.mark.parametrize("order", ["segmented, then plain", "segmented twice"])
def test_streams_concatenated_after_a_segmented_file_decode(order):
    """As xz decodes concatenated files with their indexes: a seek index lists the streams since
    the previous one, and streams may follow it (a file appended, `cat a.smx b.smx`)."""
    plain = statemix.compress(PLAIN_DATA, level=1)
    both = {"segmented, then plain": (compressed() + plain, DATA + PLAIN_DATA),
            "segmented twice": (compressed() + compressed(), DATA + DATA)}
    stream, data = both[order]
    for threads in (1, 2):
        assert statemix.decompress(stream, threads=threads) == data
    infos = statemix.read_info(io.BytesIO(stream))
    assert sum(info.indexed for info in infos) == 5 * (2 if order == "segmented twice" else 1)
    with statemix.open(io.BytesIO(stream)) as f:
        assert f.read() == data
        f.seek(len(data) - 4000)
        assert f.read(3000) == data[-4000:-1000]


def test_a_stream_in_front_of_a_segmented_file_is_refused():
    """It is a segment's stream as far as any reader can tell (a segment is a one-shot stream): so
    that a segment duplicated in front is never decoded, the index must list every stream before it."""
    stream = statemix.compress(PLAIN_DATA, level=1) + compressed()
    for threads in (1, 2):
        with pytest.raises(StatemixError, match="seek index"):
            statemix.decompress(stream, threads=threads)


def test_a_plain_stream_appended_to_a_segmented_file_decodes():
    target = io.BytesIO()
    target.write(compressed())
    with statemix.open(target, "ab", level=1) as f:
        f.write(b"and one more line\n")
    assert statemix.decompress(target.getvalue()) == DATA + b"and one more line\n"


def test_progress_is_reported_by_the_caller_thread_and_can_stop_the_workers():
    seen = []
    caller = threading.get_ident()

    def report(done):
        assert threading.get_ident() == caller
        seen.append(done)

    c = statemix.Compressor(level=1, segment_size=SEGMENT, threads=2, progress=report)
    c.compress(DATA)
    c.flush()
    assert seen == sorted(seen) and seen[-1] == len(DATA)

    class Stop(Exception):
        pass

    def stop(done):
        if done:
            raise Stop

    c = statemix.Compressor(level=1, segment_size=SEGMENT, threads=2, progress=stop)
    with pytest.raises(Stop):
        c.compress(DATA * 3)
        c.flush()


def test_bad_segment_sizes():
    for size, error in ((0, ValueError), (SEGMENT - 1, ValueError), (1.5, TypeError), ("4MiB", TypeError)):
        with pytest.raises(error):
            statemix.Compressor(segment_size=size)
