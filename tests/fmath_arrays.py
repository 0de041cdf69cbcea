"""Array versions of statemix._fmath's functions, for the accuracy tests (out[i] = f(x[i]))."""

from statemix._fmath import (
    EXP_MIN, F0, F1, SOFTPLUS_HI, SOFTPLUS_LO, exp32, log32, sigmoid32, silu32, softplus32)
from statemix._jit import kernel


@kernel
def exp32_array(x, out):
    """``out[i] = exp32(x[i])`` (for tests and table building)."""
    for i in range(x.shape[0]):
        out[i] = exp32(x[i])


@kernel
def log32_array(x, out):
    for i in range(x.shape[0]):
        out[i] = log32(x[i])


@kernel
def softplus32_array(x, out):
    for i in range(x.shape[0]):
        out[i] = softplus32(x[i])


@kernel
def sigmoid32_array(x, out):
    for i in range(x.shape[0]):
        out[i] = sigmoid32(x[i])


@kernel
def silu32_array(x, out):
    for i in range(x.shape[0]):
        out[i] = silu32(x[i])


@kernel
def softplus32_cases_array(x, out):
    """The plain reference of softplus32: the same cases taken with branches, one at a time."""
    for i in range(x.shape[0]):
        v = x[i]
        if v > SOFTPLUS_HI:
            out[i] = v
        elif v < SOFTPLUS_LO:
            out[i] = exp32(v) if v >= EXP_MIN else F0
        else:
            u = exp32(v)
            w = F1 + u
            out[i] = u if w == F1 else log32(w) * (u / (w - F1))
