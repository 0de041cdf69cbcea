"""Model revision 2's pieces and the ninth mixer's selector against plain Python references: the APMs'
training of both buckets (.bit.sse), the match model's length input (.bit.match) and the word
position (.bit.mixer); and the mixers' weight sets against the rows allocated for them."""

from __future__ import annotations

import random

import numpy as np
import pytest

from statemix._jit import kernel
from statemix.models.bit import match, mixer
from statemix.models.bit.match import match_strength
from statemix.models.bit.mixer import word_position
from statemix.models.bit.sse import APM_RATE, BUCKETS, N_APMS, apm_predict, apm_update
from statemix.models.bit.tables import lookup_tables
from statemix.models.bit.text import char_class


@kernel
def _apm_steps(apm, st, lut, p_mixes, c0s, c1s, bits, two_buckets, out):
    """One APM (keyed by c1 and c0) over a sequence of bits: each bit's prediction into ``out``."""
    for i in range(p_mixes.shape[0]):
        out[i] = apm_predict(apm, st, 0, 1, p_mixes[i], c0s[i], c1s[i], c1s[i], -1, -1, lut)
        apm_update(apm, st, 0, 1, bits[i], lut, two_buckets)


def reference_apm(lut, p_mixes, c0s, c1s, bits, two_buckets):
    """The same in Python integers: buckets at stretch (p_mix) in steps of 128 stretch units, each
    stored as its departure from squash of its centre; the nearer one, or both by their weights, learn."""
    table = {}

    def initial(bucket: int) -> int:
        return int(lut[4096 + 2048 + min((bucket - 16) * 128, 2047)])

    def value(row: int, bucket: int) -> int:
        return table.get((row, bucket), 0) + initial(bucket)

    out = []
    for p_mix, c0, c1, bit in zip(p_mixes, c0s, c1s, bits):
        position = (int(lut[p_mix >> 4]) + 2048) * 32
        low, weight = position >> 12, position & 4095
        row = (c1 << 8) + c0
        out.append((value(row, low) * (4096 - weight) + value(row, low + 1) * weight) >> 12)
        target = bit << 16
        if two_buckets:
            for bucket, share in ((low, 4096 - weight), (low + 1, weight)):
                v = value(row, bucket)
                table[row, bucket] = v + ((((target - v) * share) >> 12) >> (APM_RATE - 1)) - initial(bucket)
        else:
            bucket = low + (weight >> 11)
            v = value(row, bucket)
            table[row, bucket] = v + ((target - v) >> APM_RATE) - initial(bucket)
    return out


@pytest.mark.parametrize("two_buckets", [False, True])
def test_apm_training_matches_the_reference(two_buckets):
    rng = random.Random(7)
    n = 3000
    c1s = [rng.choice(b"ab") for _ in range(n)]
    c0s = [rng.randrange(1, 4) for _ in range(n)]
    bits = [int(rng.random() < 0.8) for _ in range(n)]
    p_mixes = [rng.randrange(1, 65536) if i % 3 else 50000 for i in range(n)]
    lut = lookup_tables()
    apm = np.zeros(65536 * BUCKETS, dtype=np.int32)
    st = np.zeros(2 * N_APMS, dtype=np.int64)
    out = np.zeros(n, dtype=np.int64)
    as_array = lambda xs: np.array(xs, dtype=np.int64)  # noqa: E731
    _apm_steps(apm, st, lut, as_array(p_mixes), as_array(c0s), as_array(c1s), as_array(bits), two_buckets, out)
    assert out.tolist() == reference_apm(lut, p_mixes, c0s, c1s, bits, two_buckets)


@kernel
def _strengths(st, base, slots, lengths, out):
    for i in range(slots.shape[0]):
        st[match.SLOT] = slots[i]
        st[match.LEN] = lengths[i]
        out[i] = match_strength(st, 0, base)


def test_match_strength_is_the_length_signed_by_the_predicted_bit():
    base = 1000  # the counters' first index; a slot is base + 2 * length bucket + predicted bit
    cases = [(-1, 5, 0), (base + 2 * 3 + 1, 3, 3 * 64), (base + 2 * 3, 3, -3 * 64), (base + 63, 500, 32 * 64),
             (base + 62, 40, -32 * 64), (base + 2 * 31 + 1, 32, 32 * 64)]
    slots, lengths, expected = (np.array(column, dtype=np.int64) for column in zip(*cases))
    out = np.zeros(len(cases), dtype=np.int64)
    _strengths(np.zeros(match.STATE_SIZE, dtype=np.int64), base, slots, lengths, out)
    assert out.tolist() == expected.tolist()


@kernel
def _word_positions(classes, c1s, out):
    for i in range(classes.shape[0]):
        out[i] = word_position(classes[i], c1s[i])


def test_word_position_counts_the_letters_of_the_word_or_names_the_class_between_words():
    texts = [b"the ", b"a cat", b"Hello", b"x9ab", b"wonderfully", b"[[Paris", b"\xc3\xa9t\xc3\xa9", b"<a", b"1999"]
    classes = []
    for text in texts:
        word = 0
        for byte in text:
            word = ((word << 3) | char_class(byte)) & 0xFFFFFF
        classes.append(word)
    expected = []
    for text in texts:
        letters = 0
        while letters < min(len(text), 8) and chr(text[-1 - letters]).isascii() and chr(text[-1 - letters]).isalpha():
            letters += 1
        expected.append(letters - 1 if letters else 8 + char_class(text[-1]))
    out = np.zeros(len(texts), dtype=np.int64)
    _word_positions(np.array(classes, dtype=np.int64), np.array([t[-1] for t in texts], dtype=np.int64), out)
    # space 1, lower case 2, byte >= 128 7, digit 4 (.text.char_class)
    assert out.tolist() == expected == [9, 2, 4, 1, 7, 4, 15, 0, 12]


@pytest.mark.parametrize("n_mix", range(1, mixer.N_MIXERS + 1))
def test_every_weight_set_a_mixer_selects_is_allocated(n_mix):
    # the model allocates mixer.sets(contexts, mixers) rows (the rows of the mixers it uses); a row
    # beyond them would read the final mixer's weights, or past the array (numba checks no bounds)
    n_ctx, n_in = 33, 92
    st = np.zeros(mixer.STATE_SIZE, dtype=np.int64)
    highest = 0
    for c1 in range(256):
        for match_state, expected, length in ((0, -1, 0), (2, 255, 1000)):
            for window in (-1, 1023):
                for c0, bit in ((1, 0), (255, 7)):
                    for markup, classes in ((0, 0), (15, 0o22222222), (15, (1 << 24) - 1)):
                        mixer.mixer_select.py_func(st, 0, n_in, n_ctx, n_mix, match_state, expected, length, c0, c1,
                                                   255, n_ctx, 8, bit, markup, classes, window)
                        highest = max(highest, max(int(st[m]) for m in range(n_mix)))
    assert highest % n_in == 0
    assert highest // n_in < mixer.sets.py_func(n_ctx, n_mix)
    # and none more (with one mixer, mixer 1's rows are allocated too: they come before any other's)
    assert highest // n_in == mixer.sets.py_func(n_ctx, n_mix) - 1 or n_mix == 1
