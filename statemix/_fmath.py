"""Deterministic float32 elementary functions for the coded path.

The platform's libm (glibc, SVML) is not correctly rounded and picks different code per CPU, so no
kernel that feeds the coder may call ``math.exp``, ``np.exp``, ``np.log`` or ``np.tanh``.  The
functions here are built only from IEEE float32 ``+ - * /``, integer conversion of clamped values and
exponent-bit manipulation (``view`` between float32 and int32), all of which give the same bits on
every machine and CPU target when compiled without fastmath (see ``statemix._jit``).  They are
branch-light so LLVM can vectorize loops that call them.

Accuracy (checked against float64 numpy in tests/test_fmath.py):

========== ============================ ==========================================
function   domain                       error
========== ============================ ==========================================
exp32      [-87, 88] (clamped outside)  relative <= 4e-7
log32      normal positive floats       absolute <= 2e-7 or relative <= 4e-7
softplus32 any                          relative <= 1e-6 (x >= -87; below: 0)
sigmoid32  any (clamped at +-80)        relative <= 1e-6 (for x >= -80)
silu32     any                          relative <= 1e-6 (away from x = 0: abs 1e-9)
========== ============================ ==========================================

Long sums: :func:`sum_lanes` and :func:`dot_lanes` add in ``LANES`` = 64 interleaved lanes (lane =
index mod 64) and then a fixed pairwise tree over the lanes, so their order is written in the source.

The polynomials are the classic single-precision minimax fits (Cody-Waite reduction by ln 2 split
into an exact high part and a small low part).
"""

from __future__ import annotations

import numpy as np

from ._jit import kernel

F0 = np.float32(0.0)
F1 = np.float32(1.0)
HALF = np.float32(0.5)
LOG2E = np.float32(1.4426950408889634)
LN2_HI = np.float32(0.693359375)  # exact in 9 bits: n * LN2_HI is exact for |n| <= 127
LN2_LO = np.float32(-2.12194440e-4)
EXP_MIN = np.float32(-87.0)
EXP_MAX = np.float32(88.0)
SQRT_HALF = np.float32(0.70710678118654752)
LANES = 64  # lanes of long sums (then a fixed pairwise tree)
# exp(r) = 1 + r + r^2 * P(r) on |r| <= ln2/2
E0 = np.float32(1.9875691500e-4)
E1 = np.float32(1.3981999507e-3)
E2 = np.float32(8.3334519073e-3)
E3 = np.float32(4.1665795894e-2)
E4 = np.float32(1.6666665459e-1)
E5 = np.float32(5.0000001201e-1)
# log(1 + f) = f - f^2/2 + f^3 * Q(f) on sqrt(1/2) - 1 <= f <= sqrt(2) - 1
L0 = np.float32(7.0376836292e-2)
L1 = np.float32(-1.1514610310e-1)
L2 = np.float32(1.1676998740e-1)
L3 = np.float32(-1.2420140846e-1)
L4 = np.float32(1.4249322787e-1)
L5 = np.float32(-1.6668057665e-1)
L6 = np.float32(2.0000714765e-1)
L7 = np.float32(-2.4999993993e-1)
L8 = np.float32(3.3333331174e-1)
LOG_MIN = np.float32(1.1754943508222875e-38)  # smallest normal float32
SOFTPLUS_HI = np.float32(20.0)
SOFTPLUS_LO = np.float32(-15.0)
SIGMOID_LIM = np.float32(80.0)


@kernel
def exp32(x):
    """Return e**x in float32 (x clamped to [-87, 88], so never 0, inf or denormal)."""
    v = min(max(np.float32(x), EXP_MIN), EXP_MAX)
    # n = round(v / ln 2): truncation of a positive number is floor; v * LOG2E + 128.5 is in [3, 256)
    n = np.int32(v * LOG2E + np.float32(128.5)) - np.int32(128)
    fn = np.float32(n)
    r = (v - fn * LN2_HI) - fn * LN2_LO
    p = ((((E0 * r + E1) * r + E2) * r + E3) * r + E4) * r + E5
    e = (r * r) * p + r + F1
    scale = np.int32((n + np.int32(127)) << np.int32(23)).view(np.float32)
    return e * scale


