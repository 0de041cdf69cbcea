"""Run in a subprocess by test_determinism.py: compress fixed inputs, decompress given streams.

Usage: python determinism_probe.py STREAMS_IN.json RESULT_OUT.json
Prints nothing; writes {"hashes": {level: sha256 of stream}, "decoded": {name: sha256 of data}}.
"""

import hashlib
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import statemix  # noqa: E402
from conftest import text_sample  # noqa: E402


def probe_input() -> bytes:
    return text_sample(20_000, seed=3) + bytes(range(256)) * 4 + text_sample(5_000, seed=4)


def probe_originals() -> dict[str, bytes]:
    """The data behind each pinned stream."""
    data = probe_input()
    return {"oneshot-2": data, "stream-1": data, "stream-3": data, "ssm": data[:3000], "ssm-1": data}


def probe_streams() -> dict[str, bytes]:
    """The streams whose hashes are pinned: one-shot (tables sized to the input), streaming, and the
    float32 ssm model (whose kernels run in parallel) with its count models, and its count models alone
    (level 1)."""
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
    return streams


def main() -> None:
    given = json.loads(Path(sys.argv[1]).read_text())
    result = {"hashes": {}, "decoded": {}}
    for name, stream in probe_streams().items():
        result["hashes"][name] = hashlib.sha256(stream).hexdigest()
    for name, hex_stream in given.items():
        result["decoded"][name] = hashlib.sha256(statemix.decompress(bytes.fromhex(hex_stream))).hexdigest()
    Path(sys.argv[2]).write_text(json.dumps(result))


if __name__ == "__main__":
    main()
