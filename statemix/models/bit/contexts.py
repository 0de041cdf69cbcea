"""Hashed contexts: which bytes before the current one select a bit history, and where it lives.

Each context kind is an id with a name and a hash of the byte history, computed once per byte by
:func:`context_hash` (``c4`` = the last 4 bytes, ``c8`` = the 4 before them, most recent byte in the
low bits; words are runs of letters, case-folded, hashed as they grow)::

    id  name              hashed bytes                        salt
    0   order 2           c4 & 0xFFFF                         2
    1   order 3           c4 & 0xFFFFFF                       3
    2   order 4           c4                                  4
    3   order 6           c4, c8 & 0xFFFF                     6   (also the match model's key)
    4   word              the current word                    9
    5   order 5           c4, c8 & 0xFF                       5
    6   word pair         the word and the previous word      10 (previous word salted 11)
    7   sparse            c4 & 0xFFFF00 (bytes 2 and 3 back)  12
    8   order 8           c4, c8                              8
    9   order 1 history   c4 & 0xFF                           1

A model's component list names the kinds it uses, in order; the k-th listed context owns region k
of the bit-history table (``2**table_bits`` bytes each) and state map k.  At each nibble boundary the
context's hash (mixed with the partial byte ``c0``) selects a 16-byte bucket (:func:`bucket`): byte 0
an 8-bit check, bytes 1..15 the bit-history states of the nibble's partial bits.  Of two
neighbouring buckets the one whose check matches is used; otherwise the one whose first state has
seen fewer bits is cleared and taken.

Adding a context: a new id and name here and its branch in :func:`context_hash`, then its name in a
preset's component list (:mod:`statemix.models.presets`); records that do not list it mean what
they meant before.
"""

from __future__ import annotations

import numpy as np

from ..._jit import kernel
from .tables import LUT_SEEN

#: context kind id -> name, in id order (the order of the first records: see cm.Config)
NAMES = ("order 2", "order 3", "order 4", "order 6", "word", "order 5", "word pair", "sparse", "order 8",
         "order 1 history")
IDS = {name: kind for kind, name in enumerate(NAMES)}


@kernel
def mix_hash(x, salt):
    """A 64-bit mix of ``x + salt`` (three multiply-xorshift rounds, wrapping int64)."""
    x = (x + salt) * np.int64(-7046029254386353131)
    x = (x ^ (x >> 29)) * np.int64(-4658895280553007687)
    x = (x ^ (x >> 32)) * np.int64(-7723592293110705685)
    return x ^ (x >> 29)


@kernel
def order6_hash(c4, c8):
    return mix_hash(c4 | ((c8 & 0xFFFF) << 32), 6 << 40)


@kernel(inline=True)
def context_hash(kind, c4, c8, word, prev_word):
    """The hash of context ``kind`` after a byte (see the table in the module docstring)."""
    if kind == 0:
        return mix_hash(c4 & 0xFFFF, 2 << 40)
    if kind == 1:
        return mix_hash(c4 & 0xFFFFFF, 3 << 40)
    if kind == 2:
        return mix_hash(c4, 4 << 40)
    if kind == 3:
        return order6_hash(c4, c8)
    if kind == 4:
        return mix_hash(word, 9 << 40)
    if kind == 5:
        return mix_hash(c4 | ((c8 & 0xFF) << 32), 5 << 40)
    if kind == 6:
        return mix_hash(word + mix_hash(prev_word, 11 << 40), 10 << 40)
    if kind == 7:
        return mix_hash(c4 & 0xFFFF00, 12 << 40)
    if kind == 8:
        return mix_hash(c4 | (c8 << 32), 8 << 40)
    return mix_hash(c4 & 0xFF, 1 << 40)


@kernel(inline=True)
def bucket(states, region, table_bits, h, lut):
    """Return the index of the first byte of the 16-byte bucket for hash ``h`` in ``region``."""
    index = (h >> 12) & ((np.int64(1) << (table_bits - 4)) - 1)
    check = (h >> 40) & np.int64(0xFF)
    first = region + (index << 4)
    second = region + ((index ^ 1) << 4)
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
