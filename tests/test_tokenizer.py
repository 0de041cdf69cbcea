"""Tests of statemix.tokenizer: round trips, agreement with the naive reference, vocabulary format."""

from __future__ import annotations

import hashlib
import json
import random
import time
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from statemix import tokenizer
from statemix._varint import encode_varint
from statemix.tokenizer import Vocabulary, decode, encode, train, training

from conftest import ROOT, shared_file, text_sample
from naive_tokenizer import naive_canonical_order, naive_decode, naive_encode, naive_train

SETTINGS = settings(deadline=None, max_examples=60,
                    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])


def _merges(vocab: Vocabulary) -> list[tuple[int, int]]:
    return [(int(a), int(b)) for a, b in vocab.merges]


# A few vocabularies of different shapes, trained once.
_TEXT = text_sample(30_000, seed=5)
_RUNS = b"aaaaaaaabbbbaaaab" * 40 + b"\x00" * 300 + b"ab" * 200


def _vocabularies() -> dict[str, Vocabulary]:
    rng = random.Random(11)
    return {
        "bytes": Vocabulary(np.zeros((0, 2), dtype=np.int32)),
        "text": train(_TEXT, 400),
        "text-split": train(_TEXT, 300, split=tokenizer.SPLIT_WORDS),
        "runs": train(_RUNS, 60),
        "random": train(rng.randbytes(20_000), 200),
        "utf8": train("naïve café – ünïcödé 日本語のテキスト ".encode() * 30, 80),
    }


VOCABS = _vocabularies()
VOCAB_NAMES = sorted(VOCABS)

INVALID_UTF8 = [
    b"\xff", b"\xfe\xff", b"\xc3", b"\xc3\x28", b"\xa0\xa1", b"\xe2\x28\xa1", b"\xe2\x82\x28",
    b"\xf0\x28\x8c\xbc", b"\xf8\xa1\xa1\xa1\xa1", b"\xed\xa0\x80", b"\xc0\xaf", b"caf\xe9 na\xefve",
    "é".encode()[:1] + b"abc" + "日本".encode()[1:],
]


# ----------------------------------------------------------------------------------------------------
# Round trips


@pytest.mark.parametrize("name", VOCAB_NAMES)
def test_every_single_byte_value(name):
    vocab = VOCABS[name]
    for b in range(256):
        ids = encode(vocab, bytes([b]))
        assert ids.tolist() == [b]
        assert decode(vocab, ids) == bytes([b])
    everything = bytes(range(256)) * 3 + bytes(range(255, -1, -1))
    assert decode(vocab, encode(vocab, everything)) == everything


@pytest.mark.parametrize("name", VOCAB_NAMES)
def test_invalid_utf8_and_empty(name):
    vocab = VOCABS[name]
    assert encode(vocab, b"").shape == (0,)
    assert decode(vocab, np.zeros(0, dtype=np.int32)) == b""
    for raw in INVALID_UTF8:
        data = raw + _TEXT[:100] + raw
        assert decode(vocab, encode(vocab, data)) == data


@SETTINGS
@given(data=st.binary(max_size=3000), name=st.sampled_from(VOCAB_NAMES))
def test_round_trip_arbitrary_bytes(data, name):
    vocab = VOCABS[name]
    ids = encode(vocab, data)
    assert ids.dtype == np.int32
    assert decode(vocab, ids) == data
    assert decode(vocab, encode(vocab, data, block_size=7)) == data


@SETTINGS
@given(text=st.text(max_size=500), name=st.sampled_from(VOCAB_NAMES))
def test_round_trip_text(text, name):
    data = text.encode("utf-8", "surrogatepass")
    assert decode(VOCABS[name], encode(VOCABS[name], data)) == data


# ----------------------------------------------------------------------------------------------------
# Agreement with the naive reference


def _samples(rng: random.Random) -> list[bytes]:
    out = [b"", b"a", b"aa", b"aaa", b"aaaa", b"abababab", b"aaabaaab"]
    for size in (50, 200, 600):
        out.append(rng.randbytes(size))
        out.append(text_sample(size, seed=size))
        out.append(bytes(rng.choice(b"ab ") for _ in range(size)))
    out.append(_RUNS[:700])
    return out


@pytest.mark.parametrize("name", VOCAB_NAMES)
def test_encode_matches_naive(name):
    vocab = VOCABS[name]
    merges = _merges(vocab)
    for data in _samples(random.Random(len(name))):
        expected = naive_encode(merges, data)
        assert encode(vocab, data, block_size=None).tolist() == expected
        assert naive_decode(merges, expected) == data


