"""Unsigned LEB128 integers ("varints"): 7 bits per byte, least significant first, the high bit set on
every byte but the last.  Used by the container format and by serialized vocabularies."""

from __future__ import annotations


class Truncated(Exception):
    """The buffer ends inside the varint."""


def encode_varint(value: int) -> bytes:
    out = bytearray()
    while True:
        byte = value & 0x7F
        value >>= 7
        if value:
            out.append(byte | 0x80)
        else:
            out.append(byte)
            return bytes(out)


def decode_varint(buf, pos: int, max_bytes: int) -> tuple[int, int]:
    """Return (value, position after it); raise Truncated, or ValueError past ``max_bytes`` bytes."""
    value = 0
    for i in range(max_bytes):
        if pos + i >= len(buf):
            raise Truncated
        byte = buf[pos + i]
        value |= (byte & 0x7F) << (7 * i)
        if not byte & 0x80:
            return value, pos + i + 1
    raise ValueError(f"varint longer than {max_bytes} bytes")


def read_varint(buf, pos: int, max_bytes: int, error: type[Exception], what: str) -> tuple[int, int]:
    """:func:`decode_varint` for a complete buffer: a truncated or overlong varint raises
    ``error("<what>: truncated")`` or ``error("<what>: varint too long")``."""
    try:
        return decode_varint(buf, pos, max_bytes)
    except Truncated:
        raise error(f"{what}: truncated") from None
    except ValueError:
        raise error(f"{what}: varint too long") from None
