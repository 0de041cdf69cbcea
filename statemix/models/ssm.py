"""ssm: an online selective state-space model (Mamba-style) over a token alphabet, trained while coding.

Model id 2.  The model predicts a softmax over ``V`` tokens; :mod:`.tokenmix` mixes it in logit space
with a frequency prior and, unless ``mixing`` is 0, with token n-gram counts and a match model (fixed
weights or learned online), and the result is coded with :mod:`statemix.coder`.  Every ``T`` tokens
(a *chunk*) the SSM trains on the chunk just coded with a few Adam iterations; with a training delay
(``Config.delay``) it trains on a second thread while the next chunk is coded with the weights as they
were.  The decoder replays the identical computation.

Tokens (``Config.tokenizer``): ``TOK_IDS`` codes the bytes themselves (V = ``vocab`` = 256; the token
interface takes any ids below ``vocab``); ``TOK_BPE`` trains a byte-level BPE vocabulary
(:mod:`statemix.tokenizer`, word pre-split, ``merges`` merges or ``default_merges(len(block))``) on the
first non-empty block, stores it in that block's code word, and codes every block as BPE tokens of
it (V = 256 + merges; the model is allocated at exactly that V when the vocabulary is known; see
:class:`Model`).  Presets: ``reference`` (bytes, the reference's one-step gradient), ``default``
(bytes, gradient through the chunk), ``bpe`` (12,288 merges, 16-token chunks, one Adam step per chunk
after the start-up schedule), all with the frequency prior only; ``mix`` (``default`` with learned
mixing of the count models and the match model: ``--model ssm``, levels 2 and 3) and ``counts`` (the
same without the SSM: level 1).

Layout: the network is :mod:`.nn` (configuration/layout/initialisation, forward, backward, Adam and
``train_chunk``; it runs position by position with no coder); the token coding loop is
:mod:`.tokenloop`; the count models and the logit-space mixing are :mod:`.tokenmix`; the record, its
checks and the presets are :mod:`.ssm_config`.  This module is the :class:`Model`: BPE framing,
kernel steps, progress, snapshots.

Determinism: float32 throughout, typed constants, summation orders written in the source, own
exp/log (:mod:`statemix._fmath`), no BLAS.  Parallel loops (``prange``) run only over independent
outputs (positions, channel blocks, parameter rows, fixed parameter blocks); the one reduction over a
partition (the gradient norm) uses a fixed block size and sums the block results in index order.  The
thread count therefore changes speed only.
"""

from __future__ import annotations

import contextlib
import math
from dataclasses import replace

import numpy as np

from .._errors import StatemixError
from .._jit import announce, threads_at_most
from .._varint import encode_varint, read_varint
from ..coder import dec_init, enc_init, finish_whole, new_state
from ..tokenizer import SPLIT_WORDS, Vocabulary, default_merges
from ..tokenizer.tables import BYTE_TOKENS, MAX_TOKEN_BYTES
from .nn.layout import TOTAL_BITS
from ..tokenizer import decode as bpe_decode
from ..tokenizer import encode as bpe_encode
from ..tokenizer import train as bpe_train
from . import tokenmix
from ._snapshot import put_back, take
from .modes import DECODE, ENCODE, LEARN
from .protocol import ModelSpec, StageStep, TraceBlock, bits_msb_first
from .steps import timed_steps
from .nn import Network
from .ssm_config import (BLOCK_SIZE_MAX, MAX_BPE_MERGES, PRESETS, TOK_BPE, TOK_IDS, Config,  # noqa: F401
                         config_for_level)
from .nn.train import hand_over, train_chunk, train_pending
from .tokenloop import STAGE_MIXED, STAGE_QUANTIZED, STAGE_SSM, code_tokens, run_range

# the kernels run_range asks for, with the seconds of their first compile (bench/compile_profile.py)
announce(code_tokens, "the ssm model's coding loop", 20)
announce(train_chunk, "the ssm model's training", 65)
announce(train_pending, "the ssm model's delayed training", 25)
announce(hand_over, "the ssm model's hand-over of a chunk", 5)

