#!/usr/bin/env python3
"""Repeated small model runs from Python: a fresh headsep.model(DIR) per run -- what every
Model.run paid before the model stayed loaded (weights and tokenizer read again) -- against runs
on one loaded model. Interleaved, median of N each (docs/PYTHON.md).

    PYTHONPATH=build/python python bench/python_model_reuse.py [MODEL_DIR] [N]
"""
import gc
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
headsep.model(folder).run(texts, **kw)  # warm: page cache, plugin files


def ms(v):
    return 1000 * statistics.median(v)


# A fresh model per run, none alive in between (its plugins unloaded with it): what every
# Model.run paid before -- weights, the tokenizer (twice: the job's check and the text generator).
fresh = []
for _ in range(n):
    t0 = time.perf_counter()
    headsep.model(folder).run(texts, **kw)
    fresh.append(time.perf_counter() - t0)
    gc.collect()
m = headsep.model(folder)
loaded, load_only = [], []
for _ in range(n):
    t0 = time.perf_counter()
    m.run(texts, **kw)
    loaded.append(time.perf_counter() - t0)
print(f"{m!r}")
print(f"{len(texts)} texts, 1 thread, median of {n}: fresh headsep.model(dir).run {ms(fresh):.1f} ms, "
      f"loaded m.run {ms(loaded):.1f} ms ({ms(fresh) / ms(loaded):.1f}x)")
