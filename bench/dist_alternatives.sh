#!/usr/bin/env bash
# The two scale-out choices the issue asks to measure (docs/DISTRIBUTED.md), on one machine:
#  - CSV input: rank 0 reads and hands chunks out (default) vs every rank parsing byte ranges
#    aligned to report boundaries (--mpi-csv ranges);
#  - per-report rows: gathered to rank 0 and formatted there (default) vs formatted by the rank
#    that computed them and written at offsets (--mpi-rows offsets).
# Each configuration runs REPEAT times (best wall time; CPU = user + sys of every process, from
# /usr/bin/time around mpirun, which waits for its ranks); bytes sent per rank from
# --mpi-stats; every configuration of a kind must write the same bytes (checked).
# Then each pair alternating A B A B ... AB_ROUNDS times (default 7): medians.
# Usage: bench/dist_alternatives.sh [CSV_REPORTS=400000] [GEN_REPORTS=500000] [REPEAT=3]
#   CSV_REPORTS: reports in the generated CSV (tests/dist/make_csv.py, ~580 B per report and
#   scenario row set; files in /dev/shm); GEN_REPORTS: ops-reports for the synthetic rows run.
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
H=${HEADSEP:-$here/build/headsep}
csv_reports=${1:-400000} gen_reports=${2:-500000} repeat=${3:-3}
out=$(mktemp -d /dev/shm/headsep-alt.XXXXXX)
trap 'rm -rf "$out"' EXIT
mpi=(mpirun --allow-run-as-root --oversubscribe --bind-to none)

python3 "$here/tests/dist/make_csv.py" "$out/in.csv" "$csv_reports"
echo "# CPU: $(python3 "$(dirname "$0")/machine.py")"
echo "# CSV: $csv_reports reports, $(stat -c %s "$out/in.csv") bytes; synthetic rows: ops-reports x axis-focus, $gen_reports reports; best of $repeat"
echo "# wall s (CPU s = user + sys of every process); MB sent by rank 0 and rank 1"
source "$here/bench/best_of.sh"  # best TAG CMD...: "wall cpu" of the best of $repeat runs
sent() {  # sent TAG: "rank0 MB / rank1 MB" from --mpi-stats lines
  python3 - "$out/$1.err" << 'EOF'
import re, sys
m = {int(r): int(b) for r, b in re.findall(r"rank (\d+) of \d+ sent (\d+) bytes", open(sys.argv[1]).read())}
print(" / ".join(f"{m[r] / 1e6:.1f}" for r in sorted(m)) if m else "-")
EOF
}
run_kind() {  # run_kind KIND FILES -- CONFIG=CMD... (CMD words separated by spaces, no quoting)
  local kind=$1 ref="" sum
  shift
  for cfg in "$@"; do
    local name=${cfg%%=*} cmd=${cfg#*=}
    rm -f "$out"/S.json "$out"/R.csv
    # shellcheck disable=SC2086
    read -r wall cpu <<< "$(best "$kind-$name" $cmd)"
    files=("$out/S.json")
    [ -f "$out/R.csv" ] && files+=("$out/R.csv")
    sum=$(cat "${files[@]}" | md5sum | cut -c1-12)
    [ -z "$ref" ] && ref=$sum
    [ "$sum" = "$ref" ] || echo "!! $kind $name: output differs from the first configuration"
    printf '%-18s %-22s %7.2f s wall %7.2f s CPU  sent MB %-14s (output %s)\n' "$kind" "$name" "$wall" "$cpu" "$(sent "$kind-$name")" "$sum"
  done
}
# --mpi-stats: a line per rank under mpirun; one process prints nothing.
csv=(run -i "$out/in.csv" -q --mpi-stats)
gen=(run -s ops-reports -w axis-focus -p reports="$gen_reports" -q --mpi-stats)
S="--summary $out/S.json" R="--per-report $out/R.csv"
run_kind csv-summary \
  "1x1=$H ${csv[*]} --threads 1 $S" \
  "1x2=$H ${csv[*]} --threads 2 $S" \
  "np2:rank0-reads=${mpi[*]} -np 2 $H ${csv[*]} --threads 1 $S" \
  "np2:ranges=${mpi[*]} -np 2 $H ${csv[*]} --mpi-csv ranges --threads 1 $S"
run_kind csv-rows \
  "1x1=$H ${csv[*]} --threads 1 $S $R" \
  "1x2=$H ${csv[*]} --threads 2 $S $R" \
  "np2:rank0,gather=${mpi[*]} -np 2 $H ${csv[*]} --threads 1 $S $R" \
  "np2:rank0,offsets=${mpi[*]} -np 2 $H ${csv[*]} --mpi-rows offsets --threads 1 $S $R" \
  "np2:ranges,gather=${mpi[*]} -np 2 $H ${csv[*]} --mpi-csv ranges --threads 1 $S $R"
run_kind gen-rows \
  "1x1=$H ${gen[*]} --threads 1 $S $R" \
  "1x2=$H ${gen[*]} --threads 2 $S $R" \
  "np2:gather=${mpi[*]} -np 2 $H ${gen[*]} --threads 1 $S $R" \
  "np2:offsets=${mpi[*]} -np 2 $H ${gen[*]} --mpi-rows offsets --threads 1 $S $R"
# Each choice against its alternative, alternating A B A B ... ROUNDS times (a shared machine's
# load drifts; alternating puts both under the same drift): median wall and CPU of each.
rounds=${AB_ROUNDS:-7}
ab() {  # ab KIND "A=CMD" "B=CMD"
  local kind=$1 a=$2 b=$3
  for _ in $(seq "$rounds"); do
    for cfg in "$a" "$b"; do
      # shellcheck disable=SC2086
      /usr/bin/time -o "$out/time" -f "%e %U %S" ${cfg#*=} > /dev/null 2> /dev/null
      awk -v n="${cfg%%=*}" '{printf "%s %s %.2f\n", n, $1, $2 + $3}' "$out/time" >> "$out/ab-$kind"
    done
  done
  python3 - "$out/ab-$kind" "$kind" "$rounds" << 'EOF'
import statistics, sys
rows = [l.split() for l in open(sys.argv[1])]
for name in dict.fromkeys(r[0] for r in rows):
    w = [float(r[1]) for r in rows if r[0] == name]
    c = [float(r[2]) for r in rows if r[0] == name]
    print(f"{sys.argv[2]:<18} {name:<22} median {statistics.median(w):6.2f} s wall (min {min(w):.2f}, max {max(w):.2f})"
          f" {statistics.median(c):6.2f} s CPU (min {min(c):.2f}, max {max(c):.2f}), {sys.argv[3]} alternating runs")
EOF
}
echo "# alternating A/B, $rounds rounds, load now: $(cut -d' ' -f1-3 /proc/loadavg)"
ab csv-summary "np2:rank0-reads=${mpi[*]} -np 2 $H ${csv[*]} --threads 1 $S" \
  "np2:ranges=${mpi[*]} -np 2 $H ${csv[*]} --mpi-csv ranges --threads 1 $S"
ab csv-rows "np2:rank0,gather=${mpi[*]} -np 2 $H ${csv[*]} --threads 1 $S $R" \
  "np2:rank0,offsets=${mpi[*]} -np 2 $H ${csv[*]} --mpi-rows offsets --threads 1 $S $R"
ab gen-rows "np2:gather=${mpi[*]} -np 2 $H ${gen[*]} --threads 1 $S $R" \
  "np2:offsets=${mpi[*]} -np 2 $H ${gen[*]} --mpi-rows offsets --threads 1 $S $R"
echo "# load after: $(cut -d' ' -f1-3 /proc/loadavg)"
