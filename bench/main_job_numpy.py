#!/usr/bin/env python3
"""The main job (scripts/run.sh: ops-reports x axis-focus, the summary) in NumPy, in memory, against
`headsep run` end to end on the same reports; checks that the two summaries agree (issue 27).

The reports and weights come from examples/python/python_plugin.py (OpsReports, AxisFocus: bit for
bit the built-in ops-reports and axis-focus), generated before the clock starts. Timed: per (report,
scenario) group the heads' contexts on the axes, difference_from_single, head_separation; then per
scenario count, mean, population std, min, max, quantiles (np.quantile, linear), the head_separation
histogram and the top-k reports. headsep: the real CLI, wall time of the process and its own run time.

Usage: main_job_numpy.py [--headsep BUILD/headsep] [--reports N] [--threads 1,2] [--repeat R]
       [--seed S] [--top K] [--chunk REPORTS]
"""
from __future__ import annotations

import argparse
import importlib.util
import json
import math
import os
import platform
import re
import resource
import statistics
import subprocess
import sys
import tempfile
import time

import numpy as np

from machine import cpu_line

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
QUANTILES = (("p01", 0.01), ("p10", 0.10), ("p50", 0.50), ("p90", 0.90), ("p99", 0.99))
BINS = 20
EXACT_CAPACITY = 4096  # headsep keeps a scenario's values (exact quantiles) up to this many groups
AXES = (("decision_axis", ("decision_axis",)), ("evidence_condition_axis", ("evidence_axis", "condition_axis")))


def load_plugins():
    """examples/python/python_plugin.py with the package's plugin classes (python/headsep/
    python_plugins.py, pure Python) as its `headsep`: the peer needs no C++ extension."""
    def load(name, path):
        spec = importlib.util.spec_from_file_location(name, path)
        mod = importlib.util.module_from_spec(spec)
        sys.modules[name] = mod  # dataclasses look their module up there
        spec.loader.exec_module(mod)
        return mod

    api = load("headsep_python_plugins", os.path.join(ROOT, "python", "headsep", "python_plugins.py"))
    saved = sys.modules.get("headsep")
    sys.modules["headsep"] = api
    try:
        ex = load("headsep_python_plugin_example", os.path.join(ROOT, "examples", "python", "python_plugin.py"))
    finally:
        if saved is None:
            del sys.modules["headsep"]
        else:
            sys.modules["headsep"] = saved
    return api, ex


def generate(reports, seed, chunk):
    """The main job's reports and weights in memory, in chunks of `chunk` reports: a list of
    (first_report, offsets, features [3, T], weights [scenarios, heads + 1, T]) and the names."""
    api, ex = load_plugins()
    gen, weighting = ex.OpsReports(), ex.AxisFocus()
    gen.open({"reports": reports, "seed": seed, "min_tokens": 3, "max_tokens": 6})
    parts = []
    for index in range(max(1, math.ceil(reports / chunk))):
        c = gen.chunk(index, chunk)
        if c is None:
            break
        features = np.stack(c.features)
        batch = api.Batch(index * chunk, c.offsets, features, list(gen.features), [], None, None)
        w = np.stack([weighting.weights(batch, slot) for slot in range(len(weighting.scenarios))])
        parts.append((index * chunk, c.offsets, features, w))
    return parts, list(weighting.scenarios), weighting.heads


def metric_names(heads):
    return ["head_separation"] + [f"diff_head{h}_{a}" for h in range(1, heads + 1) for a, _ in AXES]


def chunk_metrics(offsets, features, weights, heads):
    """Every scenario's per-group metrics of one chunk: [scenarios, 1 + heads * axes, reports].
    Per-report sums by np.bincount over the tokens' report ids (faster than np.add.reduceat on
    3-6-token segments, and than padding to [reports, 6] for einsum: measured, numpy 2.4)."""
    n = len(offsets) - 1
    report = np.repeat(np.arange(n), np.diff(offsets))               # each token's report
    axes = (features[0], features[1] + features[2])                  # the seed's axes
    out = np.empty((weights.shape[0], 1 + heads * len(axes), n))
    for s, w in enumerate(weights):                                  # 3 scenarios, not reports
        ctx = np.array([[np.bincount(report, weights=w[h] * a, minlength=n) for a in axes] for h in range(heads + 1)])
        out[s, 1:] = (ctx[1:] - ctx[:1]).reshape(heads * len(axes), n)  # difference_from_single
        pairs = [np.sqrt(np.sum((ctx[i] - ctx[j]) ** 2, axis=0)) for i in range(1, heads + 1) for j in range(i + 1, heads + 1)]
        out[s, 0] = np.mean(pairs, axis=0) if pairs else 0.0         # head_separation: mean pairwise L2
    return out


