"""The x86 instruction decoder and contexts (statemix.models.bit.instructions): the decoder finds
the instruction boundaries of x86-64 code, the contexts pay on code, and they change nothing outside
blocks coded as x86."""

from __future__ import annotations

import io

import numpy as np
import pytest

import statemix
from statemix import container
from statemix.models import cm, presets
from statemix.models.bit import contexts, instructions

from conftest import machine_code, text_sample

#: x86-64 instructions, each with its length checked by hand against the opcode map
KNOWN = [
    "55",                          # push rbp
    "48 89 e5",                    # mov rbp, rsp
    "48 83 ec 10",                 # sub rsp, 0x10
    "89 7d fc",                    # mov [rbp-4], edi
    "8b 45 fc",                    # mov eax, [rbp-4]
    "e8 10 20 00 00",              # call rel32
    "0f 1f 44 00 00",              # nop dword [rax+rax+0]  (ModRM 44: SIB and disp8)
    "48 8d 05 10 20 30 00",        # lea rax, [rip+0x302010]  (ModRM 05: disp32)
    "0f 84 10 00 00 00",           # je rel32
    "74 05",                       # je rel8
    "66 0f 1f 84 00 00 00 00 00",  # nop word [rax+rax+0]  (66, ModRM 84: SIB and disp32)
    "c7 45 f8 01 00 00 00",        # mov dword [rbp-8], 1
    "48 b8 01 02 03 04 05 06 07 08",  # movabs rax, imm64  (REX.W)
    "b8 01 00 00 00",              # mov eax, 1
    "66 b8 01 00",                 # mov ax, 1
    "f6 c2 01",                    # test dl, 1  (F6 /0: imm8)
    "f7 d8",                       # neg eax  (F7 /3: none)
    "f7 c1 00 01 00 00",           # test ecx, 0x100  (F7 /0: imm32)
    "41 57",                       # push r15
    "48 c1 e0 04",                 # shl rax, 4
    "0f b6 c0",                    # movzx eax, al
    "66 0f 3a 0f c1 08",           # palignr xmm0, xmm1, 8
    "66 0f 38 00 c1",              # pshufb xmm0, xmm1
    "8b 04 25 00 10 00 00",        # mov eax, [0x1000]  (SIB base 101, mode 00: disp32)
    "8b 84 8b 00 01 00 00",        # mov eax, [rbx+rcx*4+0x100]
    "c2 08 00",                    # ret 8
    "c8 10 00 01",                 # enter 16, 1
    "f3 c3",                       # rep ret
    "0f 05",                       # syscall
    "c3",                          # ret
]


def boundaries(data: bytes) -> list[int]:
    """Positions after which the decoder is between instructions (phase START, prefixes aside)."""
    state, ends = np.int64(0), []
    for i, byte in enumerate(data):
        before = state
        state = instructions.advance(state, np.int64(byte))
        phase = (state >> instructions._PHASE) & 7
        prefix = (before >> instructions._PHASE) & 7 == instructions.START and instructions.PREFIX[byte]
        if phase == instructions.START and not prefix:
            ends.append(i + 1)
    return ends


def ends_of(encodings: list[bytes]) -> list[int]:
    return list(np.cumsum([len(e) for e in encodings]))


def test_the_decoder_finds_the_ends_of_known_instructions():
    encodings = [bytes.fromhex(text) for text in KNOWN]
    assert boundaries(b"".join(encodings)) == ends_of(encodings)


def test_the_decoder_knows_the_opcode_and_the_one_before():
    state = np.int64(0)
    for byte in bytes.fromhex("48 89 e5 0f 84 10 00 00 00 e8"):
        state = instructions.advance(state, np.int64(byte))
    assert state & 0x1FF == 0xE8 and (state >> instructions._PREVIOUS) & 0x1FF == 0x184


def test_the_decoder_follows_generated_code():
    code, encodings = machine_code(20_000, seed=1)
    assert boundaries(code) == ends_of(encodings)


CODE_CONFIG = cm.Config(16, 16, 5, 5, 2, kinds=(0, 1, 2, 32, 33))


