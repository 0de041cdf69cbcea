"""Robustness: arbitrary inputs round-trip, damaged streams fail cleanly, threads are independent,
and memory does not grow with the input.

The mutation campaign here is bounded for CI; bench/fuzz_campaign.py runs the same cases at scale
and reports how many were tried.
"""

from __future__ import annotations

import io
import os
import random
import subprocess
import sys
import threading

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import statemix
from statemix import StatemixError

from conftest import text_sample

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(os.path.dirname(HERE), "bench"))

from fuzz_campaign import mutations, run_case, segment_mutations  # noqa: E402


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.binary(max_size=3000))
def test_arbitrary_bytes_round_trip(data):
    assert statemix.decompress(statemix.compress(data)) == data


#: inputs the model codes: arbitrary bytes, each followed by a short unit repeated (so that zstandard's
#: probe shrinks the whole and the block reaches the model), the units' order and sizes arbitrary; at
#: least 100 bytes (shorter ones may be stored, as they should)
COMPRESSIBLE = st.lists(st.tuples(st.binary(max_size=60), st.binary(min_size=1, max_size=12), st.integers(8, 40)),
                        min_size=1, max_size=25).map(
    lambda parts: b"".join(noise + unit * n for noise, unit, n in parts)).filter(lambda data: len(data) >= 100)


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(COMPRESSIBLE, st.integers(1, 3))
def test_compressible_bytes_round_trip_through_the_model(data, level):
    stream = statemix.compress(data, level=level)
    kinds = [block.kind for block in statemix.read_info(io.BytesIO(stream))[0].blocks]
    assert kinds and all(kind.startswith("modelled") or "learned" in kind for kind in kinds), kinds
    assert statemix.decompress(stream) == data


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.binary(max_size=1500), st.text(max_size=300), st.integers(1, 2))
def test_arbitrary_bytes_round_trip_ssm(noise, text, level):
    """The ssm model (level 1: count models only; 2: with the SSM); repeated text lets it win."""
    data = noise + text.encode("utf-8", "surrogatepass") * 4 + noise[:100]
    assert statemix.decompress(statemix.compress(data, model="ssm", level=level)) == data


@settings(max_examples=40, deadline=None)
@given(st.lists(st.binary(max_size=600), max_size=8), st.integers(1, 3))
def test_incremental_equals_any_split(chunks, level):
    data = b"".join(chunks)
    compressor = statemix.Compressor(level=level, size_hint=len(data))
    stream = b"".join(compressor.compress(chunk) for chunk in chunks) + compressor.flush()
    assert stream == statemix.compress(data, level=level)
    decompressor = statemix.Decompressor()
    out = b"".join(decompressor.decompress(stream[i : i + 97]) for i in range(0, len(stream), 97))
    assert out == data and decompressor.eof


@pytest.mark.slow
@settings(max_examples=300, deadline=None)
@given(st.binary(min_size=1000, max_size=200_000))
def test_arbitrary_larger_bytes_round_trip(data):
    assert statemix.decompress(statemix.compress(data)) == data


def test_mutation_campaign_small():
    rng = random.Random(2026)
    original = text_sample(1500) + bytes(range(256)) + text_sample(800, seed=9)
    stream = statemix.compress(original)
    other = statemix.compress(b"another stream " * 50, level=1)
    outcomes = {"original": 0, "error": 0}
    for case in mutations(stream, other, rng, flips=300):
        outcomes[run_case(case, original, seconds=20, rng=rng)] += 1
    assert outcomes["error"] > 0 and sum(outcomes.values()) > len(stream) + 300


@pytest.mark.parametrize("level,size,step", [(1, 6000, 2), (2, 800, 3)])
def test_mutation_campaign_ssm(level, size, step):
    # level 2 runs the SSM: its streams are the ones whose decoder trains a network
    rng = random.Random(2027)
    original = text_sample(size, seed=4) + bytes(range(256))
    stream = statemix.compress(original, model="ssm", level=level)
    assert statemix.read_info(io.BytesIO(stream))[0].blocks[0].kind == "modelled"
    other = statemix.compress(b"another stream " * 50, model="ssm", level=level)
    outcomes = {"original": 0, "error": 0}
    for case in mutations(stream, other, rng, flips=100, truncation_step=step):
        outcomes[run_case(case, original, seconds=20, rng=rng)] += 1
    assert outcomes["error"] > 0 and sum(outcomes.values()) > len(stream) // step + 100