def top_k(sep, k):
    """headsep's top-k: descending value, ascending report index on ties."""
    if k == 0 or sep.size == 0:
        return []
    kth = np.partition(sep, sep.size - min(k, sep.size))[sep.size - min(k, sep.size)]
    idx = np.flatnonzero(sep >= kth)                                 # every tie of the k-th value
    order = np.lexsort((idx, -sep[idx]))[:k]
    return [(int(idx[o]), float(sep[idx[o]])) for o in order]


def summarize(values, scenarios, heads, top):
    """The summary per scenario from all groups' metrics [scenarios, metrics, reports]."""
    names = metric_names(heads)
    out = []
    for s, name in enumerate(scenarios):
        v = values[s]
        qs = np.quantile(v, [q for _, q in QUANTILES], axis=1)        # linear, exact
        mean, std, lo, hi = v.mean(axis=1), v.std(axis=1), v.min(axis=1), v.max(axis=1)
        metrics = {}
        for m, metric in enumerate(names):
            metrics[metric] = {"mean": mean[m], "std": std[m], "min": lo[m], "max": hi[m]}
            metrics[metric].update({label: qs[j, m] for j, (label, _) in enumerate(QUANTILES)})
        counts, edges = np.histogram(v[0], bins=BINS, range=(lo[0], hi[0]))
        hist = [{"lo": edges[i], "hi": edges[i + 1], "count": int(counts[i])} for i in range(BINS)]
        out.append({"scenario": name, "count": v.shape[1], "metrics": metrics, "head_separation_histogram": hist,
                    "top": [{"report_id": f"#{i}", "report_index": i, "head_separation": x} for i, x in top_k(v[0], top)]})
    return out


def numpy_job(parts, scenarios, heads, reports, top):
    """The timed NumPy part: metrics chunk by chunk, then the summary. Returns (summary, values, times)."""
    t0 = time.perf_counter()
    values = np.empty((len(scenarios), 1 + heads * len(AXES), reports))
    for first, offsets, features, weights in parts:
        values[:, :, first:first + len(offsets) - 1] = chunk_metrics(offsets, features, weights, heads)
    t1 = time.perf_counter()
    summary = summarize(values, scenarios, heads, top)
    t2 = time.perf_counter()
    return summary, values, (t2 - t0, t1 - t0, t2 - t1)


def close(a, b, rel, absolute=1e-12):
    return abs(a - b) <= rel * max(abs(a), abs(b)) + absolute


def compare(hs, ours, values, scenarios, heads):
    """Disagreements between headsep's --summary JSON (dict) and the NumPy summary, as text lines
    (empty: they agree). Moments within 1e-9 relative; quantiles and histogram exact while headsep
    is exact (<= 4096 groups), else within the sketch's relative accuracy of the order statistic
    x_(floor(q (n-1))) (docs: QuantileSketch); the top k the same reports (up to exact ties)."""
    bad = []
    acc = float(hs["quantiles"]["relative_accuracy"]) * 1.0001
    if [s["scenario"] for s in hs["scenarios"]] != scenarios:
        return [f"scenarios: headsep {[s['scenario'] for s in hs['scenarios']]}, numpy {scenarios}"]
    if hs["groups"] != sum(s["count"] for s in ours):
        bad.append(f"groups: headsep {hs['groups']}, numpy {sum(s['count'] for s in ours)}")
    for s, (h, o) in enumerate(zip(hs["scenarios"], ours)):
        where = h["scenario"]
        if h["count"] != o["count"]:
            bad.append(f"{where}: count headsep {h['count']}, numpy {o['count']}")
            continue
        if list(h["metrics"]) != list(o["metrics"]):
            bad.append(f"{where}: metrics headsep {list(h['metrics'])}, numpy {list(o['metrics'])}")
            continue
        for m, (metric, hm) in enumerate(h["metrics"].items()):
            om = o["metrics"][metric]
            for key in ("mean", "std", "min", "max"):
                if not close(hm[key], om[key], 1e-9):
                    bad.append(f"{where} {metric} {key}: headsep {hm[key]!r}, numpy {om[key]!r}")
            exact = hm["quantiles_exact"]
            if exact != (o["count"] <= EXACT_CAPACITY):
                bad.append(f"{where} {metric}: quantiles_exact {exact} with {o['count']} groups")
            lower = np.quantile(values[s, m], [q for _, q in QUANTILES], method="lower") if not exact else None
            for j, (label, _) in enumerate(QUANTILES):
                ok = close(hm[label], om[label], 1e-9) if exact else close(hm[label], lower[j], acc)
                if not ok:
                    want = om[label] if exact else f"{lower[j]!r} (order statistic) +- {acc:g} relative"
                    bad.append(f"{where} {metric} {label}: headsep {hm[label]!r}, numpy {want}")
        bad += compare_histogram(where, h, o, values[s, 0], acc, h["metrics"]["head_separation"]["quantiles_exact"])
        bad += compare_top(where, h["top"], o["top"], values[s, 0])
    return bad


