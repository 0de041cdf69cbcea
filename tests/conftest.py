"""Shared test fixtures: paths of the optional shared corpora, and a few generated inputs."""

from __future__ import annotations

import os
import random
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
SHARED_DATA = ROOT.parent / "shared" / "data"


#: Tests that compile level 3 or the ssm model in process run in one test worker (pytest -n): the one
#: that test_determinism's fixture makes compile every model, so those compiles are paid once.
EVERY_MODEL = pytest.mark.xdist_group("every-model")


def shared_file(*parts: str) -> Path:
    """Return a file of ../shared/data, or skip the test when this machine does not have it."""
    path = SHARED_DATA.joinpath(*parts)
    if not path.is_file():
        pytest.skip(f"{path} not available (only developer and CI machines have ../shared)")
    return path


def shared_files() -> list[Path]:
    """Every file of ../shared/data (empty when absent)."""
    if not SHARED_DATA.is_dir():
        return []
    return sorted(p for p in SHARED_DATA.rglob("*") if p.is_file() and p.name != "README.md")


def text_sample(size: int, seed: int = 1) -> bytes:
    """Deterministic English-like text of ``size`` bytes (no shared data needed)."""
    rng = random.Random(seed)
    words = ("the of and to in a is that for it as was with be by on not he this are or his from at "
             "which but have an they you were her she there one all we their been has when who will "
             "compress model state token stream block entropy context mixing coder").split()
    out = []
    length = 0
    while length < size:
        sentence = " ".join(rng.choice(words) for _ in range(rng.randint(4, 14))).capitalize() + ". "
        out.append(sentence)
        length += len(sentence)
    return "".join(out).encode()[:size]


def x86_like(size: int, seed: int) -> bytes:
    """Bytes like x86 code: short runs of skewed opcode-like bytes, and every 12-40 bytes a CALL or
    JMP to one of 80 functions (so the targets repeat and the displacements rarely do)."""
    rng = random.Random(seed)
    functions = [rng.randrange(1 << 20) for _ in range(80)]
    common = [0x48, 0x89, 0x8B, 0x83, 0xC3, 0x00, 0x0F, 0x85, 0x74, 0x31, 0xC0, 0xFF, 0x24, 0x44]
    out = bytearray()
    while len(out) < size:
        for _ in range(rng.randrange(7, 35)):
            out.append(rng.choice(common) if rng.random() < 0.7 else rng.randrange(256))
        target = rng.choice(functions)
        displacement = (target - (len(out) + 5)) % (1 << 32)
        out += bytes([0xE8 if rng.random() < 0.8 else 0xE9]) + displacement.to_bytes(4, "little")
    return bytes(out[:size])


def machine_code(size: int, seed: int) -> tuple[bytes, list[bytes]]:
    """x86-64 code from 16 instruction templates with random registers and operands, calling 40
    functions; the code and its instructions."""
    rng = random.Random(seed)
    functions = [rng.randrange(1 << 20) for _ in range(40)]
    out, listed = bytearray(), []

    def reg() -> int:
        return rng.randrange(8)

    def imm(n: int) -> bytes:
        return bytes(rng.randrange(256) if rng.random() < 0.3 else 0 for _ in range(n))

    templates = [
        lambda: b"\x55",
        lambda: b"\x48\x89\xe5",
        lambda: b"\x48\x83\xec" + bytes([8 * rng.randrange(1, 8)]),
        lambda: bytes([0x89, 0x40 | reg() << 3 | 5, 256 - 4 * rng.randrange(1, 9)]),
        lambda: bytes([0x8B, 0x40 | reg() << 3 | 5, 256 - 4 * rng.randrange(1, 9)]),
        lambda: b"\x48\x8d\x05" + imm(4),
        lambda: bytes([0x70 | rng.randrange(16), rng.randrange(256)]),
        lambda: b"\x0f\x84" + imm(4),
        lambda: bytes([0x0F, 0xB6, 0xC0 | reg() << 3 | reg()]),
        lambda: bytes([0x85, 0xC0 | reg() << 3 | reg()]),
        lambda: bytes([0x83, 0xF8 | reg(), rng.randrange(16)]),
        lambda: bytes([0xB8 | reg()]) + imm(4),
        lambda: b"\x0f\x1f\x44\x00\x00",
        lambda: b"\x31\xc0",
        lambda: bytes([0x89, 0x44 | reg() << 3, 0x24, 8 * rng.randrange(8)]),
        lambda: bytes([0x8B, 0x84 | reg() << 3, 0x8B]) + imm(4),
    ]
    while len(out) < size:
        if rng.random() < 0.12:
            target = rng.choice(functions)
            encoding = b"\xe8" + ((target - (len(out) + 5)) % (1 << 32)).to_bytes(4, "little")
        else:
            encoding = rng.choice(templates[: 8 + rng.randrange(9)])()
        out += encoding
        listed.append(encoding)
    return bytes(out), listed


def photo_like(width: int, height: int, seed: int, channels: int = 1) -> bytes:
    """An 8-bit image like a photograph, ``channels`` bytes per pixel (1: gray, 3: RGB), rows one
    after another: tiles of 16 x 16 pixels, each a plane of its own slopes (so that the plane
    through W, N and NW predicts a pixel and its left neighbour alone does not), with noise of +-1
    (integers only)."""
    rng = random.Random(seed)
    tiles = {(tx, ty): (rng.randrange(60, 190), rng.randrange(-12, 13), rng.randrange(-12, 13))
             for tx in range(width // 16 + 1) for ty in range(height // 16 + 1)}
    out = bytearray()
    for y in range(height):
        for x in range(width):
            base, slope_x, slope_y = tiles[x // 16, y // 16]
            shade = base + (slope_x * (x % 16) + slope_y * (y % 16)) // 4
            for channel in range(channels):
                out.append(min(255, max(0, shade + 25 * channel + rng.randint(-1, 1))))
    return bytes(out)


@pytest.fixture
def side_jobs(monkeypatch) -> list:
    """The threads on which statemix.codec's pool ran jobs (a cm model's zstandard frame, coded beside
    the model at ``threads`` >= 2): the list the test reads after compressing."""
    import threading

    from statemix import codec

    ran = []

    class Recording(codec.ThreadPoolExecutor):
        def submit(self, fn, /, *args, **kwargs):
            def job():
                ran.append(threading.get_ident())
                return fn(*args, **kwargs)

            return super().submit(job)

    monkeypatch.setattr(codec, "ThreadPoolExecutor", Recording)
    return ran


def config_with(**changes):
    """The ssm model's default preset with some fields changed (preset id 0 = custom)."""
    from dataclasses import replace

    from statemix.models import ssm

    return replace(ssm.PRESETS["default"], preset=0, **changes)


@pytest.fixture
def text_100k() -> bytes:
    return text_sample(100_000)


@pytest.fixture
def random_bytes() -> bytes:
    return random.Random(7).randbytes(50_000)


def slow_enabled() -> bool:
    return os.environ.get("STATEMIX_SLOW") == "1"


def pytest_collection_modifyitems(config, items):
    if slow_enabled():
        return
    skip = pytest.mark.skip(reason="slow test: set STATEMIX_SLOW=1")
    for item in items:
        if "slow" in item.keywords:
            item.add_marker(skip)
