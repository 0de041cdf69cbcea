"""Slow, plain-Python references of statemix's kernels, for the kernel tests to compare against."""

from __future__ import annotations

TOP = 1 << 56
BOTTOM = 1 << 48


class RangeEncoder:
    """The range coder of statemix.coder, written with Python integers."""

    def __init__(self):
        self.low, self.range, self.cache, self.pending = 0, TOP - 1, 0, 0
        self.started = False
        self.out = bytearray()

    def _shift_low(self):
        if self.low < (0xFF << 48) or self.low >= TOP:
            carry = self.low >> 56
            if self.started:
                self.out.append((self.cache + carry) & 0xFF)
            self.started = True
            for _ in range(self.pending):
                self.out.append((0xFF + carry) & 0xFF)
            self.pending = 0
            self.cache = (self.low >> 48) & 0xFF
        else:
            self.pending += 1
        self.low = (self.low & (BOTTOM - 1)) << 8

    def encode(self, cum: int, freq: int, total_bits: int):
        r = self.range >> total_bits
        self.low += r * cum
        self.range = r * freq
        while self.range < BOTTOM:
            self.range <<= 8
            self._shift_low()

    def finish(self) -> bytes:
        self.low = (self.low + BOTTOM - 1) // BOTTOM * BOTTOM
        self._shift_low()
        self._shift_low()
        return bytes(self.out).rstrip(b"\0")


class RangeDecoder:
    def __init__(self, data: bytes):
        self.data, self.pos, self.range = data, 0, TOP - 1
        self.code = 0
        for _ in range(7):
            self.code = (self.code << 8) | self._byte()

    def _byte(self) -> int:
        b = self.data[self.pos] if self.pos < len(self.data) else 0
        self.pos += 1
        return b

    def decode(self, cumulative: list[int], total_bits: int) -> int:
        r = self.range >> total_bits
        v = min(self.code // r, (1 << total_bits) - 1)
        s = max(i for i in range(len(cumulative) - 1) if cumulative[i] <= v)
        self.code -= r * cumulative[s]
        self.range = r * (cumulative[s + 1] - cumulative[s])
        while self.range < BOTTOM:
            self.range <<= 8
            self.code = (self.code << 8) | self._byte()
        return s


def quantize(probs: list[float], total_bits: int) -> list[int]:
    """statemix.quantize.quantize_distribution, in plain Python floats."""
    n, total = len(probs), 1 << total_bits
    mass = 0.0
    for p in probs:
        mass += p
    best = max(range(n), key=lambda i: (probs[i], -i))
    scale = float(total - n) / mass if 0.0 < mass < float("inf") else 0.0
    freqs = [1 + int(min(max(p * scale, 0.0), float(total - n))) if p * scale >= 0 else 1 for p in probs]
    freqs[best] += total - sum(freqs)
    return freqs