def compare_histogram(where, h, o, sep, acc, exact):
    hh, oh = h["head_separation_histogram"], o["head_separation_histogram"]
    if len(hh) != len(oh):
        return [f"{where} histogram: {len(hh)} bins, numpy {len(oh)}"]
    bad = [f"{where} histogram bin {i} {e}: headsep {a[e]!r}, numpy {b[e]!r}"
           for i, (a, b) in enumerate(zip(hh, oh)) for e in ("lo", "hi") if not close(a[e], b[e], 1e-9)]
    if sum(b["count"] for b in hh) != len(sep):
        bad.append(f"{where} histogram: headsep counts sum to {sum(b['count'] for b in hh)}, not {len(sep)}")
    if exact:
        bad += [f"{where} histogram bin {i}: headsep {a['count']}, numpy {b['count']}"
                for i, (a, b) in enumerate(zip(hh, oh)) if a["count"] != b["count"]]
        return bad
    # Sketch mode places each value by its bucket's representative (within acc of the value):
    # below an edge e are at least the values < e / (1 + acc) and at most those < e / (1 - acc).
    srt = np.sort(sep)
    cum = 0
    for i, b in enumerate(hh[:-1]):
        cum += b["count"]
        e = b["hi"]
        lo_n = int(np.searchsorted(srt, e / (1 + acc) if e > 0 else e * (1 + acc), side="left"))
        hi_n = int(np.searchsorted(srt, e / (1 - acc) if e > 0 else e * (1 - acc), side="left"))
        if not lo_n <= cum <= hi_n:
            bad.append(f"{where} histogram: {cum} values below edge {e!r} in headsep, numpy {lo_n}..{hi_n}")
    return bad


def compare_top(where, ht, ot, sep):
    bad = []
    if len(ht) != len(ot):
        return [f"{where} top: headsep {len(ht)} reports, numpy {len(ot)}"]
    for j, (a, b) in enumerate(zip(ht, ot)):
        i = a["report_index"]
        if a["report_id"] != f"#{i}" or not 0 <= i < len(sep):
            bad.append(f"{where} top {j + 1}: headsep names {a['report_id']} / index {i}")
        elif not close(a["head_separation"], b["head_separation"], 1e-9) or not close(sep[i], b["head_separation"], 1e-12, 0.0):
            bad.append(f"{where} top {j + 1}: headsep report {i} ({a['head_separation']!r}), "
                       f"numpy report {b['report_index']} ({b['head_separation']!r}; numpy has {sep[i]!r} for {i})")
    return bad


