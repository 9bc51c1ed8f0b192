#!/usr/bin/env bash
# headsep.attention (Python, torch tensors in) vs the attention peers of run_attention_peers.sh:
# torch MultiheadAttention, SDPA, onnxruntime, and the CLI on the same files. Uses the peers' venv
# (.venv-bench, or $HEADSEP_BENCH_VENV: torch's wheel is ~5.5 GB, keep it out of tests and CI),
# adds nanobind, pandas and pytest to it, builds the extension into the build folder, runs the
# torch tests of tests/python/test_attention.py (skipped in the test command, which has no torch),
# then bench/attention_python.py with PYTHONPATH=$HEADSEP_BUILD/python.
# Usage: bench/run_attention_python.sh [attention_python.py args...]   e.g. --shapes 2048x64x64x4 --threads 1
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
source "$here/scripts/setup.sh"
venv="${HEADSEP_BENCH_VENV:-$here/.venv-bench}"
[ -x "$venv/bin/python" ] || python3 -m venv "$venv"
if ! "$venv/bin/python" -c "import numpy, torch, onnxruntime, onnx, safetensors, nanobind, pandas, pytest" 2>/dev/null; then
  echo "attention python bench: installing numpy torch onnxruntime onnx safetensors nanobind pandas into $venv" >&2
  "$venv/bin/pip" install -q numpy torch onnxruntime onnx safetensors threadpoolctl nanobind pandas pytest
fi
# The extension is built for the build's Python (HEADSEP_PYTHON=ON); configure it with this venv's
# when the build has none, and check the venv can import what was built (same Python version).
if ! grep -q '^HEADSEP_PYTHON:BOOL=ON' "$HEADSEP_BUILD/CMakeCache.txt"; then
  cmake -S "$here" -B "$HEADSEP_BUILD" -DHEADSEP_PYTHON=ON -DPython_EXECUTABLE="$venv/bin/python" >/dev/null
fi
cmake --build "$HEADSEP_BUILD" -j "${HEADSEP_JOBS:-2}" --target _headsep headsep headsep_plugins
PYTHONPATH="$HEADSEP_BUILD/python" "$venv/bin/python" -c "import headsep" ||
  { echo "run_attention_python.sh: the extension in $HEADSEP_BUILD/python does not load in $venv (another Python version?)" >&2; exit 1; }
(cd "$here/tests/python" && PYTHONPATH="$HEADSEP_BUILD/python" HEADSEP_CLI="$HEADSEP_BUILD/headsep" \
  HEADSEP_SOURCE_DIR="$here" "$venv/bin/python" -m pytest -q -p no:cacheprovider test_attention.py -k torch)
exec env -u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE PYTHONPATH="$HEADSEP_BUILD/python" HEADSEP_BUILD="$HEADSEP_BUILD" \
  "$venv/bin/python" "$here/bench/attention_python.py" "$@"
