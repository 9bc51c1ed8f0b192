#!/usr/bin/env python3
"""Repeated small model runs from Python: a fresh headsep.model(DIR) per run -- what every
Model.run paid before the model stayed loaded (weights and tokenizer read again) -- against runs
on one loaded model. Interleaved, median of N each (docs/PYTHON.md).

    PYTHONPATH=build/python python bench/python_model_reuse.py [MODEL_DIR] [N]
"""
import os
import statistics
import sys
import time

import headsep

folder = sys.argv[1] if len(sys.argv) > 1 else os.environ["HEADSEP_MODEL_DIR"]
n = int(sys.argv[2]) if len(sys.argv) > 2 else 10
texts = ["pressure is too high: stop the pump", "the return condition was met", "hold; restart after the check",
         "the weather was fine"]
kw = dict(threads=1, rows=False, report=False, progress=False)
m = headsep.model(folder)
m.run(texts, **kw)  # warm: page cache, plugin files
fresh, loaded, load_only = [], [], []
for _ in range(n):
    t0 = time.perf_counter()
    headsep.model(folder).run(texts, **kw)
    t1 = time.perf_counter()
    m.run(texts, **kw)
    t2 = time.perf_counter()
    headsep.model(folder)
    t3 = time.perf_counter()
    fresh.append(t1 - t0), loaded.append(t2 - t1), load_only.append(t3 - t2)
med = lambda v: 1000 * statistics.median(v)  # noqa: E731
print(f"{m!r}")
print(f"{len(texts)} texts, 1 thread, median of {n}: fresh headsep.model(dir).run {med(fresh):.1f} ms, "
      f"loaded m.run {med(loaded):.1f} ms ({med(fresh) / med(loaded):.1f}x), headsep.model(dir) alone {med(load_only):.1f} ms")
