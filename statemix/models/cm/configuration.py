"""cm's configuration: the options that change the output, as the stream's model record writes them.

:class:`Config` is read from and written to the record (see its Records section), sizes the model's
tables (:meth:`Config.region_bits`, :meth:`Config.memory_bytes`) and describes it in words;
:func:`config_for_level` gives the preset of a ``--level`` (:mod:`statemix.models.presets`).

It calls the components' small predicates (``is_gray``, ``sets`` ...) as plain Python
(``.py_func``): called on the kernel, each would load a compiled entry from the cache, about 5 ms
each at every start.
"""

from __future__ import annotations

from collections import namedtuple
from dataclasses import asdict, dataclass

from .. import presets
from ..bit import byte_history, contexts, distribution, image, instructions, match, mixer, sse
from ..protocol import memory_bound_mib
from ..tokenmix import SLOTS
from .loop import AUX_SIZE, N_HASHED, STATE_MAP_BASE

FIRST_RECORD_KINDS, FIRST_RECORD_RUNS = 10, 9  # contexts and run inputs a first record can have (see the package's docstring)
RECORD_TABLE_SHIFT = 3  # the record contexts' regions are 2**-RECORD_TABLE_SHIFT of the others'
GRAY_TABLE_SHIFT = 4  # and the 8-bit image contexts' 2**-GRAY_TABLE_SHIFT (their values are at most 2**12)
SMALL_TEXT_TABLE_SHIFT = 2  # and the small text contexts' (contexts.SMALL_TEXT_KINDS) 2**-SMALL_TEXT_TABLE_SHIFT,
#: but from model revision SMALL_TEXT_REVISION half the others', and at most 2**SMALL_TEXT_MAX_BITS bytes
SMALL_TEXT_REVISION, SMALL_TEXT_MAX_BITS = 5, 23
#: and from model revision FULL_TEXT_REVISION the others' up to 2**FULL_TEXT_MAX_BITS bytes (above
#: that as revision 5's: level 3's stay 8 MiB, within the decoder's default memory limit)
FULL_TEXT_REVISION, FULL_TEXT_MAX_BITS = 7, 24
#: From model revision SOURCE_SLOTS_REVISION the byte-distribution source's n-gram buckets hold
#: SOURCE_SLOTS (token, count) pairs, not 32, and there are twice as many in about the same memory
#: (:attr:`Config.source_table_bits`)
SOURCE_SLOTS_REVISION, SOURCE_SLOTS = 7, 16

#: cm's model revisions (:attr:`Config.revision`, recorded from ``00 04`` on; every earlier record is
#: revision 0) and what each changed; the constant that marks a change lives with its component and
#: is named here (tests/test_models.py checks that every such constant is).
REVISIONS = {
    0: "the first",
    1: "the mixers' constants: weights start at 1/24, not 1/4; slower rates once the stream is older "
       "(bit.mixer.REVISIONS)",
    2: "the APMs train both buckets (bit.sse.TWO_BUCKETS_REVISION); the match model's length is a mixer "
       "input (bit.match.STRENGTH_REVISION)",
    3: "a rate boost per weight set, by its uses, instead of one for the stream (bit.mixer.REVISIONS)",
    4: "the final mixer's weight sets by half the word position as well as c0 (bit.mixer.REVISIONS); a "
       "fifth APM, keyed by the word pair, and the APMs' 15/16 of the coded probability, not 14/16 "
       "(bit.sse.WORD_APM_REVISION)",
    5: "the small text contexts' regions half the others', at most 2**23 bytes, not a quarter "
       "(SMALL_TEXT_REVISION)",
    6: "mixer 3 reads the source's expected byte (bit.mixer.SOURCE_SELECTOR_REVISION); a byte-history "
       "table at most 2**20 entries (bit.byte_history.MAX_ENTRY_REVISION)",
    7: "the small text contexts' regions the others' up to 2**24 bytes (FULL_TEXT_REVISION); the "
       "byte-distribution source's buckets of 16 pairs, twice as many (SOURCE_SLOTS_REVISION)",
    8: "the coded P(1) within [2**-12, 1 - 2**-12], not [2**-16, 1 - 2**-16]: a code word holds 16 times "
       "fewer bytes, and a decoder's work is bounded so (bit.sse.FLOOR_REVISION)",
}

