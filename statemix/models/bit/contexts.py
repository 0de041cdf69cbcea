"""Hashed contexts: which bytes before the current one select a bit history, and where it lives.

Each context kind is an id with a name and a hash of the byte history, computed once per byte by
:func:`context_hash` (``c4`` = the last 4 bytes, ``c8`` = the 4 before them, most recent byte in the
low bits, ``c1`` = the last byte; words and the other text state: :mod:`.text`)::

    id  name              hashed                                          salt
    0   order 2           c4 & 0xFFFF                                     2
    1   order 3           c4 & 0xFFFFFF                                   3
    2   order 4           c4                                              4
    3   order 6           c4, c8 & 0xFFFF                                 6   (also the match model's key)
    4   word              the current word                                9
    5   order 5           c4, c8 & 0xFF                                   5
    6   word pair         the word and the previous word                  10 (previous word salted 11)
    7   sparse            c4 & 0xFFFF00 (bytes 2 and 3 back)              12
    8   order 8           c4, c8                                          8
    9   order 1 history   c4 & 0xFF                                       1
    10  word trio         the word and the two before it                  13
    11  skip word         the word and the one two back                   14
    12  above             the byte above (previous line, same column), c1 15
    13  column            the byte above and the column (capped at 255)   16
    14  indirect 1        c1 and the two bytes that followed c1 before    17
    15  indirect 2        c2 c1 and the two bytes that followed them      18
    16  markup            the markup state and c1                         19
    17  classes           the classes of the last 8 bytes                 20
    18  word and classes  the current word and the last 2 bytes' classes  21
    19  sparse 2          c4 & 0xFF00FF (bytes 1 and 3 back)              22
    20  line start        the first 2 bytes of the line and the column    23
    21  record above      the byte one record back (:mod:`.record`), c1   24
    22  record rows       the bytes one and two records back              25
    23  record neighbours the bytes one record back, before and after it  26
    24  record column     the position in the record, the byte above      27
    25  image             one-bit pixels: the byte above, 2 pixels each side  31
                          of it, the last 4 pixels of the row
    26  image rows        the same above, 2 pixels left, the byte 2 rows up   32
    27  pixels            one-bit pixels around the current bit (:mod:`.image`), per bit
    28  pixels wide       a wider neighbourhood of them, per bit
    29  gray gradient     8-bit pixels (:mod:`.image`): the plane through W, N, NW and the activity 35
    30  gray above        NW, N and NE                                    36
    31  gray vertical     the column's slope 2 N - NN, and W              37
    32  x86 instruction   the instruction decoder's place (:mod:`.instructions`)  41
    33  x86 opcodes       the last two opcodes, the place and c1          42
    34  letters           the last 6 letters (text LETTERS: what lies     50
                          between them skipped)
    35  word opener       in a word, the word and the byte before it;     52
                          between words, the last word and c2 c1          51
    36  markup name       the name of the construct opened last (text     54
                          NAME) and, in a word, the word; between words,  55
                          the last word and c1
    37  word in markup    the word (between words the last word), the     56
                          markup state (text MARKUP) and c1
    38  name position     the markup name, the word position (text        57
                          word_position) and c1
    39  last word         the word before the current one (text WORD1;    58
                          between words the word that ended last) and c1
    40  token             the bytes since the last space or control byte  59
                          (text TOKEN: case kept, any byte above 32)
    41  sentence          the word, how many words of the sentence came   60
                          before it (text SENTENCE) and c1
    42  next word         the word that followed the last word the last   61
                          time (text aux, a word-level indirect) and the
                          word (between words c1)
    43  emphasis          the word, wiki emphasis (text EMPHASIS) and c1  62
    44  class runs        the classes of the last 8 runs of bytes of one  63
                          class (text RUNS), the current run's length
                          (up to 3) and c1
    45  runs order 2      the class runs and c2 c1                        64  (class runs salted 11)
    46  classes order 2   the classes of the last 8 bytes (text CLASSES)  65  (classes salted 11)
                          and c2 c1
    47  line and markup   the line's first byte, the markup state and     66
                          c2 c1
    48  classes and last  the last word and the classes of the last 8     67
        word              bytes
    49  line and word     the line's first byte, the word and c1          68
    50  markup order 3    the markup state and c3 c2 c1                   69
    51  line and classes  the line's first byte, the classes of the last  70
                          8 bytes and c1
    52  runs and last     the class runs and the last word                71
        word
    53  cased word pair   the word, the classes of the last 3 bytes (so   72  (previous word salted 11)
                          its case) and the previous word
    54  shape order 2     2-bit classes of the last 16 bytes (text        73  (shape salted 11)
                          SHAPE) and c2 c1
    55  runs order 3      the class runs and c3 c2 c1                     74  (class runs salted 11)
    56  sixteen runs      the 8 class runs before the last 8 (text        75  (those salted 11)
                          RUNS2), the last 8 and c1
    57  token pair        the token (text TOKEN) and the one before it    76  (the one before salted 11)
                          (PREVTOKEN)
    58  word two back     the word two before the current one (text       77
                          WORD2; between words the one before the last)
                          and c1
    59  word and runs     the word, the class runs and the markup state   78
    60  column and        the column (up to 63), the classes of the last  79
        classes           4 bytes and c1

The record contexts (21-28) include the record length ``w`` in their hash; without a record
(``w`` = 0) they are idle: the model gives them no input and trains nothing of theirs (text has no
record, and their constant contexts there cost 0.2% on enwik8).  The 8-bit image contexts (29-31)
are idle likewise unless :mod:`.record` finds an 8-bit image, and the x86 instruction contexts
(32, 33) outside blocks coded as x86 code.  Kinds from 34 on are text contexts again (never idle): a
model puts its text contexts first, whatever their ids (cm.Config.context_kinds).  Kinds 21-31 are
the structure contexts; their regions, the instruction contexts' and those of the small text
contexts (:data:`SMALL_TEXT_KINDS`: word trio, column, sparse 2, line start, next word, emphasis and
the contexts 44-60) are smaller (see cm).
Kinds from 32 on need the wider component record (see cm.Config).

A model's component list names the kinds it uses, in order; the k-th listed context owns region k
of the bit-history table (``2**table_bits`` bytes each) and state map k.  At each nibble boundary the
context's hash (mixed with the partial byte ``c0``) selects a 16-byte bucket (:func:`bucket`): byte 0
an 8-bit check, bytes 1..15 the bit-history states of the nibble's partial bits.  Of two
neighbouring buckets the one whose check matches is used; otherwise the one whose first state has
seen fewer bits is cleared and taken.

Adding a context: a new id and name at the end of :data:`.kinds.NAMES` (and its row in the table
above), its branch in :func:`context_hash` (with any new byte state in :mod:`.text`), then its name
in a preset's component list (:mod:`statemix.models.presets`); records that do not list it mean what
they meant before.
"""

