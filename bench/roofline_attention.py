#!/usr/bin/env python3
"""Where the qkv attention's time goes against a roofline of FLOPs *and* transcendentals, one core.

Per report of a shape B x n x d_model x H (d_k = d_v = d_model / H; P = H(H-1)/2 pairs) headsep does
  projections   2·n·d·(d + 3·H·d_k) FLOP   (the baseline folded into X·M, docs/ATTENTION.md)
  attention     2·n²·(d + H·d_k) + 2·n²·H·d_v FLOP   (scores of heads 0..H, A·V of heads 1..H)
  exp           (H+1)·n²                   (every softmax element; the entropy reuses them)
  log           P·n² + (H+1)·n             (H(M) of every pair's mixture per key; log Z per query)
and each is divided by what one core does per second: the fp32 FMA peak of `headsep info`, and the
exp / log rates of the engine's own vector functions measured by bench_transcendental (L1-resident,
so an upper bound). The ceilings add up (all of it runs on the same vector ports). Measured beside
it: bench_attention's project/ (projections), kernel/ (attention + every metric on ready
projections) and run/ (both, what the engine calls; its CPU time per report) at the best level, one thread.

Usage: bench/roofline.sh attention [BUILD_DIR] [SHAPES]   (default build, 256x256x256x8,65536x3x2x2)
"""
import json
import os
import re
import subprocess
import sys

from machine import cpu_line

build = sys.argv[1] if len(sys.argv) > 1 else "build"
shapes = (sys.argv[2] if len(sys.argv) > 2 else "256x256x256x8,65536x3x2x2").split(",")


def gbench(binary, flt):
    path = os.path.join(build, "bench", binary)
    if not os.access(path, os.X_OK):
        sys.exit(f"roofline.sh attention: no {path} (cmake --build {build} --target {binary})")
    out = subprocess.run([path, f"--benchmark_filter={flt}", "--benchmark_format=json", "--benchmark_min_time=0.3",
                          "--benchmark_repetitions=3", "--benchmark_report_aggregates_only=true"],
                         capture_output=True, text=True, check=True).stdout
    return {b["run_name"]: b for b in json.loads(out)["benchmarks"] if b.get("aggregate_name") == "median"}


info = subprocess.run([os.path.join(build, "headsep"), "info"], capture_output=True, text=True).stdout
m = re.search(r"fp32 peak:\s*([0-9.]+) GFLOP/s per core \(measured: FMA chains at (\w+)\)", info)
if not m:
    sys.exit("roofline.sh attention: no 'fp32 peak' line in `headsep info`")
peak, level = float(m.group(1)) * 1e9, m.group(2)
tr = gbench("bench_transcendental", "^transcendental/")
rate = {k.split("/", 1)[1]: v["items_per_second"] for k, v in tr.items()}
print(f"CPU: {cpu_line()}; level {level}; fp32 peak {peak / 1e9:.1f} GFLOP/s per core (`headsep info`)")
print("exp / log per second per core (bench_transcendental, median of 3):")
for k in sorted(rate):
    err = tr["transcendental/" + k].get("max_rel_err")
    print(f"   {k:22s} {rate[k] / 1e9:7.3f} G/s   max relative error {err:.2g}")
exp_rate, log_rate = rate[f"exp/{level}-engine"], rate[f"log/{level}-engine"]

names = "|".join(re.escape(s) for s in shapes)
ba = gbench("bench_attention", f"^(project|kernel)/({names})/{level}$|^run/({names})/{level}/threads:1/real_time$")
for s in shapes:
    B, n, d, H = map(int, s.split("x"))
    dk = d // H
    P = H * (H - 1) // 2
    parts = {"projections (FMA)": 2 * n * d * (d + 3 * H * dk) / peak,
             "scores + A·V (FMA)": (2 * n * n * (d + H * dk) + 2 * n * n * H * dk) / peak,
             f"exp x {(H + 1) * n * n}": (H + 1) * n * n / exp_rate,
             f"log x {P * n * n + (H + 1) * n}": (P * n * n + (H + 1) * n) / log_rate}
    floor = sum(parts.values())
    meas = {k: ba.get(f"{k}/{s}/{level}" + ("/threads:1/real_time" if k == "run" else "")) for k in ("project", "kernel", "run")}
    # CPU seconds per report (run/ reports real time: on a shared host its CPU time is the fairer one).
    # cpu_time / real_time is the share of the wall time on a CPU; 1 / items_per_second the wall per report.
    per = {k: (v["cpu_time"] / (v["items_per_second"] * v["real_time"]) if k == "run"
               else 1.0 / v["items_per_second"]) if v else None for k, v in meas.items()}
    print(f"\n{s}: ceiling per report, one core (ns)")
    for k, t in parts.items():
        print(f"   {k:26s} {t * 1e9:12,.1f}   {100 * t / floor:5.1f} % of the floor")
    print(f"   {'floor (sum)':26s} {floor * 1e9:12,.1f}   -> {1 / floor:,.0f} reports/s")
    for k, t in per.items():
        if t:
            ceil = parts["projections (FMA)"] if k == "project" else floor - parts["projections (FMA)"] if k == "kernel" else floor
            print(f"   measured {k:17s} {t * 1e9:12,.1f}   ({1 / t:,.0f} reports/s, {100 * ceil / t:5.1f} % of its ceiling)")
