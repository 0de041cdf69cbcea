"""Image contexts: the pixels around the current bit of a one-bit image, and around the current byte
of an 8-bit one.

A one-bit image (a fax page: Calgary pic) stores 8 pixels per byte, most significant bit first, and
its rows one after another; :mod:`.record` finds the row length ``w`` in bytes.  The pixel coded by
bit ``j`` of the byte at position ``pos`` is then column ``x = 8 * column + j``, and the pixels it
depends on are its neighbours: the ones before it in its row, and the ones around column ``x`` in
the rows above.  The byte contexts of :mod:`.contexts` see them only through whole bytes; these
contexts are the exact neighbourhoods, one per bit, like the templates of JBIG::

    kind 27 "pixels"        row 0: x-1 .. x-4;  row 1: x-2 .. x+2;  row 2: x-1 .. x+1       (12 pixels)
    kind 28 "pixels wide"   row 0: x-1 .. x-7;  row 1: x-3 .. x+3;  row 2: x-2 .. x+2;
                            row 3: x                                                      (20 pixels)

(row r: r rows up; a pixel outside the stream's start reads 0).  Such a context is looked up at
every bit, not at nibble boundaries, and uses the first bit-history state of its bucket.

An 8-bit image (gray, or RGB with ``step`` = 3 bytes per pixel: each context then sees one colour
channel) has one pixel per byte; :mod:`.record` finds its row of ``width`` bytes and ``step`` from
the bytes' differences.  The neighbours of the current pixel are W (``step`` bytes back), N (one row
up), NW, NE and NN (two rows up).  Its contexts are byte contexts (hashed once per byte, looked up at
nibble boundaries like those of :mod:`.contexts`), each a prediction of the pixel with a little of
its surroundings::

    kind 29 "gray gradient"   clamp(W + N - NW) (the plane through W, N and NW), and the
                              activity (|W - NW| + |N - NW| + |N - NE|) / 4, capped at 15
    kind 30 "gray above"      NW, N and NE, 6 bits each
    kind 31 "gray vertical"   clamp(2 N - NN) (the column's slope), and W's top 5 bits

(clamp: to 0..255).  Chosen from eight by dropping each in turn on a photograph and a synthetic
image (bench/RESULTS.md, issue 14); the others (W with N, the mean of W and NE with N - NW, the row's
slope 2 W - WW, the diagonal N + NE - NNE, all four neighbours' top 4 bits) gained 0.4% together.
Their regions are a sixteenth of a text context's: their values have at most 12 bits.
"""

from __future__ import annotations

import numpy as np

from ..._jit import kernel
from .hashing import mix_hash
from .record import back

FIRST_PIXEL_KIND = 27
FIRST_GRAY_KIND = 29  # kinds 29..31: the contexts of 8-bit images, hashed once per byte
N_GRAY_KINDS = 3


@kernel(inline=True)
def per_bit(kind):
    """Whether context ``kind`` is a pixel context, looked up at every bit."""
    return FIRST_PIXEL_KIND <= kind < FIRST_GRAY_KIND


@kernel(inline=True)
def is_gray(kind):
    """Whether context ``kind`` is one of the 8-bit image contexts, idle without an image row."""
    return FIRST_GRAY_KIND <= kind < FIRST_GRAY_KIND + N_GRAY_KINDS


@kernel(inline=True)
def _clamp(v):
    return min(max(v, np.int64(0)), np.int64(255))


@kernel  # once per byte: a call (inlined, cm's loop took longer to compile)
def gray_hash(kind, hist, hist_mask, pos, width, step):
    """The hash of 8-bit image context ``kind`` for the byte at ``pos`` (rows of ``width`` bytes,
    pixels of ``step`` bytes)."""
    w = back(hist, hist_mask, pos, step)
    n = back(hist, hist_mask, pos, width)
    nw = back(hist, hist_mask, pos, width + step)
    ne = back(hist, hist_mask, pos, width - step)
    nn = back(hist, hist_mask, pos, 2 * width)
    g = kind - FIRST_GRAY_KIND
    if g == 0:
        activity = min((abs(w - nw) + abs(n - nw) + abs(n - ne)) >> 2, np.int64(15))
        h = (_clamp(w + n - nw) << 4) | activity
    elif g == 1:
        h = (((nw >> 2) << 6 | (n >> 2)) << 6) | (ne >> 2)
    else:
        h = (_clamp(2 * n - nn) << 5) | (w >> 3)
    return mix_hash((((width << 3) | step) << 24) | h, (kind + 6) << 40)


@kernel(inline=True)
def _pixel(hist, hist_mask, pos, width, c0, c1, bit, row, offset):
    """The pixel ``row`` rows up and ``offset`` columns right of the current bit's (0 or 1)."""
    if row == 0:  # offset < 0: earlier pixels of this row, in c0 and then c1
        back = -offset
        if back <= bit:
            return (c0 >> (back - 1)) & 1
        return (c1 >> (back - bit - 1)) & 1
    at = bit + offset  # pixel index from the first pixel of the byte above
    byte = pos - row * width + (at >> 3)
    if byte < 0:
        return np.int64(0)
    return (np.int64(hist[byte & hist_mask]) >> (7 - (at & 7))) & 1


#: each pixel context's template, in hash order: (row, first offset, pixels, step) per run of pixels
TEMPLATES = np.array([
    [[0, -1, 4, -1], [1, -2, 5, 1], [2, -1, 3, 1], [3, 0, 0, 1]],  # kind 27: 12 pixels
    [[0, -1, 7, -1], [1, -3, 7, 1], [2, -2, 5, 1], [3, 0, 1, 1]],  # kind 28: 20 pixels
], dtype=np.int64)


@kernel(inline=True)
def pixel_hash(kind, hist, hist_mask, pos, width, c0, c1, bit):
    """The hash of pixel context ``kind`` for the current bit (see the module docstring)."""
    h = np.int64(0)
    for run in TEMPLATES[kind - FIRST_PIXEL_KIND]:
        for k in range(run[2]):
            h = (h << 1) | _pixel(hist, hist_mask, pos, width, c0, c1, bit, run[0], run[1] + k * run[3])
    return mix_hash(h, (kind + 6) << 40)  # salts 33 and 34
