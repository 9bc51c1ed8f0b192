#!/bin/sh
# Metric kernel vs streaming-read roofline, 3-token reports, 2 heads, 2 axes, at the best
# supported SIMD level (automatic strategy), f32 and f64, 1 and 2 threads.
#
#   bench/roofline.sh [path/to/bench_kernels] [repetitions]
#   bench/roofline.sh attention [BUILD_DIR] [SHAPES]   the qkv attention against FLOPs + exp/log
#                                                      throughput (bench/roofline_attention.py)
#
# Prints kernel groups/s (reports/s), roofline groups/s (the same input bytes summed) and their
# ratio, from the median of the repetitions. The target from the issue: f32 on 2 threads >= 50%.
set -eu
if [ "${1:-}" = attention ]; then shift; exec python3 "$(dirname "$0")/roofline_attention.py" "$@"; fi
BIN=${1:-build/bench/bench_kernels}
REPS=${2:-5}
[ -x "$BIN" ] || { echo "roofline.sh: no benchmark binary at $BIN (build target bench_kernels)" >&2; exit 2; }

LEVEL=$("$BIN" --benchmark_list_tests=true --benchmark_filter='^kernel/f32/[a-z0-9]+/auto/L3/H2/threads:1' |
  awk -F/ '{print $3}' | awk 'BEGIN{r["scalar"]=0;r["sse2"]=1;r["avx2"]=2;r["avx512"]=3;b="scalar"} {if (r[$1]>r[b]) b=$1} END{print b}')

"$BIN" --benchmark_filter="^(roofline/f(32|64)|kernel/f(32|64)/$LEVEL/auto)/L3/H2/threads:[12]/" \
  --benchmark_min_time=0.2 --benchmark_repetitions="$REPS" --benchmark_report_aggregates_only=true \
  --benchmark_format=csv 2>/dev/null |
python3 -c '
import csv, sys
level = sys.argv[1]
rows = [r for r in csv.reader(sys.stdin) if r and r[0].endswith("_median")]
# header-less: name,iterations,real_time,cpu_time,time_unit,bytes_per_second,items_per_second,...
rate = {}
for r in rows:
    parts = r[0].split("/")
    prec = parts[1]
    threads = next(p for p in parts if p.startswith("threads:")).split(":")[1]
    kind = parts[0]
    rate[(kind, prec, threads)] = float(r[6])
print(f"level {level}, 3-token reports, 2 heads, 2 axes, median of repetitions")
print("%-5s %7s %16s %18s %7s" % ("prec", "threads", "kernel groups/s", "roofline groups/s", "ratio"))
for prec in ("f32", "f64"):
    for t in ("1", "2"):
        k, r = rate.get(("kernel", prec, t)), rate.get(("roofline", prec, t))
        if k and r:
            print(f"{prec:5} {t:>7} {k/1e6:>14.1f} M {r/1e6:>16.1f} M {100*k/r:>6.1f}%")
' "$LEVEL"
