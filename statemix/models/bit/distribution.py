"""A byte distribution as inputs of the bitwise mixer: the ssm model's, SSM and count models included.

The ssm model predicts a whole byte at once: a distribution over the 256 byte values, from its count
models (byte n-grams and a match model, mixed in logit space with learned weights) and, with
``SOURCE_SSM`` or ``SOURCE_WIDE_SSM``, the online-trained SSM (:mod:`statemix.models.tokenloop`).  cm
codes bits, so it reads that distribution bit by bit, as cmix and paq8px read their LSTM's:

- before a byte's first bit (:func:`source_begin`): the source's coded distribution, integer
  frequencies summing to 2**30 exactly as the ssm model would code the byte with, and their prefix
  sums ``cum`` (int64, 257 entries);
- per bit j, with the partial byte ``c0 = 1 b_0 .. b_{j-1}`` (:func:`source_input`): the byte values
  consistent with it are ``lo .. lo + w - 1`` with ``w = 2**(8 - j)``, ``lo = (c0 - 2**j) w``, and
  ``P(bit = 1) = (cum[lo + w] - cum[lo + w/2]) / (cum[lo + w] - cum[lo])``: in units of 2**-16,
  clamped to [16, 65520] (an exact 0 or 1 never reaches the mixer), its stretch is the mixer input;
- per bit, from model revision 6, the most likely byte consistent with ``c0``
  (:func:`source_expected`) selects mixer 3's weights while the match model has no prediction
  (:mod:`.mixer`);
- after the byte (:func:`source_learn`): the source learns it exactly as the ssm model's encoder
  does (the decoder replays it: no state is stored), its training on cm's thread alone (no
  parallel region: the passes are too short to share, and cm's loops then load the training
  kernels from the cache instead of compiling them again).

Every frequency is below 2**30 and every frequency is at least 1 (the quantizer's floor), so the
division is exact integer arithmetic on positive numbers, the same on every machine; the source's
own float32 arithmetic follows the determinism rules of the ssm model.

Sources, by the byte of cm's record: 0 none, ``SOURCE_COUNTS`` (1) the count models alone (the ssm
preset "counts"), ``SOURCE_SSM`` (2) the SSM with them (the preset "mix" with label smoothing 0.12
and two Adam steps per 32 bytes), ``SOURCE_WIDE_SSM`` (3) a wider SSM with them (d_model 64, no label
smoothing, one Adam step per 16 bytes), ``SOURCE_PRETRAINED_SSM`` (4) that SSM started from the
pretrained weights :data:`PRETRAINED` names (a file shipped in the package, by name and sha256:
:func:`..nn.pretrained.shipped`) and fine-tuned online at a tenth of source 3's learning rate,
``SOURCE_PRETRAINED_SSM_V2`` (5) the same from the second weight file (trained longer, on a wider
corpus: data/README.md).
Memory: the ssm model's (2**table_bits n-gram buckets of 12 + 4 * slots bytes: up to model revision
6 2**20 of 32 slots, 140 MiB; from revision 7 2**21 of 16, 152 MiB (cm.Config.source_table_bits);
plus 20 MiB of the count models' history and match table, and the SSM's parameters and activations).
"""

from __future__ import annotations

from collections import namedtuple
from dataclasses import replace

import numpy as np

from ..._fmath import LANES
from ..._jit import kernel, variant
from .. import ssm_config
from ..nn.pretrained import shipped, start_from
from ..ssm import Model as SsmModel
from ..tokenloop import learn_token_serial, learn_token_untrained, predict_token, predict_token_no_ssm
from ..tokenmix import SLOTS

SOURCE_NONE, SOURCE_COUNTS, SOURCE_SSM, SOURCE_WIDE_SSM, SOURCE_PRETRAINED_SSM, SOURCE_PRETRAINED_SSM_V2 = range(6)
PRESETS = {SOURCE_COUNTS: "counts", SOURCE_SSM: "mix", SOURCE_WIDE_SSM: "mix", SOURCE_PRETRAINED_SSM: "mix",
           SOURCE_PRETRAINED_SSM_V2: "mix"}
NAMES = {SOURCE_COUNTS: "byte distribution (count models)", SOURCE_SSM: "byte distribution (SSM and count models)",
         SOURCE_WIDE_SSM: "byte distribution (wide SSM and count models)",
         SOURCE_PRETRAINED_SSM: "byte distribution (pretrained SSM and count models)",
         SOURCE_PRETRAINED_SSM_V2: "byte distribution (pretrained SSM v2 and count models)"}

#: source -> (weight file in statemix/models/pretrained/, its sha256): the SSM's starting weights.
#: A file's bytes never change under its name; new weights are a new file and a new source.
PRETRAINED = {SOURCE_PRETRAINED_SSM: ("ssm-v1.bin", "0f3218fdbc2a2eb871dd4c393e0b445d5f43a44623e9c424666e59222fb7f3b5"),
              SOURCE_PRETRAINED_SSM_V2: ("ssm-v2.bin", "6b3e9e4415d8844b041e6ccd31bcd79d06133ab44519a6ebac6d8f28e37a5dac")}

