"""cm's byte histories (statemix.models.bit.byte_history) against a plain-Python reference, and in
the model: the record bit, the inputs' place, and round trips."""

from __future__ import annotations

import random

import numpy as np

import statemix
from statemix._jit import kernel
from statemix.models import cm
from statemix.models.bit import byte_history as bh
from statemix.models.bit import contexts
from statemix.models.bit.byte_history import byte_history_input, byte_history_train, byte_history_update
from statemix.models.bit.tables import lookup_tables

from conftest import text_sample
from test_hashing import reference_mix_hash


@kernel
def _drive(data, hashes, idle, table, entry_bits, st, counters, lut, slots):
    """Run the byte histories over ``data`` as cm does: per bit every context's input, then training;
    after each byte, the update with the next contexts' ``hashes[i]`` and ``idle[i]``."""
    n = hashes.shape[1]
    for i in range(data.shape[0]):
        c0 = np.int64(1)
        for j in range(8):
            for k in range(n):
                byte_history_input(st, 0, n, k, counters, 0, lut, c0, j)
                slots[8 * i + j, k] = st[bh.SLOT * n + k]
            bit = (np.int64(data[i]) >> (7 - j)) & 1
            byte_history_train(st, 0, n, counters, bit, lut)
            c0 = 2 * c0 + bit
        byte_history_update(st, 0, n, table, entry_bits, hashes[i], idle[i], np.int64(data[i]))


def _reference(data, hashes, idle, entry_bits):
    """The module docstring's rules in Python integers: (slots per bit and context, final table)."""
    n = hashes.shape[1]
    entry_bits = [int(b) for b in entry_bits]  # each context's part, in order
    regions = [sum(1 << b for b in entry_bits[:k]) for k in range(n)]
    size = sum(1 << b for b in entry_bits)
    table = [0] * size
    at, expect, run = [-1] * n, [-1] * n, [0] * n
    slots = []
    for i, byte in enumerate(data):
        c0 = 1
        for j in range(8):
            row = []
            for k in range(n):
                e = expect[k] | 256
                if expect[k] >= 0 and e >> (8 - j) == c0:
                    row.append(k * bh.N_COUNTERS + ((min(run[k], 15) * 8 + j) << 1) + ((e >> (7 - j)) & 1))
                else:
                    row.append(-1)
            slots.append(row)
            c0 = 2 * c0 + ((byte >> (7 - j)) & 1)
        for k in range(n):
            if at[k] >= 0:
                new_run = min(run[k] + 1, 255) if expect[k] == byte else 1
                table[at[k]] = (table[at[k]] & 0xFF0000) | (new_run << 8) | byte
            expect[k], run[k] = -1, 0
            if idle[i, k]:
                at[k] = -1
                continue
            h = reference_mix_hash(int(hashes[i, k]), bh.SALT)
            at[k] = int(regions[k]) + ((h >> 8) & ((1 << int(entry_bits[k])) - 1))
            check = (h >> 48) & 0xFF
            entry = table[at[k]]
            if entry >> 16 == check and entry & 0xFF00:
                expect[k], run[k] = entry & 0xFF, (entry >> 8) & 0xFF
            else:
                table[at[k]] = check << 16
    return slots, table


