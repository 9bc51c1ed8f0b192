#!/usr/bin/env bash
# The test command: installs missing packages, builds, runs every test through CTest.
# Usage: scripts/test.sh [--sanitize] [ctest args...]
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
san=()
if [ "${1:-}" = "--sanitize" ]; then san=(--sanitize); shift; fi
source "$here/scripts/setup.sh" "${san[@]}"
cd "$HEADSEP_BUILD"
ctest --output-on-failure -j "$(nproc)" "$@"
