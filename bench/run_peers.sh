#!/usr/bin/env bash
# headsep vs NumPy (PyPI numpy 2 in a venv, and Debian's numpy under /usr/bin/python3 when
# installed) and the seed's Python loop, same data, same run. Builds first if needed.
# Usage: bench/run_peers.sh [peers.py args...]
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
source "$here/scripts/setup.sh"
venv="$here/.venv-bench"
if [ ! -x "$venv/bin/python" ]; then
  python3 -m venv "$venv"
  "$venv/bin/pip" install -q numpy threadpoolctl
fi
bin="$HEADSEP_BUILD/bench/peer_bench"
echo "== PyPI numpy (venv) =="
# Only here: OpenBLAS core-type overrides slow a current numpy down (never set/unset in tests).
env -u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE "$venv/bin/python" "$here/bench/peers.py" "$bin" "$@"
if /usr/bin/python3 -c "import numpy" 2>/dev/null; then
  echo "== Debian numpy (/usr/bin/python3) =="
  env -u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE /usr/bin/python3 "$here/bench/peers.py" "$bin" "$@"
fi
