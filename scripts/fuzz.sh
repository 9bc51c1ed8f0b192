#!/usr/bin/env bash
# Fuzzing: installs what is missing (clang, libFuzzer, headsep's build dependencies), builds the
# libFuzzer harnesses of tests/fuzz in build-fuzz/ (clang, ASan + UBSan, coverage on the whole
# core), then runs each harness for SECONDS on a scratch copy of its seed corpus and regressions
# (tests/fuzz/corpus/<harness>, tests/fuzz/regressions/<harness>: the committed files never change).
#
# Usage: scripts/fuzz.sh [SECONDS] [HARNESS...]     (default 60 s; harnesses: csv axes params plugin safetensors tokenizer)
# Env:   HEADSEP_FUZZ_BUILD_DIR (default build-fuzz), HEADSEP_JOBS (build jobs),
#        HEADSEP_FUZZ_KEEP=1 keeps the grown corpora in $build/corpus/<harness> (to merge new seeds).
# Exit status: 0 when every harness ran clean; 1 when one found something. Each finding is in
# $build/findings/<harness>-crash-* (or leak-, timeout-, oom-): add it to tests/fuzz/regressions/<harness>/
# once fixed, and rerun one input with `$build/tests/fuzz/fuzz_<harness> FILE`.
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
seconds=${1:-60}
[ $# -gt 0 ] && shift
harnesses=("$@")
((${#harnesses[@]})) || harnesses=(csv axes params plugin safetensors tokenizer)

packages=(clang libclang-rt-14-dev cmake ninja-build pkg-config
  libxsimd-dev xtl-dev libtbb-dev libboost-dev libcli11-dev libfmt-dev nlohmann-json3-dev
  libopenblas-dev python3)
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]})); then
  echo "headsep fuzz: installing ${missing[*]}" >&2
  sudo=""; [ "$(id -u)" = 0 ] || sudo="sudo"
  $sudo apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi

build=${HEADSEP_FUZZ_BUILD_DIR:-$here/build-fuzz}
source "$here/scripts/ccache.sh"
if [ ! -f "$build/build.ninja" ]; then
  # -gline-tables-only: sanitizer reports with file:line at little compile cost.
  nice -n 15 cmake -S "$here" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release \
    -DCMAKE_C_COMPILER=clang -DCMAKE_CXX_COMPILER=clang++ \
    -DCMAKE_C_FLAGS=-gline-tables-only -DCMAKE_CXX_FLAGS=-gline-tables-only \
    -DHEADSEP_SANITIZE=address,undefined -DHEADSEP_ENABLE_FUZZ=ON \
    -DHEADSEP_ENABLE_BENCH=OFF -DHEADSEP_ENABLE_TESTS=OFF ${ccache_args[@]+"${ccache_args[@]}"} >/dev/null
fi
# Only the harnesses (and what they link): not the CLI or the built-in plugins.
nice -n 15 cmake --build "$build" --target headsep_fuzzers -j "${HEADSEP_JOBS:-$(nproc)}" 2>&1 | { grep -v '^\[' || true; }

export ASAN_OPTIONS=${ASAN_OPTIONS:-abort_on_error=1:detect_leaks=1}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}
mkdir -p "$build/findings" "$build/logs"
scratch=$(mktemp -d "${TMPDIR:-/tmp}/headsep-fuzz.XXXXXX")
trap 'rm -rf "$scratch"' EXIT
# One harness per core at a time (libFuzzer runs one thread): CI's 6 x 20 s take 60 s on 2 cores.
fuzz_one() {  # fuzz_one HARNESS: runs it and writes its table row (its result) to $scratch/HARNESS.row
  local h=$1 bin=$build/tests/fuzz/fuzz_$1 corpus=$scratch/$1 log=$build/logs/$1.log rc=0 start took runs rate size result
  mkdir -p "$corpus"
  for d in "$here/tests/fuzz/corpus/$h" "$here/tests/fuzz/regressions/$h"; do
    [ -d "$d" ] && find "$d" -maxdepth 1 -type f ! -name '.*' -exec cp {} "$corpus/" \;
  done
  start=$(date +%s)
  nice -n 15 "$bin" "$corpus" -max_total_time="$seconds" -timeout=10 -rss_limit_mb=2048 \
    -print_final_stats=1 -artifact_prefix="$build/findings/$h-" >"$log" 2>&1 || rc=$?
  took=$(( $(date +%s) - start ))
  runs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -1)
  rate=$(sed -n 's/^stat::average_exec_per_sec: *//p' "$log" | tail -1)
  size=$(find "$corpus" -type f | wc -l)
  if [ "$rc" = 0 ]; then result=clean; else result="FOUND (exit $rc, log $log)"; fi
  printf '%-12s %8s %12s %10s %8s  %s\n' "$h" "$took" "${runs:-?}" "${rate:-?}" "$size" "$result" >"$scratch/$h.row"
  if [ "${HEADSEP_FUZZ_KEEP:-0}" = 1 ]; then
    rm -rf "$build/corpus/$h" && mkdir -p "$build/corpus" && cp -r "$corpus" "$build/corpus/$h"
  fi
}
for h in "${harnesses[@]}"; do
  [ -x "$build/tests/fuzz/fuzz_$h" ] || { echo "headsep fuzz: no harness '$h' ($build/tests/fuzz/fuzz_$h)" >&2; exit 2; }
done
jobs_max=${HEADSEP_JOBS:-$(nproc)}
for h in "${harnesses[@]}"; do
  while [ "$(jobs -rp | wc -l)" -ge "$jobs_max" ]; do wait -n || true; done
  fuzz_one "$h" &
done
wait  # each harness's result is in its row
status=0
printf '%-12s %8s %12s %10s %8s  %s\n' harness seconds runs execs/s corpus result
for h in "${harnesses[@]}"; do
  [ -f "$scratch/$h.row" ] || { echo "headsep fuzz: harness '$h' ended without a result (log $build/logs/$h.log)" >&2; status=1; continue; }
  cat "$scratch/$h.row"
  case "$(cat "$scratch/$h.row")" in
    *FOUND*) status=1
      grep -E '^(==[0-9]+==ERROR|SUMMARY|.*runtime error|terminate called|  what\(\)|artifact_prefix|Test unit written)' \
      "$build/logs/$h.log" | head -20 >&2 || true ;;
  esac
done
exit $status
