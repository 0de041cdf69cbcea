#!/usr/bin/env python3
"""Measure the ssm model (statemix.models.ssm) alone: bits per byte, speed, thread scaling.

Usage
-----
    python bench/ssm_study.py FILE [--size N] [--preset reference|default|bpe] [--set key=value ...]
                              [--vocab STRATEGY] [--threads N] [--verify] [--train-bench] [--json PATH]

FILE is read whole or its first ``--size`` bytes.  The model codes it in blocks of 1 MiB through its
byte interface (``Model.encode``), the way the codec would: byte tokens (V = 256) for the byte presets,
BPE tokens for the ``bpe`` preset (vocabulary trained on the first block and stored in its code
word).  The script prints:

- coded bytes (code words only, the vocabulary included) and ``stream bytes`` (code words + the
  container's header and trailer estimate: 5 + 3 + len(config) bytes of stream header, 13 bytes per
  block header, 12 of trailer, rounded up; see statemix/container.py for the exact layout);
- V, tokens and tokens per byte;
- bits per byte (from the stream bytes), the ideal code length of the mixed and of the SSM-only
  probabilities (from the trace), so model quality and coder overhead can be told apart;
- wall time, input bytes/s and tokens/s (compile time excluded: a 2,000-byte warm-up run first;
  tokenizer training and tokenizing included);
- with ``--vocab STRATEGY``: the tokens come from another vocabulary strategy, coded through the
  token interface (``Model.encode_tokens``, V = the vocabulary's size, same architecture and
  schedule): ``G<k>`` the first k merges of the shipped general vocabulary (data/general-v1.vocab;
  1 header byte names it), ``P<k>`` k merges trained on the first block with the word pre-split and
  stored in the stream (header: its serialized size + length varint), ``auto`` P with the
  tokenizer's ``default_merges``.  Every block adds its token-count varint, as the model's own BPE
  path does, so the sizes compare with ``--preset bpe`` (which is ``P12k`` done by the model);
- with ``--verify``: decodes and checks the round trip (doubles the time);
- with ``--train-bench``: times the training step alone (forward_chunk + backward_chunk + adam_step
  on one chunk, 200 repetitions) at 1 and at 2 threads, and checks the parameters are bit-identical.

Results deserve skepticism: the machine has 2 shared cores; repeat before trusting a 3% difference.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from dataclasses import replace
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from statemix import tokenizer  # noqa: E402
from statemix._jit import set_threads  # noqa: E402
from statemix._varint import encode_varint  # noqa: E402
from statemix.models import ssm  # noqa: E402
from statemix.models.nn import backward as bwd
from statemix.models.nn import forward as fwd
from statemix.models.nn import train
from statemix.models.nn.layout import S_EB
from tokenizer_study import GENERAL  # noqa: E402
from tokenizer_study import strategy_vocabulary as study_vocabulary  # noqa: E402

HEADER_ESTIMATE = 5 + 3 + 1 + 13 + 12  # magic/version/record length, model id, block header, trailer


def parse_value(text: str):
    for cast in (int, float):
        try:
            return cast(text)
        except ValueError:
            pass
    return text


def build_config(args) -> ssm.Config:
    config = ssm.PRESETS[args.preset]
    changes = {}
    for item in args.set or []:
        key, _, value = item.partition("=")
        changes[key] = parse_value(value)
    if changes:
        config = replace(config, preset=0, **changes)
    config.validate()
    return config


BLOCK = 1 << 20  # the container's block size: the codec hands the model 1 MiB blocks
def strategy_vocabulary(strategy: str, first_block: bytes) -> tuple[tokenizer.Vocabulary, int]:
    """(vocabulary, header bytes) of a ``--vocab`` strategy: tokenizer_study's, P always with the
    word pre-split, and a stored vocabulary preceded by its length as the model's own path does."""
    general = tokenizer.Vocabulary.from_bytes(GENERAL.read_bytes()) if strategy.startswith("G") else None
    name = strategy if strategy == "auto" or strategy.startswith("G") else strategy + "/split"
    vocab, header, _ = study_vocabulary(name, first_block, general)
    if general is None:
        header += len(encode_varint(header))
    return vocab, header


def run_strategy(config: ssm.Config, data: bytes, strategy: str, verify: bool) -> dict:
    """Code ``data`` as tokens of a vocabulary strategy through the token interface."""
    blocks = [data[i:i + BLOCK] for i in range(0, len(data), BLOCK)]
    t0 = time.perf_counter()
    vocab, header = strategy_vocabulary(strategy, blocks[0])
    train_seconds = time.perf_counter() - t0
    config = replace(config, tokenizer=ssm.TOK_IDS, merges=0, vocab=vocab.size)
    warm = ssm.Model(config)
    warm.encode_tokens(tokenizer.encode(vocab, data[:2000]), 4000)
    model = ssm.Model(config)
    traces, coded, ids_per_block = [], [], []
    t0 = time.perf_counter()
    for block in blocks:
        ids = tokenizer.encode(vocab, block, block_size=None).astype(np.int64)
        trace = np.zeros((len(ids), 2))
        word = model.encode_tokens(ids, 2 * len(block) + 64, trace)
        coded.append(encode_varint(len(ids)) + word)
        traces.append(trace)
        ids_per_block.append(ids)
    seconds = time.perf_counter() - t0 + train_seconds
    trace = np.concatenate(traces)
    tokens = sum(len(i) for i in ids_per_block)
    code_bytes = header + sum(len(c) for c in coded)
    stream = code_bytes + HEADER_ESTIMATE + 13 * (len(blocks) - 1) + len(config.to_bytes())
    result = {
        "strategy": strategy, "input_bytes": len(data), "blocks": len(blocks), "vocab": vocab.size,
        "tokens": tokens, "tokens_per_byte": tokens / len(data), "vocabulary_bytes": header,
        "coded_bytes": code_bytes, "stream_bytes": stream, "bpb": 8 * stream / len(data),
        "ideal_bpb_mixed": float(-np.log2(trace[:, 0]).sum() / len(data)),
        "ideal_bpb_ssm": float(-np.log2(np.maximum(trace[:, 1], 1e-30)).sum() / len(data)),
        "train_seconds": train_seconds, "seconds": seconds, "bytes_per_s": len(data) / seconds,
        "tokens_per_s": tokens / seconds,
    }
    if verify:
        dec = ssm.Model(config)
        back = b"".join(tokenizer.decode(vocab, dec.decode_tokens(c[len(encode_varint(len(i))):], len(i)))
                        for c, i in zip(coded, ids_per_block))
        result["round_trip"] = back == data
    return result


