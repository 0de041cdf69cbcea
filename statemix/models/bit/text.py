"""Text state: what the text contexts of :mod:`.contexts` know about the bytes before the current one.

Updated once per byte by :func:`text_update` (after the byte is written to the history), read by
:func:`.contexts.context_hash`.  It lives in ``TEXT_SIZE`` int64 words of the model's state array
from ``t0`` and in one int32 array ``aux`` (the indirect tables)::

    WORD0..WORD3  hashes of the current word and the three before it (0: none yet).  A word is a run
                  of ASCII letters, case-folded, hashed as it grows; the current word is 0 between
                  words, and a word moves to WORD1 when the first non-letter after it arrives.
    LINE, ABOVE   history positions where the current and the previous line start (after a 10 byte)
    MARKUP        nesting state, bits: 0 inside <...>, 1 inside &...;, 2 inside [[...]], 3 inside
                  {{...}}, 4-7 the bracket depth of ( [ { (capped at 15)
    CLASSES       the character classes of the last 8 bytes, 3 bits each, most recent in the low bits
                  (0 other, 1 space or control, 2 lowercase, 3 uppercase, 4 digit, 5 punctuation,
                  6 markup: < > & ; [ ] { } | =, 7 bytes >= 128)
    LETTERS       the last 6 letters, case-folded, whatever came between them: 5 bits each (a = 1),
                  the most recent in the low bits
    OPENER        the byte before the current word's first letter (or the last word's)
    NAME          the hash of the name of the markup construct opened last: the opener (``<``, a
                  ``[`` or ``{`` after another, or the ``;`` of an escaped ``&lt;``) and the letters
                  right after it, case-folded (a ``/`` right after ``<`` or ``;`` skipped), so
                  ``<text``, ``{{cite``, ``[[Category``, and ``&lt;ref`` as ``&lt;/ref``; it stays
                  until the next construct opens
    NAMING        1 while the name is being read (from the opener to the first byte that is not a
                  letter), else 0
    TOKEN         the hash of the bytes since the last space or control byte (any byte above 32,
                  case kept: ``[[Category:Greek]]``, ``1987,``), as it grows; 0 right after a byte
                  of 32 or less
    SENTENCE      how many words have ended since the last ``.``, ``!``, ``?`` or newline (capped
                  at 15): 0 for the first word of a sentence
    QUOTES        how many ``'`` in a row end the text so far
    EMPHASIS      wiki emphasis, bits: 0 inside ``''...''`` (italic), 1 inside ``'''...'''`` (bold);
                  a run of 2 ``'`` toggles bit 0, of 3 bit 1, of 5 both; a newline clears both
    RUNS          the classes (as in CLASSES) of the last 8 runs of bytes of one class, 3 bits each,
                  the current run's in the low bits: the text's shape (``[[Greek`` is markup,
                  uppercase, lowercase), however long each run
    RUN_LENGTH    the bytes of the current run so far, 1..255
    RUNS2         the 8 class runs before those of RUNS, in the same form (the newest in the low bits)
    SHAPE         a coarser CLASSES over the last 16 bytes, 2 bits each (0 space or control, 1 letter,
                  2 digit, 3 any other byte), the most recent in the low bits
    PREVTOKEN     the TOKEN before the current one (the last that ended: the hash it had at the byte
                  of 32 or less that ended it)
    aux[0:256]        for each byte b, the last two bytes that followed b (16 bits, the newer low)
    aux[256:65792]    the same for each pair of bytes (order-2 indirect)
    aux[65792:131328] for each word (by the top 16 bits of its hash, :func:`word_slot`), the low 31
                      bits of the hash of the word that followed it last time
"""

from __future__ import annotations

import numpy as np

from ..._jit import kernel
from .hashing import mix_hash

(WORD0, WORD1, WORD2, WORD3, LINE, ABOVE, MARKUP, CLASSES, LETTERS, OPENER, NAME, NAMING, TOKEN, SENTENCE, QUOTES,
 EMPHASIS, RUNS, RUN_LENGTH, RUNS2, SHAPE, PREVTOKEN) = range(21)
TEXT_SIZE = 21
NEXT_WORDS = 256 + 65536  # where the words that followed each word start in aux
AUX_SIZE = NEXT_WORDS + 65536


@kernel(inline=True)
def char_class(byte):
    """The 3-bit character class of ``byte`` (see the module docstring)."""
    if byte >= 128:
        return 7
    if 97 <= byte <= 122:
        return 2
    if 65 <= byte <= 90:
        return 3
    if 48 <= byte <= 57:
        return 4
    if byte <= 32:
        return 1
    if byte == 60 or byte == 62 or byte == 38 or byte == 59 or byte == 91 or byte == 93 or byte == 123 \
            or byte == 125 or byte == 124 or byte == 61:
        return 6
    if 33 <= byte <= 47 or 58 <= byte <= 64 or 91 <= byte <= 96 or 123 <= byte <= 126:
        return 5
    return 0


@kernel(inline=True)
def coarse_class(byte_class):
    """The 2-bit class of SHAPE for a :func:`char_class` ``byte_class``: 0 space or control, 1 letter,
    2 digit, 3 any other byte."""
    if byte_class == 1:
        return 0
    if byte_class == 2 or byte_class == 3:
        return 1
    return 2 if byte_class == 4 else 3


