"""StatemixFile as safe as the standard library's BZ2File and LZMAFile: threads, seek, pickling.

Adapted from the patterns of CPython's test_bz2 / test_lzma file tests: several threads writing to one
file, seeking forward, backward, from the end and past either end, and objects that refuse pickling.
"""

from __future__ import annotations

import collections
import io
import pickle
import random
import threading

import pytest

import statemix
from statemix import Compressor, Decompressor, StatemixFile

from conftest import text_sample

CHUNK = 64 << 10


def chunk_of(thread: int, number: int) -> bytes:
    """A distinct incompressible 64 KiB chunk (stored, so the test spends no time in the model)."""
    return random.Random(thread * 1000 + number).randbytes(CHUNK)


def test_eight_threads_writing_one_file_lose_nothing():
    threads, per_thread = 8, 4
    buffer = io.BytesIO()
    barrier = threading.Barrier(threads)
    with statemix.open(buffer, "wb", level=1) as f:
        def writer(thread):
            barrier.wait()
            for number in range(per_thread):
                f.write(chunk_of(thread, number))

        workers = [threading.Thread(target=writer, args=(t,)) for t in range(threads)]
        for worker in workers:
            worker.start()
        for worker in workers:
            worker.join()
        assert f.tell() == threads * per_thread * CHUNK
    data = statemix.decompress(buffer.getvalue())
    assert len(data) == threads * per_thread * CHUNK
    written = collections.Counter(chunk_of(t, n) for t in range(threads) for n in range(per_thread))
    read = collections.Counter(data[i : i + CHUNK] for i in range(0, len(data), CHUNK))
    assert read == written  # every chunk whole, once, in some interleaving


def test_threads_reading_one_file_get_every_byte_once():
    data = b"".join(chunk_of(9, n) for n in range(8))
    f = statemix.open(io.BytesIO(statemix.compress(data)))
    pieces = collections.defaultdict(list)

    def reader(thread):
        while piece := f.read(4096):
            pieces[thread].append(piece)

    workers = [threading.Thread(target=reader, args=(t,)) for t in range(4)]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join()
    f.close()
    got = sorted(p for thread_pieces in pieces.values() for p in thread_pieces)
    assert got == sorted(data[i : i + 4096] for i in range(0, len(data), 4096))


# ---------------------------------------------------------------------------------------------------
# seek() and tell(), with LZMAFile's semantics

DATA = text_sample(50_000, seed=8)


@pytest.fixture
def reader():
    with statemix.open(io.BytesIO(statemix.compress(DATA, level=1))) as f:
        yield f


def test_seekable_only_when_reading_a_seekable_file(reader):
    assert reader.seekable()
    with statemix.open(io.BytesIO(), "wb") as f:
        assert not f.seekable()
        with pytest.raises(io.UnsupportedOperation):
            f.seek(0)

    class Unseekable(io.BytesIO):
        def seekable(self):
            return False

    with statemix.open(Unseekable(statemix.compress(b"abc"))) as f:
        assert not f.seekable()
        with pytest.raises(io.UnsupportedOperation):
            f.seek(0)
        assert f.read() == b"abc"


def test_seek_forward(reader):
    assert reader.seek(555) == 555
    assert reader.tell() == 555
    assert reader.read(100) == DATA[555:655]
    assert reader.seek(10_000, io.SEEK_CUR) == 10_655
    assert reader.read(10) == DATA[10_655:10_665]


def test_seek_backward(reader):
    reader.read(30_000)
    assert reader.seek(100) == 100
    assert reader.read(50) == DATA[100:150]
    assert reader.seek(-120, io.SEEK_CUR) == 30
    assert reader.read(10) == DATA[30:40]


def test_seek_from_the_end(reader):
    assert reader.seek(-20, io.SEEK_END) == len(DATA) - 20
    assert reader.read() == DATA[-20:]
    assert reader.seek(-len(DATA), io.SEEK_END) == 0
    assert reader.read(5) == DATA[:5]


def test_seek_past_either_end(reader):
    assert reader.seek(len(DATA) + 1000) == len(DATA)
    assert reader.read() == b""
    assert reader.seek(-10) == 0  # before the start: the start (as LZMAFile)
    assert reader.read(3) == DATA[:3]
    assert reader.seek(5, io.SEEK_END) == len(DATA)


def test_seek_bad_arguments(reader):
    with pytest.raises(ValueError):
        reader.seek(0, 3)
    with pytest.raises(TypeError):
        reader.seek(1.5)
    reader.close()
    with pytest.raises(ValueError):
        reader.seek(0)


def test_seek_across_concatenated_streams():
    with statemix.open(io.BytesIO(statemix.compress(b"first ") + statemix.compress(b"second"))) as f:
        assert f.seek(8) == 8
        assert f.read() == b"cond"
        assert f.seek(-7, io.SEEK_END) == 5
        assert f.read() == b" second"


# ---------------------------------------------------------------------------------------------------
# Pickling is refused, as for BZ2File, LZMAFile and their codec objects


@pytest.mark.parametrize("make", [
    lambda: Compressor(size_hint=10),
    lambda: Decompressor(),
    lambda: StatemixFile(io.BytesIO(), "wb", level=1),
    lambda: StatemixFile(io.BytesIO(statemix.compress(b"x"))),
], ids=["Compressor", "Decompressor", "writer", "reader"])
def test_pickling_is_refused(make):
    obj = make()
    for protocol in range(pickle.HIGHEST_PROTOCOL + 1):
        with pytest.raises(TypeError):
            pickle.dumps(obj, protocol)


# ---------------------------------------------------------------------------------------------------
# Argument errors: ValueError/TypeError, as the standard library raises, before any state changes


@pytest.mark.parametrize("level,error", [(0, ValueError), (4, ValueError), (-1, ValueError),
                                         ("foo", TypeError), (4.39, TypeError), (True, TypeError)])
def test_bad_levels(level, error):
    with pytest.raises(error):
        Compressor(level=level)
    with pytest.raises(error):
        statemix.compress(b"abc", level=level)
    with pytest.raises(error):
        statemix.open(io.BytesIO(), "wb", level=level)


@pytest.mark.parametrize("options,error", [(dict(threads=0), ValueError), (dict(threads="2"), TypeError),
                                           (dict(model="lstm"), ValueError), (dict(model=2), TypeError)])
def test_bad_options(options, error):
    with pytest.raises(error):
        Compressor(**options)


def test_level_or_model_in_read_mode_is_an_error():
    stream = io.BytesIO(statemix.compress(b"abc"))
    with pytest.raises(ValueError):
        statemix.open(stream, "rb", level=1)
    with pytest.raises(ValueError):
        statemix.open(stream, "rb", model="cm")
    with pytest.raises(ValueError):
        statemix.open(io.BytesIO(), "wb", memory_limit=1 << 30)


def test_decompressor_bad_arguments_change_nothing():
    stream = statemix.compress(b"hello, world")
    d = Decompressor()
    with pytest.raises(TypeError):
        d.decompress(b"foo", b"bar")
    with pytest.raises(TypeError):
        d.decompress("text")
    with pytest.raises(TypeError):
        d.decompress(stream, 1.0)
    assert d.decompress(stream) == b"hello, world"  # nothing of the failed calls was taken
    assert d.eof
    with pytest.raises((ValueError, TypeError)):
        Decompressor(memory_limit=0)
