#!/usr/bin/env bash
# The main job end to end: `headsep run` (ops-reports x axis-focus, the summary) against the same job
# in NumPy in memory (bench/main_job_numpy.py), PyPI numpy in a venv and Debian's numpy under
# /usr/bin/python3 when installed; every run's summaries checked against each other. Builds first.
# Usage: bench/run_main_job_peers.sh [main_job_numpy.py args...]   e.g. --reports 10000000 --threads 1,2 --repeat 3
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
build_targets=(headsep headsep_plugins)  # only what the job runs
source "$here/scripts/setup.sh"
venv="${HEADSEP_BENCH_VENV:-$here/.venv-bench}"
[ -x "$venv/bin/python" ] || python3 -m venv "$venv"
if ! "$venv/bin/python" -c "import numpy" 2>/dev/null; then
  echo "main job peers: installing numpy into $venv (first use)" >&2
  "$venv/bin/pip" install -q numpy
fi
echo "== PyPI numpy (venv $venv) =="
# Only here: OpenBLAS core-type overrides slow a current numpy down (never set/unset in tests).
env -u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE "$venv/bin/python" "$here/bench/main_job_numpy.py" \
  --headsep "$HEADSEP_BUILD/headsep" "$@"
if /usr/bin/python3 -c "import numpy" 2>/dev/null; then
  echo "== Debian numpy (/usr/bin/python3) =="
  env -u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE /usr/bin/python3 "$here/bench/main_job_numpy.py" \
    --headsep "$HEADSEP_BUILD/headsep" "$@"
fi
