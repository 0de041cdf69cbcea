"""The x86 call/jump address transform: relative branch targets made absolute, so repeats show.

In x86 machine code a near CALL is the byte E8 and a near JMP the byte E9, each followed by a 32-bit
little-endian displacement relative to the end of the instruction.  Calls to one function from many
places carry many different displacements but one target, so writing ``target = displacement +
position`` instead turns them into repeated byte strings, which the model predicts (the same idea as
the BCJ filters of xz and 7-Zip and paq8's exe model).  The transform is a bijection on every input,
code or not:

- The bytes are scanned from the first.  At position ``i`` with ``i + 4 < len(data)``, a byte E8 or
  E9 takes the four bytes after it as its operand, and the scan resumes at ``i + 5``; any other byte
  moves the scan on by one.  An operand whose top byte (the fourth) is 00 or FF (a displacement
  within +-16 MiB, as nearly all are) holds a 25-bit value ``v`` (the low 24 bits, and bit 24 set when
  the top byte is FF) and is rewritten as ``v + (offset + i + 5)`` (encoding) or
  ``v - (offset + i + 5)`` (decoding), modulo 2**25, with the top byte again 00 or FF; any other
  operand is left alone.
- Only operand bytes change, an operand is never scanned for opcodes, and a rewritten top byte is 00 or
  FF again: so decoding meets the same opcodes and operands as encoding did, and addition modulo
  2**25 is undone by subtraction.  (Were the scan to move on by one after an operand it leaves
  alone, an opcode's operand could overlap a later operand, whose rewriting would change the
  earlier one's top byte: no longer a bijection.)

``offset`` is the position of the block's first byte in the stream, so targets agree across blocks.

Whether a block is transformed is the encoder's choice, recorded in the block's kind (see
statemix.container); :func:`pays` chooses it from a cheap count: x86 code repeats many more targets than
displacements, other data about as many of each.

Cost: one pass over the block (under 1 ms per MiB, jitted), and for :func:`pays` a few vectorized
numpy passes.
"""

from __future__ import annotations

import numpy as np

from ._jit import kernel

CALL, JUMP = 0xE8, 0xE9
MODULUS = 1 << 25  # the operand's value: 24 low bits and the sign (top byte FF)
MIN_REPEATS = 16  # targets repeated in a block before the transform is considered
REPEAT_FACTOR = 2  # ... and targets must repeat this many times more often than displacements


@kernel
def _transform(data, offset, sign):
    """Rewrite the operands of ``data`` (uint8, in place): ``sign`` +1 encodes, -1 decodes."""
    n = data.shape[0]
    i = 0
    while i + 4 < n:
        opcode = data[i]
        top = data[i + 4]
        if opcode != CALL and opcode != JUMP:
            i += 1
            continue
        if top == 0 or top == 0xFF:
            value = (np.int64(data[i + 1]) | (np.int64(data[i + 2]) << 8) | (np.int64(data[i + 3]) << 16)
                     | (np.int64(top & 1) << 24))
            value = (value + sign * (offset + i + 5)) % MODULUS
            data[i + 1] = value & 0xFF
            data[i + 2] = (value >> 8) & 0xFF
            data[i + 3] = (value >> 16) & 0xFF
            data[i + 4] = 0xFF if value >> 24 else 0
        i += 5


def _transformed(data: bytes, offset: int, sign: int) -> bytes:
    out = np.frombuffer(data, dtype=np.uint8).copy()
    _transform(out, np.int64(offset % MODULUS), np.int64(sign))
    return out.tobytes()


def encode(data: bytes, offset: int) -> bytes:
    """``data`` with its branch operands made absolute (``offset``: the stream position of data[0])."""
    return _transformed(data, offset, 1)


def decode(data: bytes, offset: int) -> bytes:
    """The inverse of :func:`encode`."""
    return _transformed(data, offset, -1)


def pays(data: bytes) -> bool:
    """Whether ``data`` looks like x86 code: its branch targets repeat far more than its displacements.

    Every E8/E9 with a 00/FF fourth byte after it counts (overlaps included: an estimate, not the
    transform's own scan).
    """
    raw = np.frombuffer(data, dtype=np.uint8)
    if raw.size < 5:
        return False
    at = np.flatnonzero(((raw[:-4] == CALL) | (raw[:-4] == JUMP)) & ((raw[4:] == 0) | (raw[4:] == 0xFF)))
    if at.size < MIN_REPEATS:
        return False
    displacement = (raw[at + 1].astype(np.int64) | (raw[at + 2].astype(np.int64) << 8)
                    | (raw[at + 3].astype(np.int64) << 16) | ((raw[at + 4].astype(np.int64) & 1) << 24))
    target = (displacement + at + 5) % MODULUS
    repeated_targets = at.size - np.unique(target).size
    repeated_displacements = at.size - np.unique(displacement).size
    return repeated_targets >= MIN_REPEATS and repeated_targets > REPEAT_FACTOR * repeated_displacements
