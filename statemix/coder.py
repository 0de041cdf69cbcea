"""Range coder: integer frequencies in, bytes out.  It never sees a model.

A symbol is given to the coder as an interval ``[cum, cum + freq)`` of a total ``2**total_bits``
(``1 <= freq``, ``cum + freq <= 2**total_bits``, ``total_bits <= 32``).  How a model's probabilities
become such integers is decided on the model side, in :mod:`statemix.quantize`.

Arithmetic (all in int64, so it is exact and identical on every machine):

- The interval is ``[low, low + range)`` in 56-bit fixed point: ``range`` stays in ``[2**48, 2**56)``
  after normalisation and ``low < 2**57`` (bit 56 is a pending carry).
- Coding a symbol: ``r = range >> total_bits``; ``low += r * cum``; ``range = r * freq``.  The
  truncation of ``range`` to a multiple of ``2**total_bits`` wastes at most ``2**(total_bits - 48)`` of
  the range, i.e. under ``2**-16 / ln 2`` bits per symbol at ``total_bits = 32`` and ``2**-32 / ln 2`` for
  binary symbols at ``total_bits = 16``.
- Normalisation: while ``range < 2**48`` the top byte of ``low`` is shifted out.  A byte is held back
  (``cache``) together with a run of ``0xFF`` bytes (``pending``) until it is known whether a carry
  will propagate into it, as in LZMA's range coder.
- The very first byte of every code word is 0 (``low + range <= 2**56`` always holds), so it is not
  written; the decoder starts with it implied.
- Flushing rounds ``low`` up to a multiple of ``2**48`` (still inside the interval because
  ``range >= 2**48``), writes the bytes above bit 48, and drops the zero bytes below; trailing zero
  bytes of the code word are then trimmed as well (:func:`enc_finish`; :func:`finish_whole` keeps
  them, as format version 3 writes code words, so that a code word's length bounds what it holds:
  statemix.container).  The decoder reads 0 past the end of its input, so a code word costs at most
  one or two bytes more than its information content.

Encoder state is an int64 array ``rc`` of length :data:`STATE_SIZE` (fields below) plus an output
buffer of uint8; when the buffer is full the encoder sets ``rc[OVERFLOW]`` and stops writing (the
caller then stores the block another way).  Decoder state uses the same array layout with ``LOW``
holding the code value.
"""

from __future__ import annotations

import numpy as np

from ._jit import kernel

TOP = np.int64(1) << np.int64(56)
BOTTOM = np.int64(1) << np.int64(48)
LOW_MASK = BOTTOM - np.int64(1)

LOW, RANGE, CACHE, PENDING, POS, OVERFLOW, STARTED = range(7)
STATE_SIZE = 7


def new_state() -> np.ndarray:
    """Return a coder state array (encoder or decoder), to be initialised by enc_init/dec_init."""
    return np.zeros(STATE_SIZE, dtype=np.int64)


@kernel
def _put(rc, out, byte):
    pos = rc[POS]
    if pos < out.shape[0]:
        out[pos] = byte
    else:
        rc[OVERFLOW] = 1
    rc[POS] = pos + 1


@kernel
def _shift_low(rc, out):
    low = rc[LOW]
    if low < (np.int64(0xFF) << np.int64(48)) or low >= TOP:
        carry = low >> np.int64(56)
        if rc[STARTED] != 0:
            _put(rc, out, (rc[CACHE] + carry) & 0xFF)
        rc[STARTED] = 1
        while rc[PENDING] > 0:
            _put(rc, out, (np.int64(0xFF) + carry) & 0xFF)
            rc[PENDING] -= 1
        rc[CACHE] = (low >> np.int64(48)) & np.int64(0xFF)
    else:
        rc[PENDING] += 1
    rc[LOW] = (low & LOW_MASK) << np.int64(8)


@kernel
def enc_init(rc):
    """Start a code word."""
    rc[LOW] = 0
    rc[RANGE] = TOP - np.int64(1)
    rc[CACHE] = 0
    rc[PENDING] = 0
    rc[POS] = 0
    rc[OVERFLOW] = 0
    rc[STARTED] = 0


