"""The adaptive probability counter shared by every bitwise model (cm, the vocabulary coder).

A counter holds ``p``, P(1) in units of ``2**-b`` (cm: b = 22, the vocabulary coder: b = 16), and
``n``, the updates it has seen, capped at a limit.  After each bit ``y``::

    p += (y * 2**b - p) * DT[n] >> 16        DT[n] = floor(2**16 / (n + 1.5))
    n += 1 (until the limit)

a running average whose rate slows from 2/3 as evidence accumulates, down to ``1 / (limit + 1.5)``.
Integer arithmetic only (int64; ``>>`` rounds towards minus infinity), so every machine agrees.
"""

from __future__ import annotations

import numpy as np

from ._jit import kernel


def dt_table(limit: int) -> np.ndarray:
    """DT[n] for n = 0..limit (int64): a counter's step after n updates, in units of 2**-16."""
    return np.array([(2 * 65536) // (2 * n + 3) for n in range(limit + 1)], dtype=np.int64)


@kernel
def counter_step(p, target, rate):
    """The counter's new p: ``p + ((target - p) * rate >> 16)`` (target = y * 2**b, rate = DT[n])."""
    return p + ((target - p) * rate >> np.int64(16))