def run_headsep(binary, reports, seed, top, threads, summary_path):
    cmd = [binary, "run", "--scenario", "ops-reports", "--weighting", "axis-focus", "-p", f"reports={reports}",
           "-p", f"seed={seed}", "--top", str(top), "--summary", summary_path, "--threads", str(threads)]
    t0 = time.perf_counter()
    p = subprocess.run(cmd, capture_output=True, text=True)
    wall = time.perf_counter() - t0
    if p.returncode != 0:
        sys.exit(f"main_job_numpy: headsep failed ({p.returncode}): {' '.join(cmd)}\n{p.stderr}")
    m = re.search(r"groups in ([0-9.]+) s: .*\((\w+), (\w+)\)", p.stdout)
    if not m:
        sys.exit(f"main_job_numpy: no run-time line in headsep's output:\n{p.stdout}")
    with open(summary_path) as f:
        return wall, float(m.group(1)), m.group(2), json.load(f), cmd


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--headsep", default=os.path.join(ROOT, "build", "headsep"))
    ap.add_argument("--reports", type=int, default=10_000_000)
    ap.add_argument("--threads", default="1,2")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--seed", type=int, default=2026)
    ap.add_argument("--top", type=int, default=5)
    ap.add_argument("--chunk", type=int, default=1 << 20, help="reports per NumPy chunk (bounds the temporaries)")
    a = ap.parse_args(argv)
    try:
        threads = [int(t) for t in a.threads.split(",")]
    except ValueError:
        ap.error(f"--threads: comma-separated counts, not '{a.threads}'")
    if not (os.path.isfile(a.headsep) and os.access(a.headsep, os.X_OK)):
        ap.error(f"--headsep: no executable at '{a.headsep}' (build it: cmake --build build --target headsep headsep_plugins)")
    if a.reports < 1 or a.repeat < 1 or a.chunk < 1 or a.top < 0 or min(threads) < 1:
        ap.error("--reports, --repeat, --chunk and every --threads count must be >= 1, --top >= 0")
    groups = 3 * a.reports
    print(f"main job: {a.reports} ops-reports reports x axis-focus's 3 designs = {groups} groups, seed {a.seed}, top {a.top}")
    print(f"CPU: {cpu_line()}; numpy {np.__version__} ({np.__file__.split('/site-packages')[0] if 'site-packages' in np.__file__ else os.path.dirname(np.__file__)}), "
          f"Python {platform.python_version()}")
    t0 = time.perf_counter()
    parts, scenarios, heads = generate(a.reports, a.seed, a.chunk)
    gen_s = time.perf_counter() - t0
    tokens = sum(int(p[1][-1]) for p in parts)
    data_gib = sum(p[1].nbytes + p[2].nbytes + p[3].nbytes for p in parts) / 2**30
    print(f"generation (not timed; OpsReports.chunk + AxisFocus.weights in NumPy): {gen_s:.2f} s, {tokens} tokens, "
          f"{data_gib:.2f} GiB in memory")
    print("NumPy runs the timed part on one thread (bincount, ufuncs, partitions: no BLAS call); headsep on --threads T")
    hs_wall, hs_run, np_s, np_parts = {t: [] for t in threads}, {t: [] for t in threads}, [], []
    simd, cmd = None, None
    with tempfile.TemporaryDirectory() as tmp:
        for r in range(a.repeat):  # interleaved: headsep at each thread count, then NumPy
            line, summaries = [], []
            for t in threads:
                wall, run_s, simd, hs, cmd = run_headsep(a.headsep, a.reports, a.seed, a.top, t, os.path.join(tmp, f"s{t}.json"))
                hs_wall[t].append(wall), hs_run[t].append(run_s), summaries.append((t, hs))
                line.append(f"headsep {t}T {wall:.3f} s wall ({run_s:.3f} s run)")
            ours, values, times = numpy_job(parts, scenarios, heads, a.reports, a.top)
            np_s.append(times[0]), np_parts.append(times[1:])
            line.append(f"numpy {times[0]:.3f} s (metrics {times[1]:.3f} + summary {times[2]:.3f})")
            print(f"round {r + 1}: " + " | ".join(line), flush=True)
            for t, hs in summaries:  # every run checked
                bad = compare(hs, ours, values, scenarios, heads)
                if bad:
                    print("\n".join([f"DISAGREE: headsep --threads {t} and NumPy, round {r + 1}:"] + bad[:40]), file=sys.stderr)
                    return 1
            del ours, values
    print("agreement: every headsep summary = NumPy's (mean/std/min/max within 1e-9 relative; quantiles and histogram "
          f"{'exact' if a.reports <= EXACT_CAPACITY else 'within the sketch accuracy: headsep keeps exact values only up to 4096 groups'}; "
          f"top {a.top} the same reports)")
    shown = [os.path.relpath(cmd[0])] + cmd[1:-4] + ["--summary", "S", "--threads", "T"]
    print(f"headsep: {' '.join(shown)}   (simd {simd}, f64)")
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20
    print(f"peak memory of this process: {rss:.2f} GiB")
    best_np, med_np = min(np_s), statistics.median(np_s)
    print(f"{'':24} {'best s':>8} {'median s':>9} {'M groups/s (best)':>18} {'(median)':>9} {'x NumPy (best)':>15} {'(median)':>9}")
    print(f"{'numpy, 1 thread':24} {best_np:8.3f} {med_np:9.3f} {groups / best_np / 1e6:18.2f} {groups / med_np / 1e6:9.2f}")
    for t in threads:
        for label, xs in ((f"headsep {t}T, process", hs_wall[t]), (f"headsep {t}T, its run", hs_run[t])):
            b, m = min(xs), statistics.median(xs)
            print(f"{label:24} {b:8.3f} {m:9.3f} {groups / b / 1e6:18.2f} {groups / m / 1e6:9.2f} {best_np / b:15.2f} {med_np / m:9.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
