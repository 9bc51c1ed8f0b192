#!/usr/bin/env bash
# Scale-out on one machine (docs/DISTRIBUTED.md): the same run as 1 process x 1 thread,
# 1 process x 2 threads, and mpirun -np 1|2 x 1 thread, for a summary run and a per-report run;
# best of REPEAT wall times, the bytes each rank sends (--mpi-stats), and a check that
# every configuration wrote the same bytes. Quote the CPU and the load with the numbers.
# Usage: bench/dist_scaling.sh [REPORTS=4000000] [ROW_REPORTS=500000] [REPEAT=3] [ATT_REPORTS=40000]
#   REPORTS for the summary run, ROW_REPORTS for the per-report run (CSV rows in /dev/shm),
#   ATT_REPORTS for a summary run of an attention scheme (qkv, d_model 64, 4 heads: ~100x the
#   computing per report, the kind of run a cluster is for).
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
H=${HEADSEP:-$here/build/headsep}
reports=${1:-4000000} row_reports=${2:-500000} repeat=${3:-3} att_reports=${4:-40000}
out=$(mktemp -d /dev/shm/headsep-dist.XXXXXX)
trap 'rm -rf "$out"' EXIT
mpi=(mpirun --allow-run-as-root --oversubscribe --bind-to none)

echo "# CPU: $(python3 "$(dirname "$0")/machine.py")"
echo "# ops-reports x 3 scenarios (axis-focus): summary run ${reports} reports, per-report run ${row_reports};"
echo "# attention: ops-reports d_model 64 x qkv 4 heads, summary run ${att_reports} reports; best of ${repeat}"
echo "# wall s (CPU s = user + sys of every process)"
source "$here/bench/best_of.sh"  # best TAG CMD...: "wall cpu" of the best of $repeat runs
for kind in summary per-report attention; do
  extra=(--summary "$out/S.json")
  gen=(run -s ops-reports -w axis-focus -p reports="$reports" -q)
  [ $kind = per-report ] && extra+=(--per-report "$out/R.csv") && gen=(run -s ops-reports -w axis-focus -p reports="$row_reports" -q)
  [ $kind = attention ] && gen=(run -s ops-reports -p d_model=64 -w qkv -p heads=4 -p reports="$att_reports" -q)
  rm -f "$out"/S.json "$out"/R.csv
  declare -A t=()
  ref=""
  for cfg in "1x1" "1x2" "mpi1x1" "mpi2x1"; do
    case $cfg in
      1x1) cmd=("$H" "${gen[@]}" --threads 1) ;;
      1x2) cmd=("$H" "${gen[@]}" --threads 2) ;;
      mpi1x1) cmd=("${mpi[@]}" -np 1 "$H" "${gen[@]}" --threads 1) ;;
      mpi2x1) cmd=("${mpi[@]}" -np 2 "$H" "${gen[@]}" --mpi-stats --threads 1) ;;
    esac
    t[$cfg]=$(best "$kind-$cfg" "${cmd[@]}" "${extra[@]}")
    files=("$out/S.json")
    [ -f "$out/R.csv" ] && files+=("$out/R.csv")
    sum=$(cat "${files[@]}" | md5sum | cut -c1-12)
    [ -z "$ref" ] && ref=$sum
    [ "$sum" = "$ref" ] || echo "!! $kind $cfg: output differs from 1x1"
    read -r wall cpu <<< "${t[$cfg]}"
    printf '%-10s %-7s %8.2f s wall %8.2f s CPU  (output %s)\n' "$kind" "$cfg" "$wall" "$cpu" "$sum"
    t[$cfg]=$wall
  done
  grep -h "headsep: mpi:" "$out/$kind-mpi2x1.err" | sed 's/^/    /'
  python3 -c "
t1, t2, m1, m2 = ${t[1x1]}, ${t[1x2]}, ${t[mpi1x1]}, ${t[mpi2x1]}
print(f'    speed-up over 1x1: 1 rank x 2 threads {t1/t2:.2f}x, 2 ranks x 1 thread {t1/m2:.2f}x (mpirun -np 1: {t1/m1:.2f}x)')"
done
echo "# load after: $(cut -d' ' -f1-3 /proc/loadavg)"
