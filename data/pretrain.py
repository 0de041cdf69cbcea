"""Pretrain the SSM of cm's byte-distribution source on the corpus of data/build_corpus.py (issue 49).

    NUMBA_NUM_THREADS=1 PYTHONPATH=. taskset -c 1 python data/pretrain.py --corpus /work/corpus/corpus-v1.bin \
        --bytes 20000000 --run-dir runs/pretrain-v1 --out statemix/models/pretrained/ssm-v1.bin

The network is the project's own (statemix.models.nn: the same layout, forward, backward and Adam
kernels as the coder's SSM, serial twins, one thread), in the architecture of level 3's source
(``SOURCE_WIDE_SSM``: d_model 64, 2 layers, state 16, expand 2, conv 4, bytes), so the weights load
into that source unchanged.  Training differs from the online coder's only in its schedule: chunks of
``--chunk`` bytes (gradients through the recurrence within a chunk; the state carried from chunk to
chunk as the coder carries it), one Adam step per chunk, the learning rate warmed up linearly over
``--warmup`` steps to ``--lr`` and then decayed along a cosine to ``--lr-end`` at ``--bytes``
bytes, global-norm clip ``--clip``.  The corpus is read once in order from its start (it is
already interleaved; ``--bytes`` beyond its length wraps around).

Deterministic: float32 kernels that give the same bits at any thread count; the run state (weights,
Adam moments, the recurrent state, position) is written to ``RUN_DIR/checkpoint.npz`` every
``--checkpoint-s`` seconds and at the end, and a run started again resumes from it with the same
bits as one that never stopped.  The loss logged is the prequential one (each chunk's cross entropy
before its own update), in bits per byte, in ``RUN_DIR/log.tsv``.  At the end the weights are
written with statemix.models.nn.pretrained.save (int8 per row; vectors float32) to ``--out`` and the
float32 ones beside the checkpoint, and ``--provenance`` (data/NAME-provenance.json for ``--out``
NAME.bin) records the weight file's SHA-256 and every stage of training that made them, each with
its corpus's SHA-256 (a run continued from another's weights, ``--init`` with ``--after`` its
record, lists that run's stages first).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import math
import os
import time
from dataclasses import replace
from pathlib import Path

import numpy as np

from statemix.models.bit.distribution import SOURCE_WIDE_SSM, source_config
from statemix.models.nn import Network, pretrained
from statemix.models.nn.layout import S_E
from statemix.models.nn.train import _adam_step_serial, _backward_chunk_serial, _forward_chunk_serial, refresh_a

LN2 = math.log(2.0)


def architecture(chunk: int, clip: float, d_model: int = 64, layers: int = 2):
    """Level 3's source SSM, with the pretraining chunk and clip (neither changes the layout); a
    wider or deeper network with ``d_model`` and ``layers`` (for a source that does not exist yet)."""
    return replace(source_config(SOURCE_WIDE_SSM, 20), chunk=chunk, clip=clip, smoothing=0.0, delay=0,
                   d_model=d_model, layers=layers)


def learning_rate(step: int, total_steps: int, args) -> float:
    if step < args.warmup:
        return args.lr * (step + 1) / args.warmup
    progress = min(1.0, (step - args.warmup) / max(1, total_steps - args.warmup))
    return args.lr_end + (args.lr - args.lr_end) * 0.5 * (1.0 + math.cos(math.pi * progress))


def earlier_stages(args) -> list:
    """The training stages behind ``--init``'s weights, from the record ``--after`` names, each with
    its corpus (a record whose stages do not name theirs trained every stage on its one corpus)."""
    if not args.after:
        return []
    earlier = json.loads(Path(args.after).read_text())
    corpus = {key: earlier[key] for key in ("corpus_sha256", "corpus_bytes") if key in earlier}
    stages = earlier["stages"] if "stages" in earlier else [{**earlier["training"], "made_by": earlier["made_by"]}]
    return [{**corpus, **stage} for stage in stages]


def sha256(path) -> str:
    return hashlib.sha256(Path(path).read_bytes()).hexdigest()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--corpus", default="/work/corpus/corpus-v1.bin")
    parser.add_argument("--bytes", type=int, default=20_000_000, help="bytes to train on in all")
    parser.add_argument("--chunk", type=int, default=64)
    parser.add_argument("--d-model", type=int, default=64, help="the network's width (64: level 3's source)")
    parser.add_argument("--layers", type=int, default=2, help="the network's depth (2: level 3's source)")
    parser.add_argument("--lr", type=float, default=0.003)
    parser.add_argument("--lr-end", type=float, default=0.0003)
    parser.add_argument("--warmup", type=int, default=500)
    parser.add_argument("--clip", type=float, default=1.0)
    parser.add_argument("--run-dir", default="runs/pretrain-v1")
    parser.add_argument("--out", default="statemix/models/pretrained/ssm-v1.bin")
    parser.add_argument("--provenance", help="the record to write (default: data/NAME-provenance.json for --out NAME.bin)")
    parser.add_argument("--checkpoint-s", type=float, default=120.0)
    parser.add_argument("--init", help="start from these float32 weights (.npy) instead of the random init")
    parser.add_argument("--after", help="the provenance record of the run that wrote --init's weights (its "
                        "stages come first in this run's record)")
    parser.add_argument("--offset", type=int, default=0, help="start reading the corpus at this byte")
    parser.add_argument("--stop-after-s", type=float, default=0.0, help="stop (checkpointed) after this long")
    args = parser.parse_args()

    corpus = np.frombuffer(Path(args.corpus).read_bytes(), dtype=np.uint8).astype(np.int64)
    corpus_sha = hashlib.sha256(corpus.astype(np.uint8).tobytes()).hexdigest()
    config = architecture(args.chunk, args.clip, args.d_model, args.layers)
    net = Network(config)
    T = config.chunk
    K = config.conv
    L = config.layers
    E = int(net.sz[S_E])
    total_steps = args.bytes // T
    run = Path(args.run_dir)
    run.mkdir(parents=True, exist_ok=True)
    ckpt = run / "checkpoint.npz"
    acts, grads = net.acts, net.grads
    step, seen_loss = 0, 0.0
    prev = 0  # the byte before the chunk (0 at the very start)
    if args.init:
        net.P[:] = np.load(args.init)
        refresh_a(net.P, net.off, net.sz, net.Aneg)
    if ckpt.exists():
        state = np.load(ckpt)
        assert str(state["corpus_sha"]) == corpus_sha, "checkpoint of another corpus"
        assert int(state["chunk"]) == T
        net.P[:], net.M[:], net.W[:], net.sf[:] = state["P"], state["M"], state["W"], state["sf"]
        for l in range(L):
            acts.hs[l, 0] = state["h"][l]
            acts.xh[l, 0:K - 1] = state["x"][l]
        step, prev = int(state["step"]), int(state["prev"])
        refresh_a(net.P, net.off, net.sz, net.Aneg)
        print(f"resumed at step {step} ({step * T:,d} bytes)", flush=True)
    log = open(run / "log.tsv", "a")
    if step == 0:
        log.write("step\tbytes\tlr\tbits_per_byte_last\tgrad_norm\telapsed_s\n")

    def save_checkpoint():
        tmp = run / "checkpoint.tmp.npz"
        np.savez(tmp, P=net.P, M=net.M, W=net.W, sf=net.sf, h=acts.hs[:, 0].copy(), x=acts.xh[:, 0:K - 1].copy(),
                 step=step, prev=prev, chunk=T, corpus_sha=corpus_sha)
        os.replace(tmp, ckpt)

    tin, tout = net.tin, net.tout
    n = corpus.shape[0]
    start = time.perf_counter()
    last_ckpt = start
    window_loss, window_bytes, norm = 0.0, 0, 0.0
    while step < total_steps:
        pos = (args.offset + step * T) % n
        if pos + T > n:  # wrap around: the next pass starts again from the corpus's start
            pos = 0
        tout[:] = corpus[pos:pos + T]
        tin[0] = prev
        tin[1:] = tout[:T - 1]
        _forward_chunk_serial(net.P, net.Aneg, net.off, net.sz, acts, tin, E)
        loss = float(np.sum(acts.lse[:T] - acts.logits[np.arange(T), tout]))  # nats, before the update
        _backward_chunk_serial(net.P, net.Aneg, net.off, net.sz, net.hy, acts, grads, tin, tout, net.G, E)
        lr = np.float32(learning_rate(step, total_steps, args))
        norm = _adam_step_serial(net.P, net.G, net.M, net.W, net.hy, net.sf, lr, net.partial)
        refresh_a(net.P, net.off, net.sz, net.Aneg)
        for l in range(L):  # carry the state the forward pass reached (as the coder does)
            acts.hs[l, 0] = acts.hs[l, T]
            acts.xh[l, 0:K - 1] = acts.xh[l, T:T + K - 1]
        prev = int(tout[T - 1])
        step += 1
        window_loss += loss
        window_bytes += T
        if window_bytes >= 1 << 18 or step == total_steps:
            elapsed = time.perf_counter() - start
            bpb = window_loss / window_bytes / LN2
            log.write(f"{step}\t{step * T}\t{lr:.6f}\t{bpb:.4f}\t{norm:.3f}\t{elapsed:.1f}\n")
            log.flush()
            print(f"step {step} bytes {step * T:,d} lr {lr:.5f} loss {bpb:.4f} bpb norm {norm:.2f} "
                  f"{elapsed:.0f}s ({step * T / max(elapsed, 1e-9) / 1000 if elapsed else 0:.1f} KB/s this run)",
                  flush=True)
            window_loss, window_bytes = 0.0, 0
        now = time.perf_counter()
        if now - last_ckpt >= args.checkpoint_s:
            save_checkpoint()
            last_ckpt = now
        if args.stop_after_s and now - start >= args.stop_after_s:
            break
    save_checkpoint()
    if step < total_steps:
        print(f"stopped at step {step} of {total_steps}; run again to resume", flush=True)
        return
    np.save(run / "weights-f32.npy", net.P)
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    pretrained.save(args.out, config, net.P)
    stage = dict(corpus_sha256=corpus_sha, corpus_bytes=int(n), bytes=step * T, steps=step, chunk=T, lr=args.lr,
                 lr_end=args.lr_end, warmup=args.warmup,
                 clip=args.clip, init=args.init, offset=args.offset, schedule="linear warm-up, cosine decay",
                 tool="statemix.models.nn kernels (serial twins), one thread",
                 made_by="python data/pretrain.py " + " ".join(
                     f"--{k.replace('_', '-')} {v}" for k, v in vars(args).items() if k not in ("provenance", "after")))
    record = dict(weights=str(args.out), weights_sha256=sha256(args.out), weights_bytes=os.path.getsize(args.out),
                  format="statemix.models.nn.pretrained v1, int8 per row (vectors and A_log float32)",
                  architecture=dict(vocab=config.vocab, d_model=config.d_model, expand=config.expand,
                                    d_state=config.d_state, conv=config.conv, layers=config.layers),
                  stages=[*earlier_stages(args), stage])
    provenance = args.provenance or Path(__file__).with_name(f"{Path(args.out).stem}-provenance.json")
    Path(provenance).write_text(json.dumps(record, indent=1) + "\n")
    print(json.dumps(record, indent=1))


if __name__ == "__main__":
    main()