#: The arrays the kernels take: the ssm network's (net, acts, grads), the count models' (counts, lc,
#: ts), scratch for one byte (ex: the coded softmax, freqs, lanes), the prefix sums ``cum`` and
#: ``at`` (one int64: the network position of the byte being coded).
Arrays = namedtuple("Arrays", "net acts grads counts lc ts ex freqs lanes cum at")


#: what a source keeps of its ssm preset as it was when the source got its id, and where it differs
#: from it: cm's record names the source, not its hyper-parameters, so a later retuning of the presets
#: must not reach old streams (a retuned source needs a new id; tests/test_models.py pins each
#: source's whole ssm record)
PINNED = {SOURCE_SSM: dict(smoothing=0.12, delay=0, chunk=32, iters_c=2),
          SOURCE_WIDE_SSM: dict(delay=0, d_model=64),
          SOURCE_PRETRAINED_SSM: dict(delay=0, d_model=64, lr=0.0003, lr_min=0.0003)}
PINNED[SOURCE_PRETRAINED_SSM_V2] = PINNED[SOURCE_PRETRAINED_SSM]  # the same network and fine-tuning, other weights


def source_config(source: int, table_bits: int, slots: int = SLOTS) -> ssm_config.Config:
    """The ssm configuration of ``source`` with 2**``table_bits`` n-gram buckets of ``slots`` pairs.
    Its frequencies keep the first floor: they become cm's byte distribution, not a code word (cm's
    own floor bounds cm's code words)."""
    return replace(ssm_config.PRESETS[PRESETS[source]], table_bits=table_bits, slots=slots, floor=0,
                   **PINNED.get(source, {}))


class Source:
    """The state of one byte-distribution source: an ssm model over bytes, run one byte at a time."""

    SNAPSHOT_STATE = True  # a model's snapshot copies this object's arrays (models._snapshot)

    def __init__(self, source: int, table_bits: int, slots: int = SLOTS):
        self.model = SsmModel(source_config(source, table_bits, slots))
        if source in PRETRAINED:
            start_from(self.model.network, shipped(*PRETRAINED[source], self.model.model_config))
        self.ex = np.zeros(256, dtype=np.float32)
        self.freqs = np.zeros(256, dtype=np.int32)
        self.lanes = np.zeros(LANES, dtype=np.float32)
        self.cum = np.zeros(257, dtype=np.int64)
        self.at = np.zeros(1, dtype=np.int64)

    @property
    def uses_ssm(self) -> bool:
        return bool(self.model.model_config.use_ssm)

    def arrays(self) -> Arrays:
        model = self.model
        network = model.network
        return Arrays(network.net, network.acts, network.grads, model.counts, model.lc, model.mixstate.arrays(),
                      self.ex, self.freqs, self.lanes, self.cum, self.at)


def memory_bytes(source: int, table_bits: int, slots: int = SLOTS) -> int:
    """An upper bound of a source's memory, in bytes."""
    return source_config(source, table_bits, slots).memory_bytes() if source else 0


@kernel(inline=True)
def source_begin(src):
    """Compute the distribution of the next byte and its prefix sums (before its first bit)."""
    src.at[0] = predict_token(src.net, src.acts, src.lc, src.ts, src.ex, src.freqs, src.lanes)
    c = np.int64(0)
    for v in range(256):
        src.cum[v] = c
        c += np.int64(src.freqs[v])
    src.cum[256] = c


@kernel(inline=True)
def _consistent(c0, bit):
    """The byte values consistent with the partial byte ``c0`` (bit ``bit``): the first, and how many."""
    width = np.int64(1) << (8 - bit)
    return (c0 - (np.int64(1) << bit)) << (8 - bit), width


@kernel(inline=True)
def source_input(cum, c0, bit, lut):
    """The stretched P(next bit = 1) of the distribution (``cum``: its prefix sums, ``Arrays.cum``),
    given the partial byte ``c0`` (bit ``bit``)."""
    lo, width = _consistent(c0, bit)
    low = cum[lo]
    high = cum[lo + width]
    p = ((high - cum[lo + (width >> 1)]) << 16) // (high - low)
    return lut[max(16, min(65520, p)) >> 4]


@kernel(inline=True)
def source_expected(cum, c0, bit):
    """The byte the distribution finds most likely among those consistent with the partial byte
    ``c0`` (bit ``bit``), the lowest of equals: a mixer selector (:mod:`.mixer`, mixer 3)."""
    lo, width = _consistent(c0, bit)
    best = lo
    most = cum[lo + 1] - cum[lo]
    for byte in range(lo + 1, lo + width):
        frequency = cum[byte + 1] - cum[byte]
        if frequency > most:
            best = byte
            most = frequency
    return best


@kernel(inline=True)
def source_learn(src, byte):
    """Learn the coded ``byte`` (after its last bit)."""
    learn_token_serial(src.net, src.acts, src.grads, src.acts, src.counts, src.lc, src.ts, src.ex, src.at[0], byte,
                       True, True)


#: the two steps for a source without the SSM, and for none (see :data:`.tokenloop.learn_token_untrained`)
source_begin_no_ssm = variant(source_begin, "no_ssm", predict_token=predict_token_no_ssm)
source_learn_no_ssm = variant(source_learn, "no_ssm", learn_token_serial=learn_token_untrained)