@kernel
def log32(x):
    """Return ln(x) in float32 for x > 0 (x clamped below to the smallest normal float32)."""
    bits = np.float32(max(np.float32(x), LOG_MIN)).view(np.int32)
    e = np.int32(bits >> np.int32(23)) - np.int32(127)
    m = np.int32((bits & np.int32(0x7FFFFF)) | np.int32(0x3F800000)).view(np.float32)  # in [1, 2)
    if m > np.float32(2.0) * SQRT_HALF:
        m = m * HALF
        e = e + np.int32(1)
    f = m - F1
    fe = np.float32(e)
    z = f * f
    q = (((((((L0 * f + L1) * f + L2) * f + L3) * f + L4) * f + L5) * f + L6) * f + L7) * f + L8
    y = (f * z) * q
    y = y + fe * LN2_LO
    y = y - HALF * z
    return (f + y) + fe * LN2_HI


@kernel
def log1p_exp32(u):
    """Return ln(1 + u) for u >= 0 accurately also for small u (Goldberg's correction).

    Both cases are computed and one is selected (no branch, so loops that call it vectorize); where
    ``1 + u == 1`` the unselected quotient is u / 0, which the kernels' IEEE division leaves as inf."""
    w = F1 + u
    corrected = log32(w) * (u / (w - F1))
    return u if w == F1 else corrected


@kernel
def softplus32(x):
    """Return ln(1 + e**x) in float32: x above 20, e**x below -15 (0 below -87), else ln(1 + e**x).

    Every case is computed and one selected, so the value is exactly that of the case alone."""
    v = np.float32(x)
    ev = exp32(v)
    tail = ev if v >= EXP_MIN else F0  # below e**-87 the value is under 1.7e-38
    body = log1p_exp32(ev)
    low = tail if v < SOFTPLUS_LO else body
    return v if v > SOFTPLUS_HI else low


@kernel
def sigmoid32(x):
    """Return 1 / (1 + e**-x) in float32."""
    v = min(max(np.float32(x), -SIGMOID_LIM), SIGMOID_LIM)
    return F1 / (F1 + exp32(-v))


@kernel
def silu32(x):
    """Return x * sigmoid(x) in float32."""
    v = np.float32(x)
    return v * sigmoid32(v)


@kernel
def _lane_tree(lanes):
    """Add the LANES partial sums pairwise: lane j += lane j + w for w = 32, 16, ..., 1; return lane 0."""
    w = LANES // 2
    while w >= 1:
        for j in range(w):
            lanes[j] += lanes[j + w]
        w //= 2
    return lanes[0]


@kernel
def sum_lanes(a, n, lanes):
    """Sum a[0:n]: 64 interleaved lanes, then a pairwise tree over the lanes."""
    for j in range(LANES):
        lanes[j] = F0
    full = n - n % LANES
    for i in range(0, full, LANES):
        blk = a[i:i + LANES]
        for j in range(LANES):
            lanes[j] += blk[j]
    for i in range(full, n):
        lanes[i - full] += a[i]
    return _lane_tree(lanes)


@kernel
def dot_lanes(a, b, n, lanes):
    """Dot product of a[0:n] and b[0:n] with the lane order of :func:`sum_lanes`."""
    for j in range(LANES):
        lanes[j] = F0
    full = n - n % LANES
    for i in range(0, full, LANES):
        ba = a[i:i + LANES]
        bb = b[i:i + LANES]
        for j in range(LANES):
            lanes[j] += ba[j] * bb[j]
    for i in range(full, n):
        lanes[i - full] += a[i] * b[i]
    return _lane_tree(lanes)
