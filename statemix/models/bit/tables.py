"""Fixed tables of the bitwise model: stretch/squash, the counter rule, bit-history states.

Every table is computed exactly (Python's ``decimal`` with one explicit context, or integers), so
it is identical on every machine; the kernels read them from one int64 array ``lut``::

    lut[0:4096]        stretch(p) = round(256 ln(p / (1 - p))) for p = (2i + 1) / 8192, +-2047
    lut[4096:8192]     squash(x) = round(65536 / (1 + e^-(x / 256))) for x = i - 2048, in [1, 65535]
    lut[8192:9216]     DT[n], the counter rule's step after n updates (statemix._counter)
    lut[LUT_NEXT:]     bit-history transitions next[2 * state + y]          (512)
    lut[LUT_SEEN:]     bits seen by each state, n0 + n1                      (256)
    lut[LUT_INITIAL:]  each state's initial P(1) as a 32-bit counter          (256)
    lut[LUT_RUN:]      each state's "run" input, +-64 per bit when one-sided  (256)

The tables take about 0.1 s to compute (the decimal logarithms and exponentials), a tenth of level 1's
time on 1 MB, so they are kept beside the kernel cache (``lookup_tables.npy``) and read from there when
their digest is :data:`LUT_DIGEST`.  The digest is pinned: every stream depends on these tables, so a
computation that gives other tables (another ``decimal``) is refused rather than used.

Counters are 32 bits: ``p`` (22 bits, P(1) in units of 2**-22) in the high bits and ``n`` (10 bits,
updates seen, capped at a limit) in the low bits; :func:`train` applies the counter rule.
Bit-history states count the 0s and 1s seen (capped at ``HISTORY_CAP``; seeing one bit shrinks a
count of the other above 2 to half plus one, so a history favours recent bits) and the last bit.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import tempfile
from decimal import ROUND_HALF_EVEN, Context, Decimal
from pathlib import Path

import numpy as np

from ..._counter import counter_step, dt_table
from ..._errors import StatemixError
from ..._jit import CACHE_DIR, kernel

COUNTER_INIT = 1 << 31  # p = 1/2, n = 0
HISTORY_CAP = 24  # largest bit count a bit-history state remembers
LUT_NEXT, LUT_SEEN, LUT_INITIAL, LUT_RUN = 9216, 9728, 9984, 10240  # bit-history tables in lut
#: blake2b (16 bytes) of the tables as little-endian int64 (see the module docstring)
LUT_DIGEST = "b5ca17dc70d4c15e44bb2a0f29ac183c"


def _lookup_tables() -> np.ndarray:
    """Return the int64 table array described in the module docstring."""
    ctx = Context(prec=20, rounding=ROUND_HALF_EVEN)
    one = Decimal(1)
    stretch = np.empty(4096, dtype=np.int64)
    for i in range(4096):
        p = ctx.divide(Decimal(2 * i + 1), Decimal(8192))
        logit = ctx.ln(ctx.divide(p, ctx.subtract(one, p)))
        stretch[i] = max(-2047, min(2047, int(ctx.to_integral_value(ctx.multiply(logit, Decimal(256))))))
    squash = np.empty(4096, dtype=np.int64)
    for i in range(4096):
        x = ctx.divide(Decimal(i - 2048), Decimal(256))
        p = ctx.divide(Decimal(65536), ctx.add(one, ctx.exp(ctx.minus(x))))
        squash[i] = max(1, min(65535, int(ctx.to_integral_value(p))))
    next_state, seen, run, initial = _bit_history_tables()
    return np.concatenate([stretch, squash, dt_table(1023), next_state, seen, initial, run])


def _bit_history_tables() -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Enumerate the bit-history states: (n0, n1, last bit), counts capped at HISTORY_CAP.

    State 0 is the empty history.  Returns the transition table ``next[2 * state + y]``, the number
    of bits each state has seen (``n0 + n1``), each state's run input, and its initial probability
    of a 1, ``(2 n1 + 1) / (2 (n0 + n1) + 2)``, as a 32-bit counter (22-bit p).
    """
    start = (0, 0, 2)
    index = {start: 0}
    order = [start]
    transitions = []
    for n0, n1, _ in order:  # grows while iterating: breadth-first enumeration
        for y in (0, 1):
            a, b = (n0, n1) if y == 0 else (n1, n0)  # a: count of y, b: the other
            a = min(a + 1, HISTORY_CAP)
            b = b if b <= 2 else b // 2 + 1
            nxt = (a, b, 0) if y == 0 else (b, a, 1)
            if nxt not in index:
                index[nxt] = len(order)
                order.append(nxt)
            transitions.append(index[nxt])
    assert len(order) <= 256
    pad = 256 - len(order)
    seen = [n0 + n1 for n0, n1, _ in order] + [0] * pad
    run = [(64 * min(n1, 16) if n0 == 0 else -64 * min(n0, 16) if n1 == 0 else 0) for n0, n1, _ in order] + [0] * pad
    initial = [(((2 * n1 + 1) << 22) // (2 * (n0 + n1) + 2)) << 10 for n0, n1, _ in order] + [1 << 31] * pad
    return (np.array(transitions + [0] * 2 * pad, dtype=np.int64), np.array(seen, dtype=np.int64),
            np.array(run, dtype=np.int64), np.array(initial, dtype=np.int64))


_LUT: np.ndarray | None = None


def lookup_tables() -> np.ndarray:
    """The tables (computed once per process, or read from beside the kernel cache)."""
    global _LUT
    if _LUT is None:
        _LUT = _cached_tables(Path(CACHE_DIR) / "lookup_tables.npy" if CACHE_DIR else None)
    return _LUT


def tables_digest(lut: np.ndarray) -> str:
    """32 hex digits of blake2b over ``lut`` as little-endian int64 (what :data:`LUT_DIGEST` pins)."""
    return hashlib.blake2b(lut.astype("<i8").tobytes(), digest_size=16).hexdigest()


def _cached_tables(path: Path | None) -> np.ndarray:
    """The tables from ``path`` if it holds them (by their digest), else computed and written there."""
    if path is not None:
        try:  # mapped, not read: a damaged header cannot make it allocate more than the file holds
            mapped = np.load(path, mmap_mode="r", allow_pickle=False)
            if mapped.dtype == np.int64 and mapped.ndim == 1 and tables_digest(mapped) == LUT_DIGEST:
                return np.array(mapped)
        except (OSError, ValueError, EOFError):
            pass
    lut = _lookup_tables()
    if tables_digest(lut) != LUT_DIGEST:
        raise StatemixError("statemix: this Python computes the model's fixed tables differently "
                            "(statemix.models.bit.tables): its streams would not decode elsewhere")
    if path is not None:
        partial = None
        try:
            with tempfile.NamedTemporaryFile(dir=path.parent, suffix=".tmp", delete=False) as f:
                partial = f.name
                np.save(f, lut, allow_pickle=False)
            os.replace(partial, path)
        except OSError:
            with contextlib.suppress(OSError, TypeError):
                os.unlink(partial)
    return lut


@kernel(inline=True)
def stretch(lut, p16):
    """ln(p / (1 - p)) in units of 1/256 for P(1) = p16 / 65536."""
    return lut[p16 >> 4]


@kernel
def squash(lut, x):
    """P(1) in units of 2**-16 for the logit x / 256 (clamped to [-2048, 2047])."""
    if x > 2047:
        x = 2047
    if x < -2048:
        x = -2048
    return lut[4096 + x + 2048]


@kernel(inline=True)
def train(counters, slot, bit, limit, lut):
    """Apply the counter rule to the 32-bit counter ``counters[slot]`` after ``bit``."""
    s = np.int64(counters[slot])
    n = s & 1023
    p = counter_step(s >> 10, np.int64(bit) << 22, lut[8192 + n])
    if n < limit:
        n += 1
    counters[slot] = (p << 10) | n
