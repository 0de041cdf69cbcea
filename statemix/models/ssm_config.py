"""The ssm model's configuration: the stream record, its checks, the presets and their description.

Record (``Config.to_bytes``, little-endian, 68 bytes; struct format ``_FMT_ALL``)::

    preset u8 | vocab - 1 u16 | d_model, expand, d_state, conv, layers, chunk, bptt, iters_a u8 |
    chunks_a u16 | iters_b u8 | chunks_b u16 | iters_c, channel_block u8 |
    lr, beta1, beta2, adam_eps, clip, smoothing, prior, lr_min f32 | seed u32 | lr_half f32 |
    tokenizer u8 | merges u16 | mixing, use_ssm, match, calibrate, table_bits u8 | delay u8 | floor u8

A record of 67 bytes (written before ``floor`` existed) reads as ``floor`` = 0, one of 66 bytes
(before ``delay``) as ``delay`` = 0 and ``floor`` = 0.

:meth:`Config.from_bytes` checks every field: the structural ranges of :meth:`Config.validate`
(what a model can be built with) and, for the fields that size memory, no more than the largest
value any preset writes (``_RECORD_MAX``), so a corrupt record is refused before any allocation.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass, replace

import numpy as np

from ..tokenizer import default_merges
from . import presets, tokenmix
from .protocol import memory_bound_mib
from .nn.layout import layout

_FMT = "<BHBBBBBBBBHBHBBffffffffI"
_FMT_66 = _FMT + "fBHBBBBB"  # + lr_half, tokenizer, merges, tokenmix options
_FMT_67 = _FMT_66 + "B"  # + delay
_FMT_ALL = _FMT_67 + "B"  # + floor
TOK_IDS, TOK_BPE = 0, 1  # Config.tokenizer
MAX_BPE_MERGES = 65536 - 256  # V = 256 + merges must stay <= 65536
BLOCK_SIZE_MAX = 1 << 24  # largest block the container hands a model
PRESETS = {}  # name -> Config, filled below from statemix.models.presets.SSM_PRESETS


@dataclass(frozen=True)
class Config:
    """Options of the ssm model; all change the output and are recorded in the stream header.

    ``preset``: which named preset this started from (1 reference, 2 default, 3 bpe, 4 mix,
    5 counts, 0 custom; informative).
    ``vocab``: V, the token alphabet (256 for bytes).  ``d_model``, ``expand`` (inner width E =
    expand * d_model), ``d_state`` (N), ``conv`` (K), ``layers`` (L): the architecture.
    ``chunk``: T, tokens per training chunk.  ``bptt``: 1 = gradients flow through the recurrence and
    the conv within the chunk, 0 = one step deep (the reference).  Schedule: ``iters_a`` Adam
    iterations for the first ``chunks_a`` chunks, ``iters_b`` for the next ``chunks_b``, then
    ``iters_c``.  ``channel_block``: channels per parallel task of the scan (a divisor of E; changes
    nothing but the partition, recorded so the work split never depends on the machine).
    ``lr``, ``beta1``, ``beta2``, ``adam_eps``: Adam.  ``lr_min`` and ``lr_half``: the learning rate
    at chunk c is lr_min + (lr - lr_min) * lr_half / (lr_half + c) when lr_half > 0 (encoded in
    ``lr_min``'s sign: see ``lr_half`` below).  ``clip``: global gradient norm.  ``smoothing``: label
    smoothing.  ``prior``: weight of the frequency prior log(1 + count) (times the entropy-adaptive
    scale).  ``seed``: initialisation.
    ``tokenizer``: ``TOK_IDS`` (0: the tokens are the bytes, or ids given to the token interface) or
    ``TOK_BPE`` (1: a BPE vocabulary trained on the first non-empty block and stored in its code word;
    ``vocab`` must then be 256).  ``merges``: with ``TOK_BPE``, the merges to train (0: the tokenizer's
    ``default_merges(len(first block))``; training may stop earlier on a small block); else 0.
    Count models and mixing (:mod:`.tokenmix`): ``mixing`` (0 SSM + frequency prior, 1 the reference's
    fixed-weight n-grams, 2 learned), ``use_ssm`` (0: no SSM, the count models alone), ``match``
    (the token match model, learned mixing only), ``calibrate`` (learned inverse temperature,
    learned mixing only), ``table_bits`` (log2 of the n-gram buckets), ``slots`` ((token, count) pairs
    per bucket: 32 for every ssm stream, which does not record it; cm's byte-distribution source sets it).
    ``delay``: chunks between coding a chunk and training on it, 0 or 1 (:mod:`.nn.train`): with 1,
    the training of a chunk runs on a second thread while the next chunk is coded.
    ``floor``: the coded frequencies' floor (:func:`statemix.quantize.least_frequency`): 0, every
    token at least 1 of 2**30 (the first records); 1, the tokens other than the most probable at
    least 2**-9 of the total, so that a code word byte holds fewer than 2,840 tokens
    (statemix.container, "What a payload can hold").
    """

    preset: int = 2
    vocab: int = 256
    d_model: int = 32
    expand: int = 2
    d_state: int = 16
    conv: int = 4
    layers: int = 2
    chunk: int = 32
    bptt: int = 1
    iters_a: int = 8
    chunks_a: int = 10
    iters_b: int = 4
    chunks_b: int = 20
    iters_c: int = 2
    channel_block: int = 16
    lr: float = 0.002
    beta1: float = 0.9
    beta2: float = 0.999
    adam_eps: float = 1e-8
    clip: float = 5.0
    smoothing: float = 0.12
    prior: float = 0.3
    lr_min: float = 0.002
    lr_half: float = 0.0
    seed: int = 42
    tokenizer: int = 0
    merges: int = 0
    mixing: int = 0
    use_ssm: int = 1
    match: int = 0
    calibrate: int = 0
    table_bits: int = 12
    delay: int = 0
    floor: int = 1
    slots: int = tokenmix.SLOTS

    def to_bytes(self) -> bytes:
        return struct.pack(
            _FMT_ALL, self.preset, self.vocab - 1, self.d_model, self.expand, self.d_state,
            self.conv, self.layers, self.chunk, self.bptt, self.iters_a, self.chunks_a, self.iters_b,
            self.chunks_b, self.iters_c, self.channel_block, self.lr, self.beta1, self.beta2,
            self.adam_eps, self.clip, self.smoothing, self.prior, self.lr_min, self.seed, self.lr_half,
            self.tokenizer, self.merges, self.mixing, self.use_ssm, self.match, self.calibrate,
            self.table_bits, self.delay, self.floor)

    @classmethod
    def from_bytes(cls, raw: bytes) -> "Config":
        if len(raw) == struct.calcsize(_FMT_66):
            raw += b"\0"  # no delay
        if len(raw) == struct.calcsize(_FMT_67):
            raw += b"\0"  # the first floor
        if len(raw) != struct.calcsize(_FMT_ALL):
            raise ValueError("ssm model configuration has the wrong length")
        v = struct.unpack(_FMT_ALL, raw)
        config = cls(v[0], v[1] + 1, *v[2:15], *(float(x) for x in v[15:23]), lr_half=float(v[24]),
                     seed=v[23], tokenizer=v[25], merges=v[26], mixing=v[27], use_ssm=v[28],
                     match=v[29], calibrate=v[30], table_bits=v[31], delay=v[32], floor=v[33])
        config.validate()
        too_big = [name for name, top in _RECORD_MAX.items() if getattr(config, name) > top]
        if too_big:
            raise ValueError(f"ssm model configuration larger than any preset's ({', '.join(too_big)})")
        return config

    def validate(self) -> None:
        E = self.d_model * self.expand
        ok = (self.preset <= 5 and 2 <= self.vocab <= 65536 and 1 <= self.d_model <= 256
              and 1 <= self.expand <= 8 and 1 <= self.d_state <= 64 and 1 <= self.conv <= 8
              and 1 <= self.layers <= 8 and 1 <= self.chunk <= 255 and self.bptt in (0, 1)
              and 1 <= self.iters_a <= 64 and 1 <= self.iters_b <= 64 and 1 <= self.iters_c <= 64
              and 1 <= self.channel_block <= E and E % self.channel_block == 0
              and self.tokenizer in (TOK_IDS, TOK_BPE) and 0 <= self.merges <= MAX_BPE_MERGES
              and (self.vocab == 256 if self.tokenizer == TOK_BPE else self.merges == 0)
              and self.mixing in (tokenmix.MIX_PRIOR, tokenmix.MIX_REFERENCE, tokenmix.MIX_LEARNED)
              and self.use_ssm in (0, 1) and self.match in (0, 1) and self.calibrate in (0, 1)
              and 10 <= self.table_bits <= 21 and self.delay in (0, 1) and self.floor in (0, 1)
              and 1 <= self.slots <= tokenmix.SLOTS)
        floats = (self.lr, self.beta1, self.beta2, self.adam_eps, self.clip, self.smoothing,
                  self.prior, self.lr_min, self.lr_half)
        ok = ok and all(np.isfinite(floats))
        ok = ok and (0 < self.lr <= 1 and 0 <= self.beta1 < 1 and 0 <= self.beta2 < 1
                     and 0 < self.adam_eps <= 1 and 0 < self.clip <= 1e6 and 0 <= self.smoothing < 1
                     and 0 <= self.prior <= 100 and 0 < self.lr_min <= 1 and 0 <= self.lr_half <= 1e9)
        if not ok:
            raise ValueError(f"ssm model configuration out of range: {self}")

    def describe(self) -> str:
        """In words, e.g. "ssm level 2 (SSM: 2 layers of width 32 over bytes, ...)"."""
        name = _preset_name(self)
        tokens = ("bytes" if self.tokenizer == TOK_IDS and self.vocab == 256 else
                  f"{self.vocab} token ids" if self.tokenizer == TOK_IDS else
                  f"BPE tokens ({self.merges or 'default'} merges trained on the first block)")
        if self.use_ssm:
            parts = [f"SSM of {self.layers} layers, width {self.d_model} (state {self.d_state}) over {tokens}"
                     + (", trained one chunk behind the coding" if self.delay else "")]
        else:
            parts = [f"count models only over {tokens}"]
        mixing = {tokenmix.MIX_PRIOR: "frequency prior", tokenmix.MIX_REFERENCE: "fixed-weight n-grams",
                  tokenmix.MIX_LEARNED: "learned mixing of n-gram counts"}[self.mixing]
        if self.mixing != tokenmix.MIX_PRIOR:
            mixing += f" in 2**{self.table_bits} buckets"
        parts.append(mixing + (" and a match model" if self.match else ""))
        if not self.floor:
            parts.append("the first frequency floor")
        parts.append(f"at most {memory_bound_mib(self.memory_bytes())} of memory")
        return f"ssm {name or 'custom'} ({', '.join(parts)})"

    def max_vocab(self) -> int:
        """The largest V this configuration can reach (V itself unless a BPE vocabulary is trained)."""
        if self.tokenizer == TOK_BPE:
            return 256 + (self.merges or default_merges(BLOCK_SIZE_MAX))
        return self.vocab

    def memory_bytes(self) -> int:
        """Upper bound of the model's memory, in bytes."""
        if self.tokenizer == TOK_BPE:
            # the model at its largest V, plus the tokenizer's working memory on a block
            return (replace(self, vocab=self.max_vocab(), tokenizer=TOK_IDS, merges=0).memory_bytes()
                    + 32 * BLOCK_SIZE_MAX)
        _, total = layout(self)
        V, D, E, N, K, L, T = (self.vocab, self.d_model, self.d_model * self.expand, self.d_state,
                               self.conv, self.layers, self.chunk)
        acts = (3 * (L + 1) * T * D + L * (T + K) * E + L * T * (8 * E + 2 * N + 1)
                + L * (T + 1) * N * E + 2 * L * T * N * E + 3 * T * V)
        copies = self.delay * (total + acts)  # the coding weights and the trainer's activations
        return 4 * (4 * total + acts + copies) + 64 * V + tokenmix.State.memory_bytes(V, self.table_bits, self.slots)


PRESETS.update({name: Config(**fields) for name, fields in presets.SSM_PRESETS.items()})


def config_for_level(level: int, size_hint: int | None) -> Config:
    """The ssm configuration of ``--level`` ``level`` for an input of ``size_hint`` bytes (None: unknown)."""
    name, extra = presets.SSM_LEVELS[level]
    config = PRESETS[name]
    return replace(config, table_bits=presets.ssm_table_bits(config.table_bits + extra, size_hint))


def _preset_name(config: Config) -> str | None:
    """"level N" or "preset NAME" when ``config`` is what a preset writes (a full-size preset first,
    then one sized down to some input)."""
    hints = (None, *(1 << b for b in range(0, 40)))
    # compare records (the floats of a parsed record are float32-rounded); a record written before the
    # floor existed names the preset it was
    record = replace(config, floor=1).to_bytes()
    levels = [str(level) for level in presets.LEVELS if config_for_level(level, None).to_bytes() == record]
    levels = levels or [str(level) for level in presets.LEVELS
                        if any(config_for_level(level, hint).to_bytes() == record for hint in hints)]
    if levels:
        return "level " + " or ".join(levels)
    names = [name for name, preset in PRESETS.items() if preset.to_bytes() == record]
    return f"preset {names[0]}" if names else None


#: The largest value of each size field over every preset (levels included): a stream record
#: beyond these is refused as corrupt before anything is allocated.
_RECORD_MAX = {name: max(getattr(c, name) for c in (*PRESETS.values(),
                                                     *(config_for_level(level, None) for level in presets.LEVELS)))
               for name in ("vocab", "d_model", "expand", "d_state", "conv", "layers", "chunk", "merges",
                            "table_bits")}
