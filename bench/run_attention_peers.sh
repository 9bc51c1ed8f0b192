#!/usr/bin/env bash
# headsep's QKV attention vs PyTorch (MultiheadAttention with weights, + entropy/JS, SDPA) and
# onnxruntime, same batch, same weights, same threads. Builds first if needed; the peers come
# from PyPI in the venv $HEADSEP_BENCH_VENV (default .venv-bench), created on first use (torch's wheel brings CUDA libraries,
# about 5.5 GB: keep this out of tests and CI).
# Usage: bench/run_attention_peers.sh [attention_peers.py args...]   e.g. --shapes 256x256x256x8 --threads 2
#        (--ort-variants all: every onnxruntime session variant; --check SHAPES: the torch peer vs headsep)
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
source "$here/scripts/setup.sh"
venv="${HEADSEP_BENCH_VENV:-$here/.venv-bench}"
[ -x "$venv/bin/python" ] || python3 -m venv "$venv"
if ! "$venv/bin/python" -c "import numpy, torch, onnxruntime, onnx, safetensors" 2>/dev/null; then
  echo "attention peers: installing numpy torch onnxruntime onnx safetensors into $venv (first use)" >&2
  "$venv/bin/pip" install -q numpy torch onnxruntime onnx safetensors threadpoolctl
fi
# Only here: OpenBLAS core-type overrides slow a current numpy/torch down (never set/unset in tests).
exec env -u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE "$venv/bin/python" "$here/bench/attention_peers.py" \
  --headsep "$HEADSEP_BUILD/headsep" "$@"
