#!/usr/bin/env python3
"""The SSM's arithmetic throughput against what one core reaches: where its time goes, per phase.

Usage: python bench/ssm_speed.py [FILE] [--preset mix] [--set KEY=INT ...] [--reps 50] [--threads 1]

The SSM (statemix.models.nn) does four things per chunk of T tokens: T position-by-position forward
passes while coding (``forward_position``), then, per training iteration, a forward pass over the
chunk (``forward_chunk``; without a training delay the first iteration reuses the coding pass), a
backward pass (``backward_chunk``), an Adam step (``adam_step``) and the refresh of -exp(A_log)
(``refresh_a``).  With a training delay the coding runs on one thread and the rest on another: the
script prints both threads' shares.  The script builds the preset's model, runs it over the first 64 KiB of FILE (past
the early schedule; default: generated text), then times each phase alone from that state, ``reps``
times, and prints per phase: floating-point operations per call, milliseconds per call, GFLOP/s,
and the share of the peak.

Operation counts (float32; an add, a multiply, a comparison or an exp each count 1; a matrix-vector
product of a ``k x m`` matrix counts ``2 k m``), per position and layer, with D model width, E =
expand * D, N state, K conv, R = 2N + 1, V vocabulary:

- forward: LayerNorm ~ 8 D; in-projection 2 D 2E; conv 2 K E + SiLU 4 E; x-projection 2 E R;
  dt 4 E + softplus 4 E; scan 6 E N (dA = exp(dt A): 2, h = dA h + dt B x': 3, y += C h: 2, less
  the shared dt x') + D_skip 2 E; gate SiLU 5 E; out-projection 2 E D + residual D; once per
  position the final LayerNorm 8 D and the head 2 D V + softmax 4 V;
- backward: twice the forward's matrix work (the input gradient and the weight gradient of each
  product) plus the same element-wise work again: counted as 2x the forward;
- Adam, per parameter: gradient norm 2, clipping 1, two moments 7, the bias-corrected step 6 (sqrt
  and divide counted 1 each): 16.

These are counts of useful work, not of what the compiled code executes; their ratio to the time
is the achieved rate.  The peak: a kernel of the same kind (float32, multiply then add in separate
instructions, as statemix's kernels compile: no FMA) over arrays that stay in the L1 cache,
``c = c * a + b`` on 4,096 independent lanes, 2 operations per element; its best of 5 runs.

Results deserve skepticism: 2 shared cores; the peak is one core's (``--threads`` applies to the
SSM's phases only).
"""

from __future__ import annotations

import argparse
import sys
import time
from dataclasses import replace
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from statemix._fmath import LANES  # noqa: E402
from statemix._jit import kernel, set_threads  # noqa: E402
from statemix.models import ssm  # noqa: E402
from statemix.models.nn import backward as bwd  # noqa: E402
from statemix.models.nn import forward as fwd  # noqa: E402
from statemix.models.nn import train  # noqa: E402
from statemix.models.nn.layout import S_E, S_EB  # noqa: E402

PEAK_LANES = 4096


@kernel
def _multiply_add(a, b, c, reps):
    for _ in range(reps):
        for i in range(c.shape[0]):
            c[i] = c[i] * a[i] + b[i]


def peak_gflops(seconds: float = 0.5) -> float:
    """Best of 5: GFLOP/s of ``c = c * a + b`` (float32, in cache) on one thread."""
    a = np.full(PEAK_LANES, 0.5, dtype=np.float32)
    b = np.ones(PEAK_LANES, dtype=np.float32)
    c = np.zeros(PEAK_LANES, dtype=np.float32)
    _multiply_add(a, b, c, 1)
    reps = 1000
    while True:
        t0 = time.perf_counter()
        _multiply_add(a, b, c, reps)
        if time.perf_counter() - t0 > seconds / 5:
            break
        reps *= 2
    best = min(_timed(lambda: _multiply_add(a, b, c, reps)) for _ in range(5))
    return 2 * PEAK_LANES * reps / best / 1e9


def _timed(call) -> float:
    t0 = time.perf_counter()
    call()
    return time.perf_counter() - t0


def operation_counts(config) -> dict[str, float]:
    """Floating-point operations per call of each phase (see the module docstring)."""
    V, D, E, N, K, L, T = (config.vocab, config.d_model, config.d_model * config.expand, config.d_state,
                           config.conv, config.layers, config.chunk)
    R = 2 * N + 1
    layer = (8 * D + 2 * D * 2 * E + 2 * K * E + 4 * E + 2 * E * R + 8 * E + 6 * E * N + 2 * E + 5 * E
             + 2 * E * D + D)
    position = L * layer + 8 * D + 2 * D * V + 4 * V
    parameters = ssm_parameters(config)
    return {
        "forward_position": position,
        "forward_chunk": T * position,
        "backward_chunk": 2 * T * position,
        "adam_step": 16 * parameters,
        "refresh_a": 2 * L * N * E,
    }


def ssm_parameters(config) -> int:
    from statemix.models.nn.layout import layout

    return int(layout(config)[1])


