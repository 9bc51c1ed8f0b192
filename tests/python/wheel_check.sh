#!/usr/bin/env bash
# `pip wheel .` really works: builds the wheel from the source tree (scikit-build-core, nanobind:
# from PyPI, or from the pip cache), installs it into a fresh venv with numpy, and runs a job
# outside the source tree: the summary equals the CLI's, the package's own plugins are found
# without HEADSEP_PLUGIN_PATH; the wheel's `headsep` console script and `python -m headsep` print
# the executable's version and write the executable's summary. Usage: wheel_check.sh PYTHON SOURCE_DIR WORK_DIR WHEEL_BUILD_DIR
set -euo pipefail
python=$1 src=$2 work=$3 wheel_build=$4
rm -rf "$work/venv" "$work/dist" "$work/run" && mkdir -p "$work/dist" "$work/run"
# The wheel's CMake build folder persists between runs, so a rebuild is incremental; with ccache
# (as scripts/setup.sh uses it) a folder beside build/ shares the core's objects with it.
export SKBUILD_BUILD_DIR="$wheel_build"
if command -v ccache >/dev/null; then
  export CMAKE_ARGS="-DCMAKE_CXX_COMPILER_LAUNCHER=ccache -DCMAKE_C_COMPILER_LAUNCHER=ccache ${CMAKE_ARGS:-}"
fi
"$python" -m pip wheel --no-deps -q -w "$work/dist" "$src"
"$python" -m venv "$work/venv"
"$work/venv/bin/pip" install -q "$work"/dist/headsep-*.whl
unset HEADSEP_PLUGIN_PATH PYTHONPATH
cd "$work/run"
"$HEADSEP_CLI" run -s ops-reports -w axis-focus -p reports=2000 --summary s.json --quiet
want=$("$HEADSEP_CLI" --version)
[ "$("$work/venv/bin/headsep" --version)" = "$want" ] || { echo "wheel: headsep --version differs from $want" >&2; exit 1; }
[ "$("$work/venv/bin/python" -m headsep --version)" = "$want" ] || { echo "wheel: python -m headsep --version differs" >&2; exit 1; }
"$work/venv/bin/headsep" run -s ops-reports -w axis-focus -p reports=2000 --summary script.json --quiet
"$work/venv/bin/python" - <<'PY'
import headsep, json, os, pathlib
assert "site-packages" in headsep.__file__, headsep.__file__
plugins = {p["name"]: p["file"] for p in headsep.plugins()}
assert "site-packages/headsep/plugins/" in plugins["ops-reports"], plugins
res = headsep.run("ops-reports", "axis-focus", {"reports": 2000}, rows=False)
def masked(text):  # run.execution: this run's command line, start time, threads (docs/SUMMARY.md)
    d = json.loads(text)
    d["run"].pop("execution")
    return json.dumps(d)
assert masked(res.summary_json()) == masked(pathlib.Path("s.json").read_text(encoding="utf-8"))
assert masked(pathlib.Path("script.json").read_text(encoding="utf-8")) == masked(res.summary_json())
print("wheel ok:", headsep.__file__)
PY
