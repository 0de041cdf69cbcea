"""Write the revision goldens: ``input.bin`` and one stream per model record in ``RECORDS``.

Run by hand from the repository's root (``python tests/goldens/renew.py``), only to add the record
of a new model revision (append it to RECORDS; a stream already here is never rewritten: it is what
an earlier build wrote, and tests/test_goldens.py checks that every build still decodes it).

The input makes each component of the models act: English text with HTML markup (the text and
markup contexts, the match model), fixed-width binary records (the record detector and its
contexts), an 8-bit gray image (the image contexts) and, in a second block, x86 machine code (the
x86 transform and the instruction contexts).  Each stream is two blocks coded by the model its
record names, as statemix.codec.BlockCoder codes them.
"""

from __future__ import annotations

import random
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path[:0] = [str(HERE.parent.parent), str(HERE.parent)]

from conftest import machine_code, photo_like, text_sample  # noqa: E402

from statemix import container  # noqa: E402
from statemix.codec import BlockCoder  # noqa: E402
from statemix.models import build_model  # noqa: E402
from statemix.models.protocol import ModelSpec  # noqa: E402

#: golden name -> model record (hex): every cm and ssm record that test_api's goldens of a 460-byte
#: repeated line pin, and the records of today's levels and ssm presets
RECORDS = {
    "ssm-smoothed": "0204ff0020021004022001080a0004140002106f12033b6666663f77be7f3f77cc2b320000a0408fc2f53d9a99993e6f12033b2a00000000000000000000020101000c",
    "level2": "010004070e10090508d5efffffffffff1fc1",
    "10-contexts": "010e100a0302",
    "16-contexts": "0100020e100704ffcb070001",
    "29-contexts": "0100030e10070405ffcbe7ff03c1",
    "32-kinds": "0100020e100704ffcbe7ffc1",
    "byte-histories": "0100030e10070405ffefffff03e1",
    "first-rates": "0100030e10070405ffefffff03c1",
    "kinds-to-36": "010004040e10090505d5efffff1fc1",
    "kinds-to-38": "010004040e10090505d5efffff7fc1",
    "kinds-to-43": "010004040e10090506d5efffffff0fc1",
    "kinds-to-51": "010004040e10090507d5efffffffff0fc1",
    "kinds-to-56": "010004050e10090508d5efffffffffff01c1",
    "kinds-to-60": "010004060e10090508d5efffffffffff1fc1",
    "level1": "010e10050201",
    "level1-one-mixer": "010e10050101",
    "level3-source-4": "010004070e10090508d5efffffffffff1fc4",
    "level3-16-contexts": "0100020e100704ffcb070002",
    "level3-29-contexts": "0100030e10070405ffcbe7ff03c2",
    "level3-32-kinds": "0100020e100704ffcbe7ffc2",
    "level3-byte-histories": "0100030e10070405ffefffff03e2",
    "level3-first-rates": "0100030e10070405ffefffff03c2",
    "level3-kinds-to-36": "010004040e10090505d5efffff1fc2",
    "level3-kinds-to-38": "010004040e10090505d5efffff7fc2",
    "level3-kinds-to-43": "010004040e10090506d5efffffff0fc2",
    "level3-kinds-to-51": "010004040e10090507d5efffffffff0fc2",
    "level3-kinds-to-56": "010004050e10090508d5efffffffffff01c2",
    "level3-kinds-to-60": "010004060e10090508d5efffffffffff1fc2",
    "level3-model-revision-1": "010004010e10080405ffefffff03c2",
    "level3-model-revision-2": "010004020e10090405ffefffff03c2",
    "level3-model-revision-3": "010004030e10090405d5efffff1fc2",
    "level3-orders-3-5-6": "010004030e10090405ffefffff03c2",
    "level3-revision-1": "0100020e100704ffcbe71f82",
    "level3-source-2": "010004070e10090508d5efffffffffff1fc2",
    "level3-source-3": "010004070e10090508d5efffffffffff1fc3",
    "level3-ungated": "0100020e100704ffcbe71f02",
    "model-revision-1": "010004010e10080405ffefffff03c1",
    "model-revision-2": "010004020e10090405ffefffff03c1",
    "model-revision-3": "010004030e10090405d5efffff1fc1",
    "orders-3-5-6": "010004030e10090405ffefffff03c1",
    "revision-1": "0100020e100704ffcbe71f81",
    "ungated": "0100020e100704ffcbe71f01",
    "level3": "010004070e10090508d5efffffffffff1fc5",
    "model-revision-8": "010004080e10090508d5efffffffffff1fc1",
    "level3-model-revision-8": "010004080e10090508d5efffffffffff1fc5",
    "ssm": "0204ff0020021004021001080a0004140001106f12033b6666663f77be7f3f77cc2b320000a040000000009a99993e6f12033b2a00000000000000000000020101000d01",
    "ssm-floor": "0204ff0020021004021001080a0004140001106f12033b6666663f77be7f3f77cc2b320000a040000000009a99993e6f12033b2a00000000000000000000020101000d0101",
}


def markup(size: int) -> bytes:
    """English-like text in HTML paragraphs, headings and links."""
    rng = random.Random(7)
    words = text_sample(size, seed=21).split(b". ")
    out = bytearray(b"<html><head><title>statemix golden</title></head>\n<body>\n")
    for i, sentence in enumerate(words):
        if i % 9 == 0:
            out += b"<h2>" + sentence[:30] + b"</h2>\n"
        elif i % 4 == 0:
            out += b'<p class="note"><a href="/page/%d.html">' % rng.randrange(100) + sentence + b".</a></p>\n"
        else:
            out += b"<p>" + sentence + b".</p>\n"
        if len(out) >= size:
            break
    return bytes(out[:size])


def records(count: int, width: int = 24) -> bytes:
    """``count`` binary records of ``width`` bytes: an id, a date, two measurements and a code."""
    rng = random.Random(9)
    out = bytearray()
    for i in range(count):
        row = (1000 + i).to_bytes(4, "little") + (20260000 + 3 * i).to_bytes(4, "little")
        row += rng.randrange(5000, 5200).to_bytes(4, "little") + rng.randrange(1 << 16).to_bytes(4, "little")
        row += b"CODE%02d" % rng.randrange(12) + b"\n\x00"
        out += row[:width]
    return bytes(out)


def golden_input() -> tuple[bytes, bytes]:
    """The two blocks: markup text, records and an image; then x86 code."""
    first = markup(3500) + records(80) + photo_like(48, 40, seed=3)
    code, _ = machine_code(2500, seed=5)
    return first, code


def stream(record: bytes, blocks: tuple[bytes, ...]) -> bytes:
    spec = ModelSpec.from_bytes(record)
    coder = BlockCoder(build_model(spec))
    out, offset, crc = bytearray(container.write_header(spec)), 0, 0
    for raw in blocks:
        out += coder.block(raw, offset=offset)
        offset += len(raw)
        crc = container.crc32(raw, crc)
    return bytes(out + container.write_trailer(offset, crc))


def main() -> None:
    first, code = golden_input()
    data = first + code
    path = HERE / "input.bin"
    if path.exists() and path.read_bytes() != data:
        raise SystemExit("input.bin differs from golden_input(): the goldens' input never changes")
    path.write_bytes(data)
    for name, record in RECORDS.items():
        target = HERE / f"{name}.smx"
        if target.exists():
            continue
        target.write_bytes(stream(bytes.fromhex(record), (first, code)))
        print(f"{target.name}: {target.stat().st_size} bytes")


if __name__ == "__main__":
    main()
