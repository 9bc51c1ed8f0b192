#!/usr/bin/env bash
# Issue 27's whole measurement on the CPU this runs on, in one go: the README's "targets on each
# CPU" table wants a column per CPU (Zen 3 with AVX2 only, a Xeon with AVX-512, Zen 4), and each
# column is these seven benches, run one after another on an otherwise idle machine (~35 min; the
# peers' venv with torch and onnxruntime is made on first use, ~5.5 GB). Everything printed also
# goes to bench-results/issue27-<date>-<cpu>.log, which starts with bench/machine.py's CPU line.
# Usage: bench/run_issue27.sh [--quick]   (--quick: fewer rounds and reports, ~13 min, a smoke run)
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
quick=0
[ "${1:-}" = "--quick" ] && quick=1
source "$here/bench/results_log.sh" issue27
if [ $quick = 1 ]; then reports=1000000 repeat=2 vrepeat=1 reps=3; else reports=10000000 repeat=5 vrepeat=3 reps=9; fi

step "1. the main job against NumPy in memory (target 1: >= 10x on 2 threads; 1 thread >= 9 M groups/s)"
bash "$here/bench/run_main_job_peers.sh" --reports "$reports" --threads 1,2 --repeat "$repeat"
step "1. the metric kernels, AVX2 / SSE2 on the main job's shapes (target 1: >= 1.6x)"
source "$here/scripts/setup.sh"
"$HEADSEP_BUILD/bench/bench_kernels" --benchmark_filter='^mainjob' --benchmark_repetitions="$reps" \
  --benchmark_enable_random_interleaving=true --benchmark_report_aggregates_only=true
step "2. attention against torch and onnxruntime (target 2)"
bash "$here/bench/run_attention_peers.sh" --threads 1,2 --repeat "$repeat"
# The issue compares with the best onnxruntime set-up a user could write: every graph under every
# session variant at 256² (the rows above try two variants per graph).
step "2. every onnxruntime graph and session variant, 256², 1 thread (target 2: the best set-up)"
bash "$here/bench/run_attention_peers.sh" --shapes 256x256x256x8 --threads 1 --repeat "$vrepeat" \
  --ort-variants all --ort-variants-others all
step "2. the 256² attention against this CPU's FLOP + exp + log roofline"
bash "$here/bench/roofline.sh" attention "$HEADSEP_BUILD" 256x256x256x8
for t in 1 2; do
  step "3. MiniLM against torch eager with maps and torch SDPA, $t thread(s) (target 3)"
  bash "$here/bench/run_model_peers.sh" --threads "$t"
done
echo; echo "# log: $log"