@SETTINGS
@given(data=st.binary(max_size=300), alphabet=st.sampled_from([b"ab", b"abc ", b"a", None]),
       name=st.sampled_from(VOCAB_NAMES))
def test_encode_matches_naive_property(data, alphabet, name):
    if alphabet is not None:
        data = bytes(alphabet[b % len(alphabet)] for b in data)
    assert encode(VOCABS[name], data, block_size=None).tolist() == naive_encode(
        _merges(VOCABS[name]), data)


def test_blocks_are_independent():
    vocab = VOCABS["text"]
    data = _TEXT[:10_000]
    for size in (1, 2, 3, 1000, 4096):
        pieces = [encode(vocab, data[i : i + size], block_size=None) for i in range(0, len(data), size)]
        assert encode(vocab, data, block_size=size).tolist() == np.concatenate(pieces).tolist()


@SETTINGS
@given(data=st.binary(max_size=250), alphabet=st.sampled_from([b"ab", b"abc ", b"a b.1", None]),
       n_merges=st.integers(0, 40), min_count=st.integers(2, 4), split=st.booleans())
def test_train_matches_naive(data, alphabet, n_merges, min_count, split):
    if alphabet is not None:
        data = bytes(alphabet[b % len(alphabet)] for b in data)
    vocab = train(data, n_merges, min_count=min_count, canonical=False,
                  split=tokenizer.SPLIT_WORDS if split else tokenizer.SPLIT_NONE)
    assert _merges(vocab) == naive_train(data, n_merges, min_count, split_words=split)
    _check_canonical(data, n_merges, min_count, split)


def test_train_matches_naive_on_text_and_random():
    rng = random.Random(4)
    for data in (text_sample(1500, seed=9), rng.randbytes(1500), _RUNS[:1000]):
        for split in (False, True):
            vocab = train(data, 50, split=tokenizer.SPLIT_WORDS if split else tokenizer.SPLIT_NONE,
                          canonical=False)
            assert _merges(vocab) == naive_train(data, 50, split_words=split)
            _check_canonical(data, 50, 2, split)


def _token_set(vocab: Vocabulary) -> list[bytes]:
    return sorted(vocab.token_bytes(i) for i in range(vocab.size))


def _check_canonical(data: bytes, n_merges: int, min_count: int, split: bool):
    """The canonical order holds the same tokens, in groups sorted by (left, right): the order written
    independently from its definition (naive_canonical_order), and the library's canonical_order."""
    rule = tokenizer.SPLIT_WORDS if split else tokenizer.SPLIT_NONE
    plain = train(data, n_merges, min_count=min_count, split=rule, canonical=False)
    stats: dict = {}
    canonical = train(data, n_merges, min_count=min_count, split=rule, stats=stats)
    assert _token_set(canonical) == _token_set(plain)
    counts = stats["counts"]
    assert np.all(np.diff(counts) <= 0)
    assert _merges(canonical) == naive_canonical_order(_merges(plain), [int(c) for c in counts], 256)
    assert np.array_equal(canonical.merges,
                          tokenizer.canonical_order(plain.merges, counts, 256))
    assert decode(canonical, encode(canonical, data)) == data


def test_token_length_limit():
    data = b"\x00" * 5000
    vocab = train(data, 100, canonical=False)
    assert int(vocab.token_lengths().max()) <= tokenizer.MAX_TOKEN_BYTES
    assert _merges(vocab) == naive_train(data, 100)
    assert decode(vocab, encode(vocab, data)) == data


def test_training_is_deterministic_and_pinned():
    first = train(_TEXT, 400)
    second = train(bytes(_TEXT), 400)
    assert first == second
    # pinned: a change here changes every stream that stores a vocabulary
    assert first.crc() == PINNED_CRC
    assert hashlib.sha256(first.to_bytes()).hexdigest() == PINNED_SHA256


PINNED_CRC = 3581140453
PINNED_SHA256 = "2440780e9e438c9084fbd78f874581a4b314b91a1b14a8bd183add896bafad24"


def test_train_extends_a_base():
    base = VOCABS["text"].prefix(100)
    extended = train(_TEXT, 50, base=base)
    assert extended.base == 100 and extended.n_merges <= 150
    assert np.array_equal(extended.merges[:100], base.merges)
    assert decode(extended, encode(extended, _TEXT)) == _TEXT
    assert encode(extended, _TEXT).shape[0] < encode(base, _TEXT).shape[0]
    small = _TEXT[:800]
    extended = train(small, 20, base=base.prefix(30), canonical=False)
    assert _merges(extended) == naive_train(small, 20, base=_merges(base.prefix(30)))


