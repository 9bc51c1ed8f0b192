#!/usr/bin/env bash
# The decoder families against the Llama path at equal FLOPs per token (bench/family_speed.py):
# random-init models made by transformers from the venv (HEADSEP_BENCH_VENV, default .venv-bench,
# made on first use), 1 thread, best of --reps. Usage: bench/run_family_speed.sh [--reps 3] [--families a,b]
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
source "$here/scripts/setup.sh"
venv=${HEADSEP_BENCH_VENV:-$here/.venv-bench}
[ -x "$venv/bin/python" ] || python3 -m venv "$venv"
if ! "$venv/bin/python" -c "import numpy, torch, transformers, safetensors" 2>/dev/null; then
  echo "family speed: installing numpy torch transformers safetensors into $venv (first use)" >&2
  "$venv/bin/pip" install -q numpy torch transformers safetensors
fi
exec "$venv/bin/python" "$here/bench/family_speed.py" "$HEADSEP_BUILD/headsep" "$@"
