"""Model revisions 2 to 6's pieces and the ninth mixer's selector against plain Python references: the
APMs' training of both buckets and the fifth APM's key (.bit.sse), the match model's length input
(.bit.match), the word position and the mixers' training, with revision 3's rate per weight set
(.bit.mixer), revision 6's selector of mixer 3 by the source's byte (.bit.distribution); and the
mixers' weight sets, revision 4's final sets among them, against the rows allocated for them."""

from __future__ import annotations

import random

import numpy as np
import pytest

from statemix._jit import kernel
from statemix.models.bit import distribution, match, mixer
from statemix.models.bit.match import match_strength
from statemix.models.bit import sse
from statemix.models.bit.sse import APM_RATE, BUCKETS, N_APMS, apm_predict, apm_update
from statemix.models.bit.tables import lookup_tables
from statemix.models.bit.text import char_class, word_position


@kernel
def _apm_steps(apm, st, lut, p_mixes, c0s, c1s, bits, two_buckets, out):
    """One APM (keyed by c1 and c0) over a sequence of bits: each bit's prediction into ``out``."""
    for i in range(p_mixes.shape[0]):
        out[i] = apm_predict(apm, st, 0, 1, p_mixes[i], c0s[i], c1s[i], c1s[i], -1, -1, 0, 0, lut)
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


def test_the_fifth_apm_is_keyed_by_the_word_pair_and_c0_within_its_rows():
    # the fifth APM's rows follow the fourth's, before a record model's rows; the same word pair gives
    # one row per c0 (no two c0 share one), another word pair mostly others
    lut = lookup_tables()
    apm = sse.initial_apm(N_APMS, records=True)
    st = np.zeros(2 * N_APMS, dtype=np.int64)
    rng = random.Random(5)
    words = [(rng.getrandbits(63) - (1 << 62), rng.getrandbits(63) - (1 << 62)) for _ in range(200)]
    rows_of = {}
    for word0, word1 in words:
        for c0 in range(1, 256):
            apm_predict.py_func(apm, st, 0, N_APMS, 30000, c0, 97, 0x61626364, -1, -1, word0, word1, lut)
            row = (int(st[N_APMS - 1]) - (int(st[2 * N_APMS - 1]) >> 11)) // BUCKETS
            assert 4 * 65536 + 256 <= row < 5 * 65536 + 256 == sse.rows(N_APMS)
            rows_of.setdefault((word0, word1), set()).add(row)
    assert all(len(rows) == 255 for rows in rows_of.values())
    assert len(set.union(*rows_of.values())) > 0.5 * 200 * 255