from __future__ import annotations

import numpy as np

from ..._jit import kernel
from . import image, instructions, record, text
from .hashing import mix_hash, order6_hash, wrapping_add
from .kinds import IDS, NAMES  # noqa: F401  (the kinds' names, data only; IDS re-exported)
from .tables import LUT_SEEN

#: kinds whose regions are a quarter of the others' (from model revision 5 half, at most 8 MiB: see
#: cm.Config.region_bits): four text contexts
#: that joined levels 2 and 3 together (issue 12; no earlier preset used them), which gain nearly as
#: much so (bench/RESULTS.md) and keep level 2 within 1.5 GiB on 3 MB of text, and next word and
#: emphasis (a quarter region cost them 0.005% on enwik8_1M; level 3 stays within 1.5 GiB), and the
#: contexts 44-60 (a quarter region cost 44-51 0.036% on enwik8_1M; at full size level 3 would need
#: 1,812 MiB)
SMALL_TEXT_KINDS = (10, 13, 19, 20, 42, 43) + tuple(range(44, 61))
#: each kind's order, the bytes before the current one it spans, where it is one (else 0): the longest
#: of them with history selects mixer weights (:mod:`.mixer`); the kinds after order 1 history are
#: none
_ORDERS_TO_ORDER_1 = (2, 3, 4, 6, 0, 5, 0, 0, 8, 1)
ORDERS = _ORDERS_TO_ORDER_1 + (0,) * (len(NAMES) - len(_ORDERS_TO_ORDER_1))


