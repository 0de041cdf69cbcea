"""Snapshots of a model's whole state: copies of every array and of the Python-level state.

A model's state is its instance attributes: numpy arrays, tuples of arrays, plain values and state
objects whose own attributes are the same kinds of thing (e.g. the count models' ``State``).
:func:`take` copies all of it except the names a model lists as constant (configuration and shared
read-only tables); :func:`put_back` makes the model's attributes equal to the copy again, writing
into the model's existing arrays where shapes agree (so kernels holding views still see the
model's arrays) and dropping attributes that did not exist when the snapshot was taken (e.g. the
buffers a BPE model allocates with its first block).  Immutable values (ints, the frozen
``Vocabulary``) are shared, not copied.
"""

from __future__ import annotations

import numpy as np

_ABSENT = object()


class Snapshot:
    """A copy of one model's state, opaque to callers: pass it to the model's ``restore``."""

    __slots__ = ("owner", "state")

    def __init__(self, owner: type, state: dict):
        self.owner = owner
        self.state = state


def _copy_array(value: np.ndarray, old) -> np.ndarray:
    fits = isinstance(old, np.ndarray) and old.shape == value.shape and old.dtype == value.dtype
    target = old if fits else np.empty_like(value, order="C")
    np.copyto(target, value)
    return target


def _copy(value, old=_ABSENT):
    if isinstance(value, np.ndarray):
        return _copy_array(value, old)
    if isinstance(value, tuple):
        olds = old if isinstance(old, tuple) and len(old) == len(value) else (_ABSENT,) * len(value)
        items = [_copy(v, o) for v, o in zip(value, olds)]
        return type(value)(*items) if hasattr(value, "_fields") else tuple(items)  # keep named tuples
    if isinstance(value, list):
        return [_copy(v) for v in value]
    if hasattr(value, "__dict__") and getattr(type(value), "SNAPSHOT_STATE", False):
        fields = _copy_dict(vars(value), vars(old) if type(old) is type(value) else {})
        copy = old if type(old) is type(value) else object.__new__(type(value))
        vars(copy).clear()
        vars(copy).update(fields)
        return copy
    return value


def _copy_dict(values: dict, olds: dict, skip=()) -> dict:
    return {name: _copy(value, olds.get(name, _ABSENT)) for name, value in values.items() if name not in skip}


def take(model, skip, reuse: Snapshot | None = None) -> Snapshot:
    """Copy ``model``'s state (all attributes but ``skip``), into ``reuse``'s arrays where they fit."""
    olds = reuse.state if reuse is not None and reuse.owner is type(model) else {}
    return Snapshot(type(model), _copy_dict(vars(model), olds, skip))


def put_back(model, skip, snapshot: Snapshot) -> None:
    """Make ``model``'s state equal to ``snapshot`` again (the snapshot stays valid)."""
    if not isinstance(snapshot, Snapshot) or snapshot.owner is not type(model):
        raise TypeError(f"not a snapshot of a {type(model).__name__}")
    current = vars(model)
    for name in [n for n in current if n not in skip and n not in snapshot.state]:
        del current[name]
    for name, value in snapshot.state.items():
        current[name] = _copy(value, current.get(name, _ABSENT))
