#!/usr/bin/env bash
# The main job: installs missing packages, builds, then
#  1. prints the seed exercise's block (computed from data/qkv-multihead-report-scenarios.csv);
#  2. runs a large synthetic set — ops-reports through the seed's three head designs
#     (axis-focus) — and prints the per-scenario summary (JSON in build/demo-summary.json).
# Usage: scripts/run.sh [REPORTS]   (default 10000000)
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
# Only what the job runs: the executable and the built-in plugins (scripts/test.sh builds the rest).
build_targets=(headsep headsep_plugins)
source "$here/scripts/setup.sh"
reports=${1:-10000000}
echo "== the seed exercise (headsep example) =="
"$HEADSEP_BUILD/headsep" example
echo
echo "== ${reports} synthetic operations reports x the seed's 3 head designs =="
"$HEADSEP_BUILD/headsep" run --scenario ops-reports --weighting axis-focus \
  -p reports="$reports" -p seed=2026 --top 5 --summary "$HEADSEP_BUILD/demo-summary.json"
echo "(summary JSON: $HEADSEP_BUILD/demo-summary.json)"
