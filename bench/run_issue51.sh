#!/usr/bin/env bash
# Issue 51's whole measurement on the CPU this runs on, in one go (~30 min idle; --quick ~12): the
# README's "issue 51 on each CPU" table wants a column per CPU, and each column is these benches,
# run one after another on an otherwise idle machine. The peers' venv (torch, transformers,
# onnxruntime; ~5.5 GB) is made on first use. Everything printed also goes to
# bench-results/issue51-<date>-<cpu>.log, which starts with bench/machine.py's CPU line.
#   1. decoders at real dimensions (GPT-2 small, Qwen2-0.5B, Llama-3.2-1B shapes, random init,
#      128-token reports in batches of 8) against transformers eager with output_attentions and
#      SDPA: % of the fp32 peak, ratios by wall and per CPU-second, 2 threads then 1
#   2. bf16 held as bf16 against --dtype f32 at the 1B shape (4 of its 16 layers)
#   3. the 256² attention against its FLOP + exp + log floor, and every onnxruntime set-up
# Usage: bench/run_issue51.sh [--quick]
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
quick=0
[ "${1:-}" = "--quick" ] && quick=1
source "$here/bench/results_log.sh" issue51
if [ $quick = 1 ]; then tokens=1024 repeat=2 reps=2 threads=(2); else tokens=2048 repeat=3 reps=3 threads=(2 1); fi
source "$here/scripts/setup.sh"
export HEADSEP_BENCH_VENV=${HEADSEP_BENCH_VENV:-$here/.venv-bench}

for t in "${threads[@]}"; do
  for arch in gpt2-small qwen2-0.5b llama-1b; do
    # Llama-3.2-1B's shape: 2 GFLOP a token; transformers eager ~90 tokens/s on 2 idle Zen 4 cores.
    n=$tokens; [ $arch = llama-1b ] && n=$((tokens / 2))
    step "1. $arch, $t thread(s): >= 60 % of the fp32 peak, >= 2x transformers eager with maps"
    bash "$here/bench/run_model_peers.sh" --arch "$arch" --shapes 128x8 --tokens "$n" --repeat "$repeat" --threads "$t"
  done
done
step "2. bf16 held as bf16 vs --dtype f32, the 1B shape (4 layers): >= 1.6x with AVX512-BF16"
env -u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE "$HEADSEP_BENCH_VENV/bin/python" "$here/bench/bf16_speed.py" \
  "$HEADSEP_BUILD/headsep" speed --layers 4 --reps "$reps"
step "2. a bf16 checkpoint: headsep holding it as bf16 against transformers eager in bf16 (1B shape, 4 layers)"
bash "$here/bench/run_model_peers.sh" --arch llama-1b --layers 4 --dtype bf16 --shapes 128x8 --tokens "$tokens" \
  --repeat "$repeat" --threads 2
step "3. the 256² attention against this CPU's FLOP + exp + log floor (>= 90 %, 1 thread)"
bash "$here/bench/roofline.sh" attention "$HEADSEP_BUILD" 256x256x256x8
step "3. every onnxruntime set-up at 256², 1 thread (never below the best)"
bash "$here/bench/run_attention_peers.sh" --shapes 256x256x256x8 --threads 1 --repeat "$reps" --ort-variants all
echo; echo "# log: $log"