@kernel  # once per byte: a call (inlined, cm's loop took longer to compile)
def context_hash(kind, c4, c8, st, t0, r0, i0, aux, hist, hist_mask, pos):
    """The hash of context ``kind`` after a byte (see the table in the module docstring).

    ``st[t0:]``, ``aux``: the text state (:mod:`.text`); ``st[r0:]``: the record detector's
    (:mod:`.record`); ``st[i0]``: the x86 instruction state (:mod:`.instructions`); ``hist``,
    ``hist_mask``, ``pos``: the history ring and the position of the next byte.
    """
    if kind >= 44:
        return _shape_hash(kind, c4, st, t0, hist, hist_mask, pos)
    if kind >= 34:
        return _word_state_hash(kind, c4, st, t0, aux)
    if kind < 10:
        if kind == 0:
            return mix_hash(c4 & 0xFFFF, 2 << 40)
        if kind == 1:
            return mix_hash(c4 & 0xFFFFFF, 3 << 40)
        if kind == 2:
            return mix_hash(c4, 4 << 40)
        if kind == 3:
            return order6_hash(c4, c8)
        if kind == 4:
            return mix_hash(st[t0 + text.WORD0], 9 << 40)
        if kind == 5:
            return mix_hash(c4 | ((c8 & 0xFF) << 32), 5 << 40)
        if kind == 6:
            return mix_hash(wrapping_add(st[t0 + text.WORD0], mix_hash(st[t0 + text.WORD1], 11 << 40)), 10 << 40)
        if kind == 7:
            return mix_hash(c4 & 0xFFFF00, 12 << 40)
        if kind == 8:
            return mix_hash(c4 | (c8 << 32), 8 << 40)
        return mix_hash(c4 & 0xFF, 1 << 40)
    c1 = c4 & 0xFF
    if kind == 10:
        return mix_hash(wrapping_add(st[t0 + text.WORD0],
                                     mix_hash(wrapping_add(st[t0 + text.WORD1], mix_hash(st[t0 + text.WORD2], 11 << 40)),
                                              11 << 40)), 13 << 40)
    if kind == 11:
        return mix_hash(wrapping_add(st[t0 + text.WORD0], mix_hash(st[t0 + text.WORD2], 11 << 40)), 14 << 40)
    if kind == 12 or kind == 13 or kind == 20:
        line = st[t0 + text.LINE]
        column = pos - line
        above_at = st[t0 + text.ABOVE] + column
        above = np.int64(hist[above_at & hist_mask]) if above_at < line else np.int64(0)
        if kind == 12:
            return mix_hash((above << 8) | c1, 15 << 40)
        if kind == 13:
            return mix_hash((above << 8) | min(column, 255), 16 << 40)
        first = (np.int64(hist[line & hist_mask]) << 8) | np.int64(hist[(line + 1) & hist_mask]) if column > 2 else 0
        return mix_hash((first << 16) | (min(column, 255) << 8) | c1, 23 << 40)
    if kind == 14:
        return mix_hash((np.int64(aux[c1]) << 8) | c1, 17 << 40)
    if kind == 15:
        pair = c4 & 0xFFFF
        return mix_hash((np.int64(aux[256 + pair]) << 16) | pair, 18 << 40)
    if instructions.is_instruction(kind):
        return instructions.instruction_hash(kind, st[i0], c1)
    if image.is_gray(kind):
        step = st[r0 + record.PIXEL]
        return image.gray_hash(kind, hist, hist_mask, pos, st[r0 + record.IMAGE], step) if step > 0 else np.int64(0)
    if kind >= image.FIRST_PIXEL_KIND:  # hashed at every bit instead (see cm)
        return np.int64(0)
    if kind >= 21:
        return _structure_hash(kind, c1, st[r0 + record.LENGTH], hist, hist_mask, pos)
    if kind == 16:
        return mix_hash((st[t0 + text.MARKUP] << 8) | c1, 19 << 40)
    if kind == 17:
        return mix_hash(st[t0 + text.CLASSES], 20 << 40)
    if kind == 18:
        return mix_hash(wrapping_add(st[t0 + text.WORD0], st[t0 + text.CLASSES] & 63), 21 << 40)
    return mix_hash(c4 & 0xFF00FF, 22 << 40)