def run(config: ssm.Config, data: bytes, verify: bool) -> dict:
    warm = ssm.Model(config)
    warm.encode(data[:2000], 4000)
    model = ssm.Model(config)
    blocks = [data[i:i + BLOCK] for i in range(0, len(data), BLOCK)]
    traces, coded, tokens = [], [], 0
    t0 = time.perf_counter()
    for block in blocks:
        trace = np.zeros((len(block), 2))
        word = model.encode(block, 2 * len(block) + 64, trace)
        count = model.tokenize(block).shape[0]  # the block's token count (cheap next to coding)
        tokens += count
        traces.append(trace[:count])
        coded.append(word)
    seconds = time.perf_counter() - t0
    trace = np.concatenate(traces)
    code_bytes = sum(len(c) for c in coded)
    stream = code_bytes + HEADER_ESTIMATE + 13 * (len(blocks) - 1) + len(config.to_bytes())
    result = {
        "config": config.__dict__, "input_bytes": len(data), "blocks": len(blocks),
        "vocab": model.vocab_size, "tokens": tokens, "tokens_per_byte": tokens / len(data),
        "coded_bytes": code_bytes, "stream_bytes": stream, "bpb": 8 * stream / len(data),
        "ideal_bpb_mixed": float(-np.log2(trace[:, 0]).sum() / len(data)),
        "ideal_bpb_ssm": float(-np.log2(np.maximum(trace[:, 1], 1e-30)).sum() / len(data)),
        "seconds": seconds, "bytes_per_s": len(data) / seconds, "tokens_per_s": tokens / seconds,
    }
    if model.vocabulary is not None:
        result["vocabulary_bytes"] = len(model.vocabulary.to_bytes())
    if verify:
        t0 = time.perf_counter()
        dec = ssm.Model(config)
        back = b"".join(dec.decode(c, len(b)) for c, b in zip(coded, blocks))
        result["decode_seconds"] = time.perf_counter() - t0
        result["round_trip"] = back == data
    return result


def train_bench(config: ssm.Config, data: bytes, reps: int = 200) -> dict:
    """Time the training step alone at 1 and 2 threads from the same model state."""
    base = ssm.Model(config)
    base.encode(data[: 40 * config.chunk], 1 << 20)  # past the early schedule
    start = base.snapshot()
    out = {}
    params = {}
    for threads in (1, 2, 1, 2):
        set_threads(threads)
        model = ssm.Model(config)
        model.restore(start)  # the same state, BPE vocabulary included
        m = model.network
        lr = np.float32(config.lr)
        fwd.forward_chunk(m.P, m.Aneg, m.off, m.sz, m.acts, m.tin, m.sz[S_EB])
        t0 = time.perf_counter()
        for _ in range(reps):
            fwd.forward_chunk(m.P, m.Aneg, m.off, m.sz, m.acts, m.tin, m.sz[S_EB])
            bwd.backward_chunk(m.P, m.Aneg, m.off, m.sz, m.hy, m.acts, m.grads, m.tin, m.tout, m.G, m.sz[S_EB])
            train.adam_step(m.P, m.G, m.M, m.W, m.hy, m.sf, lr, m.partial)
            train.refresh_a(m.P, m.off, m.sz, m.Aneg)
        ms = (time.perf_counter() - t0) / reps * 1e3
        out[f"ms_per_iteration_T{threads}"] = min(ms, out.get(f"ms_per_iteration_T{threads}", 1e9))
        params[threads] = m.P.copy()
    out["speedup"] = out["ms_per_iteration_T1"] / out["ms_per_iteration_T2"]
    out["identical"] = bool(np.array_equal(params[1], params[2]))
    set_threads(1)
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("file")
    parser.add_argument("--size", type=float, default=None)
    parser.add_argument("--preset", default="default", choices=sorted(ssm.PRESETS))
    parser.add_argument("--set", action="append", metavar="KEY=VALUE")
    parser.add_argument("--vocab", metavar="STRATEGY", help="G<k>, P<k> or auto (see above)")
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--verify", action="store_true")
    parser.add_argument("--train-bench", action="store_true")
    parser.add_argument("--json")
    args = parser.parse_args()
    data = Path(args.file).read_bytes()
    if args.size:
        data = data[: int(args.size)]
    config = build_config(args)
    set_threads(args.threads)
    if args.train_bench:
        result = train_bench(config, data)
    elif args.vocab:
        result = run_strategy(config, data, args.vocab, args.verify)
    else:
        result = run(config, data, args.verify)
    result["threads"] = args.threads
    result["file"] = args.file
    for key, value in result.items():
        if key != "config":
            print(f"{key:>18}: {value:.4f}" if isinstance(value, float) else f"{key:>18}: {value}")
    if args.json:
        Path(args.json).write_text(json.dumps(result, indent=1, default=str))
    return 0


if __name__ == "__main__":
    sys.exit(main())