def test_train_rejects_bad_arguments():
    with pytest.raises(ValueError):
        train(b"abc", 10, min_count=1)


def test_prefix_is_a_vocabulary():
    vocab = VOCABS["text"]
    for n in (0, 1, 10, vocab.n_merges, vocab.n_merges + 5):
        prefix = vocab.prefix(n)
        assert prefix.n_merges == min(n, vocab.n_merges)
        assert decode(prefix, encode(prefix, _TEXT)) == _TEXT


# ----------------------------------------------------------------------------------------------------
# Vocabulary validation and serialization


@pytest.mark.parametrize("name", VOCAB_NAMES)
def test_serialization_round_trip(name):
    vocab = VOCABS[name]
    raw = vocab.to_bytes()
    assert Vocabulary.from_bytes(raw) == vocab
    assert Vocabulary.from_bytes(bytearray(raw)) == vocab
    if vocab.n_merges:
        assert len(raw) < 3 * vocab.n_merges + 16


def test_canonical_order_groups():
    stats: dict = {}
    plain = train(_TEXT, 300, canonical=False, stats=stats)
    canonical = tokenizer.canonical_order(plain.merges, stats["counts"], 256)
    vocab = Vocabulary(canonical)
    assert _token_set(vocab) == _token_set(plain)
    # with made-up counts: one group sorts everything a group can hold
    same = tokenizer.canonical_order(plain.merges, np.full(300, 5), 256)
    assert _token_set(Vocabulary(same)) == _token_set(plain)
    assert len(vocab.to_bytes()) < len(plain.to_bytes())


def test_serialization_with_base():
    base = VOCABS["text"].prefix(200)
    extended = train(_TEXT[::-1], 40, base=base)
    raw = extended.to_bytes()
    assert Vocabulary.from_bytes(raw, base=base) == extended
    with pytest.raises(ValueError):
        Vocabulary.from_bytes(raw)
    with pytest.raises(ValueError):
        Vocabulary.from_bytes(raw, base=VOCABS["text"].prefix(199))
    with pytest.raises(ValueError):
        Vocabulary.from_bytes(raw, base=VOCABS["random"].prefix(200))


def test_corrupt_vocabulary_every_bit_flip_and_truncation():
    vocab = VOCABS["utf8"]
    raw = vocab.to_bytes()
    for cut in range(len(raw)):
        with pytest.raises(ValueError):
            Vocabulary.from_bytes(raw[:cut])
    with pytest.raises(ValueError):
        Vocabulary.from_bytes(raw + b"\x00")
    for i in range(len(raw)):
        for bit in range(8):
            corrupt = bytearray(raw)
            corrupt[i] ^= 1 << bit
            with pytest.raises(ValueError):
                Vocabulary.from_bytes(bytes(corrupt))


@SETTINGS
@given(garbage=st.binary(max_size=200))
def test_garbage_vocabulary_raises_value_error_only(garbage):
    for raw in (garbage, b"\x01" + garbage):
        try:
            Vocabulary.from_bytes(raw)
        except ValueError:
            pass


def test_huge_declared_merge_count_is_refused_or_bounded():
    raw = bytes([tokenizer.FORMAT]) + b"\x00" + b"\xff\xff\xff\xff\x0f" + b"\x00" + b"\x00" * 4
    with pytest.raises(ValueError):
        Vocabulary.from_bytes(raw)
    start = time.perf_counter()
    raw = bytes([tokenizer.FORMAT, 0]) + encode_varint(tokenizer.MAX_MERGES) + b"\x00" + b"\x00" * 4
    with pytest.raises(ValueError):
        Vocabulary.from_bytes(raw)
    assert time.perf_counter() - start < 10


@pytest.mark.parametrize("merges", [
    [(256, 0)], [(0, 256)], [(-1, 0)], [(97, 98), (97, 98)], [(0, 1), (256, 300)],
])
def test_invalid_merge_lists(merges):
    with pytest.raises(ValueError):
        Vocabulary(np.array(merges, dtype=np.int64))


def test_overlong_tokens_are_rejected():
    merges = [(0, 0)] + [(256 + i, 256 + i) for i in range(8)]  # lengths 2, 4, ..., 512
    with pytest.raises(ValueError):
        Vocabulary(np.array(merges))
    Vocabulary(np.array(merges[:8]))  # up to 256 bytes is fine


def test_decode_rejects_ids_out_of_range():
    vocab = VOCABS["runs"]
    for ids in ([vocab.size], [-1], [0, 1, vocab.size + 100]):
        with pytest.raises(ValueError):
            decode(vocab, np.array(ids))