def test_mutation_campaign_segmented():
    rng = random.Random(2028)
    original = text_sample(140_000, seed=5)
    stream = statemix.compress(original, level=1, segment_size=1 << 16)
    other = statemix.compress(b"another stream " * 50, level=1)
    outcomes = {"original": 0, "error": 0}
    cases = [*segment_mutations(stream, rng), *mutations(stream, other, rng, flips=20, truncation_step=4001)]
    for case in cases:
        outcomes[run_case(case, original, seconds=20, rng=rng)] += 1
    assert outcomes["error"] >= len(cases) - 2  # damage is found (a flip may hit unread padding)


def test_two_threads_give_the_same_bytes_as_alone():
    inputs = [text_sample(300_000, seed=s) for s in (1, 2)]
    alone = [statemix.compress(data) for data in inputs]
    results = [None, None]

    def work(i):
        results[i] = statemix.compress(inputs[i])

    threads = [threading.Thread(target=work, args=(i,)) for i in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert results == alone


PEAK_PROBE = r"""
import random, sys, statemix
mode, size, path = sys.argv[1], int(sys.argv[2]) << 20, sys.argv[3]
rng = random.Random(5)
# 64 KiB of random bytes (they touch every page of level 1's hashed tables and match table) and
# text: modelled
text = rng.randbytes(1 << 16)
text += (b"memory probe text, with some variety %d. " * 40000)[: (1 << 20) - len(text)]
def blocks():  # the first 4 MiB and every eighth MiB text (modelled), the rest random (stored)
    for i in range(size >> 20):
        yield text if i < 4 or i % 8 == 0 else rng.randbytes(1 << 20)
if mode == "compress":
    c = statemix.Compressor(level=1)
    with open(path, "wb") as out:
        for block in blocks():
            out.write(c.compress(block))
        out.write(c.flush())
else:
    d = statemix.StreamsDecompressor()
    expected = blocks()
    got = bytearray()
    with open(path, "rb") as src:
        while chunk := src.read(1 << 16):
            got += d.decompress(chunk)
            while len(got) >= 1 << 20:
                assert bytes(got[: 1 << 20]) == next(expected)
                del got[: 1 << 20]
    d.check_end()
# VmHWM: this process's own peak (ru_maxrss would include the parent's from before exec)
print(next(line.split()[1] for line in open("/proc/self/status") if line.startswith("VmHWM:")))
"""


def test_peak_memory_does_not_grow_with_input(tmp_path):
    """Streaming 32 MiB peaks within 4 MiB of streaming 8 MiB (both have modelled and stored blocks),
    compressing and decompressing: the codec keeps neither the input nor the output (either would
    add 24 MiB).  The model's pages are touched as it learns, up to its bound, which is not growth
    with the input: so both runs start with 4 MiB of text, which fills level 1's 4 MiB history ring,
    and the text touches every page of its tables."""
    for mode in ("compress", "decompress"):
        peaks = []
        for mib in (8, 32):
            path = tmp_path / f"{mib}.smx"
            done = subprocess.run([sys.executable, "-c", PEAK_PROBE, mode, str(mib), str(path)],
                                  capture_output=True, text=True, check=True)
            peaks.append(int(done.stdout.strip()) / 1024)  # MiB
        assert peaks[1] - peaks[0] < 4, (mode, peaks)


def test_header_check_catches_damaged_block_length():
    stream = bytearray(statemix.compress(text_sample(4000)))
    header_length = 11 + stream[6]
    stream[header_length + 1] ^= 0x40  # raw length of the first block
    with pytest.raises(StatemixError, match="corrupt|length"):
        statemix.decompress(bytes(stream))


def test_zstandard_block_declaring_a_huge_size_is_refused_without_allocating_it():
    """Found by the mutation campaign: a byte overwrite in a zstandard frame's header made it declare
    a content size of about 2**57 bytes, and zstandard tried to allocate it (MemoryError)."""
    import zstandard

    from statemix import container
    from statemix.models import spec_for_level

    raw = bytes(range(256)) * 64
    payload = bytearray(zstandard.ZstdCompressor(level=19, write_content_size=False).compress(raw))

    def stream(frame: bytes) -> bytes:
        return (container.write_header(spec_for_level(1, len(raw)))
                + container.write_block(container.ZSTANDARD, raw, frame)
                + container.write_trailer(len(raw), container.crc32(raw)))

    assert statemix.decompress(stream(bytes(payload))) == raw
    payload[4] |= 0xC0  # the frame header descriptor: an 8-byte content size follows
    with pytest.raises(StatemixError, match="corrupt stream: zstandard block"):
        statemix.decompress(stream(bytes(payload)))
