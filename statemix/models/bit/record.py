"""Record detection: the distance at which the bytes of fixed-size records, table rows and image rows repeat.

Binary data is often a sequence of records of one size: rows of a bitmap (the fax image Calgary pic
has rows of 216 bytes), fields of a table, arrays of structs.  The byte one record back ("above")
then predicts the current byte far better than the bytes just before it.  This module finds the
record length online, from the history alone, so the decoder finds the same length at the same byte
and nothing is stored.

The evidence is a byte value repeating at the same distance twice in a row: when byte ``b`` arrives at
position ``q`` and ``q - last[b] == gap[b]`` (the distance between its two previous occurrences), that
distance ``d`` gets a vote, if ``MIN_RECORD <= d < MAX_RECORD``.  The record length is the distance
with the highest score ``votes[d] * bit_length(d)`` (votes since they were last halved): a repeat at
a long distance is stronger evidence than one at a short distance, which a small alphabet gives by
chance (four byte values in random order repeat at distance 2 about once in five), but not so much
stronger that a counter field (which repeats once per 256 records) outweighs the record itself.  It is
reported only once it has ``MIN_VOTES`` votes and at least ``1 / MIN_SHARE`` of all votes (else 0: no
record): text gives distances 2-10 about 11-19% of its votes (enwik8, book1), a fax image's rows
28-62%, a table of floats 99%.  When a distance reaches ``VOTE_LIMIT`` votes, every count is halved, so a new
structure later in the stream (a tar of mixed files) takes over after about ``VOTE_LIMIT / 2`` of
its own votes.  Ties keep the length found first.

Text (revision 1 of the detector, named by the stream's model record): prose and markup repeat
short strings at short distances often enough to look like records now and then (enwik8's
``&amp;#945;&amp;#961;`` entities at 10 bytes, tennis scores at 5, wiki table cells at 3; Calgary
bib's fields at 8), and there the record contexts and selectors cost up to 1.5%.  So while the
history is text (at least ``TEXT_LEVEL / TEXT_ONE`` of a moving average over about
``2**TEXT_SHIFT`` bytes is printable ASCII or a control of text: backspace, tab, line ends, form feed,
escape; NUL bytes, the padding of text and binary alike, leave the average as it was), a record is
reported only if it is at least ``MIN_TEXT_RECORD`` bytes long and has at least ``1 / MIN_TEXT_SHARE``
of the votes, as the lines of a fixed-width text table have (80-99%).  Revision 0, the first, has no
such gate.

Image rows (revision 2): the rows of an 8-bit image (a photograph, a scan) hardly ever repeat a
byte exactly, so the votes above miss them; but the byte one row up is close to the current one.
Every ``SAMPLE_STEP``-th byte (from position ``MAX_RECORD`` on) adds ``|byte - the byte d back|`` to a
sum per distance ``d`` (1 .. ``MAX_RECORD - 1``; all sums halved after ``SMOOTH_LIMIT`` samples, so
they follow about the last 16-32 kB).  The image row is the distance of at least ``MIN_IMAGE_ROW``
bytes with the smallest sum, reported (after ``MIN_SAMPLES`` samples) if that sum is at most
``1 / IMAGE_RATIO`` of the mean over all distances.  It stands in for the record length while the
votes find none (in text only for an 8-bit image).  The pixel is the distance 1 .. ``MAX_PIXEL``
with the smallest sum (1: gray, 3: RGB); the data is an 8-bit image, for the contexts of
:mod:`.image`, if that sum is at most ``1 / PIXEL_RATIO`` of the mean, the row is at least
``MIN_IMAGE_PIXELS`` pixels wide, its sum at most ``ROW_PIXEL`` times the pixel's (short repeats in
text, such as scores "6-3, 2-6", are close at the pixel but not one "row" up), and the votes do not find the same row (exact repeats: a one-bit
image or a table, which the record contexts code better).  Measured (the mean over the sum of
distance 1 / of the row, whole files): Grace Hopper's photograph in gray 6.4 / 8.0, the fax image
Calgary pic 2.1 / 6.1, tables (kennedy.xls, geo, sum, obj2) 0.7-1.1 / 1.1-32, text about 1 / under 2
at every distance.  Text does not look like an image at all (no row in enwik8's first MB but for 64
bytes), so the text gate does not apply to image rows: 8-bit pixels are often printable bytes.
A moving average with differences capped at 63, over 4 or 16 kB, and keeping a row found while it
is within 1/8 of the best, were measured and coded Hopper 1.0-2.3% larger (bench/RESULTS.md).

State: ``STATE_SIZE`` int64 words of the model's state array from ``r0`` (``LENGTH``: the record
length reported, 0 for none; ``BEST``: the distance with the highest score; ``TOTAL``: all votes;
``USED``: 1 if the model has record contexts; ``WINDOW``: for such a model while a record is found,
the 10 bits one record back around the next byte: the last bit of the byte before, the byte, the
first bit of the byte after (-1 otherwise; a mixer selector, :mod:`.mixer`); ``TEXT``: the
moving average of text bytes, scale ``TEXT_ONE``; ``GATED``: the revision (0, 1 to gate text, 2
also to find image rows), named by the model record; ``IMAGE``: the image row, bytes (0: none);
``SAMPLES``: samples in the sums; ``PIXEL``:
the bytes of an 8-bit image's pixel, 0 if it is none) and ``AUX_SIZE`` int32 words of an array from
``a0``::

    a0 + [0, 256)               LAST: low 32 bits of the position where each byte value was last seen
                                (+1, so 0 means never)
    a0 + [256, 512)             GAP: the distance between its two last occurrences (0: none)
    a0 + [512, 512 + MAX_RECORD) VOTES: votes per distance
    a0 + SMOOTH + [0, MAX_RECORD) the sums of byte differences per distance (revision 2)

Cost: a few operations per byte, and a pass over ``MAX_RECORD`` counts per halving; with revision
2 a pass over ``MAX_RECORD`` sums per ``SAMPLE_STEP`` bytes (about 110 additions per byte); none for
a model without record contexts.
"""

