"""The SSM network as an object: its arrays, and running it token by token with no coding loop.

:class:`Network` allocates and initialises every array of one network (see :mod:`.layout`) for a
config object with the architecture and training fields of ``statemix.models.ssm_config.Config``.
Use it position by position::

    probs = network.predict()          # P(next token), float32 (V,), valid until the next call
    network.observe(token)             # the token that came; trains at the end of each chunk

or pass :attr:`Network.net` (the :data:`.layout.Net` tuple), :attr:`acts` and :attr:`grads` to
the kernels of :mod:`.forward`, :mod:`.backward` and :mod:`.train` from another kernel (the ssm
model's token coding loop does so).  The same token sequence always gives the same bits, at any
thread count and in any number of calls.
"""

from __future__ import annotations

import numpy as np

from .forward import forward_position
from .layout import (ADAM_BLOCK, LANES, ST_SIZE, Net, hyper, init_params, layout, new_activations,
                     new_gradients, sizes)
from .train import begin_position, coding_weights, end_position, refresh_a


class Network:
    """One SSM network: parameters, Adam moments, run state, one chunk of activations and gradients."""

    SNAPSHOT_STATE = True  # a model's snapshot copies this object's arrays (models._snapshot)

    def __init__(self, config):
        self.off, total = layout(config)
        self.sz = sizes(config)
        self.hy = hyper(config)
        self.P = init_params(config)
        self.G = np.zeros(total, dtype=np.float32)
        self.M = np.zeros(total, dtype=np.float32)
        self.W = np.zeros(total, dtype=np.float32)
        E = config.d_model * config.expand
        self.Aneg = np.zeros((config.layers, config.d_state, E), dtype=np.float32)
        refresh_a(self.P, self.off, self.sz, self.Aneg)
        self.st = np.zeros(ST_SIZE, dtype=np.int64)
        self.sf = np.ones(2, dtype=np.float32)
        self.partial = np.zeros((total + ADAM_BLOCK - 1) // ADAM_BLOCK, dtype=np.float32)
        self.saved_h = np.zeros((config.layers, config.d_state, E), dtype=np.float32)
        self.saved_x = np.zeros((config.layers, config.conv - 1, E), dtype=np.float32)
        self.tin = np.zeros(config.chunk, dtype=np.int64)
        self.tout = np.zeros(config.chunk, dtype=np.int64)
        self.acts = new_activations(config)
        self.grads = new_gradients(config)
        # the delayed trainer's inputs and the coding pass's weights (see .layout; empty without a delay)
        delayed = config.delay > 0
        self.Pc = self.P.copy() if delayed else np.zeros(0, dtype=np.float32)
        self.Ac = self.Aneg.copy() if delayed else np.zeros((0, 0, 0), dtype=np.float32)
        self.tin_t = np.zeros(config.chunk if delayed else 0, dtype=np.int64)
        self.tout_t = np.zeros(config.chunk if delayed else 0, dtype=np.int64)
        self.acts_t = new_activations(config) if delayed else None
        self._lanes = np.empty(LANES, dtype=np.float32)
        self._t = -1

    @property
    def net(self) -> Net:
        """The arrays as the kernels take them (views of this object's arrays, not copies)."""
        return Net(self.P, self.G, self.M, self.W, self.Aneg, self.off, self.sz, self.hy, self.st, self.sf,
                   self.partial, self.saved_h, self.saved_x, self.tin, self.tout, self.Pc, self.Ac, self.tin_t,
                   self.tout_t)

    @property
    def trainer_acts(self):
        """The activations the delayed trainer works in (the coding pass's own without a delay)."""
        return self.acts if self.acts_t is None else self.acts_t

    def predict(self) -> np.ndarray:
        """P(next token) after the tokens observed so far (float32, V; overwritten by later calls)."""
        net = self.net
        self._t = t = begin_position(net)
        weights = coding_weights.py_func(net)  # plain Python: a kernel hands no uncounted array back
        forward_position(*weights, self.off, self.sz, self.acts, self.tin, t, self._lanes)
        return self.acts.probs[t]

    def observe(self, token: int, train: bool = True) -> None:
        """Take the token that followed the last :meth:`predict`; train at the end of a chunk."""
        if self._t < 0:
            raise ValueError("observe() needs a predict() first")
        end_position(self.net, self.acts, self.grads, self.trainer_acts, self._t, np.int64(token), train)
        self._t = -1
