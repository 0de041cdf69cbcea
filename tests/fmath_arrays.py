"""Array versions of statemix._fmath's functions, for the accuracy tests (out[i] = f(x[i]))."""

from statemix._fmath import exp32, log32, sigmoid32, silu32, softplus32
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