@kernel  # once per byte: a call (inlined, cm's loop took longer to compile)
def _word_state_hash(kind, c4, st, t0, aux):
    """The contexts of the text state's LETTERS, OPENER, NAME, MARKUP, TOKEN, SENTENCE and EMPHASIS
    words, the last word's and the next word's (kinds 34-43)."""
    word = st[t0 + text.WORD0]
    if kind == 42:
        latest = word if word != 0 else c4 & 0xFF
        return mix_hash(wrapping_add(np.int64(aux[text.word_slot(st[t0 + text.WORD1])]), mix_hash(latest, 11 << 40)),
                        61 << 40)
    if kind == 43:
        return mix_hash(wrapping_add(word, (st[t0 + text.EMPHASIS] << 8) | (c4 & 0xFF)), 62 << 40)
    if kind == 39:
        return mix_hash(wrapping_add(st[t0 + text.WORD1], c4 & 0xFF), 58 << 40)
    if kind == 40:
        return mix_hash(st[t0 + text.TOKEN], 59 << 40)
    if kind == 41:
        return mix_hash(wrapping_add(word, (st[t0 + text.SENTENCE] << 8) | (c4 & 0xFF)), 60 << 40)
    if kind == 37:
        latest = word if word != 0 else st[t0 + text.WORD1]
        return mix_hash(wrapping_add(latest, (st[t0 + text.MARKUP] << 8) | (c4 & 0xFF)), 56 << 40)
    if kind == 38:
        position = text.word_position(st[t0 + text.CLASSES], c4 & 0xFF)
        return mix_hash(wrapping_add(st[t0 + text.NAME], (position << 8) | (c4 & 0xFF)), 57 << 40)
    if kind == 34:
        return mix_hash(st[t0 + text.LETTERS], 50 << 40)
    if kind == 35:
        if word == 0:
            return mix_hash(wrapping_add(st[t0 + text.WORD1], c4 & 0xFFFF), 51 << 40)
        return mix_hash(wrapping_add(word, st[t0 + text.OPENER]), 52 << 40)
    if word == 0:
        return mix_hash(wrapping_add(st[t0 + text.NAME], wrapping_add(st[t0 + text.WORD1], c4 & 0xFF)), 55 << 40)
    return mix_hash(wrapping_add(st[t0 + text.NAME], word), 54 << 40)


@kernel  # once per byte: a call (inlined, cm's loop took longer to compile)
def _shape_hash(kind, c4, st, t0, hist, hist_mask, pos):
    """The contexts of the text's shape: its byte classes and class runs (text CLASSES and RUNS), the
    line's first byte and the markup state, with the last bytes or words (kinds 44-56), and four more of
    the words, tokens and the line (57-60)."""
    c1 = c4 & 0xFF
    classes = st[t0 + text.CLASSES]
    runs = st[t0 + text.RUNS]
    if kind == 44:
        return mix_hash((runs << 10) | (min(st[t0 + text.RUN_LENGTH], 3) << 8) | c1, 63 << 40)
    if kind == 45:
        return mix_hash(wrapping_add(mix_hash(runs, 11 << 40), c4 & 0xFFFF), 64 << 40)
    if kind == 46:
        return mix_hash(wrapping_add(mix_hash(classes, 11 << 40), c4 & 0xFFFF), 65 << 40)
    if kind == 48:
        return mix_hash(wrapping_add(st[t0 + text.WORD1], classes), 67 << 40)
    if kind == 50:
        return mix_hash((st[t0 + text.MARKUP] << 24) | (c4 & 0xFFFFFF), 69 << 40)
    if kind == 52:
        return mix_hash(wrapping_add(st[t0 + text.WORD1], runs), 71 << 40)
    if kind == 53:
        cased = wrapping_add(st[t0 + text.WORD0], classes & 0x1FF)
        return mix_hash(wrapping_add(cased, mix_hash(st[t0 + text.WORD1], 11 << 40)), 72 << 40)
    if kind == 54:
        return mix_hash(wrapping_add(mix_hash(st[t0 + text.SHAPE], 11 << 40), c4 & 0xFFFF), 73 << 40)
    if kind == 55:
        return mix_hash(wrapping_add(mix_hash(runs, 11 << 40), c4 & 0xFFFFFF), 74 << 40)
    if kind == 56:
        return mix_hash(wrapping_add(mix_hash(st[t0 + text.RUNS2], 11 << 40), (runs << 8) | c1), 75 << 40)
    if kind == 57:
        return mix_hash(wrapping_add(st[t0 + text.TOKEN], mix_hash(st[t0 + text.PREVTOKEN], 11 << 40)), 76 << 40)
    if kind == 58:
        return mix_hash(wrapping_add(st[t0 + text.WORD2], c1), 77 << 40)
    if kind == 59:
        return mix_hash(wrapping_add(st[t0 + text.WORD0], (runs << 8) | st[t0 + text.MARKUP]), 78 << 40)
    line = st[t0 + text.LINE]
    first = np.int64(hist[line & hist_mask]) if pos > line else np.int64(0)
    if kind == 47:
        return mix_hash((first << 24) | (st[t0 + text.MARKUP] << 16) | (c4 & 0xFFFF), 66 << 40)
    if kind == 49:
        return mix_hash(wrapping_add(st[t0 + text.WORD0], (first << 8) | c1), 68 << 40)
    if kind == 60:
        return mix_hash((min(pos - line, 63) << 24) | ((classes & 0xFFF) << 8) | c1, 79 << 40)
    return mix_hash((classes << 16) | (first << 8) | c1, 70 << 40)


