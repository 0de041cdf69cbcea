"""The context kinds' names: data only (no numba), so :mod:`statemix.models.presets` can name its
components cheaply.  What each kind hashes, and its salt, is in :mod:`.contexts`; a kind's id is its
place in :data:`NAMES` and never changes (streams record ids).
"""

from __future__ import annotations

#: context kind id -> name, in id order (the order of the first records: see cm.Config)
NAMES = ("order 2", "order 3", "order 4", "order 6", "word", "order 5", "word pair", "sparse", "order 8",
         "order 1 history", "word trio", "skip word", "above", "column", "indirect 1", "indirect 2", "markup",
         "classes", "word and classes", "sparse 2", "line start", "record above", "record rows",
         "record neighbours", "record column", "image", "image rows", "pixels",
         "pixels wide", "gray gradient", "gray above", "gray vertical", "x86 instruction", "x86 opcodes",
         "letters", "word opener", "markup name", "word in markup", "name position",
         "last word", "token", "sentence", "next word", "emphasis", "class runs", "runs order 2", "classes order 2",
         "line and markup", "classes and last word", "line and word", "markup order 3", "line and classes",
         "runs and last word", "cased word pair", "shape order 2", "runs order 3", "sixteen runs", "token pair",
         "word two back", "word and runs", "column and classes")
#: context kind name -> id
IDS = {name: kind for kind, name in enumerate(NAMES)}
