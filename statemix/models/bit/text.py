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
    aux[0:256]        for each byte b, the last two bytes that followed b (16 bits, the newer low)
    aux[256:65792]    the same for each pair of bytes (order-2 indirect)
"""

from __future__ import annotations


from ..._jit import kernel
from .hashing import mix_hash

WORD0, WORD1, WORD2, WORD3, LINE, ABOVE, MARKUP, CLASSES = range(8)
TEXT_SIZE = 8
AUX_SIZE = 256 + 65536


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


@kernel(inline=True)
def text_update(st, t0, aux, pos, byte, c1, c2):
    """Advance the text state after ``byte`` (at history position ``pos - 1``; ``c1``, ``c2``: the two
    bytes before it)."""
    letter = byte | 32
    if 97 <= letter <= 122:
        st[t0 + WORD0] = mix_hash(st[t0 + WORD0], letter)
    elif st[t0 + WORD0] != 0:
        st[t0 + WORD3] = st[t0 + WORD2]
        st[t0 + WORD2] = st[t0 + WORD1]
        st[t0 + WORD1] = st[t0 + WORD0]
        st[t0 + WORD0] = 0
    if byte == 10:
        st[t0 + ABOVE] = st[t0 + LINE]
        st[t0 + LINE] = pos
    st[t0 + MARKUP] = _markup(st[t0 + MARKUP], byte, c1)
    st[t0 + CLASSES] = ((st[t0 + CLASSES] << 3) | char_class(byte)) & 0xFFFFFF
    aux[c1] = ((aux[c1] << 8) | byte) & 0xFFFF
    pair = 256 + (c2 << 8) + c1
    aux[pair] = ((aux[pair] << 8) | byte) & 0xFFFF
