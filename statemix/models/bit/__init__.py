"""bit: the components of the bitwise model (cm), one job per module, in data-flow order.

:mod:`.tables` (stretch/squash, the counter rule, bit-history states), :mod:`.contexts` (hashed
contexts and their bit-history buckets), :mod:`.match` (the match model), :mod:`.mixer` (weight
sets, the final mixer), :mod:`.sse` (the APM stages).  :mod:`statemix.models.cm` runs them per bit;
each module's docstring gives its quantities and their fixed-point scales.
"""
