"""Byte-level BPE tokens: training and encoding (:mod:`.bpe`), the vocabulary and its format (:mod:`.vocab`).

Everything here is integer arithmetic, so every result is the same on every machine and at every
thread count.

:mod:`.tables` holds the limits, byte classes and the merge-table kernels both sides share.
"""

from .bpe import canonical_order, decode, default_merges, encode, train
from .tables import (BLOCK_SIZE, BYTE_TOKENS, FORMAT, ID_BITS, MAX_MERGES, MAX_TOKEN_BYTES, MAX_TRAIN_BYTES,
                     SPLIT_NONE, SPLIT_WORDS)
from .vocab import Vocabulary

__all__ = [
    "BLOCK_SIZE", "MAX_MERGES", "MAX_TOKEN_BYTES", "SPLIT_NONE", "SPLIT_WORDS", "Vocabulary",
    "canonical_order", "decode", "default_merges", "encode", "train",
]