@pytest.mark.parametrize("revision", [3, 4])
def test_the_coded_probability_weighs_the_mixer_and_the_apms_by_revision(revision):
    share = 2 if revision < 4 else 1  # sixteenths of p_mix
    for p_mix, p_apms in ((100, [65000, 120, 7, 40000, 3]), (65000, [1, 2, 3, 4, 5]), (32768, [32768] * 5)):
        for n in (1, 4, 5):
            total = sum(p_apms[:n])
            expected = (share * p_mix + (16 - share) * total // n) >> 4
            assert sse.coded_probability.py_func(p_mix, total, n, revision) == expected


@kernel
def _mixer_steps(weights, st, lut, inputs, chosen, bits, final, uses, out):
    """Two mixers and the final one over a sequence of bits: mixer m uses weight set ``chosen[i, m]``,
    the final mixer the one at index ``final``, the uses start at ``uses``; each bit's p_mix into ``out``."""
    n_in = inputs.shape[1]
    for i in range(bits.shape[0]):
        for m in range(2):
            mixer._choose(st, 0, m, n_in, chosen[i, m])
        st[mixer.FINAL], st[mixer.USES] = final, uses
        out[i] = mixer.mixer_predict(weights, inputs[i], n_in, st, 0, 2, lut)
        mixer.mixer_update(weights, inputs[i], n_in, st, 0, 2, out[i], bits[i], i // 8)


def reference_mixers(lut, revision, n_sets, inputs, chosen, bits):
    """The same in Python integers, from the module docstring's formulas."""
    r = mixer.REVISIONS[revision]
    n_in = len(inputs[0])
    sets = [[(1 << 16) // r.initial] * (n_in - 1) + [0] for _ in range(n_sets)]  # the bias last
    final = [(1 << 16) // 2] * 2
    uses = [0] * n_sets

    def squash(x: int) -> int:
        return int(lut[4096 + max(-2048, min(2047, x)) + 2048])

    def clamp(w: int) -> int:
        return max(-mixer.WEIGHT_LIMIT, min(mixer.WEIGHT_LIMIT, w))

    out = []
    for i, (x, pair, bit) in enumerate(zip(inputs, chosen, bits)):
        dots = [max(-2047, min(2047, sum(w * v for w, v in zip(sets[s], x)) >> 16)) for s in pair]
        p_mix = squash(sum(v * d for v, d in zip(final, dots)) >> 16)
        out.append(p_mix)
        pos = i // 8
        err = ((bit << 16) - p_mix) * (r.final + (r.final_boost << 16) // (pos + (1 << 16)))
        final = [clamp(v + ((d * err) >> 22)) for v, d in zip(final, dots)]
        stream_boost = (r.stream_boost << 16) // (pos + (1 << 16))
        for s, dot in zip(pair, dots):
            miss = (bit << 16) - squash(dot)
            if abs(miss) < mixer.MIXER_SKIP:
                continue
            rate = r.mixer_rate + stream_boost
            if r.set_boost:
                rate = r.mixer_rate + max(stream_boost, r.set_boost * mixer.USES_SCALE // (uses[s] + mixer.USES_SCALE))
                uses[s] = min(uses[s] + 1, mixer.USES_LIMIT)
            sets[s] = [clamp(w + ((v * miss * rate) >> r.rate_shift)) for w, v in zip(sets[s], x)]
    return out, uses


@pytest.mark.parametrize("revision", [2, 3, 4])
def test_mixer_training_matches_the_reference(revision):
    # weight sets used often and rarely (set 0 by one mixer at every bit, the others now and then),
    # inputs of both signs and the bias; long enough for revision 3's boost to fade on set 0
    rng = random.Random(revision)
    n, n_sets, n_in = 4000, 6, 5
    inputs = [[rng.randrange(-2047, 2048) for _ in range(n_in - 1)] + [256] for _ in range(n)]
    chosen = [(0, rng.choice((1, 1, 1, 2, 3, 4, 5))) for _ in range(n)]
    bits = [int(rng.random() < 0.5 + 0.4 * (x[0] > 0)) for x in inputs]
    lut = lookup_tables()
    weights = mixer.initial_weights(n_sets, n_in, 2, revision, n_in - 1)
    st = np.zeros(mixer.STATE_SIZE, dtype=np.int64)
    mixer.set_rates(st, 0, revision)
    out = np.zeros(n, dtype=np.int64)
    final = n_sets * n_in + 5 * mixer.N_MIXERS  # the final mixer's weight set for c0 = 5 (of group 0)
    uses_at = n_sets * n_in + mixer.REVISIONS[revision].final_groups * 256 * mixer.N_MIXERS
    assert len(weights) == uses_at + n_sets
    _mixer_steps(weights, st, lut, np.array(inputs, dtype=np.int64), np.array(chosen, dtype=np.int64),
                 np.array(bits, dtype=np.int64), final, uses_at, out)
    expected, uses = reference_mixers(lut, revision, n_sets, inputs, chosen, bits)
    assert out.tolist() == expected
    # the uses are counted only where the revision boosts by them
    assert weights[uses_at:].tolist() == (uses if revision >= 3 else [0] * n_sets)
    assert (max(uses) > 1000) == (revision >= 3)


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


def reference_source_byte(frequencies: list[int], c0: int, bit: int) -> int:
    """The most likely byte among those whose first ``bit`` bits are ``c0``'s (the lowest of equals)."""
    consistent = [b for b in range(256) if (b | 256) >> (8 - bit) == c0]
    return max(consistent, key=lambda b: (frequencies[b], -b))


def test_mixer_3_reads_the_sources_most_likely_consistent_byte_without_a_match():
    rng = random.Random(3)
    for trial in range(40):
        frequencies = [rng.choice((1, 1, 7, 300, rng.randrange(1, 1 << 20))) for _ in range(256)]
        cum = np.cumsum([0] + frequencies).astype(np.int64)
        byte = rng.randrange(256)
        for bit in range(8):
            c0 = (byte | 256) >> (8 - bit)
            assert distribution.source_expected.py_func(cum, c0, bit) == reference_source_byte(frequencies, c0, bit)
    # mixer 3's row: with a match, (length bucket, expected byte); without, the source's byte and the
    # bit position after the other rows; without a source's byte, c0
    n_ctx, n_in = 33, 92
    st = np.zeros(mixer.STATE_SIZE, dtype=np.int64)
    mixer3 = (mixer.MIXER2_SETS + (n_ctx + 1) * 8) * n_in
    for match_state, source_byte, row in ((2, 7, 1 * 256 + 9), (0, 7, 1280 + 3 * 256 + 7), (0, -1, 1024 + 12)):
        mixer.mixer_select.py_func(st, 0, n_in, n_ctx, 4, match_state, 9, 20, 12, 0, 0, 0, 0, 3, 0, 0, -1,
                                   source_byte)
        assert st[3] == mixer3 + row * n_in


@pytest.mark.parametrize("revision", [3, 4, 6])
@pytest.mark.parametrize("n_mix", range(1, mixer.N_MIXERS + 1))
def test_every_weight_set_a_mixer_selects_is_allocated(n_mix, revision):
    # the model allocates mixer.sets(contexts, mixers) rows (the rows of the mixers it uses); a row
    # beyond them would read the final mixer's weights, or past the array (numba checks no bounds);
    # then the final mixer's sets (by c0, from revision 4 by half the word position too) and the uses
    n_ctx, n_in = 33, 92
    n_sets = mixer.sets.py_func(n_ctx, n_mix)
    groups = mixer.REVISIONS[revision].final_groups
    st = np.zeros(mixer.STATE_SIZE, dtype=np.int64)
    mixer.set_rates(st, 0, revision)
    highest, finals = 0, set()
    for c1 in range(256):
        for match_state, expected, length in ((0, -1, 0), (2, 255, 1000)):
            for window in (-1, 1023):
                for c0, bit, source_byte in ((1, 0, -1), (255, 7, -1), (1, 0, 0), (255, 7, 255)):
                    for markup, classes in ((0, 0), (15, 0o2), (3, 0o222), (15, 0o22222), (15, 0o22222222),
                                            (15, (1 << 24) - 1)):
                        mixer.mixer_select.py_func(st, 0, n_in, n_ctx, n_mix, match_state, expected, length, c0, c1,
                                                   255, n_ctx, 8, bit, markup, classes, window, source_byte)
                        highest = max(highest, max(int(st[m]) for m in range(n_mix)))
                        group = word_position.py_func(classes, c1) >> 1 if groups > 1 else 0
                        assert st[mixer.FINAL] == n_sets * n_in + (group * 256 + c0) * mixer.N_MIXERS
                        assert st[mixer.USES] == n_sets * n_in + groups * 256 * mixer.N_MIXERS
                        finals.add(int(st[mixer.FINAL]))
    assert highest % n_in == 0
    assert highest // n_in < n_sets
    # and none more (with one mixer, mixer 1's rows are allocated too: they come before any other's)
    assert highest // n_in == n_sets - 1 or n_mix == 1
    # revision 4's final mixer has a group per half word position: all 8 seen here (4 letters' counts
    # and 4 class pairs between words), each with c0 = 1 and 255
    assert len(finals) == (16 if groups > 1 else 2)
    assert mixer.weight_words(n_sets, n_in, revision) == n_sets * (n_in + 1) + groups * 256 * mixer.N_MIXERS
