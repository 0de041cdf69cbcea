"""Kernel steps of about 50 ms: where a model's loop returns to Python to report progress.

A model codes a block in steps (one kernel call each) so that the caller's ``progress`` callback
runs often: a progress bar moves, and an interruption takes effect between steps.  How much work a
step holds is not a constant: the first steps of a stream are slower than later ones by an order of
magnitude (the first touch of each page of the freshly allocated tables: about 1 s for the first
4 KiB of a 3 MB text at the default level, 0.07 s for the next; more on a machine short of free
memory), and machines differ.  So steps are sized by the clock: :func:`timed_steps` starts at one
item (which can touch only so many new pages), doubles a step while it takes under half of
:data:`STEP_SECONDS` and halves it when it takes over that.  Step boundaries never change the output
(a kernel's state lives in its arrays; see each model's ``run_range``), so timing them is safe.
"""

from __future__ import annotations

import time
from collections.abc import Iterator

#: target wall time of one step, seconds
STEP_SECONDS = 0.05


def timed_steps(n: int, most: int) -> Iterator[tuple[int, int]]:
    """Yield ``(start, end)`` ranges that cover ``0..n`` in order, each of at most ``most`` items,
    sized so that the caller's work on one range (the time until it asks for the next) stays near
    :data:`STEP_SECONDS`."""
    size = 1
    start = 0
    while start < n:
        end = min(n, start + size)
        began = time.perf_counter()
        yield start, end
        took = time.perf_counter() - began
        if took > STEP_SECONDS:
            size = max(1, size // 2)
        elif took < STEP_SECONDS / 2:
            size = min(most, size * 2)
        start = end