MODEL_ID = 2
PARALLEL_MIN_VOCAB = 256  # smaller vocabularies run on one thread (output is the same at any count)
# The most tokens in one kernel step (Model.step_tokens; steps are timed, see .steps):
# STEP_COST // (V + STEP_COST_TOKEN) with the SSM (256 over bytes), STEP_COUNTS with the count models
# alone; with the SSM it also bounds a traced step's stage arrays (3 x V float32 per token).
STEP_COST = 1 << 17
STEP_COST_TOKEN = 256
STEP_COUNTS = 1 << 13
#: attributes that are configuration, not state (see Model.snapshot)
_CONSTANT = frozenset({"config", "spec", "_sink", "_traced", "_stage_sink"})


def decoding_bounded(config: Config, format_version: int) -> bool:
    """Whether a stream of ``format_version`` with this record costs model work in proportion to its
    bytes (statemix.container, "Streams read only on request"): whole code words (version 3) under
    the coarse floor (``Config.floor``)."""
    return format_version >= 3 and bool(config.floor)


class Model:
    """The ssm model's state: one object per stream, fed every block of the stream in order.

    With ``tokenizer == TOK_IDS`` the model codes token ids below ``vocab`` (the byte interface codes
    bytes when ``vocab == 256``).  With ``tokenizer == TOK_BPE`` the byte interface trains a BPE
    vocabulary (:func:`statemix.tokenizer.train`, word pre-split, ``merges`` or
    ``default_merges(len(block))`` merges) on the first non-empty block it sees, whether that block is
    coded (:meth:`encode`) or stored (:meth:`learn`), and tokenizes every block with it (tokens never
    span blocks).  V = 256 + merges is known only then, so the parameters and buffers are allocated at
    that moment, at exactly that V (the initial weights depend on V through their shapes only).

    Code word of a block (BPE)::

        [first non-empty block only] varint(len(vocabulary)) + Vocabulary.to_bytes()
        varint(token count) + range-coder code word of the tokens

    An empty block codes to nothing and changes nothing.
    """

    SNAPSHOT_STATE = True  # inside cm's byte-distribution source, its snapshot copies this model too

    def __init__(self, config: Config):
        config.validate()
        self.config = config
        self.spec = ModelSpec(MODEL_ID, config.to_bytes())
        self.vocabulary = None
        self.allocated = False
        self._sink = None  # the trace hooks (see statemix.models.protocol)
        self._stage_sink = None
        self._traced: list = []
        if config.tokenizer == TOK_IDS:
            self._allocate(config.vocab)

    def _allocate(self, V: int) -> None:
        config = replace(self.config, vocab=V, tokenizer=TOK_IDS, merges=0)
        self.model_config = config  # the architecture actually run (V known)
        self.network = Network(config)
        self.counts = np.zeros(config.vocab, dtype=np.int64)
        self.lc = np.zeros(config.vocab, dtype=np.float32)
        self.rc = new_state()
        coding_bytes = self.config.tokenizer == TOK_IDS and self.config.vocab == 256
        orders = tokenmix.BYTE_ORDERS if coding_bytes else tokenmix.ORDERS
        self.mixstate = tokenmix.State(config.vocab, config.table_bits, orders, config.slots)
        self.allocated = True

    @property
    def vocab_size(self) -> int | None:
        """V, once known."""
        return self.model_config.vocab if self.allocated else None

    def _run(self, mode: int, tokens: np.ndarray, coded: np.ndarray, trace: np.ndarray, progress=None) -> int:
        # below PARALLEL_MIN_VOCAB a chunk's parallel regions are too small to pay for a second
        # thread; bytes pay since the backward pass's products run as SIMD loops, and with a
        # training delay the second thread trains beside the coding (bench/RESULTS.md, 2026-12-03)
        small = self.model_config.vocab < PARALLEL_MIN_VOCAB
        with threads_at_most(1) if small else contextlib.nullcontext():
            return self._run_block(mode, tokens, coded, trace, progress)

    def step_tokens(self) -> int:
        """The most tokens in one kernel step (see :data:`STEP_COST`)."""
        config = self.model_config
        if not config.use_ssm:
            return STEP_COUNTS
        return max(8, STEP_COST // (config.vocab + STEP_COST_TOKEN))

    def _run_block(self, mode: int, tokens: np.ndarray, coded: np.ndarray, trace: np.ndarray, progress) -> int:
        """Code, decode or learn ``tokens`` in steps; ``progress(tokens done)`` after each step."""
        if mode == ENCODE:
            enc_init(self.rc)
        elif mode == DECODE:
            dec_init(self.rc, coded)
        n = tokens.shape[0]
        step = self.step_tokens()
        bit_trace = _NO_BIT_TRACE
        if self._sink is not None and mode == ENCODE:
            bit_trace = np.zeros((n * self.token_bits(), 2))
        ts = self.mixstate.arrays()
        network = self.network
        net = network.net
        staging = self._stage_sink is not None and mode == ENCODE
        byte_ends = self._byte_ends(tokens) if staging else None
        V = self.model_config.vocab
        for start, end in timed_steps(n, step):
            stages = np.zeros((end - start, 3, V), dtype=np.float32) if staging else _NO_STAGES
            run_range(mode, tokens, coded, self.rc, net, network.acts, network.grads, network.trainer_acts,
                      self.counts, self.lc, ts, trace, bit_trace, stages, start, end)
            if staging:
                self._stage_sink(self._stage_step(tokens[start:end], byte_ends[start:end], stages))
            if progress is not None:
                progress(end)
        if bit_trace.shape[0]:
            self._traced.append(bit_trace)
        return finish_whole(self.rc, coded) if mode == ENCODE else 0

    def token_bits(self) -> int:
        """Binary decisions per token in a trace: ceil(log2 V)."""
        return max(1, (self.model_config.vocab - 1).bit_length())

    # the trace hook and ablations (statemix.models.protocol)
    def trace(self, sink) -> None:
        """Report every later encoded block to ``sink`` (a :class:`.protocol.TraceBlock`; blocks only
        learned are not reported: the mixer's distribution is not computed for them)."""
        self._sink = sink

    def trace_stages(self, sink) -> None:
        """Report every later encoded block's stage distributions to ``sink``, a
        :class:`.protocol.StageStep` per step: the SSM's softmax (with the SSM), the softmax mixed
        with the count models, and the quantized distribution the coder uses."""
        self._stage_sink = sink

    def _stage_step(self, tokens: np.ndarray, byte_ends: np.ndarray, stages: np.ndarray) -> StageStep:
        named = {"SSM softmax": stages[:, STAGE_SSM]} if self.config.use_ssm else {}
        named["mixed (SSM and count models)" if self.config.use_ssm else "mixed (count models)"] = stages[:, STAGE_MIXED]
        named["quantized (coded)"] = stages[:, STAGE_QUANTIZED]
        return StageStep(tokens.copy(), byte_ends, named)

    def _byte_ends(self, tokens: np.ndarray) -> np.ndarray:
        """The index in the block of each token's last byte."""
        if self.config.tokenizer == TOK_IDS:
            return np.arange(len(tokens))
        return np.cumsum(self.vocabulary.token_lengths()[tokens]) - 1

    def _report(self, data: bytes, tokens: np.ndarray) -> None:
        if self._sink is None or not self._traced:
            return
        bit_trace = self._traced.pop()
        self._traced.clear()
        nbits = self.token_bits()
        ends = self._byte_ends(tokens) + 1
        components = {"SSM": bit_trace[:, 1]} if self.config.use_ssm else {}
        self._sink(TraceBlock(bit_trace[:, 0], bits_msb_first(tokens, nbits), np.repeat(ends - 1, nbits),
                              len(data), components))

    def components(self) -> list[str]:
        names = ["SSM"] if self.config.use_ssm else []
        if self.config.mixing != tokenmix.MIX_PRIOR:
            names.append("count models")
            if self.config.match:
                names.append("match model")
        return names

    def ablated(self, components) -> "Model":
        """A fresh model with the named components switched off (diagnostics only: no valid stream)."""
        changes = {"SSM": dict(use_ssm=0), "count models": dict(mixing=tokenmix.MIX_PRIOR, match=0),
                   "match model": dict(match=0)}
        config = self.config
        for name in components:
            config = replace(config, **changes[name])
        return Model(config)

    # token-level interface (a tokenizer maps bytes to ids < vocab and back); ``progress`` gets tokens
    def _tokens_ok(self) -> None:
        if not self.allocated:
            raise ValueError("the vocabulary of this ssm model is not known yet")

    def encode_tokens(self, tokens: np.ndarray, limit: int, trace: np.ndarray | None = None,
                      progress=None) -> bytes | None:
        self._tokens_ok()
        tokens = np.ascontiguousarray(tokens, dtype=np.int64)
        if tokens.size and (tokens.min() < 0 or tokens.max() >= self.model_config.vocab):
            raise ValueError("token id out of range")
        out = np.empty(max(limit, 0), dtype=np.uint8)
        n = self._run(ENCODE, tokens, out, _NO_TRACE if trace is None else trace, progress)
        return None if n > limit else out[:n].tobytes()

    def decode_tokens(self, coded: bytes, count: int, progress=None) -> np.ndarray:
        self._tokens_ok()
        out = np.zeros(count, dtype=np.int64)
        self._run(DECODE, out, np.frombuffer(coded, dtype=np.uint8).copy(), _NO_TRACE, progress)
        return out

    def learn_tokens(self, tokens: np.ndarray, progress=None) -> None:
        self._tokens_ok()
        self._run(LEARN, np.ascontiguousarray(tokens, dtype=np.int64), _NO_CODED, _NO_TRACE, progress)

    def _byte_progress(self, progress, tokens: np.ndarray):
        """``progress`` in bytes for a step function counting ``tokens`` (decoded ones: filled in as they come)."""
        if progress is None or self.config.tokenizer == TOK_IDS:
            return progress
        lengths = self.vocabulary.token_lengths()
        done = [0, 0]  # tokens, bytes

        def report(end):
            done[1] += int(lengths[tokens[done[0]:end]].sum())
            done[0] = end
            progress(done[1])
        return report

    def snapshot(self, reuse=None):
        """A copy of the whole model state (into ``reuse``'s arrays, an earlier snapshot, if given)."""
        return take(self, _CONSTANT, reuse)

    def restore(self, snapshot) -> None:
        """Put ``snapshot`` back: the model behaves as if the blocks seen since had never been."""
        put_back(self, _CONSTANT, snapshot)

    # byte interface of statemix.models
    def _bytes_ok(self) -> None:
        if self.config.tokenizer == TOK_IDS and self.config.vocab != 256:
            raise ValueError("this ssm configuration codes tokens, not bytes")

    def _set_vocabulary(self, vocabulary) -> None:
        self.vocabulary = vocabulary
        self._allocate(vocabulary.size)

    def train_vocabulary(self, data: bytes):
        """The vocabulary the model trains on a first block ``data`` (a pure function of the data)."""
        n = self.config.merges or default_merges(len(data))
        return bpe_train(data, n, split=SPLIT_WORDS)

    def tokenize(self, data: bytes) -> np.ndarray:
        """Token ids of one block (int64): its bytes, or its BPE tokens once the vocabulary is known."""
        if self.config.tokenizer == TOK_IDS:
            return np.frombuffer(data, dtype=np.uint8).astype(np.int64)
        return bpe_encode(self.vocabulary, data, block_size=None).astype(np.int64)

    def encode(self, data: bytes, limit: int, trace: np.ndarray | None = None, *, progress=None,
               x86: bool = False) -> bytes | None:
        """Code ``data``; return the code word, or None if it would be longer than ``limit`` bytes.

        The model learns ``data`` either way.  ``trace`` (rows: one per token) receives the coded
        and the SSM-only probability of each token.  ``x86`` (the block is x86 code) changes nothing here.
        """
        self._bytes_ok()
        if self.config.tokenizer == TOK_IDS:
            tokens = self.tokenize(data)
            coded = self.encode_tokens(tokens, limit, trace, progress)
            self._report(data, tokens)
            return coded
        if not data:
            return b"" if limit >= 0 else None
        head = b""
        if self.vocabulary is None:
            self._set_vocabulary(self.train_vocabulary(data))
            raw = self.vocabulary.to_bytes()
            head = encode_varint(len(raw)) + raw
        tokens = self.tokenize(data)
        head += encode_varint(tokens.shape[0])
        body = self.encode_tokens(tokens, limit - len(head), trace, self._byte_progress(progress, tokens))
        self._report(data, tokens)
        return None if body is None else head + body

    def decode(self, coded: bytes, size: int, *, progress=None, x86: bool = False) -> bytes:
        """Decode ``size`` bytes from the code word ``coded``."""
        self._bytes_ok()
        if self.config.tokenizer == TOK_IDS:
            return self.decode_tokens(coded, size, progress).astype(np.uint8).tobytes()
        if size == 0:
            return b""
        pos = 0
        if self.vocabulary is None:
            n, pos = _read_varint(coded, pos)
            if pos + n > len(coded):
                raise StatemixError("corrupt stream: ssm vocabulary truncated")
            try:
                vocabulary = Vocabulary.from_bytes(coded[pos:pos + n])
            except ValueError as exc:
                raise StatemixError(f"corrupt stream: ssm vocabulary: {exc}") from None
            if vocabulary.size > self.config.max_vocab():
                raise StatemixError("corrupt stream: ssm vocabulary larger than its configuration")
            self._set_vocabulary(vocabulary)
            pos += n
        count, pos = _read_varint(coded, pos)
        if not 1 <= count <= min(size, self.max_tokens(len(coded) - pos, self.vocabulary.size)):
            raise StatemixError("corrupt stream: ssm token count out of range")
        tokens = np.zeros(count, dtype=np.int64)
        self._tokens_ok()
        self._run(DECODE, tokens, np.frombuffer(coded[pos:], dtype=np.uint8).copy(), _NO_TRACE,
                  self._byte_progress(progress, tokens))
        lengths = self.vocabulary.token_lengths()
        if int(lengths[tokens].sum()) != size:
            raise StatemixError("corrupt stream: ssm tokens do not add up to the block length")
        return bpe_decode(self.vocabulary, tokens)

    def max_tokens(self, payload_length: int, vocab: int) -> int:
        """The most tokens a code word of ``payload_length`` bytes can hold over ``vocab`` symbols
        (statemix.container, "What a payload can hold"): under the coarse floor (``Config.floor``) a
        token costs more than 2**-9 / ln 2 bits, so fewer than 2,840 fit in a byte; under the first
        floor every symbol has at least 1 of 2**TOTAL_BITS, and a token costs more than
        (vocab - 1) / (2**TOTAL_BITS ln 2) bits."""
        from ..container import SSM_COARSE_TOKENS_PER_PAYLOAD_BYTE

        if self.config.floor:
            return payload_length * SSM_COARSE_TOKENS_PER_PAYLOAD_BYTE
        return int(8 * payload_length * (1 << TOTAL_BITS) * math.log(2) / max(vocab - 1, 1)) + 1

    def max_raw_length(self, payload_length: int) -> int:
        """The most bytes a block's code word of ``payload_length`` bytes can hold (statemix.container):
        its tokens times the longest token's bytes (before a BPE vocabulary is read, the longest any
        vocabulary may have; its token count is checked again once it is read)."""
        if self.config.tokenizer == TOK_IDS:
            return self.max_tokens(payload_length, self.config.vocab)
        vocab = self.vocabulary.size if self.vocabulary is not None else BYTE_TOKENS
        return self.max_tokens(payload_length, vocab) * MAX_TOKEN_BYTES

    def max_learned_length(self, payload_length: int) -> int | None:
        """The most bytes a learned block of ``payload_length`` bytes may hold under the coarse floor:
        what a code word of that length holds in tokens, counted in bytes (a block has no more
        tokens than bytes), so learning costs no more model work per payload byte than decoding;
        under the first floor, no bound of the model's own."""
        return self.max_tokens(payload_length, BYTE_TOKENS) if self.config.floor else None

    def learn(self, data: bytes, *, progress=None, x86: bool = False) -> None:
        """Update the model with ``data`` without coding it (a block stored by other means), exactly as
        :meth:`encode` would.  ``x86`` changes nothing here."""
        self._bytes_ok()
        if self.config.tokenizer == TOK_BPE:
            if not data:
                return
            if self.vocabulary is None:
                self._set_vocabulary(self.train_vocabulary(data))
        tokens = self.tokenize(data)
        self.learn_tokens(tokens, self._byte_progress(progress, tokens))


def _read_varint(raw: bytes, pos: int) -> tuple[int, int]:
    return read_varint(raw, pos, 5, StatemixError, "corrupt stream: ssm block header")


_NO_TRACE = np.zeros((0, 2), dtype=np.float64)
_NO_CODED = np.zeros(0, dtype=np.uint8)
_NO_BIT_TRACE = np.zeros((0, 2), dtype=np.float64)
_NO_STAGES = np.zeros((0, 3, 1), dtype=np.float32)