from __future__ import annotations

import numpy as np

from ..._jit import kernel

MIN_RECORD = 2  # distances 1 (runs of one byte value) say nothing about records
MAX_RECORD = 1 << 12  # bytes: the longest record (image row) detected
MIN_VOTES = 16  # votes before a record length is reported
MIN_SHARE = 4  # ... and its share of all votes at least 1 / MIN_SHARE
VOTE_LIMIT = 1 << 8  # a count reaching this halves every count
MIN_TEXT_RECORD = 32  # bytes: the shortest record reported in text
MIN_TEXT_SHARE = 2  # ... and its share of all votes there at least 1 / MIN_TEXT_SHARE
TEXT_SHIFT = 5  # the text share is a moving average over about 2**TEXT_SHIFT bytes
TEXT_ONE = 1 << 12  # the text share's scale (1.0)
TEXT_LEVEL = 3 * TEXT_ONE // 4  # at or above this share of text bytes the history counts as text
SAMPLE_STEP = 37  # revision 2: every 37th byte (a prime: the samples visit every column of a row) is
# compared with each of the MAX_RECORD bytes before it (32 measured 0.2-0.5% larger on images)
SMOOTH_LIMIT = 1 << 10  # ... and after this many samples the sums are halved
MIN_SAMPLES = 32  # samples before an image row is reported
MIN_IMAGE_ROW = 8  # bytes: the shortest image row
IMAGE_RATIO = 2  # a row is reported if the byte one row up is at least this much closer than the mean
PIXEL_RATIO = 4  # ... and it is an 8-bit image if the pixel to the left is this much closer
MIN_IMAGE_PIXELS = 16  # pixels: the narrowest 8-bit image
ROW_PIXEL = 2  # ... whose pixel one row up is at most this much farther than the one to the left
MAX_PIXEL = 4  # bytes: the longest pixel (1: gray, 3: RGB, 4: RGBA)
LENGTH, BEST, TOTAL, USED, WINDOW, TEXT, GATED, IMAGE, SAMPLES, PIXEL = range(10)
STATE_SIZE = 10
LAST, GAP, VOTES = 0, 256, 512
SMOOTH = VOTES + MAX_RECORD
AUX_SIZE = SMOOTH + MAX_RECORD


@kernel  # once per byte: a call (inlined, cm's loop took longer to compile)
def window(st, r0, hist, hist_mask, pos):
    """Set ``WINDOW`` for the byte at ``pos`` (after :func:`record_update` took the byte before it)."""
    width = st[r0 + LENGTH]
    if st[r0 + USED] == 0 or width == 0 or pos <= width:
        st[r0 + WINDOW] = -1
        return
    left = np.int64(hist[(pos - width - 1) & hist_mask]) & 1
    above = np.int64(hist[(pos - width) & hist_mask])
    right = np.int64(hist[(pos - width + 1) & hist_mask]) >> 7 if width > 1 else np.int64(0)
    st[r0 + WINDOW] = (left << 9) | (above << 1) | right


@kernel(inline=True)
def back(hist, hist_mask, pos, distance):
    """The byte ``distance`` before position ``pos`` of the history ring (0 before the stream's start)."""
    return np.int64(hist[(pos - distance) & hist_mask]) if 0 < distance <= pos else np.int64(0)


@kernel(inline=True)
def _bit_length(n):
    bits = 0
    rest = n
    while rest > 0:
        bits += 1
        rest >>= 1
    return bits