@kernel
def enc_encode(rc, out, cum, freq, total_bits):
    """Code the symbol occupying ``[cum, cum + freq)`` of ``2**total_bits``."""
    r = rc[RANGE] >> np.int64(total_bits)
    rc[LOW] += r * np.int64(cum)
    rc[RANGE] = r * np.int64(freq)
    while rc[RANGE] < BOTTOM:
        rc[RANGE] <<= np.int64(8)
        _shift_low(rc, out)


@kernel
def enc_bit(rc, out, p1, bit):
    """Code one bit; ``p1`` in [1, 65535] is P(bit = 1) in units of 2**-16 (1 takes [0, p1))."""
    if bit:
        enc_encode(rc, out, 0, p1, 16)
    else:
        enc_encode(rc, out, p1, 65536 - p1, 16)


@kernel
def enc_finish(rc, out):
    """End the code word; return its length in bytes (may exceed ``len(out)`` if it overflowed)."""
    rc[LOW] = (rc[LOW] + LOW_MASK) & ~LOW_MASK
    _shift_low(rc, out)
    _shift_low(rc, out)
    n = rc[POS]
    if rc[OVERFLOW] == 0:
        while n > 0 and out[n - 1] == 0:
            n -= 1
    return n


@kernel
def _get(rc, src):
    pos = rc[POS]
    rc[POS] = pos + 1
    if pos < src.shape[0]:
        return np.int64(src[pos])
    return np.int64(0)


@kernel
def dec_init(rc, src):
    """Start decoding the code word in ``src``."""
    rc[POS] = 0
    rc[RANGE] = TOP - np.int64(1)
    code = np.int64(0)
    for _ in range(7):
        code = (code << np.int64(8)) | _get(rc, src)
    rc[LOW] = code


@kernel
def dec_target(rc, total_bits):
    """Return the value in ``[0, 2**total_bits)`` that selects the next symbol's interval."""
    r = rc[RANGE] >> np.int64(total_bits)
    v = rc[LOW] // r
    limit = (np.int64(1) << np.int64(total_bits)) - np.int64(1)
    if v > limit:  # only on corrupt input; the stream checksum reports it
        v = limit
    if v < 0:
        v = np.int64(0)
    return v


@kernel
def dec_consume(rc, src, cum, freq, total_bits):
    """Remove the decoded symbol ``[cum, cum + freq)`` from the code value."""
    r = rc[RANGE] >> np.int64(total_bits)
    rc[LOW] -= r * np.int64(cum)
    rc[RANGE] = r * np.int64(freq)
    while rc[RANGE] < BOTTOM:
        rc[RANGE] <<= np.int64(8)
        rc[LOW] = ((rc[LOW] << np.int64(8)) | _get(rc, src)) & (TOP - np.int64(1))


@kernel
def dec_bit(rc, src, p1):
    """Decode one bit coded by :func:`enc_bit` with the same ``p1``."""
    if dec_target(rc, 16) < p1:
        dec_consume(rc, src, 0, p1, 16)
        return 1
    dec_consume(rc, src, p1, 65536 - p1, 16)
    return 0


@kernel
def dec_symbol(rc, src, cumulative, total_bits):
    """Decode one symbol; ``cumulative`` has ``n + 1`` non-decreasing entries from 0 to 2**total_bits."""
    v = dec_target(rc, total_bits)
    lo = 0
    hi = cumulative.shape[0] - 2
    while lo < hi:  # largest s with cumulative[s] <= v
        mid = (lo + hi + 1) >> 1
        if cumulative[mid] <= v:
            lo = mid
        else:
            hi = mid - 1
    dec_consume(rc, src, cumulative[lo], cumulative[lo + 1] - cumulative[lo], total_bits)
    return lo


def finish_whole(rc, out) -> int:
    """End the code word like :func:`enc_finish`, but return its length with its trailing zero bytes
    (they are in ``out`` unless the code word overflowed it: then the length exceeds ``len(out)``).

    A code word of ``n`` such bytes holds at most ``8 n`` bits of cost (the sum of
    ``-log2(freq / 2**total_bits)`` over its symbols): the range starts below 2**56, each symbol
    multiplies it by at most ``freq / 2**total_bits``, each byte written multiplies it by 2**8, and it
    is at least 2**48 when the code word ends.
    """
    enc_finish(rc, out)
    return int(rc[POS])
