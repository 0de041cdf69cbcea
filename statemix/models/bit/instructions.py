"""x86 instruction state: where the next byte falls in an x86-64 instruction, for two contexts.

Machine code is a sequence of instructions of 1 to 15 bytes: prefixes, an opcode of one to three
bytes, a ModRM byte (register and addressing mode) with an optional SIB byte, a displacement and an
immediate.  What a byte is depends on where it falls: after a ModRM byte of mode 01, a one-byte
displacement; after the opcode E8, four bytes of call target.  Byte contexts see none of this.  A
small length decoder follows the instruction boundaries byte by byte, as paq8's exe model does, and
two contexts key on where it is (:mod:`.contexts`, kinds 32 and 33):

    32  x86 instruction   the opcode, the phase, the bytes left in its operands, the ModRM byte
    33  x86 opcodes       the opcode and the one before it, the phase, the bytes left, the last byte

The contexts are idle (no input, nothing trained) except in blocks the encoder coded as x86 code,
after the branch transform (:mod:`statemix.x86`, block kind "modelled x86"): the decoder knows the
block's kind before it decodes a bit.  In other data the decoder's phases are noise.

The decoder (:func:`advance`) reads one byte at a time, with no lookahead and no error state: any
byte sequence keeps it in a valid state, so a wrong guess (data, or an instruction it does not know:
VEX and EVEX prefixes are read as plain opcodes with a ModRM byte) costs only prediction until the
next instruction it reads right.  It decodes 64-bit code (40-4F are REX prefixes; REX.W makes
B8-BF's immediate 8 bytes; A0-A3 take an 8-byte address).

State: one int64 word of packed fields (bit offsets)::

    0-8    the opcode: 00-FF one byte; 100-1FF the second byte after 0F; 138, 13A the 0F 38 / 0F 3A maps
    9-11   the phase: what the next byte is (START, OPCODE2, OPCODE3, MODRM, SIB, OPERAND)
    12-15  bytes left in the displacement and immediate (after the ModRM or SIB byte: all of them)
    16     operand-size prefix 66 seen; 17 REX.W seen
    18-25  the ModRM byte (once read)
    26-29  the immediate's size code, kept from the opcode to the ModRM byte
    32-40  the previous instruction's opcode
"""

from __future__ import annotations

import numpy as np

from ..._jit import kernel
from .hashing import mix_hash

STATE_SIZE = 1
FIRST_KIND = 32  # the context kinds of this module: 32, 33

#: immediate size codes (bytes: 0, 1, 2, 3, 4; IZ 4 or 2 after 66; IV 8 after REX.W, else as IZ;
#: MOFFS 8; GROUP_B / GROUP_Z: IB / IZ when the ModRM's reg field is 0 or 1 (TEST), else none; FAR 6)
NONE, IB, IW, IW_IB, ID, IZ, IV, MOFFS, GROUP_B, GROUP_Z, FAR = range(11)
#: phases: what the next byte is
START, OPCODE2, OPCODE3, MODRM, SIB, OPERAND = range(6)

_PHASE, _LEFT, _OPSIZE, _REX_W, _MODRM, _IMMEDIATE, _PREVIOUS = 9, 12, 16, 17, 18, 26, 32


def _one_byte_map():
    """For each one-byte opcode: whether a ModRM byte follows, its immediate's code, whether it is a prefix."""
    modrm, immediate, prefix = (np.zeros(256, np.int64) for _ in range(3))
    for row in range(0, 0x40, 8):  # the ALU rows: op r/m,r; op r,r/m; op AL,ib; op eAX,iz
        modrm[row:row + 4] = 1
        immediate[row + 4], immediate[row + 5] = IB, IZ
    for op in (0x62, 0x63, 0x69, 0x6B, *range(0x80, 0x90), 0xC0, 0xC1, 0xC4, 0xC5, 0xC6, 0xC7,
               *range(0xD0, 0xD4), *range(0xD8, 0xE0), 0xF6, 0xF7, 0xFE, 0xFF):
        modrm[op] = 1
    for ops, code in (((0x6A, 0x6B, 0x80, 0x82, 0x83, 0xA8, 0xC0, 0xC1, 0xC6, 0xCD, 0xD4, 0xD5, 0xEB,
                        *range(0x70, 0x80), *range(0xB0, 0xB8), *range(0xE0, 0xE8)), IB),
                      ((0x68, 0x69, 0x81, 0xA9, 0xC7), IZ), ((0xC2, 0xCA), IW), ((0xC8,), IW_IB),
                      ((0xE8, 0xE9), ID), ((0x9A, 0xEA), FAR), (range(0xA0, 0xA4), MOFFS),
                      (range(0xB8, 0xC0), IV), ((0xF6,), GROUP_B), ((0xF7,), GROUP_Z)):
        immediate[list(ops)] = code
    prefix[[0x26, 0x2E, 0x36, 0x3E, 0x64, 0x65, 0x66, 0x67, 0xF0, 0xF2, 0xF3, *range(0x40, 0x50)]] = 1
    return modrm, immediate, prefix


