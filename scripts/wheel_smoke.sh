#!/usr/bin/env bash
# The wheel's smoke test, as a user without a compiler would run it: a fresh venv, `pip install
# WHEEL` (numpy from PyPI), then from an empty folder: `headsep --version` and `python -m headsep
# --version` agree; every ELF file of the package finds its libraries (ldd); `headsep plugins`
# lists the built-in plugins; `headsep example` prints the seed exercise; a run's summary from the
# console script equals headsep.run's in Python; a Python plugin found as a .py file through
# --plugin-dir runs. With REFERENCE (an executable built by scripts/setup.sh) the run's summary
# must also equal that executable's. Run by scripts/build_wheel.sh and scripts/fresh-check.sh --wheel.
# Usage: scripts/wheel_smoke.sh WHEEL [REFERENCE]    Env: PYTHON (default python3)
set -euo pipefail
wheel=$(readlink -f "$1") ref=${2:-}
dir=$(mktemp -d "${TMPDIR:-/tmp}/headsep-wheel.XXXXXX")
trap 'rm -rf "$dir"' EXIT
fail() { echo "wheel_smoke: FAILED: $*" >&2; exit 1; }
say() { echo "wheel_smoke: $*"; }
"${PYTHON:-python3}" -m venv "$dir/venv"
"$dir/venv/bin/pip" install -q --disable-pip-version-check "$wheel" || fail "pip install $wheel"
bin=$dir/venv/bin
cd "$dir" && unset HEADSEP_PLUGIN_PATH PYTHONPATH
v=$("$bin/headsep" --version) || fail "headsep --version"
[ "$v" = "$("$bin/python" -m headsep --version)" ] || fail "python -m headsep --version differs from headsep --version"
say "$v (console script and python -m headsep)"
site=$("$bin/python" -c 'import headsep, os; print(os.path.dirname(os.path.dirname(headsep.__file__)))')
while IFS= read -r -d '' f; do
  ! ldd "$f" 2>&1 | grep -q "not found" || fail "$f: $(ldd "$f" | grep 'not found' | head -3)"
done < <(find "$site/headsep" "$site/headsep.libs" -name '*.so*' -type f -print0 2>/dev/null)
say "every shared object of the package finds its libraries ($(find "$site/headsep.libs" -type f 2>/dev/null | wc -l) vendored)"
"$bin/headsep" plugins > plugins.txt || fail "headsep plugins"
for p in ops-reports axis-focus qkv text csv; do grep -q " $p " plugins.txt || fail "headsep plugins: no $p"; done
"$bin/headsep" example > example.txt || fail "headsep example"
grep -q "^csv_rows = 36$" example.txt || fail "headsep example: $(head -2 example.txt)"
"$bin/headsep" run -s ops-reports -w axis-focus -p reports=20000 --summary cli.json --quiet || fail "headsep run"
"$bin/python" - <<'PY' || fail "headsep.run's summary differs from the console script's"
import json, pathlib, headsep
def masked(text):  # run.execution: this run's command line, start time, threads (docs/SUMMARY.md)
    d = json.loads(text)
    d["run"].pop("execution")
    return d
res = headsep.run("ops-reports", "axis-focus", {"reports": 20000}, rows=False)
assert masked(res.summary_json()) == masked(pathlib.Path("cli.json").read_text()), "summaries differ"
PY
say "headsep run == headsep.run (20 000 reports, every summary field but run.execution)"
mkdir plugins && cat > plugins/ramp.py <<'PY'
import numpy as np
import headsep

class Ramp(headsep.ScenarioGenerator):
    """Three-token reports whose axes ramp with the report index."""
    features = ("decision_axis", "evidence_axis", "condition_axis")
    random_access = True
    parameters = {"reports": 1000}

    def open(self, params):
        self.total_reports = params["reports"]

    def chunk(self, index, max_reports):
        first = index * max_reports
        n = min(max_reports, self.total_reports - first)
        if n <= 0:
            return None
        x = np.linspace(0, 1, 3 * n) + first
        return headsep.Chunk(np.arange(n + 1) * 3, [x, 1 - x, x * x])
PY
"$bin/headsep" plugins ramp --plugin-dir plugins | grep -q "^ramp (scenario plugin)" || fail "headsep plugins: no ramp from plugins/ramp.py"
"$bin/headsep" run --plugin-dir plugins -s ramp -w uniform -p reports=5000 --summary ramp.json --quiet || fail "run -s ramp"
grep -q "\"groups\": 5000," ramp.json || fail "run -s ramp: $(head -c 300 ramp.json)"
say "a Python plugin from --plugin-dir (plugins/ramp.py) ran: 5000 reports"
if [ -n "$ref" ]; then
  "$ref" run -s ops-reports -w axis-focus -p reports=20000 --summary ref.json --quiet || fail "$ref run"
  "$bin/python" -c '
import json, sys
a, b = (json.load(open(p)) for p in ("cli.json", "ref.json"))
for d in (a, b): d["run"].pop("execution")
sys.exit(a != b)' || fail "the wheel's summary differs from $ref's"
  say "the summary equals $ref's"
fi
say "ok"
