"""Issue 49's first measurement: the share of a pretrained SSM in cm level 3's byte-distribution source.

    PYTHONPATH=. taskset -c 1 python bench/pretrain_share.py MODE FILE...

MODE: ``pretrained`` (level 3, the SSM started from the weight file $STATEMIX_PRETRAINED, see
statemix/models/nn/pretrained.py, online learning rate $STATEMIX_PRETRAINED_LR if set: this process
patches the source's constructor, so its streams decode only here), ``random`` (level 3 as it is: the SSM from its random
initialisation), ``nossm`` (level 3 with its byte-distribution source replaced by source 1, the
count models alone, as level 2 has it; level 3's tables otherwise).  Every stream is decompressed
and compared.  Prints one JSON line per file (bytes of the whole stream, bits per byte, times, the
process's peak RSS so far).
"""

import json
import os
import resource
import sys
import time

import statemix
from statemix.models import presets

mode = sys.argv[1]
if mode == "nossm":
    presets.CM_LEVELS[3] = {**presets.CM_LEVELS[3], "source": 1}
    os.environ.pop("STATEMIX_PRETRAINED", None)
elif mode == "random":
    os.environ.pop("STATEMIX_PRETRAINED", None)
elif mode == "pretrained":
    assert os.environ.get("STATEMIX_PRETRAINED"), "set STATEMIX_PRETRAINED"
    from statemix.models.bit import distribution
    from statemix.models.nn import pretrained

    plain_init = distribution.Source.__init__

    def pretrained_init(self, *args, **kwargs):
        plain_init(self, *args, **kwargs)
        if self.uses_ssm:
            weights = pretrained.load(os.environ["STATEMIX_PRETRAINED"], self.model.model_config)
            rate = os.environ.get("STATEMIX_PRETRAINED_LR")
            pretrained.start_from(self.model.network, weights, float(rate) if rate else None)

    distribution.Source.__init__ = pretrained_init
else:
    raise SystemExit(f"unknown mode {mode}")
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
                          weights=os.environ.get("STATEMIX_PRETRAINED"),
                          lr=os.environ.get("STATEMIX_PRETRAINED_LR"))), flush=True)
