"""Byte-level BPE tokens: training (:mod:`.training`), encoding and decoding (:mod:`.bpe`), and the
vocabulary with its serialized format (:mod:`.vocab`).

Everything here is integer arithmetic, so every result is the same on every machine and at every
thread count.

:mod:`.tables` holds the limits, byte classes and the merge-table kernels both sides share.
"""

from .bpe import decode, encode
from .training import canonical_order, default_merges, train
from .tables import (BLOCK_SIZE, BYTE_TOKENS, FORMAT, ID_BITS, MAX_MERGES, MAX_TOKEN_BYTES, MAX_TRAIN_BYTES,
                     SPLIT_NONE, SPLIT_WORDS)
from .vocab import Vocabulary

__all__ = [
    "BLOCK_SIZE", "MAX_MERGES", "MAX_TOKEN_BYTES", "SPLIT_NONE", "SPLIT_WORDS", "Vocabulary",
    "canonical_order", "decode", "default_merges", "encode", "train",
]