def test_instruction_contexts_pay_on_code_and_round_trip():
    code = machine_code(40_000, seed=2)[0]
    coded = cm.Model(CODE_CONFIG).encode(code, len(code), x86=True)
    idle = cm.Model(CODE_CONFIG).encode(code, len(code), x86=False)
    assert cm.Model(CODE_CONFIG).decode(coded, len(code), x86=True) == code
    assert len(coded) < 0.95 * len(idle)  # measured: 18,258 against 19,987
    # the decoder must be told: the same code word read as not x86 gives other bytes
    assert cm.Model(CODE_CONFIG).decode(coded, len(code), x86=False) != code


def test_outside_x86_blocks_the_instruction_contexts_change_nothing():
    data = text_sample(20_000, seed=3) + machine_code(10_000, seed=4)[0]
    without = cm.Config(16, 16, 3, 5, 2, kinds=(0, 1, 2))
    assert cm.Model(CODE_CONFIG).encode(data, len(data)) == cm.Model(without).encode(data, len(data))


def test_the_default_codes_x86_blocks_with_the_instruction_contexts(monkeypatch):
    code = machine_code(300_000, seed=5)[0]
    stream = statemix.compress(code)
    (info,) = statemix.read_info(io.BytesIO(stream))
    assert container.KIND_NAMES[container.MODELLED_X86] in [block.kind for block in info.blocks]
    assert statemix.decompress(stream) == code
    record = info.model.parameters
    # the default's record (with a model revision) holds kinds from 32 on in a mask as long as its
    # highest kind needs (8 bytes for kinds 56-63)
    assert record[:2] == cm.configuration.RECORD_REVISED and record[7] == max(presets.CM_KINDS) // 8 + 1 == 8
    assert {32, 33} <= set(cm.Config.from_bytes(record).kinds)
    # and they pay there: against level 2 without them
    level_2 = dict(presets.CM_LEVELS[2])
    level_2["kinds"] = tuple(k for k in level_2["kinds"] if k not in presets.INSTRUCTION_KINDS)
    level_2["contexts"] = len(level_2["kinds"])
    monkeypatch.setitem(presets.CM_LEVELS, 2, level_2)
    without = statemix.compress(code)
    assert cm.Config.from_bytes(statemix.read_info(io.BytesIO(without))[0].model.parameters).kinds == level_2["kinds"]
    assert len(stream) < 0.97 * len(without)  # measured: 111,707 against 116,978


@pytest.mark.parametrize("kinds", [(0, 1, 32), (2, 33), (0, 32, 33), tuple(range(34))])
def test_a_component_set_with_instruction_contexts_is_written_wide_and_read_back(kinds):
    config = cm.Config(16, 16, len(kinds), 5, 2, kinds=kinds)
    record = config.to_bytes()
    assert record[:2] == cm.configuration.RECORD_WIDE and record[6] == 5 and len(record) == 13
    assert cm.Config.from_bytes(record) == config


def test_a_set_of_the_first_32_kinds_is_written_as_before():
    config = cm.Config(16, 16, 3, 5, 2, kinds=(0, 1, 31))
    assert config.to_bytes()[:2] == cm.configuration.RECORD_MASK and len(config.to_bytes()) == 11


def _first_unknown_kind_record() -> str:
    """A wide record with kinds 0-2 and the first kind this build does not know."""
    width = len(contexts.NAMES) // 8 + 1
    return f"0003 10 10 05 02 {width:02x} {(7 | 1 << len(contexts.NAMES)).to_bytes(width, 'little').hex()} 00"


@pytest.mark.parametrize("record", [
    "0003 10 10 05 02 04 07000000 00",              # 4 mask bytes: the 00 02 record's job
    "0003 10 10 05 02 05 0700000000 00",            # last mask byte 0: not the shortest record
    "0003 10 10 05 02 09 070000000100000000 00",    # 9 mask bytes
    "0003 10 10 05 02 05 0700000001",               # too short
    "0003 10 10 05 02 05 0700000001 00 00",         # too long
    _first_unknown_kind_record(),
])
def test_bad_wide_records_are_refused(record):
    with pytest.raises(ValueError):
        cm.Config.from_bytes(bytes.fromhex(record.replace(" ", "")))