RECORD_LIST = b"\x00\x01"  # a record with a component list starts so (a first record's table_bits is >= 12)
RECORD_MASK = b"\x00\x02"  # and one with a component set
RECORD_WIDE = b"\x00\x03"  # and one with a component set that holds kinds from 32 on
RECORD_REVISED = b"\x00\x04"  # and one with a component set and a model revision after the first
DETECTOR_SHIFT = 6  # a component set's last byte: the byte-distribution source, and these 2 bits the detector's
BYTE_HISTORIES_BIT = 1 << 5  # and this bit: the byte histories (sources are below it)
#: the record detector's revision -> its bits in the component set's last byte (see Config), and back
DETECTOR_BITS = (0b00, 0b10, 0b11)
DETECTOR_REVISIONS = {bits: revision for revision, bits in enumerate(DETECTOR_BITS)}


#: Input positions in the mixers' vector (:meth:`Config.input_layout`): ``counters[k]`` and ``runs[k]``
#: context k's (``runs`` as long as the run inputs), the match model's, the first byte history's,
#: the source's (-1: none), the match model's length input's (-1: none, before model revision 2) and
#: the bias's, the last input before those of the contexts that can be idle.
InputLayout = namedtuple("InputLayout", "counters runs match histories source strength bias")


@dataclass(frozen=True)
class Config:
    """Options of the cm model that change the output (all recorded in the stream header).

    ``table_bits``: log2 of the bytes of bit-history states per hashed context.
    ``hist_bits``: log2 of the match model's history bytes (its hash table has 2**(hist_bits-2)
    int32 entries).  ``contexts``: how many hashed contexts.  ``mixers``: how many mixers (1..9,
    the first of :mod:`.bit.mixer`'s list; with one, no final mixer).  ``apms``: how many APMs (1..4,
    from model revision 4 1..5, the first of :mod:`.bit.sse`'s list).  ``kinds``: the component set,
    the context kinds of :mod:`.bit.contexts` (kept in id order); None for the first records, which list no
    components and mean the first ``contexts`` kinds in id order (with the run quirk described in the
    module docstring).  ``source``: the byte-distribution input (:mod:`.bit.distribution`, 0 for
    none).  ``detector``: the record detector's revision (0, 1 or 2, see Records).  ``revision``: the
    model's revision, which sets what is not a field of its own (:data:`REVISIONS`); 0 in every
    record before ``00 04``.

    Records: the first format is 5 bytes ``table_bits, hist_bits, contexts, mixers, apms``; a record
    with a component list is ``00 01 table_bits hist_bits mixers apms n kind_0 .. kind_n-1`` (read,
    no longer written); the one written for a component list is the set, ``00 02 table_bits hist_bits
    mixers apms``, a 32-bit little-endian mask with bit ``kind`` set for each kind used, and the
    byte-distribution source (:mod:`.bit.distribution`) in the low 6 bits of its last byte, and in its
    top 2 bits (from ``DETECTOR_SHIFT``) the record detector's revision (:mod:`.bit.record`) as
    :data:`DETECTOR_BITS` writes it: ``00`` revision 0, the first, blind to text; ``10`` revision 1,
    which finds no short or weak record in text; ``11`` revision 2, which also finds the rows of
    8-bit images (``01`` is refused: a newer statemix may know it).  A set with kinds from 32 on
    (the x86 instruction contexts) is written ``00 03 table_bits hist_bits mixers apms n``, an
    ``n``-byte mask (5 to 8 bytes, its last byte not 0) and the same last byte.  A model revision
    after the first is written ``00 04 revision table_bits hist_bits mixers apms n``, an ``n``-byte
    mask (4 to 8 bytes, as short as the kinds allow) and the same last byte; a revision this build
    does not know is refused, naming it.  (The kinds in id
    order: the model's output does not depend on the order of its contexts, since each owns its own
    tables and the mixers' integer sums do not depend on the order of their terms).  A stream record
    is accepted only within the sizes the presets write (:mod:`.presets`).
    """

    table_bits: int = 22
    hist_bits: int = 24
    contexts: int = N_HASHED
    mixers: int = 3
    apms: int = 2
    kinds: tuple | None = None
    source: int = distribution.SOURCE_NONE
    detector: int = 0
    byte_histories: bool = False
    revision: int = 0

    def __post_init__(self):
        if self.kinds is not None:  # a set of kinds, kept in id order (see Records)
            object.__setattr__(self, "kinds", tuple(sorted(self.kinds)))
        elif self.revision:
            raise ValueError("a cm model revision after the first needs a component set (see Records)")

    @property
    def context_kinds(self) -> tuple:
        """The contexts in the model's order, k-th context owning region k and state map k: the text
        contexts first, then those that can be idle (each group in id order; before kinds 34-36 that
        was plain id order)."""
        if self.kinds is None:
            return tuple(range(self.contexts))
        return tuple(sorted(self.kinds, key=lambda kind: (contexts.can_idle(kind), kind)))

    @property
    def has_records(self) -> bool:
        """Whether the model has record contexts (and so the record selectors: .bit.mixer, .bit.sse)."""
        return any(contexts.is_structure(kind) for kind in self.context_kinds)

    @property
    def run_inputs(self) -> int:
        return min(self.contexts, FIRST_RECORD_RUNS) if self.kinds is None else self.contexts

    @property
    def byte_history_inputs(self) -> int:
        """How many contexts have byte histories: the text contexts, which come first (context_kinds)
        (the structure and x86 contexts, idle on text, have none)."""
        if not self.byte_histories:
            return 0
        return sum(not contexts.can_idle(kind) for kind in self.context_kinds)

    def input_layout(self) -> "InputLayout":
        """Where each input sits in the mixers' input vector (see the package's docstring): the text
        contexts' first, then the match model, their run inputs, the byte histories, the source and
        the match model's length input (from revision 2) and the bias; the contexts that can be idle
        (structure and x86) last, each one's counter input then its run input, so that the mixers read
        only a prefix while they are idle."""
        kinds = self.context_kinds
        lead = next((k for k, kind in enumerate(kinds) if contexts.can_idle(kind)), len(kinds))
        counters = [2 + k for k in range(lead)]
        match_at = 2 + lead  # (not ``match``: the module of that name gives match_strength its revision)
        runs = [match_at + 1 + k for k in range(min(lead, self.run_inputs))]
        histories = match_at + 1 + len(runs)
        at = histories + self.byte_history_inputs
        source = at if self.source else -1
        at += 1 if self.source else 0
        strength = at if self.match_strength else -1
        bias = at + (1 if self.match_strength else 0)
        at = bias + 1
        for k in range(lead, len(kinds)):
            counters.append(at)
            at += 1
            if k < self.run_inputs:
                runs.append(at)
                at += 1
        assert at == self.inputs
        return InputLayout(counters, runs, match_at, histories, source, strength, bias)

    @property
    def coarse_floor(self) -> bool:
        """Whether the coded P(1) keeps 2**-12 from 0 and 1 (model revision ``bit.sse.FLOOR_REVISION``
        on, :func:`.bit.sse.coded_floor`), which bounds what a code word holds (statemix.container)."""
        return self.revision >= sse.FLOOR_REVISION

    @property
    def match_strength(self) -> bool:
        """Whether the match model gives its length input too (model revision 2 on, :mod:`.bit.match`)."""
        return self.revision >= match.STRENGTH_REVISION

    @property
    def inputs(self) -> int:
        """Width of the mixers' input vector (see the module docstring)."""
        return (2 + self.contexts + 1 + self.run_inputs + self.byte_history_inputs + (1 if self.source else 0)
                + (1 if self.match_strength else 0) + 1)

    def to_bytes(self) -> bytes:
        if self.kinds is None:
            return bytes([self.table_bits, self.hist_bits, self.contexts, self.mixers, self.apms])
        mask = sum(1 << kind for kind in self.kinds)
        fields = bytes([self.table_bits, self.hist_bits, self.mixers, self.apms])
        width = (mask.bit_length() + 7) // 8
        if self.revision:
            width = max(4, width)
            head = RECORD_REVISED + bytes([self.revision]) + fields + bytes([width])
        elif width <= 4:
            head, width = RECORD_MASK + fields, 4
        else:
            head = RECORD_WIDE + fields + bytes([width])
        last = self.source | (BYTE_HISTORIES_BIT if self.byte_histories else 0) | (DETECTOR_BITS[self.detector] << DETECTOR_SHIFT)
        return head + mask.to_bytes(width, "little") + bytes([last])

    @classmethod
    def from_bytes(cls, raw: bytes) -> "Config":
        raw = bytes(raw)
        if raw[:2] == RECORD_REVISED:
            if len(raw) >= 3 and raw[2] >= len(mixer.REVISIONS):
                raise ValueError(f"cm model revision {raw[2]} unknown: this build knows revisions 0 to "
                                 f"{len(mixer.REVISIONS) - 1} (a newer statemix may know it)")
            if not (len(raw) >= 9 and 4 <= raw[7] <= 8 and len(raw) == 9 + raw[7]):
                raise ValueError("cm model record has the wrong length")
            kinds, source, detector, histories = _component_set(raw[8:-1], raw[-1])
            config = cls(raw[3], raw[4], len(kinds), raw[5], raw[6], kinds, source, detector, histories, raw[2])
            if config.to_bytes() != raw:
                raise ValueError("cm model record is not in its canonical form")
            _check_kinds(kinds)
        elif raw[:2] in (RECORD_LIST, RECORD_MASK, RECORD_WIDE):
            source, detector, histories = 0, 0, False
            if raw[:2] == RECORD_LIST and len(raw) >= 7:
                kinds = tuple(raw[7:])
                if raw[6] != len(kinds):
                    raise ValueError("cm component list has the wrong length")
            elif raw[:2] == RECORD_MASK and len(raw) == 11:
                kinds, source, detector, histories = _component_set(raw[6:10], raw[10])
            elif raw[:2] == RECORD_WIDE and len(raw) >= 7 and 5 <= raw[6] <= 8 and len(raw) == 8 + raw[6] and raw[-2]:
                kinds, source, detector, histories = _component_set(raw[7:-1], raw[-1])
            else:
                raise ValueError("cm model record has the wrong length")
            config = cls(raw[2], raw[3], len(kinds), raw[4], raw[5], kinds, source, detector, histories)
            _check_kinds(kinds)
        elif len(raw) == 5:
            config = cls(*raw)
            if config.contexts > FIRST_RECORD_KINDS:
                raise ValueError(f"cm first record with more than {FIRST_RECORD_KINDS} contexts: {config}")
        else:
            raise ValueError("cm model configuration must be 5 bytes or a component list")
        if not (presets.CM_MIN_TABLE_BITS <= config.table_bits <= presets.CM_MAX_TABLE_BITS
                and presets.CM_MIN_HIST_BITS <= config.hist_bits <= presets.CM_MAX_HIST_BITS
                and 1 <= config.contexts <= N_HASHED and 1 <= config.mixers <= mixer.N_MIXERS
                and 1 <= config.apms <= sse.max_apms(config.revision)):
            raise ValueError(f"cm model configuration out of range: {config}")
        return config

    def memory_bytes(self) -> int:
        """Upper bound of the model's memory, in bytes."""
        counters = STATE_MAP_BASE + self.contexts * 256 + self.byte_history_inputs * byte_history.N_COUNTERS
        weights = mixer.weight_words(mixer.sets.py_func(self.contexts, self.mixers), self.inputs, self.revision)
        words = counters + sse.rows(self.apms, self.has_records) * sse.BUCKETS + weights
        source = distribution.memory_bytes(self.source, self.source_table_bits, self.source_slots)
        return (4 * (words + AUX_SIZE) + self.history_bytes + (1 << self.hist_bits)
                + 4 * (1 << (self.hist_bits - 2)) + source + 4 * self.byte_history_entries)

    def region_bits(self, kind: int) -> int:
        """log2 of the bytes of bit-history states of context ``kind``: ``table_bits``, an eighth of
        that for the record contexts and the x86 instruction contexts, a sixteenth for the 8-bit image
        contexts; for the small text contexts (contexts.SMALL_TEXT_KINDS) ``table_bits`` while that
        is at most FULL_TEXT_MAX_BITS, else half, at most 2**SMALL_TEXT_MAX_BITS bytes (so level 3
        stays under the decoder's default memory limit; earlier revisions: :data:`REVISIONS`).
        Why each is sized so: bench/RESULTS.md (issue 14's record tables; model revisions 5 and 7)."""
        if image.is_gray.py_func(kind):
            return self.table_bits - GRAY_TABLE_SHIFT
        if kind in contexts.SMALL_TEXT_KINDS:
            if self.revision >= FULL_TEXT_REVISION and self.table_bits <= FULL_TEXT_MAX_BITS:
                return self.table_bits
            if self.revision >= SMALL_TEXT_REVISION:
                return min(self.table_bits - 1, SMALL_TEXT_MAX_BITS)
            return self.table_bits - SMALL_TEXT_TABLE_SHIFT
        small = contexts.needs_record.py_func(kind) or instructions.is_instruction.py_func(kind)
        return self.table_bits - (RECORD_TABLE_SHIFT if small else 0)

    def entry_bits(self, kind: int) -> int:
        """log2 of the byte-history entries of context ``kind`` (:mod:`.bit.byte_history`): one per 16
        bytes of its region, from model revision 6 at most 2**20 (level 3's 32 MiB regions then have
        as many as level 2's: 84 MiB less, and room under the decoder's default limit)."""
        bits = self.region_bits(kind) - byte_history.ENTRY_SHIFT
        return min(bits, byte_history.MAX_ENTRY_BITS) if self.revision >= byte_history.MAX_ENTRY_REVISION else bits

    @property
    def byte_history_entries(self) -> int:
        """uint32 entries of the byte-history table: every context's part (none without byte histories)."""
        return sum(1 << self.entry_bits(kind) for kind in self.context_kinds[: self.byte_history_inputs])

    @property
    def history_bytes(self) -> int:
        """Bytes of the bit-history table: every context's region."""
        return sum(1 << self.region_bits(kind) for kind in self.context_kinds)

    @property
    def source_table_bits(self) -> int:
        """log2 of the byte-distribution source's n-gram buckets: 2**4 fewer than a context's bytes,
        at most 2**20 (the ssm preset's), so both shrink alike with the input; from model revision
        SOURCE_SLOTS_REVISION, of half as many slots, 2**3 fewer, at most 2**21."""
        if self.revision >= SOURCE_SLOTS_REVISION:
            return min(21, max(12, self.table_bits - 3))
        return min(20, max(12, self.table_bits - 4))

    @property
    def source_slots(self) -> int:
        """(token, count) pairs per bucket of the byte-distribution source (:mod:`..tokenmix`)."""
        return SOURCE_SLOTS if self.revision >= SOURCE_SLOTS_REVISION else SLOTS

    def components(self) -> list[str]:
        """The names of the components this configuration has (see :meth:`Model.ablated`)."""
        source = [distribution.NAMES[self.source]] if self.source else []
        histories = ["byte histories"] if self.byte_histories else []
        return ["order 0", "order 1", *(contexts.NAMES[k] for k in self.context_kinds), "match", *histories, *source,
                "APMs"]

    def describe(self) -> str:
        """In words: "cm level 2 (10 contexts of 16 MiB, 3 mixers, 2 APMs, 16 MiB history, ...)"."""
        levels = presets.cm_levels_of(asdict(self))
        name = "cm " + (f"level {' or '.join(map(str, levels))}" if levels else "custom")
        # every component but the two counters every cm has, and the APMs (counted below)
        listed = f": {', '.join(self.components()[2:-1])}" if self.kinds is not None else ""
        sizes = f"{self.contexts} contexts of {_size(1 << self.table_bits)}"
        for what, test in (("record", contexts.needs_record), ("8-bit image", image.is_gray),
                           ("x86 instruction", instructions.is_instruction),
                           ("small text", contexts.SMALL_TEXT_KINDS.__contains__)):
            kinds = [kind for kind in self.context_kinds if test(kind)]
            if kinds:
                sizes += f", {len(kinds)} of them {what} contexts of {_size(1 << self.region_bits(kinds[0]))}"
        return (f"{name} ({sizes}{listed}, {self.mixers} "
                f"mixer{'s' if self.mixers > 1 else ''}, {self.apms} APM{'s' if self.apms > 1 else ''}, "
                f"{_size(1 << self.hist_bits)} history, at most {memory_bound_mib(self.memory_bytes())} of memory)")


