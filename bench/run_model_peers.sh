#!/usr/bin/env bash
# headsep's BERT forward + every head metric vs PyTorch (bench/model_peers.py) on all-MiniLM-L6-v2:
# same safetensors, same token ids, same threads. Builds first, fetches the model; torch comes
# from the venv (HEADSEP_BENCH_VENV, default .venv-bench, made on first use: ~5.5 GB of wheels,
# never part of the tests).
# Usage: bench/run_model_peers.sh [--threads 2] [--shapes 64x64,128x32,16x1024,64x1]
#        bench/run_model_peers.sh --arch gpt2|llama [--shapes 128x32,128x1]   (random-init decoders
#        made at run time; also needs transformers, installed into the venv on first use)
#        bench/run_model_peers.sh --arch gpt2-small|llama-1b|qwen2-0.5b [--shapes 128x8] [--layers N]
#        (real dimensions, issue 51: transformers eager with maps and SDPA as the peers)
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
source "$here/scripts/setup.sh"
model=$(bash "$here/scripts/fetch_model.sh")
venv=${HEADSEP_BENCH_VENV:-$here/.venv-bench}
[ -x "$venv/bin/python" ] || python3 -m venv "$venv"
if ! "$venv/bin/python" -c "import numpy, torch, safetensors" 2>/dev/null; then
  echo "model peers: installing numpy torch safetensors into $venv (first use)" >&2
  "$venv/bin/pip" install -q numpy torch safetensors
fi
if [[ " $* " == *" --arch "* ]] && ! "$venv/bin/python" -c "import transformers" 2>/dev/null; then
  echo "model peers: installing transformers into $venv (first use, decoders)" >&2
  "$venv/bin/pip" install -q transformers
fi
exec env -u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE "$venv/bin/python" "$here/bench/model_peers.py" \
  --model "$model" --peer "$HEADSEP_BUILD/bench/model_peer" "$@"