def test_token_bytes():
    vocab = VOCABS["text"]
    table = [vocab.token_bytes(i) for i in range(vocab.size)]
    assert table[:256] == [bytes([i]) for i in range(256)]
    for r, (a, b) in enumerate(_merges(vocab)):
        assert table[256 + r] == table[a] + table[b]
    assert vocab.token_lengths().tolist() == [len(t) for t in table]


# ----------------------------------------------------------------------------------------------------
# The shipped general vocabulary


def test_general_vocabulary_matches_its_record():
    path = ROOT / "data" / "general-v1.vocab"
    if not path.is_file():
        pytest.skip("no general vocabulary shipped")
    raw = path.read_bytes()
    meta = json.loads(path.with_suffix(".json").read_text())
    assert hashlib.sha256(raw).hexdigest() == meta["sha256"]
    vocab = Vocabulary.from_bytes(raw)
    assert vocab.n_merges == meta["merges"] and vocab.crc() == meta["merge_list_crc32"]
    assert decode(vocab, encode(vocab, _TEXT)) == _TEXT


# ----------------------------------------------------------------------------------------------------
# Speed and memory on the benchmark (slow)


@pytest.mark.slow
def test_speed_and_memory_on_enwik8_1m():
    data = shared_file("enwik8", "enwik8_1M").read_bytes()
    vocab = train(data, 4096)
    encode(vocab, data[:1000])
    stats: dict = {}
    start = time.perf_counter()
    ids = encode(vocab, data, stats=stats)
    enc = time.perf_counter() - start
    start = time.perf_counter()
    back = decode(vocab, ids)
    dec = time.perf_counter() - start
    assert back == data
    assert len(data) / enc > 3e6
    assert len(data) / dec > 50e6
    assert stats["peak_bytes"] < 40 * len(data)


# ----------------------------------------------------------------------------------------------------
# Every shared data file


def _shared_data_files() -> list[Path]:
    from conftest import shared_files

    return shared_files()


@pytest.mark.parametrize("path", _shared_data_files(), ids=lambda p: p.name)
def test_shared_files_round_trip(path):
    """Heads of every file of ../shared/data with its own default vocabulary (whole files: slow)."""
    data = path.read_bytes()[:65536]
    vocab = train(data, tokenizer.default_merges(len(data)), split=tokenizer.SPLIT_WORDS)
    assert decode(vocab, encode(vocab, data)) == data
    assert Vocabulary.from_bytes(vocab.to_bytes()) == vocab


@pytest.mark.slow
@pytest.mark.parametrize("path", _shared_data_files(), ids=lambda p: p.name)
def test_shared_files_round_trip_whole(path):
    data = path.read_bytes()
    vocab = train(data[: 1 << 20], tokenizer.default_merges(len(data)), split=tokenizer.SPLIT_WORDS)
    assert decode(vocab, encode(vocab, data)) == data


def test_pair_table_grows_without_losing_counts():
    """_count_occurrence from a 4-slot table: every key keeps its count and occurrence list."""
    z = np.zeros(6, dtype=np.int64)
    z[training.Z_PCAP], z[training.Z_HMASK], z[training.Z_OCAP] = 2, 3, 1
    pairs = (np.full(4, -1, dtype=np.int64), np.zeros(4, dtype=np.int32), np.zeros(2, dtype=np.int64),
             np.zeros(2, dtype=np.int32), np.zeros(2, dtype=np.int32), np.zeros(2, dtype=np.int8))
    occ = (np.zeros(1, dtype=np.int32), np.zeros(1, dtype=np.int32), np.zeros(1, dtype=np.int32))
    expected = {}
    for at in range(300):
        key = (at * 7919) % 53 + 1
        expected.setdefault(key, []).append(at)
        pairs, occ = training._count_occurrence(np.int64(key), at, pairs, occ, z)
    hkeys, hidx, pkey, pcount, phead, _ = pairs
    opos, onext, touched = occ
    assert z[training.Z_NPAIRS] == len(expected) and z[training.Z_NOCC] == 300
    assert z[training.Z_HMASK] + 1 >= 2 * len(expected)
    assert sorted(touched[: z[training.Z_NTOUCHED]]) == list(range(len(expected)))
    for key, positions in expected.items():
        (slot,) = np.nonzero(hkeys == key)[0]
        pi = hidx[slot]
        assert pkey[pi] == key and pcount[pi] == len(positions)
        seen, e = [], phead[pi]
        while e != -1:
            seen.append(int(opos[e]))
            e = onext[e]
        assert seen == positions[::-1]