def _two_byte_map():
    """For each opcode after 0F: whether a ModRM byte follows, and its immediate's code."""
    modrm, immediate = np.ones(256, np.int64), np.zeros(256, np.int64)
    modrm[[0x05, 0x06, 0x07, 0x08, 0x09, 0x0B, 0x0E, *range(0x30, 0x38), 0x77, *range(0x80, 0x90), 0xA0,
           0xA1, 0xA2, 0xA8, 0xA9, 0xAA, *range(0xC8, 0xD0)]] = 0
    immediate[[0x70, 0x71, 0x72, 0x73, 0xA4, 0xAC, 0xBA, 0xC2, 0xC4, 0xC5, 0xC6]] = IB
    immediate[0x80:0x90] = ID  # Jcc rel32
    return modrm, immediate


MODRM_1, IMMEDIATE_1, PREFIX = _one_byte_map()
MODRM_2, IMMEDIATE_2 = _two_byte_map()


@kernel  # once per byte: a call (inlined, cm's loop took longer to compile)
def _bytes_of(code, s):
    """The immediate's size in bytes for size code ``code`` under the prefixes recorded in ``s``."""
    if code == IZ or (code == IV and not (s >> _REX_W) & 1):
        return 2 if (s >> _OPSIZE) & 1 else 4
    if code == IV or code == MOFFS:
        return 8
    if code == FAR:
        return 6
    if code == ID:
        return 4
    return code if code <= IW_IB else 0  # NONE, IB, IW, IW_IB: 0-3 bytes


@kernel  # once per byte: a call (inlined, cm's loop took longer to compile)
def _with_phase(s, phase, left):
    return (s & ~(np.int64(7) << _PHASE) & ~(np.int64(15) << _LEFT)) | (phase << _PHASE) | (left << _LEFT)


@kernel  # once per byte: a call (inlined, cm's loop took longer to compile)
def _operands(s, left):
    """After the opcode, ModRM or SIB byte: ``left`` bytes of displacement and immediate follow."""
    if left > 0:
        return _with_phase(s, OPERAND, min(left, 15))
    opcode = s & 0x1FF  # the instruction ends: its opcode becomes the previous one, prefixes are cleared
    return (opcode << _PREVIOUS) | opcode | (START << _PHASE)


@kernel  # once per byte: a call (inlined, cm's loop took longer to compile)
def _opcode(s, opcode, has_modrm, code):
    """After an instruction's last opcode byte."""
    t = (s & ~np.int64(0x1FF)) | opcode
    if has_modrm:
        return _with_phase((t & ~(np.int64(15) << _IMMEDIATE)) | (code << _IMMEDIATE), MODRM, 0)
    return _operands(t, _bytes_of(code, t))


@kernel  # once per byte: a call (inlined, cm's loop took longer to compile)
def advance(s, byte):
    """The state word after ``byte`` (see the module docstring)."""
    phase = (s >> _PHASE) & 7
    if phase == START:
        if PREFIX[byte]:
            if byte == 0x66:
                return s | (np.int64(1) << _OPSIZE)
            if byte >= 0x48 and byte < 0x50:
                return s | (np.int64(1) << _REX_W)
            return s
        if byte == 0x0F:
            return _with_phase(s, OPCODE2, 0)
        return _opcode(s, byte, MODRM_1[byte], IMMEDIATE_1[byte])
    if phase == OPCODE2:
        if byte == 0x38 or byte == 0x3A:
            return _with_phase((s & ~np.int64(0x1FF)) | 0x100 | byte, OPCODE3, 0)
        return _opcode(s, 0x100 | byte, MODRM_2[byte], IMMEDIATE_2[byte])
    if phase == OPCODE3:
        return _opcode(s, s & 0x1FF, 1, IB if (s & 0xFF) == 0x3A else NONE)
    if phase == MODRM:
        mode, reg, rm = byte >> 6, (byte >> 3) & 7, byte & 7
        code = (s >> _IMMEDIATE) & 15
        if code == GROUP_B or code == GROUP_Z:
            code = NONE if reg >= 2 else (IB if code == GROUP_B else IZ)
        displacement = 1 if mode == 1 else (4 if mode == 2 or (mode == 0 and rm == 5) else 0)
        t = (s & ~(np.int64(0xFF) << _MODRM)) | (np.int64(byte) << _MODRM)
        left = displacement + _bytes_of(code, t)
        if mode != 3 and rm == 4:
            return _with_phase(t, SIB, left)
        return _operands(t, left)
    left = (s >> _LEFT) & 15
    if phase == SIB:  # base 101 without displacement mode: a 4-byte displacement instead
        return _operands(s, left + (4 if (s >> (_MODRM + 6)) & 3 == 0 and byte & 7 == 5 else 0))
    return _operands(s, left - 1)


@kernel  # once per byte: a call (inlined, cm's loop took longer to compile)
def instruction_hash(kind, s, c1):
    """The hash of context ``kind`` (32 or 33) in state ``s`` after the byte ``c1``."""
    phase = (s >> _PHASE) & 7
    where = (s & 0x1FF) | (phase << 9) | (((s >> _LEFT) & 15) << 12)
    if kind == FIRST_KIND:
        modrm = (s >> _MODRM) & 0xFF if phase == OPERAND or phase == SIB else np.int64(0)
        return mix_hash(where | (modrm << 16), 41 << 40)
    return mix_hash(where | (((s >> _PREVIOUS) & 0x1FF) << 16) | (c1 << 25), 42 << 40)


@kernel(inline=True)
def is_instruction(kind):
    """Whether context ``kind`` is one of this module's, idle outside x86 blocks."""
    return kind == FIRST_KIND or kind == FIRST_KIND + 1
