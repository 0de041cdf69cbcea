"""Run in a subprocess by test_determinism.py: compress fixed inputs, decompress given streams.

Usage: python determinism_probe.py STREAMS_IN.json RESULT_OUT.json  (STREAMS_IN: {} to decode its own)
Prints nothing; writes {"hashes": {level: sha256 of stream}, "decoded": {name: sha256 of data}}.
"""

import hashlib
import json
import random
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import statemix  # noqa: E402
from conftest import machine_code, photo_like, text_sample, x86_like  # noqa: E402


def probe_input() -> bytes:
    """An 8-bit image (the cm model's 8-bit image contexts), text, a one-bit image (its record and
    pixel contexts), every byte value, text, x86-like code and x86-64 instructions (the block is
    coded after the x86 transform, with the instruction contexts)."""
    return (photo_like(96, 100, seed=5) + text_sample(20_000, seed=3) + bitmap(32, 90) + bytes(range(256)) * 4
            + text_sample(5_000, seed=4) + x86_like(8_000, seed=7) + machine_code(6_000, seed=8)[0])


def bitmap(width: int, rows: int) -> bytes:
    """A one-bit image of ``rows`` rows of ``width`` bytes, eight pixels a byte: two filled circles
    over vertical lines at irregular columns."""
    lines = set(random.Random(5).sample(range(8 * width), 8 * width // 5))
    out = bytearray()
    for y in range(rows):
        for column in range(width):
            byte = 0
            for bit in range(8):
                x = 8 * column + bit
                inside = (x - 80) ** 2 + (y - 40) ** 2 < 900 or (x - 180) ** 2 + (y - 60) ** 2 < 400
                byte = (byte << 1) | (inside ^ (x in lines))
            out.append(byte)
    return bytes(out)


def bpe_input() -> bytes:
    """130 pseudo-words of 50-60 random letters, each twice, shuffled (14,532 bytes).

    Every word is a new run of letters, so a BPE vocabulary trained on it is large (4,712 tokens,
    above ``statemix.models.ssm.PARALLEL_MIN_VOCAB``: the ssm kernels then run on every thread),
    while the text is few tokens (464), so the ssm bpe preset codes it in about a second.
    """
    rng = random.Random(18)
    words = ["".join(rng.choice("abcdefghijklmnopqrstuvwxyz") for _ in range(rng.randint(50, 60)))
             for _ in range(130)] * 2
    rng.shuffle(words)
    return (" ".join(words) + "\n").encode()


def bpe_stream(data: bytes) -> bytes:
    """``data`` as one modelled block of the ssm preset "bpe".

    No ``--level`` selects that preset, so the stream is made by hand from the format's parts, as the
    codec writes them: the header naming the preset's record, the model's code word, the trailer.
    """
    from statemix import container
    from statemix.models import ModelSpec, build_model, ssm

    spec = ModelSpec(ssm.MODEL_ID, ssm.PRESETS["bpe"].to_bytes())
    coded = build_model(spec).encode(data, 2 * len(data))
    return (container.write_header(spec) + container.write_block(container.MODELLED, data, coded)
            + container.write_trailer(len(data), container.crc32(data)))


def probe_originals() -> dict[str, bytes]:
    """The data behind each pinned stream."""
    data = probe_input()
    return {"oneshot-2": data, "stream-1": data, "stream-3": data, "ssm": data[:3000], "ssm-1": data,
            "ssm-bpe": bpe_input()}


def probe_streams() -> dict[str, bytes]:
    """The streams whose hashes are pinned: one-shot (tables sized to the input), streaming, the float32
    ssm model over bytes with its count models (its training runs beside the coding of the next
    chunk: a delay of one chunk), its count models alone (level 1), and the ssm bpe preset, whose
    vocabulary is large enough that its kernels run in parallel (``bpe_input``)."""
    originals = probe_originals()
    streams = {"oneshot-2": statemix.compress(originals["oneshot-2"], level=2)}
    for level in (1, 3):
        data = originals[f"stream-{level}"]
        compressor = statemix.Compressor(level=level)
        streams[f"stream-{level}"] = b"".join(
            [compressor.compress(data[i : i + 7000]) for i in range(0, len(data), 7000)] + [compressor.flush()]
        )
    streams["ssm"] = statemix.compress(originals["ssm"], model="ssm")
    streams["ssm-1"] = statemix.compress(originals["ssm-1"], model="ssm", level=1)
    streams["ssm-bpe"] = bpe_stream(originals["ssm-bpe"])
    return streams


def main() -> None:
    given = json.loads(Path(sys.argv[1]).read_text())
    result = {"hashes": {}, "decoded": {}}
    made = probe_streams()
    for name, stream in made.items():
        result["hashes"][name] = hashlib.sha256(stream).hexdigest()
    given = given or {name: stream.hex() for name, stream in made.items()}  # none given: decode its own
    for name, hex_stream in given.items():
        result["decoded"][name] = hashlib.sha256(statemix.decompress(bytes.fromhex(hex_stream))).hexdigest()
    Path(sys.argv[2]).write_text(json.dumps(result))


if __name__ == "__main__":
    main()
