"""The share of level 3's pretrained SSM (issue 49): level 3 with its byte-distribution source as shipped
and with that source changed, on the same files.

    PYTHONPATH=. taskset -c 1 python bench/pretrain_share.py MODE FILE...

MODE: ``pretrained`` (level 3 as it is: its source, the SSM started from the weights it names),
``random`` (level 3 with source 3: the same SSM from its random initialisation), ``nossm`` (level 3
with source 1: the count models alone, as level 2 has it; level 3's tables otherwise), ``candidate``
(level 3's source with the weights of the file $STATEMIX_PRETRAINED instead of the shipped ones: this
process replaces the loader, so its streams decode only here; for weights not yet shipped; with
$STATEMIX_PRETRAINED_D_MODEL, a network of that width, as ``data/pretrain.py --d-model`` trains it).  The
stream records the source, so every stream but the candidate's decodes anywhere.  Every stream is
decompressed and compared.  Prints one JSON line per file (bytes of the whole stream, bits per byte,
times, the process's peak RSS so far).
"""

import json
import os
import resource
import sys
import time

import statemix
from statemix.models import presets
from statemix.models.bit import distribution

mode = sys.argv[1]
shipped = presets.CM_LEVELS[3]["source"]
sources = {"pretrained": shipped, "random": distribution.SOURCE_WIDE_SSM, "nossm": distribution.SOURCE_COUNTS,
           "candidate": shipped}
if mode not in sources:
    raise SystemExit(f"unknown mode {mode}")
presets.CM_LEVELS[3] = {**presets.CM_LEVELS[3], "source": sources[mode]}
weights = None
if mode == "candidate":
    from statemix.models.nn import pretrained

    weights = os.environ["STATEMIX_PRETRAINED"]
    distribution.shipped = lambda name, sha256, config: pretrained.load(weights, config)
    if "STATEMIX_PRETRAINED_D_MODEL" in os.environ:
        width = dict(d_model=int(os.environ["STATEMIX_PRETRAINED_D_MODEL"]))
        distribution.PINNED[shipped] = {**distribution.PINNED.get(shipped, {}), **width}
for path in sys.argv[2:]:
    data = open(path, "rb").read()
    t0 = time.perf_counter()
    stream = statemix.compress(data, level=3, threads=1)
    t1 = time.perf_counter()
    ok = statemix.decompress(stream) == data
    t2 = time.perf_counter()
    assert ok, f"{path}: round trip failed"
    print(json.dumps(dict(mode=mode, file=os.path.basename(path), size=len(data), bytes=len(stream),
                          bpb=round(8 * len(stream) / len(data), 4), compress_s=round(t1 - t0, 1),
                          decompress_s=round(t2 - t1, 1), ok=ok,
                          peak_mib=resource.getrusage(resource.RUSAGE_SELF).ru_maxrss // 1024,
                          weights=weights)), flush=True)
