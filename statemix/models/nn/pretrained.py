"""Pretrained SSM weights: their file format, and starting a network from them.

File (little-endian)::

    magic b"SMXW" | version u8 (1) | quant u8 (0 float32, 1 int8 with a float32 scale per row) |
    vocab u16 | d_model, expand, d_state, conv, layers u8 | total u32 |
    then every tensor in the order of :func:`.layout.layout`: float32 values, or for a matrix with
    ``quant`` 1, per row (the outer index: matrices are stored transposed) a float32 scale and the
    row's int8 values (value = scale * q, scale = max |row| / 127).  Vectors and ``A_log`` stay float32.

Dequantization is numpy float32 arithmetic (one product per value): the same bits everywhere.

The files shipped with the package live in ``statemix/models/pretrained/``; a byte-distribution
source that starts from one (:data:`..bit.distribution.PRETRAINED`) names it and its sha256, and
:func:`shipped` refuses a file that is missing or not those bytes.  data/pretrain.py writes them
(the provenance of NAME.bin: data/NAME-provenance.json).
"""

from __future__ import annotations

import functools
import hashlib
import struct
from pathlib import Path

import numpy as np

from ..._errors import StatemixError

from .layout import (A_LOG, CONV_B, CONV_W, DSKIP, DT_B, DT_W, EMB, HEAD, LN_B, LN_G, LNF_B, LNF_G, NT, WIN,
                     WOUT, WX, layout)

MAGIC = b"SMXW"
SHIPPED = Path(__file__).resolve().parent.parent / "pretrained"  # the package's weight files
_HEADER = "<4sBBHBBBBBI"
Q_FLOAT32, Q_INT8 = 0, 1


def _tensors(config):
    """(offset, rows, cols) of every tensor in layout order; rows 0 marks a float32-only tensor."""
    V, D, E, N, K, L = (config.vocab, config.d_model, config.d_model * config.expand,
                        config.d_state, config.conv, config.layers)
    R = 2 * N + 1
    off, total = layout(config)
    shapes = {LN_G: (0, D), LN_B: (0, D), WIN: (D, 2 * E), CONV_W: (K, E), CONV_B: (0, E), WX: (E, R),
              DT_W: (0, E), DT_B: (0, E), A_LOG: (0, N * E), DSKIP: (0, E), WOUT: (E, D)}
    out = []
    for l in range(L):
        for k in range(NT):
            rows, cols = shapes[k]
            out.append((int(off[l * NT + k]), rows, cols))
    for k, (rows, cols) in ((EMB, (V, D)), (LNF_G, (0, D)), (LNF_B, (0, D)), (HEAD, (D, V))):
        out.append((int(off[L * NT + k]), rows, cols))
    return out, total


def save(path, config, P: np.ndarray, quant: int = Q_INT8) -> bytes:
    """Write ``P`` (float32, the layout of ``config``) to ``path``; return the bytes written."""
    tensors, total = _tensors(config)
    assert P.shape == (total,)
    parts = [struct.pack(_HEADER, MAGIC, 1, quant, config.vocab, config.d_model, config.expand, config.d_state,
                         config.conv, config.layers, total)]
    for o, rows, cols in tensors:
        size = max(rows, 1) * cols
        block = np.asarray(P[o:o + size], dtype=np.float32)
        if quant == Q_FLOAT32 or rows == 0:
            parts.append(block.astype("<f4").tobytes())
            continue
        m = block.reshape(rows, cols)
        scale = (np.abs(m).max(axis=1) / np.float32(127)).astype(np.float32)
        safe = np.where(scale > 0, scale, np.float32(1))
        q = np.clip(np.rint(m / safe[:, None]), -127, 127).astype(np.int8)
        for r in range(rows):
            parts.append(scale[r:r + 1].astype("<f4").tobytes() + q[r].tobytes())
    raw = b"".join(parts)
    with open(path, "wb") as f:
        f.write(raw)
    return raw


def load(path, config) -> np.ndarray:
    """The float32 parameters in ``path``, checked against ``config``'s architecture."""
    with open(path, "rb") as f:
        return parse(f.read(), config, path)


def parse(raw: bytes, config, path) -> np.ndarray:
    """The float32 parameters in the weight file's bytes ``raw`` (read from ``path``)."""
    head = struct.calcsize(_HEADER)
    magic, version, quant, V, D, X, N, K, L, total = struct.unpack(_HEADER, raw[:head])
    want = (config.vocab, config.d_model, config.expand, config.d_state, config.conv, config.layers)
    if magic != MAGIC or version != 1 or (V, D, X, N, K, L) != want:
        raise ValueError(f"{path}: not pretrained weights of this architecture {want}: {(V, D, X, N, K, L)}")
    tensors, n = _tensors(config)
    P = np.zeros(n, dtype=np.float32)
    pos = head
    for o, rows, cols in tensors:
        if quant == Q_FLOAT32 or rows == 0:
            size = max(rows, 1) * cols
            P[o:o + size] = np.frombuffer(raw, dtype="<f4", count=size, offset=pos)
            pos += 4 * size
            continue
        for r in range(rows):
            scale = np.frombuffer(raw, dtype="<f4", count=1, offset=pos)[0]
            q = np.frombuffer(raw, dtype=np.int8, count=cols, offset=pos + 4)
            P[o + r * cols:o + (r + 1) * cols] = q.astype(np.float32) * np.float32(scale)
            pos += 4 + cols
    if pos != len(raw) or n != total:
        raise ValueError(f"{path}: wrong length")
    return P


@functools.lru_cache(maxsize=4)
def _shipped_bytes(name: str, sha256: str) -> bytes:
    path = SHIPPED / name
    try:
        raw = path.read_bytes()
    except OSError as exc:
        raise StatemixError(f"the pretrained weights {name} (sha256 {sha256[:16]}...) are not installed: "
                            f"{exc.strerror}") from None
    if hashlib.sha256(raw).hexdigest() != sha256:
        raise StatemixError(f"the pretrained weights {name} installed are not those the stream names "
                            f"(sha256 {sha256[:16]}...)")
    return raw


def shipped(name: str, sha256: str, config) -> np.ndarray:
    """The float32 parameters of the package's weight file ``name``, whose sha256 must be ``sha256``
    (a :class:`StatemixError` naming the file otherwise); a new array each call."""
    return parse(_shipped_bytes(name, sha256), config, name)


def start_from(network, P: np.ndarray, learning_rate: float | None = None) -> None:
    """Put the parameters ``P`` into ``network`` (a :class:`.network.Network` of their architecture),
    in the weights its coding pass reads too; ``learning_rate``: its online rate from then on (lr
    and lr_min), else the configuration's."""
    from .layout import H_LR, H_LR_MIN
    from .train import refresh_a

    network.P[:] = P
    refresh_a(network.P, network.off, network.sz, network.Aneg)
    if network.Pc.shape[0]:
        network.Pc[:] = network.P
        network.Ac[:] = network.Aneg
    if learning_rate is not None:
        network.hy[H_LR] = np.float32(learning_rate)
        network.hy[H_LR_MIN] = np.float32(learning_rate)
