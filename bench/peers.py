#!/usr/bin/env python3
"""headsep vs its peers on the same generated data, in one run.

Peers: NumPy (vectorized einsum; whichever numpy runs this script) and the seed's own per-row
Python loop (the textbook script's weighted_context / vector_diff / l2_distance). The data
(reports of LENGTH tokens, the seed's 3 feature columns, single + HEADS weights) is generated
here with NumPy, written as raw float64 arrays, and read by bench/peer_bench (headsep's kernels,
full outputs in memory). Prints groups/s for each and headsep's speedup; checks that headsep's
separations match NumPy's.

Usage: peers.py PEER_BENCH_BINARY [--reports N] [--length L] [--heads H] [--threads T]
"""
import argparse
import json
import math
import os
import subprocess
import sys
import tempfile
import time

import numpy as np


def numpy_metrics(F, W, R, L):
    # Seed axes: decision = decision_axis; evidence_condition = evidence_axis + condition_axis.
    A = np.stack([F[0], F[1] + F[2]]).reshape(2, R, L)
    Wr = W.reshape(W.shape[0], R, L)
    ctx = np.einsum("hrl,crl->hrc", Wr, A, optimize=True)  # (heads+1, R, 2)
    diff = ctx[1:] - ctx[:1]
    heads = W.shape[0] - 1
    pairs = [np.linalg.norm(ctx[i] - ctx[j], axis=-1) for i in range(1, heads + 1) for j in range(i + 1, heads + 1)]
    sep = np.mean(pairs, axis=0) if pairs else np.zeros(R)
    return ctx, diff, sep


def seed_loop(F, W, R, L, limit):
    """The textbook's per-row arithmetic, on dict rows as csv.DictReader yields them."""
    axes = [("decision_axis", ["decision_axis"]), ("evidence_condition_axis", ["evidence_axis", "condition_axis"])]
    heads = W.shape[0] - 1
    cols = ["single_weight"] + [f"head{h}_weight" for h in range(1, heads + 1)]
    groups = []
    for r in range(min(R, limit)):
        rows = []
        for t in range(r * L, (r + 1) * L):
            row = {"decision_axis": str(F[0, t]), "evidence_axis": str(F[1, t]), "condition_axis": str(F[2, t])}
            for k, c in enumerate(cols):
                row[c] = str(W[k, t])
            rows.append(row)
        groups.append(rows)

    def weighted_context(scenario_rows, weight_column):
        return [sum(float(row[weight_column]) * sum(float(row[c]) for c in src) for row in scenario_rows) for _, src in axes]

    def vector_diff(left, right):
        return [a - b for a, b in zip(left, right)]

    def l2_distance(left, right):
        return math.sqrt(sum((a - b) ** 2 for a, b in zip(left, right)))

    t0 = time.perf_counter()
    seps = []
    for rows in groups:
        ctx = [weighted_context(rows, c) for c in cols]
        diffs = []
        for h in range(1, heads + 1):
            diffs += vector_diff(ctx[h], ctx[0])
        d = [l2_distance(ctx[i], ctx[j]) for i in range(1, heads + 1) for j in range(i + 1, heads + 1)]
        seps.append(sum(d) / len(d) if d else 0.0)
    return len(groups) / (time.perf_counter() - t0), seps


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("peer_bench")
    ap.add_argument("--reports", type=int, default=4_000_000)
    ap.add_argument("--length", type=int, default=3)
    ap.add_argument("--heads", type=int, default=2)
    ap.add_argument("--threads", type=int, default=os.cpu_count())
    ap.add_argument("--seed-limit", type=int, default=50_000)
    a = ap.parse_args()
    R, L, H = a.reports, a.length, a.heads
    rng = np.random.default_rng(2026)
    F = rng.uniform(-1, 2, size=(3, R * L))
    W = rng.uniform(0, 1, size=(H + 1, R * L))

    best = 1e30
    for _ in range(5):
        t0 = time.perf_counter()
        ctx, diff, sep = numpy_metrics(F, W, R, L)
        best = min(best, time.perf_counter() - t0)
    np_rate = R / best

    seed_rate, seed_seps = seed_loop(F, W, R, L, a.seed_limit)
    assert np.allclose(seed_seps, sep[: len(seed_seps)], rtol=1e-12, atol=1e-12), "seed loop and NumPy disagree"

    with tempfile.TemporaryDirectory() as d:
        F.tofile(os.path.join(d, "features.f64"))
        W.tofile(os.path.join(d, "weights.f64"))
        sep.astype(np.float64).tofile(os.path.join(d, "separation.f64"))
        runs = {}
        for prec in ("f64", "f32"):
            out = subprocess.run([a.peer_bench, d, str(R), str(L), str(H), str(a.threads), prec, "best"],
                                 check=True, capture_output=True, text=True).stdout
            runs[prec] = json.loads(out)

    try:
        from threadpoolctl import threadpool_info
        blas = ", ".join(f"{i.get('internal_api')} {i.get('version')} ({i.get('architecture')})" for i in threadpool_info())
    except Exception:  # threadpoolctl is optional
        blas = "unknown"
    print(f"data: {R} reports x {L} tokens, {H} heads, seed axes; numpy {np.__version__} [{blas}]; "
          f"headsep threads={a.threads} simd={runs['f64']['simd']}")
    print(f"{'implementation':34s} {'groups/s':>14s} {'headsep f64 speedup':>20s}")
    hs = runs["f64"]["groups_per_s"]
    print(f"{'seed per-row Python loop':34s} {seed_rate:14.4g} {hs / seed_rate:19.1f}x")
    print(f"{'NumPy einsum (vectorized)':34s} {np_rate:14.4g} {hs / np_rate:19.1f}x")
    print(f"{'headsep f64':34s} {hs:14.4g} {1.0:19.1f}x   max |sep - numpy| = {runs['f64']['max_abs_diff_vs_numpy']:.2g}")
    f32 = runs["f32"]["groups_per_s"]
    print(f"{'headsep f32':34s} {f32:14.4g} {f32 / hs:19.1f}x   max |sep - numpy| = {runs['f32']['max_abs_diff_vs_numpy']:.2g}")
    if runs["f64"]["max_abs_diff_vs_numpy"] > 1e-9:
        sys.exit("headsep and NumPy disagree")


if __name__ == "__main__":
    main()
