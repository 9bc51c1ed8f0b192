# Sourced by the run_issue*.sh benches: everything the script prints from here on also goes to
# bench-results/<name>-<date>-<cpu>.log, which starts with bench/machine.py's CPU line and the
# commit. Usage: source bench/results_log.sh NAME; then step "what runs next" before each bench.
cpu=$(python3 "$here/bench/machine.py")
slug=$(echo "$cpu" | sed -E 's/, load.*//; s/[^A-Za-z0-9]+/-/g; s/-+$//')
mkdir -p "$here/bench-results"
log="$here/bench-results/$1-$(date -u +%Y%m%dT%H%MZ)-$slug.log"
exec > >(tee "$log") 2>&1
echo "# $1 on: $cpu"
echo "# commit $(git -C "$here" rev-parse --short HEAD 2>/dev/null || echo '?'), $(date -u '+%F %T') UTC"
step() { echo; echo "## $*"; echo "# load before: $(cut -d' ' -f1-3 /proc/loadavg)"; }