def _check_kinds(kinds: tuple) -> None:
    if len(set(kinds)) != len(kinds) or any(k >= N_HASHED for k in kinds):
        raise ValueError(f"cm component list invalid (unknown or repeated context): {kinds}; a context "
                         f"this build does not know needs a newer statemix")


def _component_set(mask: bytes, last: int) -> tuple[tuple, int, int, bool]:
    """(kinds, source, detector, byte histories) of a component set's mask (little-endian) and its last byte."""
    bits = int.from_bytes(mask, "little")
    kinds = tuple(kind for kind in range(8 * len(mask)) if (bits >> kind) & 1)
    source, revision = last & (BYTE_HISTORIES_BIT - 1), last >> DETECTOR_SHIFT
    if source not in distribution.PRESETS and source != distribution.SOURCE_NONE:
        raise ValueError(f"cm byte-distribution source {source} unknown (a newer statemix may know it)")
    if revision not in DETECTOR_REVISIONS:
        raise ValueError(f"cm record detector {revision:02b} unknown (a newer statemix may know it)")
    return kinds, source, DETECTOR_REVISIONS[revision], bool(last & BYTE_HISTORIES_BIT)


def _size(n: int) -> str:
    return f"{n >> 20} MiB" if n >= 1 << 20 else f"{n >> 10} KiB"


def config_for_level(level: int, size_hint: int | None) -> Config:
    """The cm configuration of ``--level`` ``level`` for an input of ``size_hint`` bytes (None: unknown)."""
    return Config(**presets.cm_sized(level, presets.cm_fit(size_hint)))