def test_byte_histories_follow_the_reference():
    rng = random.Random(7)
    # repeats (runs past 15), variations and random bytes; three contexts: order 1, order 2 and a
    # context idle every third byte, in tables small enough to collide
    data = bytes(b"abcabcabc" * 12) + text_sample(600, seed=3) + rng.randbytes(200) + b"x" * 300
    arr = np.frombuffer(data, dtype=np.uint8)
    n = 3
    hashes = np.zeros((len(data), n), dtype=np.int64)
    idle = np.zeros((len(data), n), dtype=np.int64)
    for i in range(len(data)):
        hashes[i, 0] = data[i] * 7919
        hashes[i, 1] = (data[i - 1] << 8 | data[i]) * 104729 + (1 << 62) if i else 5
        hashes[i, 2] = -(data[i] + 1)
        idle[i, 2] = i % 3 == 0
    entry_bits = np.array([5, 6, 4], dtype=np.int64)  # 32, 64 and 16 entries
    table = np.zeros(32 + 64 + 16, dtype=np.uint32)
    st = np.zeros(bh.state_size(n), dtype=np.int64)
    st[: 2 * n] = -1  # no entry, no expected byte
    lut = lookup_tables()
    counters = np.full(n * bh.N_COUNTERS, 1 << 31, dtype=np.uint32)
    slots = np.zeros((8 * len(data), n), dtype=np.int64)
    _drive(arr, hashes, idle, table, entry_bits, st, counters, lut, slots)
    expected_slots, expected_table = _reference(data, hashes, idle, entry_bits)
    assert slots.tolist() == expected_slots
    assert table.tolist() == expected_table
    assert (slots >= 0).mean() > 0.3  # the contexts did predict, often
    assert max(((e >> 8) & 0xFF) for e in expected_table) > 15  # and runs passed the last bucket


def test_record_carries_byte_histories_and_only_text_contexts_get_them():
    level3 = cm.config_for_level(3, 1 << 20)
    assert level3.byte_histories and cm.config_for_level(2, 1 << 20).byte_histories
    assert not cm.config_for_level(1, 1 << 20).byte_histories
    text_contexts = sum(not contexts.can_idle(kind) for kind in level3.context_kinds)
    assert level3.byte_history_inputs == text_contexts
    # the first contexts get them: the text contexts come first, kinds 34-36 among them
    assert not any(map(contexts.can_idle, level3.context_kinds[:text_contexts]))
    assert {34, 35, 36} <= set(level3.context_kinds[:text_contexts])
    assert cm.Config.from_bytes(level3.to_bytes()) == level3
    without = cm.Config(**{**level3.__dict__, "byte_histories": False})
    assert cm.Config.from_bytes(without.to_bytes()) == without
    assert without.to_bytes()[-1] | cm.configuration.BYTE_HISTORIES_BIT == level3.to_bytes()[-1]
    assert level3.inputs == without.inputs + text_contexts
    assert level3.memory_bytes() > without.memory_bytes()


def test_byte_history_entries_one_per_16_bytes_of_region_from_revision_6_at_most_2_to_the_20():
    for revision, table_bits, full, small in ((5, 25, 21, 19), (5, 24, 20, 19), (6, 25, 20, 19), (6, 24, 20, 19),
                                              (6, 20, 16, 15)):
        config = cm.Config(table_bits, 24, 2, 9, 5, kinds=(0, 44), source=1, byte_histories=True, revision=revision)
        assert (config.entry_bits(0), config.entry_bits(44)) == (full, small), (revision, table_bits)
        assert config.byte_history_entries == (1 << full) + (1 << small)
    level3 = cm.config_for_level(3, None)
    assert max(map(level3.entry_bits, level3.context_kinds)) == 20 < level3.table_bits - bh.ENTRY_SHIFT


def test_byte_histories_change_the_code_and_round_trip():
    data = text_sample(30_000, seed=8)
    without = cm.config_for_level(3, len(data))  # sized to a small input: none (see the next test)
    level3 = cm.Config(**{**without.__dict__, "byte_histories": True})
    coded = cm.Model(level3).encode(data, len(data))
    assert coded != cm.Model(without).encode(data, len(data))
    assert cm.Model(level3).decode(coded, len(data)) == data
    compressor = statemix.Compressor(level=3)  # of unknown size: with them
    assert statemix.decompress(compressor.compress(data) + compressor.flush()) == data


def test_only_presets_for_inputs_of_512_kib_or_more_or_of_unknown_size_have_byte_histories():
    for level in (2, 3):
        assert not cm.config_for_level(level, 512 * 1024 - 1).byte_histories
        assert cm.config_for_level(level, 512 * 1024).byte_histories
        assert cm.config_for_level(level, None).byte_histories
    assert not cm.config_for_level(1, None).byte_histories
