#!/usr/bin/env bash
# Installs what headsep needs (only what is missing), then configures and builds it.
# Usage: scripts/setup.sh [--sanitize]   (sourced by run.sh and test.sh)
# Env: HEADSEP_BUILD_DIR (default build, or build-asan with --sanitize), HEADSEP_JOBS.
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)

packages=(g++ cmake ninja-build pkg-config
  libxsimd-dev xtl-dev libtbb-dev libboost-dev
  catch2 libbenchmark-dev libcli11-dev libfmt-dev nlohmann-json3-dev
  python3)
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]})); then
  echo "headsep setup: installing ${missing[*]}" >&2
  sudo=""; [ "$(id -u)" = 0 ] || sudo="sudo"
  $sudo apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi

sanitize=""
[ "${1:-}" = "--sanitize" ] && sanitize="address,undefined"
if [ -n "$sanitize" ]; then
  build=${HEADSEP_BUILD_DIR:-$here/build-asan}
  extra=(-DHEADSEP_SANITIZE="$sanitize" -DHEADSEP_ENABLE_BENCH=OFF -DCMAKE_BUILD_TYPE=RelWithDebInfo)
else
  build=${HEADSEP_BUILD_DIR:-$here/build}
  extra=(-DCMAKE_BUILD_TYPE=Release)
fi
if [ ! -f "$build/build.ninja" ]; then
  cmake -S "$here" -B "$build" -G Ninja "${extra[@]}" >/dev/null
fi
# Progress lines hidden; errors and warnings shown; the build's exit status is kept (pipefail).
cmake --build "$build" -j "${HEADSEP_JOBS:-$(nproc)}" 2>&1 | { grep -v '^\[' || true; }
export HEADSEP_BUILD="$build"
