"""Byte histories: the byte that followed each hashed context last time, and how often in a row.

A bit history (:mod:`.contexts`) tells what each *bit* did in a context; it cannot tell that the
context was followed by the same whole byte every time.  For every hashed context, after each byte
(:func:`byte_history_update`) a table of ``2**entry_bits`` uint32 entries per context (one per 16
bytes of its bit histories; from model revision 6 at most 2**20, 4 MiB), indexed by
a mix of the context's hash, remembers ``check (8 bits) | run (8 bits) | byte (8 bits)``: the byte that last
followed the context and how many times in a row (capped at 255).  The entry of the context just
left is updated with the byte that came (same byte: run + 1, another: run 1), then the entry of the
new context is read: if its check byte agrees, the context's expected byte and run are kept in the
state until the byte's end.

Per bit (:func:`byte_history_input`), while the expected byte agrees with the partial byte ``c0``,
its next bit selects a counter by (context, run bucket 0..15, bit position, expected bit): the
mixer input is that counter's stretched probability, else 0 (so a context that disagrees, or has no
entry, says nothing and trains nothing).  This is paq8's "run" map of each context (ContextMap's
byte history), without its second-to-last byte.

State (int64, from ``b0``, per context ``k`` of ``n``): ``ENTRY`` the entry index of the current
context (-1: idle), ``EXPECT`` the expected byte (-1: none), ``RUN`` its run, ``SLOT`` the counter
used this bit (-1: none).  Counters: ``N_COUNTERS`` per context (32-bit, :mod:`.tables`' rule).
"""

from __future__ import annotations

import numpy as np

from ..._jit import kernel
from .hashing import mix_hash
from .tables import train

ENTRY, EXPECT, RUN, SLOT = range(4)  # fields, each n words long
N_COUNTERS = 16 * 8 * 2  # (run bucket) x (bit position) x (expected bit)
LIMIT = 1023  # counter confidence cap
ENTRY_SHIFT = 4  # a context has 2**(its region bits - ENTRY_SHIFT) entries (4 bytes each)
MAX_ENTRY_BITS, MAX_ENTRY_REVISION = 20, 6  # from model revision 6 at most 2**20 (cm.Config.entry_bits)
SALT = 0x5851F42D  # of the entry's hash: mix_hash(context hash, SALT), bits 8.. index, 48..55 check


def state_size(n: int) -> int:
    return 4 * n


@kernel  # once per byte: a call (inlined, cm's loop took longer to compile)
def byte_history_update(st, b0, n, table, entry_bits, hashes, idle, byte):
    """After ``byte``: update each context's entry with it, then read the new contexts' entries.

    ``entry_bits[k]``: log2 of context k's entries (its part of ``table``, which holds the contexts'
    parts in order; cm.Config.entry_bits); ``hashes[k]``: its new hash; ``idle[k]``: whether it is
    idle now.
    """
    first = np.int64(0)  # context k's first entry
    for k in range(n):
        part = first
        first += np.int64(1) << entry_bits[k]
        at = st[b0 + ENTRY * n + k]
        if at >= 0:
            entry = np.int64(table[at])
            if st[b0 + EXPECT * n + k] == byte:
                run = min(st[b0 + RUN * n + k] + 1, 255)
            else:
                run = 1
            table[at] = np.uint32((entry & 0xFF0000) | (run << 8) | byte)
        st[b0 + EXPECT * n + k] = -1
        st[b0 + RUN * n + k] = 0
        if idle[k]:
            st[b0 + ENTRY * n + k] = -1
            continue
        h = mix_hash(hashes[k], SALT)
        at = part + ((h >> 8) & ((np.int64(1) << entry_bits[k]) - 1))
        check = (h >> 48) & 0xFF
        entry = np.int64(table[at])
        if (entry >> 16) == check and entry & 0xFF00:
            st[b0 + EXPECT * n + k] = entry & 0xFF
            st[b0 + RUN * n + k] = (entry >> 8) & 0xFF
        else:
            table[at] = np.uint32(check << 16)  # claimed: run 0 until the byte is known
        st[b0 + ENTRY * n + k] = at


@kernel(inline=True)
def byte_history_input(st, b0, n, k, counters, base, lut, c0, bit):
    """Context k's byte-history input for the next bit (stretch units, 0 without a prediction)."""
    st[b0 + SLOT * n + k] = -1
    expected = st[b0 + EXPECT * n + k]
    if expected >= 0:
        expected |= 256
        if (expected >> (8 - bit)) == c0:
            run_bucket = min(st[b0 + RUN * n + k], 15)
            slot = base + k * N_COUNTERS + ((run_bucket * 8 + bit) << 1) + ((expected >> (7 - bit)) & 1)
            st[b0 + SLOT * n + k] = slot
            return lut[np.int64(counters[slot]) >> 20]
    return np.int64(0)


@kernel(inline=True)
def byte_history_train(st, b0, n, counters, bit, lut):
    """Train the counters the last inputs came from on the coded bit."""
    for k in range(n):
        slot = st[b0 + SLOT * n + k]
        if slot >= 0:
            train(counters, slot, bit, LIMIT, lut)