def phase_times(model, reps: int) -> dict[str, float]:
    """Seconds per call of each phase, from the model's current state (the best of 3 rounds;
    forward_position: per position, timed over a whole chunk's positions).  The training passes as
    the model runs them: with a training delay the serial twins, scans in one task of E channels;
    without, the parallel kernels with the configured channel blocks."""
    m = model.network
    lr = np.float32(model.model_config.lr)
    lanes = np.empty(LANES, dtype=np.float32)
    T = model.model_config.chunk
    if model.model_config.delay:
        forward_chunk, backward_chunk, adam_step = (
            train._forward_chunk_serial, train._backward_chunk_serial, train._adam_step_serial)
        block = m.sz[S_E]
    else:
        forward_chunk, backward_chunk, adam_step = fwd.forward_chunk, bwd.backward_chunk, train.adam_step
        block = m.sz[S_EB]
    calls = {
        "forward_position": lambda: [fwd.forward_position(m.P, m.Aneg, m.off, m.sz, m.acts, m.tin, t, lanes)
                                     for t in range(T)],
        "forward_chunk": lambda: forward_chunk(m.P, m.Aneg, m.off, m.sz, m.acts, m.tin, block),
        "backward_chunk": lambda: backward_chunk(m.P, m.Aneg, m.off, m.sz, m.hy, m.acts, m.grads, m.tin, m.tout,
                                                 m.G, block),
        "adam_step": lambda: adam_step(m.P, m.G, m.M, m.W, m.hy, m.sf, lr, m.partial),
        "refresh_a": lambda: train.refresh_a(m.P, m.off, m.sz, m.Aneg),
    }
    out = {}
    for name, call in calls.items():
        call()
        best = min(_timed(lambda: [call() for _ in range(reps)]) for _ in range(3))
        out[name] = best / reps / (T if name == "forward_position" else 1)
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("file", nargs="?")
    parser.add_argument("--preset", default="mix", choices=sorted(ssm.PRESETS))
    parser.add_argument("--reps", type=int, default=50)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--set", action="append", default=[], metavar="KEY=INT",
                        help="change an integer field of the preset (chunk=16, say)")
    args = parser.parse_args()
    config = ssm.PRESETS[args.preset]
    changes = {key: int(value) for key, _, value in (item.partition("=") for item in args.set)}
    if changes:
        config = replace(config, preset=0, **changes)
        config.validate()
    if args.file:
        data = Path(args.file).read_bytes()[: 1 << 16]
    else:
        rng = np.random.default_rng(1)
        words = [bytes(rng.integers(97, 123, rng.integers(2, 9))) for _ in range(400)]
        data = b" ".join(words[i] for i in rng.integers(0, 400, 12000))[: 1 << 16]
    model = ssm.Model(config)
    model.encode(data, 1 << 20)
    set_threads(args.threads)
    peak = peak_gflops()
    counts = operation_counts(model.model_config)
    seconds = phase_times(model, args.reps)
    sz = model.model_config
    T, iters = sz.chunk, sz.iters_c
    # per chunk, steady schedule: T coding passes, iters backward/Adam/refresh, iters - 1 chunk passes
    # (iters with a training delay: the trainer's weights are not the coding pass's)
    per_chunk = {"forward_position": T, "forward_chunk": iters - 1 + sz.delay, "backward_chunk": iters,
                 "adam_step": iters, "refresh_a": iters}
    print(f"preset {args.preset}: V {sz.vocab}, D {sz.d_model}, E {sz.d_model * sz.expand}, N {sz.d_state}, "
          f"L {sz.layers}, T {T}, {ssm_parameters(sz):,} parameters; {iters} training iterations per chunk; "
          f"training delay {sz.delay}; threads {args.threads}")
    print(f"peak (c = c * a + b, float32, no FMA, one thread): {peak:.2f} GFLOP/s")
    print(f"{'phase':<18}{'flop/call':>12}{'ms/call':>10}{'GFLOP/s':>9}{'of peak':>9}{'calls/byte':>12}"
          f"{'us/byte':>9}")
    total_flops = total_seconds = training = training_flops = 0.0
    for name, flops in counts.items():
        per_call = seconds[name]
        rate = flops / per_call / 1e9
        per_byte = per_chunk[name] / T
        total_flops += flops * per_byte
        total_seconds += per_call * per_byte
        if name != "forward_position":
            training += per_call * per_byte
            training_flops += flops * per_byte
        print(f"{name:<18}{flops:>12,.0f}{per_call * 1e3:>10.4f}{rate:>9.2f}{rate / peak:>9.1%}{per_byte:>12.4f}"
              f"{per_call * per_byte * 1e6:>9.2f}")
    for label, flops, secs in (("training", training_flops, training), ("per byte (SSM)", total_flops, total_seconds)):
        rate = flops / secs / 1e9
        print(f"{label:<18}{flops:>12,.0f}{secs * 1e3:>10.4f}{rate:>9.2f}{rate / peak:>9.1%}{'':>12}{secs * 1e6:>9.2f}")
    if sz.delay:
        print(f"with the delay, on two threads: coding {(total_seconds - training) * 1e6:.2f} us/byte of SSM "
              f"(plus the count models and the coder), training {training * 1e6:.2f} us/byte")
    return 0


if __name__ == "__main__":
    sys.exit(main())