@kernel  # once per byte: a call (inlined, cm's loop took longer to compile)
def record_update(st, r0, aux, a0, hist, hist_mask, pos, byte):
    """Take the byte at position ``pos`` (0-based; already in ``hist``) into the detector (nothing
    for a model without record contexts: nothing reads its length)."""
    if st[r0 + USED] == 0:
        return
    if byte != 0:
        texty = TEXT_ONE if 32 <= byte < 127 or 8 <= byte <= 13 or byte == 27 else 0
        st[r0 + TEXT] += (texty - st[r0 + TEXT]) >> TEXT_SHIFT
    _vote(st, r0, aux, a0, pos, byte)
    best = st[r0 + BEST]
    top = np.int64(aux[a0 + VOTES + best])
    found = top >= MIN_VOTES and top * MIN_SHARE >= st[r0 + TOTAL]
    if found and st[r0 + GATED] != 0 and st[r0 + TEXT] >= TEXT_LEVEL:
        found = best >= MIN_TEXT_RECORD and top * MIN_TEXT_SHARE >= st[r0 + TOTAL]
    exact = best if found else 0
    if st[r0 + GATED] >= 2 and pos % SAMPLE_STEP == 0 and pos >= MAX_RECORD:
        _image_rows(st, r0, aux, a0, hist, hist_mask, pos, byte, exact)
    # an image row stands in for a record, in text only if the image is 8-bit (text is never smooth)
    image = st[r0 + IMAGE] if st[r0 + PIXEL] != 0 or st[r0 + TEXT] < TEXT_LEVEL else 0
    st[r0 + LENGTH] = exact if exact != 0 else image


@kernel  # once per byte: a call (inlined, cm's loop took longer to compile)
def _image_rows(st, r0, aux, a0, hist, hist_mask, pos, byte, exact):
    """Revision 2: take the sample at ``pos`` into the sums; set ``IMAGE`` and ``PIXEL`` (see the
    module docstring; ``exact``: the record length the votes find at ``pos``, 0 for none)."""
    base = a0 + SMOOTH
    samples = st[r0 + SAMPLES] + 1
    halve = samples >= SMOOTH_LIMIT
    if halve:
        samples >>= 1
    st[r0 + SAMPLES] = samples
    total = np.int64(0)
    best = np.int64(0)
    least = np.int64(1) << 62
    pixel = np.int64(0)
    nearest = np.int64(1) << 62
    for d in range(1, MAX_RECORD):
        diff = np.int64(hist[(pos - d) & hist_mask]) - byte
        s = np.int64(aux[base + d]) + (diff if diff >= 0 else -diff)
        if halve:
            s >>= 1
        aux[base + d] = np.int32(s)
        total += s
        if d >= MIN_IMAGE_ROW and s < least:
            least = s
            best = d
        if d <= MAX_PIXEL and s < nearest:
            nearest = s
            pixel = d
    found = samples >= MIN_SAMPLES and least * IMAGE_RATIO * (MAX_RECORD - 1) <= total
    st[r0 + IMAGE] = best if found else 0
    gray = (found and best >= MIN_IMAGE_PIXELS * pixel and best != exact and least <= ROW_PIXEL * nearest
            and nearest * PIXEL_RATIO * (MAX_RECORD - 1) <= total)
    st[r0 + PIXEL] = pixel if gray else 0


@kernel  # once per byte: a call (inlined, cm's loop took longer to compile)
def _vote(st, r0, aux, a0, pos, byte):
    """Count the vote, if any, of ``byte`` at ``pos`` for a record length (see the module docstring)."""
    seen = np.int64(aux[a0 + LAST + byte])
    aux[a0 + LAST + byte] = np.int32(((pos + 1) & 0x7FFFFFFF))
    if seen == 0:
        return
    distance = (pos + 1 - seen) & 0x7FFFFFFF
    before = np.int64(aux[a0 + GAP + byte])
    aux[a0 + GAP + byte] = np.int32(min(distance, MAX_RECORD))
    if distance != before or distance < MIN_RECORD or distance >= MAX_RECORD:
        return
    votes = np.int64(aux[a0 + VOTES + distance]) + 1
    aux[a0 + VOTES + distance] = np.int32(votes)
    st[r0 + TOTAL] += 1
    best = st[r0 + BEST]
    if distance != best and votes * _bit_length(distance) > np.int64(aux[a0 + VOTES + best]) * _bit_length(best):
        best = distance
        st[r0 + BEST] = best
    if votes >= VOTE_LIMIT:
        total = np.int64(0)
        for d in range(MAX_RECORD):
            aux[a0 + VOTES + d] >>= 1
            total += aux[a0 + VOTES + d]
        st[r0 + TOTAL] = total
