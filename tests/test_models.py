"""The model contract of statemix.models: record checks before allocation, memory limits, describe(),
progress callbacks in bounded steps, and snapshot/restore."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from statemix import StatemixError
from statemix.models import ModelSpec, build_model, cm, memory_needed, spec_for_level, ssm
from statemix.models.bit import contexts, distribution, mixer

from conftest import config_with, text_sample


def test_oversized_cm_record_is_refused_before_allocating(monkeypatch):
    def no_allocation(self, config):
        raise AssertionError("the model was built")

    monkeypatch.setattr(cm.Model, "__init__", no_allocation)
    for record in ([26, 28, 10, 3, 2], [26, 24, 10, 3, 2], [24, 27, 10, 3, 2]):
        with pytest.raises(StatemixError, match="corrupt stream"):
            build_model(ModelSpec(cm.MODEL_ID, bytes(record)))
        with pytest.raises(StatemixError, match="corrupt stream"):
            memory_needed(ModelSpec(cm.MODEL_ID, bytes(record)))


def test_level_3_records_with_the_older_history_stay_valid():
    # level 3's history had 2**26 bytes before the shape contexts (2**25 now): the largest record a
    # preset ever wrote is still accepted, one size more is not
    older = dataclasses.replace(cm.config_for_level(3, None), hist_bits=26)
    assert memory_needed(ModelSpec(cm.MODEL_ID, older.to_bytes())) == older.memory_bytes()
    with pytest.raises(StatemixError, match="corrupt stream"):
        memory_needed(ModelSpec(cm.MODEL_ID, dataclasses.replace(older, hist_bits=27).to_bytes()))


def test_oversized_ssm_record_is_refused():
    for change in (dict(d_model=64), dict(layers=3), dict(table_bits=22), dict(chunk=64), dict(vocab=300)):
        spec = ModelSpec(ssm.MODEL_ID, config_with(**change).to_bytes())
        with pytest.raises(StatemixError, match="corrupt stream"):
            build_model(spec)


def test_memory_limit():
    spec = spec_for_level(3)
    need = memory_needed(spec)
    assert need == cm.Config.from_bytes(spec.parameters).memory_bytes() > 400 << 20
    assert spec.describe().endswith(", at most 1,387 MiB of memory)")  # the bound, rounded up as below
    with pytest.raises(StatemixError, match=r"^this stream's model needs 1,387 MiB of memory, more than the "
                                            r"limit of 300 MiB \(raise it with --memory\)$"):
        build_model(spec, memory_limit=300 << 20)
    build_model(spec_for_level(1, 1000), memory_limit=need)
    assert memory_needed(spec_for_level(3, 1000, "ssm")) < memory_needed(spec_for_level(3, None, "ssm"))


@pytest.mark.parametrize("model,level,hint,words", [
    ("cm", 2, None, "cm level 2 (57 contexts of 16 MiB, 8 of them record contexts of 2 MiB, 3 of them 8-bit image "
                    "contexts of 1 MiB, 2 of them x86 instruction contexts of 2 MiB, 23 of them small text contexts of "
                    "16 MiB: order 2, order 4,"),
    ("cm", 1, 5000, "cm level 1 (5 contexts of"),
    ("cm", 3, None, "cm level 3 (57 contexts of 32 MiB, 8 of them record contexts of 4 MiB, 3 of them 8-bit image "
                    "contexts of 2 MiB, 2 of them x86 instruction contexts of 4 MiB, 23 of them small text contexts of "
                    "8 MiB: order 2,"),
    ("ssm", 1, None, "ssm level 1 (count models only"),
    ("ssm", 2, None, "ssm level 2 (SSM of 2 layers"),
    ("ssm", 3, 1 << 30, "ssm level 3 ("),
])
def test_describe_names_the_preset(model, level, hint, words):
    assert spec_for_level(level, hint, model).describe().startswith(words)


def test_small_text_regions_by_model_revision():
    # up to revision 4 a quarter of the others'; from revision 5 half, at most 2**23 bytes (so level 3's
    # stay at 8 MiB); from revision 7 the others' up to 2**24 bytes, above that as revision 5's; the
    # other text contexts' keep table_bits
    for revision, table_bits, small in ((4, 24, 22), (4, 25, 23), (5, 24, 23), (5, 25, 23), (5, 20, 19),
                                        (6, 24, 23), (7, 24, 24), (7, 25, 23), (7, 20, 20), (8, 24, 24)):
        config = cm.Config(table_bits, 24, 2, 9, 5, kinds=(0, 44), source=1, revision=revision)
        assert cm.Config.from_bytes(config.to_bytes()) == config
        assert (config.region_bits(44), config.region_bits(0)) == (small, table_bits), (revision, table_bits)
    assert cm.Config.from_bytes(spec_for_level(2).parameters).revision == 8


def test_source_buckets_by_model_revision():
    # up to revision 6 buckets of 32 slots, 2**4 fewer than a context's bytes, at most 2**20; from
    # revision 7 twice as many of 16 slots, in about the same memory
    for revision, table_bits, bits, slots in ((6, 24, 20, 32), (6, 16, 12, 32), (7, 24, 21, 16), (7, 25, 21, 16),
                                              (7, 16, 13, 16), (7, 14, 12, 16)):
        config = cm.Config(table_bits, 24, 2, 9, 5, kinds=(0, 44), source=1, revision=revision)
        assert (config.source_table_bits, config.source_slots) == (bits, slots), (revision, table_bits)
        source = distribution.Source(config.source, bits, slots)
        assert source.model.mixstate.tokens.shape == (1 << bits, slots)
    before, after = (distribution.memory_bytes(1, bits, slots) for bits, slots in ((20, 32), (21, 16)))
    assert before < after < 1.1 * before


def test_cm_description_lists_every_component_but_the_counters_and_apms():
    for level, last in ((2, "x86 opcodes, match, byte histories, byte distribution (count models), 9 mixers, 5 APMs"),
                        (3, "match, byte histories, byte distribution (pretrained SSM v2 and count models), 9 mixers")):
        assert last in spec_for_level(level).describe()


def test_describe_custom_and_invalid_records():
    assert ModelSpec(cm.MODEL_ID, bytes([20, 22, 4, 1, 1])).describe().startswith("cm custom (4 contexts")
    assert ModelSpec(ssm.MODEL_ID, config_with(prior=0.5).to_bytes()).describe().startswith("ssm custom (")
    assert ModelSpec(ssm.MODEL_ID, ssm.PRESETS["bpe"].to_bytes()).describe().startswith("ssm preset bpe (")
    assert "invalid" in ModelSpec(cm.MODEL_ID, bytes([26, 28, 10, 3, 2])).describe()
    assert "unknown model 9" in ModelSpec(9, b"").describe()


BYTES_TINY = dict(d_model=8, d_state=4, chunk=16, channel_block=8, iters_a=2, chunks_a=4)
BPE_TINY = dict(BYTES_TINY, tokenizer=ssm.TOK_BPE, merges=96)


def small_models():
    """(name, factory) of models covering cm levels 1-2, ssm levels 1-2 and a BPE ssm."""
    return [
        ("cm-1", lambda: build_model(spec_for_level(1, 20_000))),
        ("cm-2", lambda: build_model(spec_for_level(2, 20_000))),
        ("ssm-1", lambda: build_model(spec_for_level(1, 20_000, "ssm"))),
        ("ssm-2", lambda: build_model(spec_for_level(2, 20_000, "ssm"))),
        ("ssm-bpe", lambda: ssm.Model(config_with(**BPE_TINY))),
    ]


@pytest.mark.parametrize("name,factory", small_models(), ids=[n for n, _ in small_models()])
def test_progress_is_called_in_steps_and_can_abort(name, factory):
    data = text_sample(40_000 if name.startswith("cm") or name == "ssm-1" else 1500, seed=2)
    seen = []
    coded = factory().encode(data, len(data), progress=seen.append)
    assert coded == factory().encode(data, len(data))  # steps never change the output
    assert seen == sorted(seen) and seen[-1] == len(data) and len(seen) > 1
    decoded = []
    assert factory().decode(coded, len(data), progress=decoded.append) == data
    assert decoded[-1] == len(data) and decoded == sorted(decoded)
    learned = []
    factory().learn(data, progress=learned.append)
    assert learned[-1] == len(data)

    class Stop(Exception):
        pass

    def stop(done):
        raise Stop

    with pytest.raises(Stop):
        factory().encode(data, len(data), progress=stop)


@pytest.mark.parametrize("name,factory", small_models(), ids=[n for n, _ in small_models()])
def test_encode_after_restore_equals_fresh_model_with_same_history(name, factory):
    data = text_sample(6000, seed=5)
    blocks = [data[:2000], data[2000:3500], data[3500:]]
    if name.startswith("ssm") and name != "ssm-1":
        blocks = [b[:600] for b in blocks]
    restored = factory()
    early = restored.snapshot()  # before the first block: a BPE model has no vocabulary yet
    restored.encode(blocks[1], 10_000)
    restored.restore(early)
    restored.encode(blocks[0], 10_000)
    snap = restored.snapshot(reuse=early)
    restored.encode(blocks[1], 10_000)  # modelled, then undone
    restored.learn(blocks[2])
    restored.restore(snap)
    expected = factory_history(factory, blocks[0], blocks[2])
    assert restored.encode(blocks[2], 10_000) == expected
    restored.restore(snap)  # a snapshot stays valid after a restore
    assert restored.encode(blocks[2], 10_000) == expected


def factory_history(factory, first, then):
    """The code word of ``then`` from a fresh model that saw only ``first``."""
    model = factory()
    model.encode(first, 10_000)
    return model.encode(then, 10_000)


@pytest.mark.parametrize("model", ["cm", "ssm"])
def test_every_model_implements_the_protocol(model):
    from statemix.models import Model

    built = build_model(spec_for_level(1, 1000, model))
    assert isinstance(built, Model)
    assert built.spec == spec_for_level(1, 1000, model)
    blocks = []
    built.trace(blocks.append)
    built.encode(b"hello hello hello", 100)
    (block,) = blocks
    assert block.size == 17 and block.bits.size == block.p_coded.size == 8 * 17
    assert np.all((block.p_coded > 0) & (block.p_coded < 1))
    assert built.components() and isinstance(built.ablated(built.components()[:1]), Model)


def test_cm_component_list_record():
    old = cm.Config.from_bytes(spec_for_level(1).parameters)
    assert old.kinds is None and old.to_bytes() == bytes([22, 22, 5, 2, 1])  # the first records stay
    listed = cm.Config(20, 22, 3, 2, 1, kinds=(4, 0, 9))
    assert listed.kinds == (0, 4, 9)  # a set, kept in id order
    record = listed.to_bytes()
    assert record == bytes([0, 2, 20, 22, 2, 1]) + ((1 << 0) | (1 << 4) | (1 << 9)).to_bytes(4, "little") + b"\0"
    assert cm.Config.from_bytes(record) == listed
    assert cm.Config.from_bytes(bytes([0, 1, 20, 22, 2, 1, 3, 4, 0, 9])) == listed  # the list record is still read
    gated = cm.Config(20, 22, 3, 2, 1, kinds=(0, 4, 21), detector=1)  # with the record detector's revision
    mask = ((1 << 0) | (1 << 4) | (1 << 21)).to_bytes(4, "little")
    assert gated.to_bytes() == bytes([0, 2, 20, 22, 2, 1]) + mask + b"\x80"
    assert cm.Config.from_bytes(gated.to_bytes()) == gated
    images = cm.Config(20, 22, 3, 2, 1, kinds=(0, 4, 29), source=1, detector=2)  # revision 2: bits 7-6 = 11
    assert images.to_bytes() == bytes([0, 2, 20, 22, 2, 1]) + ((1 << 0) | (1 << 4) | (1 << 29)).to_bytes(4, "little") + b"\xc1"
    assert cm.Config.from_bytes(images.to_bytes()) == images
    assert listed.components() == ["order 0", "order 1", "order 2", "word", "order 1 history", "match", "APMs"]
    assert ModelSpec(cm.MODEL_ID, record).describe().startswith(
        "cm custom (3 contexts of 1 MiB: order 2, word, order 1 history, match, 2 mixers,")
    unknown_source = max(distribution.PRESETS) + 1
    for bad in (bytes([0, 1, 20, 22, 2, 1, 2, 4, 4]), bytes([0, 1, 20, 22, 2, 1, 2, 4, 99]),
                bytes([0, 1, 20, 22, 2, 1, 3, 4, 0]), bytes([0, 1, 27, 22, 2, 1, 1, 4]),
                bytes([0, 2, 20, 22, 2, 1, 0, 0, 0, 0, 0]), bytes([0, 2, 20, 22, 2, 1, 1, 0, 0, 0, 0x41]),
                bytes([0, 2, 20, 22, mixer.N_MIXERS + 1, 1, 1, 0, 0, 0, 0]), bytes([0, 2, 20, 22, 2, 5, 1, 0, 0, 0, 0]),
                bytes([0, 2, 20, 22, 2, 1, 1, 0, 0, 0]), bytes([0, 2, 20, 22, 2, 1, 1, 0, 0, 0, unknown_source]),
                bytes([0, 2, 20, 22, 2, 1, 1, 0, 0, 0, 0x80 | unknown_source])):
        with pytest.raises(StatemixError, match="corrupt stream"):
            build_model(ModelSpec(cm.MODEL_ID, bad))
    data = text_sample(5000, seed=9)
    coded = cm.Model(listed).encode(data, len(data))
    assert cm.Model(listed).decode(coded, len(data)) == data
    # the same contexts listed in id order give what the first record with 3 contexts would, except
    # that a component list keeps every context's run input
    same = cm.Model(cm.Config(20, 22, 3, 2, 1, kinds=(0, 1, 2))).encode(data, len(data))
    first = cm.Model(cm.Config(20, 22, 3, 2, 1)).encode(data, len(data))
    assert same == first


def test_cm_model_revision_record():
    revised = cm.Config(20, 22, 3, 2, 1, kinds=(0, 4, 9), revision=1)
    mask = ((1 << 0) | (1 << 4) | (1 << 9)).to_bytes(4, "little")
    assert revised.to_bytes() == bytes([0, 4, 1, 20, 22, 2, 1, 4]) + mask + b"\0"
    assert cm.Config.from_bytes(revised.to_bytes()) == revised
    wide = cm.Config(20, 22, 2, 2, 1, kinds=(0, 33), source=1, revision=1)
    assert wide.to_bytes() == bytes([0, 4, 1, 20, 22, 2, 1, 5]) + (1 | (1 << 33)).to_bytes(5, "little") + b"\1"
    assert cm.Config.from_bytes(wide.to_bytes()) == wide
    assert dataclasses.replace(revised, revision=0).to_bytes()[:2] == b"\0\2"  # revision 0 keeps its records
    with pytest.raises(ValueError, match="needs a component set"):
        cm.Config(20, 22, 3, 2, 1, revision=1)
    unknown = len(mixer.REVISIONS)  # the first revision this build does not know
    with pytest.raises(StatemixError, match=f"revision {unknown} unknown.*newer statemix"):
        build_model(ModelSpec(cm.MODEL_ID, bytes([0, 4, unknown, 20, 22, 2, 1, 4]) + mask + b"\0"))
    unknown_width = len(contexts.NAMES) // 8 + 1  # the mask bytes that reach the first kind this build does not know
    for bad in (bytes([0, 4, 0, 20, 22, 2, 1, 4]) + mask + b"\0",  # revision 0 is written 00 02
                bytes([0, 4, 1, 20, 22, 2, 1, 5]) + mask + b"\0\0",  # a mask longer than its kinds need
                bytes([0, 4, 1, 20, 22, 2, 1, 3]) + mask[:3] + b"\0", bytes([0, 4, 1, 20, 22, 2, 1, 4]) + mask,
                bytes([0, 4, 1, 20, 22, 2, 1, unknown_width]) + (1 << len(contexts.NAMES)).to_bytes(unknown_width, "little")
                + b"\0",  # unknown kind
                bytes([0, 4, 1])):
        with pytest.raises(StatemixError, match="corrupt stream"):
            build_model(ModelSpec(cm.MODEL_ID, bad))
    data = text_sample(5000, seed=9)
    coded = cm.Model(revised).encode(data, len(data))
    assert coded != cm.Model(dataclasses.replace(revised, revision=0)).encode(data, len(data))  # other rates
    assert cm.Model(revised).decode(coded, len(data)) == data
    second = dataclasses.replace(revised, revision=2)  # the APMs' training and the match's length input
    assert second.to_bytes()[2] == 2 and cm.Config.from_bytes(second.to_bytes()) == second
    assert second.inputs == revised.inputs + 1 and revised.input_layout().strength == -1
    recoded = cm.Model(second).encode(data, len(data))
    assert recoded != coded and cm.Model(second).decode(recoded, len(data)) == data
    third = dataclasses.replace(revised, revision=3)  # the mixers' rate per weight set
    assert cm.Config.from_bytes(third.to_bytes()) == third and third.inputs == second.inputs
    third_coded = cm.Model(third).encode(data, len(data))
    assert third_coded != recoded and cm.Model(third).decode(third_coded, len(data)) == data
    fourth = dataclasses.replace(revised, revision=4)  # the final mixer's sets by word, the APMs' share
    assert cm.Config.from_bytes(fourth.to_bytes()) == fourth and fourth.inputs == third.inputs
    assert fourth.memory_bytes() == third.memory_bytes() + 7 * 256 * 9 * 4  # 7 more groups of final sets
    fourth_coded = cm.Model(fourth).encode(data, len(data))
    assert fourth_coded != third_coded and cm.Model(fourth).decode(fourth_coded, len(data)) == data
    four_apms, five_apms = (dataclasses.replace(fourth, apms=n) for n in (4, 5))  # the fifth: the word pair's
    assert cm.Config.from_bytes(five_apms.to_bytes()) == five_apms
    with pytest.raises(StatemixError, match="corrupt stream"):  # a fifth APM before revision 4
        build_model(ModelSpec(cm.MODEL_ID, dataclasses.replace(five_apms, revision=3).to_bytes()))
    assert five_apms.memory_bytes() == four_apms.memory_bytes() + 65536 * 33 * 4
    fifth_coded = cm.Model(five_apms).encode(data, len(data))
    assert fifth_coded != cm.Model(four_apms).encode(data, len(data))
    assert cm.Model(five_apms).decode(fifth_coded, len(data)) == data


def test_cm_output_does_not_depend_on_the_order_of_its_contexts():
    # the component-set record (and reading the older list records in id order) rests on this
    config = cm.Config(16, 16, 4, 5, 4, kinds=(0, 4, 14, 16))
    data = text_sample(20000, seed=3)
    permuted = cm.Model(config)
    permuted.state[cm.loop.KINDS:cm.loop.KINDS + 4] = (16, 14, 0, 4)
    assert permuted.encode(data, len(data)) == cm.Model(config).encode(data, len(data))


@pytest.mark.parametrize("size", [5000, 300000, None])
def test_level1_loop_codes_what_the_generic_loop_codes(size):
    # level 1 runs cm's loop compiled for its shape (loop.fixed_loop): every bit as the generic loop's
    config = cm.config_for_level(1, size)
    assert cm.loop.fixed_shape(config) == cm.LEVEL1_SHAPE
    data = text_sample(20000, seed=6) + np.random.default_rng(6).integers(0, 256, 3000, dtype=np.uint8).tobytes()
    fixed, generic = cm.Model(config), cm.Model(config)
    generic._loop = cm.loop.run_range_no_ssm
    coded = fixed.encode(data, len(data))
    assert coded == generic.encode(data, len(data))
    assert fixed.state.tolist() == generic.state.tolist()
    reader = cm.Model(config)
    reader._loop = cm.loop.run_range_no_ssm
    assert reader.decode(coded, len(data)) == data


def test_only_level1_shapes_take_the_fixed_loop():
    assert cm.Model(cm.config_for_level(1, 1000))._loop is cm.run_range_level1
    assert cm.Model(cm.config_for_level(2, 1000))._loop is not cm.run_range_level1
    assert cm.loop.fixed_shape(cm.config_for_level(2, None)) is None  # contexts that can idle: the width varies
    assert cm.Model(cm.Config(20, 20, 5, 3, 1))._loop is not cm.run_range_level1  # another mixer count


def test_lookup_tables_are_pinned_and_only_a_matching_cache_file_is_read(tmp_path, monkeypatch):
    from statemix.models.bit import tables

    lut = tables._lookup_tables()
    assert tables.tables_digest(lut) == tables.LUT_DIGEST  # every stream depends on them
    path = tmp_path / "lookup_tables.npy"
    assert np.array_equal(tables._cached_tables(path), lut) and path.exists()  # computed, then kept
    assert np.array_equal(tables._cached_tables(path), lut)
    other = lut.copy()
    other[5] += 1
    np.save(path, other)
    assert np.array_equal(tables._cached_tables(path), lut)  # not these: computed again
    path.write_bytes(b"not an array")
    assert np.array_equal(tables._cached_tables(path), lut)
    with open(path, "wb") as f:  # a header that claims far more than the file holds: not allocated
        np.lib.format.write_array_header_1_0(f, {"descr": "<i8", "fortran_order": False, "shape": (1 << 40,)})
    assert np.array_equal(tables._cached_tables(path), lut)
    assert np.array_equal(tables._cached_tables(None), lut)  # no cache directory
    assert sorted(p.name for p in tmp_path.iterdir()) == ["lookup_tables.npy"]
    monkeypatch.setattr(tables, "LUT_DIGEST", "0" * 32)  # as if this Python computed other tables
    with pytest.raises(StatemixError, match="fixed tables"):
        tables._cached_tables(None)


def test_source_input_is_the_mass_of_the_upper_half():
    # the byte distribution read bit by bit, against a plain sum over the byte values
    from statemix.models.bit.tables import lookup_tables

    lut = lookup_tables()
    rng = np.random.default_rng(5)
    source = distribution.Source(distribution.SOURCE_COUNTS, 12)
    arrays = source.arrays()
    for trial in range(20):
        freqs = rng.integers(1, 1 << 22, 256) if trial % 2 else rng.integers(1, 50, 256) * (rng.random(256) < 0.1) + 1
        arrays.cum[:] = np.concatenate([[0], np.cumsum(freqs)])
        byte = int(rng.integers(256))
        for bit in range(8):
            c0 = (byte | 256) >> (8 - bit)
            values = [v for v in range(256) if (v | 256) >> (8 - bit) == c0]
            ones = sum(int(freqs[v]) for v in values if (v >> (7 - bit)) & 1)
            p = min(65520, max(16, (ones << 16) // sum(int(freqs[v]) for v in values)))
            assert distribution.source_input(arrays.cum, c0, bit, lut) == lut[p >> 4], (trial, bit)


def test_sources_keep_their_ssm_configuration():
    """cm's record names a byte-distribution source by its id, not by its ssm configuration: a retuned
    ssm preset or default must not change what an existing source is (a retuned source needs a new id).
    Each keeps the first frequency floor (the last byte, 00): its frequencies are a distribution for
    cm, not a code word."""
    records = {1: "05ff0020021004022001080a0004140002106f12033b6666663f77be7f3f77cc2b320000a0408fc2f53d9a99993e"
                  "6f12033b2a0000000000000000000002000100150000",
               2: "04ff0020021004022001080a0004140002106f12033b6666663f77be7f3f77cc2b320000a0408fc2f53d9a99993e"
                  "6f12033b2a0000000000000000000002010100150000",
               3: "04ff0040021004021001080a0004140001106f12033b6666663f77be7f3f77cc2b320000a040000000009a99993e"
                  "6f12033b2a0000000000000000000002010100150000",
               4: "04ff0040021004021001080a00041400011052499d396666663f77be7f3f77cc2b320000a040000000009a99993e"
                  "52499d392a0000000000000000000002010100150000",
               5: "04ff0040021004021001080a00041400011052499d396666663f77be7f3f77cc2b320000a040000000009a99993e"
                  "52499d392a0000000000000000000002010100150000"}
    assert sorted(records) == sorted(distribution.PRESETS)
    for source, record in records.items():
        assert distribution.source_config(source, 21, 16).to_bytes().hex() == record, source
    wide = distribution.source_config(distribution.SOURCE_WIDE_SSM, 21, 16)
    assert (wide.d_model, wide.smoothing, wide.chunk, wide.iters_c, wide.delay) == (64, 0.0, 16, 1, 0)


@pytest.mark.parametrize("source", [1, 2, 3, 4, 5])
def test_cm_with_a_byte_distribution_round_trips(source):
    data = text_sample(12000, seed=4)
    plain = cm.Config(16, 16, 4, 5, 2, kinds=(0, 1, 2, 4))
    config = cm.Config(16, 16, 4, 5, 2, kinds=(0, 1, 2, 4), source=source)
    assert cm.Config.from_bytes(config.to_bytes()) == config
    coded = cm.Model(config).encode(data, len(data))
    assert cm.Model(config).decode(coded, len(data)) == data
    assert coded != cm.Model(plain).encode(data, len(data))
    name = cm.Model(config).components()[-2]
    assert name.startswith("byte distribution")
    assert cm.Model(config).ablated([name]).encode(data, len(data)) != coded


def test_cm_ablation_reaches_every_input_of_the_widest_model():
    """The diagnostics switch components off by input index: the default level has more inputs than
    an int64 has bits (a mask of them overflowed, and its APM bit was also an input's), so an 8-bit
    image context's input (past the bias, index > 63, live in the image), the source's, a text
    context's and the APMs must each change the code word alone."""
    from determinism_probe import photo_like

    data = text_sample(6000, seed=5) + photo_like(96, 100, seed=5)
    model = cm.Model(cm.config_for_level(2, len(data)))
    layout = model.config.input_layout()
    assert layout.counters[model.config.context_kinds.index(contexts.IDS["gray vertical"])] > 63
    coded = model.encode(data, len(data))
    for name in (model.components()[-2], "line start", "gray vertical", "APMs"):
        ablated = cm.Model(model.config).ablated([name])
        assert ablated.encode(data, len(data)) != coded, name


@pytest.mark.parametrize("config", [cm.Config(16, 16, 10, 3, 2), cm.config_for_level(1, 10**6),
                                    cm.config_for_level(2, 10**6), cm.config_for_level(3, 10**6),
                                    cm.Config(16, 16, 6, 3, 2, kinds=(0, 4, 21, 25, 29, 32), source=1)])
def test_cm_input_layout(config):
    """Every input has one place; the text contexts' inputs, the match model's, the byte histories',
    the source's and the bias come before every input of a context that can be idle (the mixers read
    only that prefix while those are idle); without such contexts, the first records' layout."""
    layout = config.input_layout()
    kinds = config.context_kinds
    places = [0, 1, layout.match, *layout.counters, *layout.runs, layout.bias,
              *range(layout.histories, layout.histories + config.byte_history_inputs)]
    places += [layout.source] if config.source else []
    places += [layout.strength] if config.match_strength else []
    assert sorted(places) == list(range(config.inputs))
    idle_capable = [k for k, kind in enumerate(kinds) if contexts.can_idle(kind)]
    tail = [layout.counters[k] for k in idle_capable] + [layout.runs[k] for k in idle_capable if k < len(layout.runs)]
    assert sorted(set(places) - set(tail)) == list(range(layout.bias + 1))
    if not idle_capable:
        n, r = config.contexts, config.run_inputs
        assert layout.counters == [2 + k for k in range(n)] and layout.match == 2 + n
        assert layout.runs == [3 + n + k for k in range(r)] and layout.bias == config.inputs - 1


def test_every_revision_constant_is_named_in_the_revisions_table():
    """Each module constant that marks a cm model revision (``*_REVISION``) is named in that revision's
    line of cm.configuration.REVISIONS, and the table runs from 0 to the latest revision a preset writes."""
    import importlib
    import pkgutil

    from statemix.models import bit, presets
    from statemix.models.cm import configuration

    latest = max(level.get("revision", 0) for level in presets.CM_LEVELS.values())
    assert sorted(configuration.REVISIONS) == list(range(latest + 1)) == list(range(len(bit.mixer.REVISIONS)))
    modules = [configuration] + [importlib.import_module(f"statemix.models.bit.{info.name}")
                                 for info in pkgutil.iter_modules(bit.__path__)]
    marks = [(module, name, value) for module in modules for name, value in vars(module).items()
             if name.endswith("_REVISION") and isinstance(value, int)]
    assert len(marks) >= 7
    for module, name, value in marks:
        assert name in configuration.REVISIONS[value], (module.__name__, name, value)
