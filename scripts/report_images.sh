#!/usr/bin/env bash
# Regenerates the README's report images (docs/images/*.png) from the current code: the figures
# of `headsep example`, a 100,000-report run and a sweep, as --plot-svg writes them, screenshot in
# headless Chromium (the browser the tests use).
# Usage: scripts/report_images.sh [BUILD_DIR]   (default: build)
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
H=${1:-$here/build}/headsep
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
"$H" example --plot-svg "$tmp/ex" > /dev/null
"$H" run -s ops-reports -p reports=100000 -w axis-focus -q --plot-svg "$tmp/big"
"$H" sweep -s ops-reports -w axis-focus -q --vary axis-focus.sharpness=0.25:4:9 --plot-svg "$tmp/sw" \
  -p 'designs=decision_vs_evidence=decision_axis,evidence_condition_axis;both_decision=decision_axis,decision_axis'
# shot OUT.png WIDTH HEIGHT SVG...: the figures side by side on a white page, screenshot.
shot() {
  local out=$1 w=$2 h=$3
  shift 3
  { echo '<!DOCTYPE html><meta charset="utf-8"><body style="margin:4px;display:flex;gap:6px;align-items:flex-start;background:#fff">'
    for f in "$@"; do sed 1d "$f"; done; } > "$tmp/page.html"
  chromium --headless --no-sandbox --disable-gpu --hide-scrollbars --force-device-scale-factor=1 \
    --user-data-dir="$tmp/profile" --window-size="$w,$h" --screenshot="$out" "file://$tmp/page.html" 2> /dev/null
}
shot "$here/docs/images/seed-plot.png" 1212 374 "$tmp"/ex/seed-plot-{0,1,2}.svg
shot "$here/docs/images/report-distributions.png" 830 280 "$tmp/big/dist-head_separation.svg"
shot "$here/docs/images/sweep.png" 780 400 "$tmp/sw/sweep.svg"
echo "wrote docs/images/seed-plot.png, report-distributions.png, sweep.png"
