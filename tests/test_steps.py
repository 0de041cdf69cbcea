"""Kernel steps sized by the clock (statemix.models.steps): they cover the block in order, never
exceed their bound, grow while steps are quick and shrink while they are slow."""

from __future__ import annotations

import pytest

from statemix.models import steps


class FakeClock:
    """``time`` for the steps module: each step takes ``seconds_per_item`` per item of the range."""

    def __init__(self):
        self.now = 0.0

    def perf_counter(self) -> float:
        return self.now


def run(n: int, most: int, seconds_per_item: float, monkeypatch) -> list[tuple[int, int]]:
    clock = FakeClock()
    monkeypatch.setattr(steps, "time", clock)
    ranges = []
    for start, end in steps.timed_steps(n, most):
        ranges.append((start, end))
        clock.now += (end - start) * seconds_per_item
    return ranges


@pytest.mark.parametrize("n, most", [(0, 64), (1, 64), (1000, 64), (100_000, 1 << 16), (5, 1)])
def test_steps_cover_the_block_in_order_within_their_bound(n, most, monkeypatch):
    ranges = run(n, most, 1e-6, monkeypatch)
    assert [i for start, end in ranges for i in range(start, end)] == list(range(n))
    assert all(0 < end - start <= most for start, end in ranges)


def test_quick_steps_grow_to_the_bound(monkeypatch):
    sizes = [end - start for start, end in run(1 << 20, 1 << 14, 1e-7, monkeypatch)]
    assert sizes[:4] == [1, 2, 4, 8]
    assert max(sizes) == 1 << 14


def test_slow_steps_shrink_to_one_item(monkeypatch):
    # quick at first, then a step of one item takes longer than the target: back down to one item
    clock = FakeClock()
    monkeypatch.setattr(steps, "time", clock)
    sizes = []
    for start, end in steps.timed_steps(300, 1 << 10):
        sizes.append(end - start)
        clock.now += (end - start) * (1e-6 if len(sizes) <= 5 else 2 * steps.STEP_SECONDS)
    assert sizes[:10] == [1, 2, 4, 8, 16, 32, 16, 8, 4, 2]
    assert set(sizes[10:]) == {1}


def test_steps_settle_near_the_target(monkeypatch):
    # 10 us per item: a 50 ms step holds about 5000 items (between 1/4 and 1x the target's worth)
    sizes = [end - start for start, end in run(1 << 20, 1 << 16, 1e-5, monkeypatch)]
    assert sizes[:13] == [1 << k for k in range(13)]  # 4096 items: 41 ms
    assert all(1250 <= size <= 5000 for size in sizes[13:-1])