@kernel(inline=True)
def word_slot(word):
    """The entry of ``word`` (a WORD hash) in the table of the words that followed each word."""
    return NEXT_WORDS + ((word >> 48) & 0xFFFF)


@kernel(inline=True)
def word_position(classes, c1):
    """0..15: inside a word, the letters of it so far minus 1 (0..7, 7 for 8 or more: the last bytes
    that are letters, classes 2 and 3 of the CLASSES word); between words, 8 + the class of
    ``c1`` (:func:`char_class`)."""
    letters = 0
    while letters < 8 and ((classes >> (3 * letters)) & 6) == 2:
        letters += 1
    return letters - 1 if letters > 0 else 8 + char_class(c1)


@kernel  # once per byte: a call (inlined, cm's loop took longer to compile)
def _markup(before, byte, c1):
    """The MARKUP word after ``byte`` (``before``: the word before it; ``c1``: the byte before it)."""
    state = before
    if byte == 60:
        state |= 1
    elif byte == 62:
        state &= ~1
    elif byte == 38:
        state |= 2
    elif byte == 59 or byte == 32:
        state &= ~2
    elif byte == 91 and c1 == 91:
        state |= 4
    elif byte == 93 and c1 == 93:
        state &= ~4
    elif byte == 123 and c1 == 123:
        state |= 8
    elif byte == 125 and c1 == 125:
        state &= ~8
    depth = (state >> 4) & 15
    if byte == 40 or byte == 91 or byte == 123:
        depth = min(depth + 1, 15)
    elif (byte == 41 or byte == 93 or byte == 125) and depth > 0:
        depth -= 1
    return (state & 15) | (depth << 4)


@kernel  # once per byte: a call (inlined, cm's loop took longer to compile)
def text_update(st, t0, aux, pos, byte, c1, c2):
    """Advance the text state after ``byte`` (at history position ``pos - 1``; ``c1``, ``c2``: the two
    bytes before it)."""
    letter = byte | 32
    is_letter = 97 <= letter <= 122
    if is_letter:
        if st[t0 + WORD0] == 0:
            st[t0 + OPENER] = c1
        st[t0 + LETTERS] = ((st[t0 + LETTERS] << 5) | (letter - 96)) & 0x3FFFFFFF
        if st[t0 + NAMING]:
            st[t0 + NAME] = mix_hash(st[t0 + NAME], letter)
        st[t0 + WORD0] = mix_hash(st[t0 + WORD0], letter)
    elif st[t0 + WORD0] != 0:
        aux[word_slot(st[t0 + WORD1])] = np.int32(st[t0 + WORD0] & 0x7FFFFFFF)
        st[t0 + SENTENCE] = min(st[t0 + SENTENCE] + 1, 15)
        st[t0 + WORD3] = st[t0 + WORD2]
        st[t0 + WORD2] = st[t0 + WORD1]
        st[t0 + WORD1] = st[t0 + WORD0]
        st[t0 + WORD0] = 0
    escaped_lt = byte == 59 and c1 == 116 and c2 == 108  # the end of "&lt;" (at least of "lt;")
    if byte == 60 or (byte == 123 and c1 == 123) or (byte == 91 and c1 == 91) or escaped_lt:
        st[t0 + NAMING] = 1
        st[t0 + NAME] = byte
    elif st[t0 + NAMING] and not is_letter and not (byte == 47 and (c1 == 60 or c1 == 59)):
        st[t0 + NAMING] = 0
    if byte == 39:
        st[t0 + QUOTES] += 1
    else:
        quotes = st[t0 + QUOTES]
        if quotes == 2 or quotes == 3 or quotes == 5:
            st[t0 + EMPHASIS] ^= 1 if quotes == 2 else 2 if quotes == 3 else 3
        st[t0 + QUOTES] = 0
    if byte == 46 or byte == 33 or byte == 63 or byte == 10:
        st[t0 + SENTENCE] = 0
    if byte <= 32 and st[t0 + TOKEN] != 0:
        st[t0 + PREVTOKEN] = st[t0 + TOKEN]
    st[t0 + TOKEN] = mix_hash(st[t0 + TOKEN], byte + 1) if byte > 32 else 0
    if byte == 10:
        st[t0 + EMPHASIS] = 0
        st[t0 + ABOVE] = st[t0 + LINE]
        st[t0 + LINE] = pos
    st[t0 + MARKUP] = _markup(st[t0 + MARKUP], byte, c1)
    byte_class = char_class(byte)
    if byte_class != (st[t0 + CLASSES] & 7):
        st[t0 + RUNS2] = ((st[t0 + RUNS2] << 3) | (st[t0 + RUNS] >> 21)) & 0xFFFFFF
        st[t0 + RUNS] = ((st[t0 + RUNS] << 3) | byte_class) & 0xFFFFFF
        st[t0 + RUN_LENGTH] = 0
    st[t0 + RUN_LENGTH] = min(st[t0 + RUN_LENGTH] + 1, 255)
    st[t0 + CLASSES] = ((st[t0 + CLASSES] << 3) | byte_class) & 0xFFFFFF
    st[t0 + SHAPE] = ((st[t0 + SHAPE] << 2) | coarse_class(byte_class)) & 0xFFFFFFFF
    aux[c1] = ((aux[c1] << 8) | byte) & 0xFFFF
    pair = 256 + (c2 << 8) + c1
    aux[pair] = ((aux[pair] << 8) | byte) & 0xFFFF