def can_idle(kind: int) -> bool:
    """Whether context ``kind`` can be idle (a structure or x86 context: see the module docstring);
    the others, the text contexts, never are."""
    return bool(is_structure(kind) or instructions.is_instruction.py_func(kind))  # plain Python (see cm.configuration)


@kernel(inline=True)
def needs_record(kind):
    """Whether context ``kind`` is one of the record contexts, idle without a record."""
    return 21 <= kind < image.FIRST_GRAY_KIND


def is_structure(kind: int) -> bool:
    """Whether context ``kind`` is a structure context (record or image): idle without a record or
    image row, with a smaller region."""
    return 21 <= kind < instructions.FIRST_KIND


@kernel  # once per byte: a call (inlined, cm's loop took longer to compile)
def _structure_hash(kind, c1, width, hist, hist_mask, pos):
    """The record contexts of whole bytes (kinds 21-26; ``width``: the record length, 0 for none)."""
    above = record.back(hist, hist_mask, pos, width) if width > 0 else np.int64(0)
    if kind == 21:
        return mix_hash((((width << 8) | above) << 8) | c1, 24 << 40)
    if kind == 25 or kind == 26:
        left = record.back(hist, hist_mask, pos, width + 1) & 3 if width > 0 else np.int64(0)
        right = record.back(hist, hist_mask, pos, width - 1) >> 6 if width > 1 else np.int64(0)
        around = (((left << 8) | above) << 2) | right
        if kind == 25:
            return mix_hash((((width << 12) | around) << 4) | (c1 & 15), 31 << 40)
        two = record.back(hist, hist_mask, pos, 2 * width) if width > 0 else np.int64(0)
        return mix_hash((((((width << 12) | around) << 8) | two) << 2) | (c1 & 3), 32 << 40)
    if kind == 22:
        two = record.back(hist, hist_mask, pos, 2 * width) if width > 0 else np.int64(0)
        return mix_hash((((width << 8) | above) << 8) | two, 25 << 40)
    if kind == 23:
        left = record.back(hist, hist_mask, pos, width + 1) if width > 0 else np.int64(0)
        right = record.back(hist, hist_mask, pos, width - 1) if width > 1 else np.int64(0)
        return mix_hash((((((width << 8) | left) << 8) | above) << 8) | right, 26 << 40)
    column = pos % width if width > 0 else np.int64(0)
    return mix_hash((((width << 12) | column) << 8) | above, 27 << 40)


@kernel(inline=True)
def _candidates(region, table_bits, h):
    """(first, second, check): the two 16-byte buckets where hash ``h`` may live, and its check byte."""
    index = (h >> 12) & ((np.int64(1) << (table_bits - 4)) - 1)
    return region + (index << 4), region + ((index ^ 1) << 4), (h >> 40) & np.int64(0xFF)


@kernel(inline=True)
def find_bucket(states, region, table_bits, h):
    """The bucket :func:`bucket` would return for hash ``h``, without claiming one: if neither
    candidate holds ``h``'s check byte, the empty bucket at the end of ``states`` (its last 16
    bytes, never written), which reads as the cleared bucket :func:`bucket` would hand out."""
    first, second, check = _candidates(region, table_bits, h)
    if states[first] == check:
        return first
    if states[second] == check:
        return second
    return states.shape[0] - 16


@kernel(inline=True)
def bucket(states, region, table_bits, h, lut):
    """Return the index of the first byte of the 16-byte bucket for hash ``h`` in ``region``."""
    first, second, check = _candidates(region, table_bits, h)
    if states[first] == check:
        return first
    if states[second] == check:
        return second
    victim = first
    if lut[LUT_SEEN + np.int64(states[second + 1])] < lut[LUT_SEEN + np.int64(states[first + 1])]:
        victim = second
    states[victim] = check
    for k in range(1, 16):
        states[victim + k] = 0
    return victim
