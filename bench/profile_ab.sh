#!/usr/bin/env bash
# Before/after on the README's main job, in one run, alternating (the machine is shared: only
# ratios within one run mean anything): ops-reports (3..6 tokens) x axis-focus x the summary,
# --profile on both. Prints per run wall, groups/s, CPU seconds summed over threads, and per
# stage CPU; checks the summaries (without their profile section) are byte-identical.
# Usage: bench/profile_ab.sh BEFORE_HEADSEP AFTER_HEADSEP [REPORTS=2000000] [THREADS=1,2] [REPS=3]
set -euo pipefail
before=$1 after=$2 reports=${3:-2000000} threads=${4:-1,2} reps=${5:-3}
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
echo "CPU: $(python3 "$(dirname "$0")/machine.py")"
for t in ${threads//,/ }; do
  for r in $(seq "$reps"); do
    for which in before after; do
      bin=${!which}
      dirs=(); [ -d "$(dirname "$bin")/plugins" ] && dirs=(--plugin-dir "$(dirname "$bin")/plugins")  # its own plugins first
      "$bin" run "${dirs[@]}" -s ops-reports -w axis-focus -p reports="$reports" -p seed=2026 --top 5 --threads "$t" -q --profile \
        --summary "$tmp/$which-$t-$r.json" 2>/dev/null
    done
  done
done
echo "load after: $(cut -d' ' -f1-3 /proc/loadavg)"
/usr/bin/python3 - "$tmp" "$threads" "$reps" <<'PY'
import json, sys, statistics as st
tmp, threads, reps = sys.argv[1], sys.argv[2].split(','), int(sys.argv[3])
def load(p):  # the summary without its profile and run blocks (paths, command line, start time)
    j = json.load(open(p)); prof = j.pop('profile'); j.pop('run', None); return j, prof
for t in threads:
    rows = {}
    for which in ('before', 'after'):
        runs = [load(f'{tmp}/{which}-{t}-{r}.json') for r in range(1, reps + 1)]
        rows[which] = runs
    ref = rows['before'][0][0]
    same = all(j == ref for w in rows.values() for j, _ in w)
    print(f'threads {t}: summaries identical (without profile and run): {same}')
    med = {}
    for which, runs in rows.items():
        wall = st.median(p['wall_s'] for _, p in runs); cpu = st.median(p['cpu_s'] for _, p in runs)
        gps = st.median(p['groups_per_s'] for _, p in runs)
        med[which] = (wall, cpu, gps)
        stages = {}
        for _, p in runs:
            for s in p['stages']:
                k = s['kind'] if s['kind'] != 'weighting' else 'weighting'
                stages.setdefault(k, []).append(s['cpu_s'])
        per = ', '.join(f'{k} {st.median(v) * len(v) / reps:.3f}' for k, v in stages.items())
        print(f'  {which:6s} wall {wall:7.3f} s  {gps / 1e6:6.2f} M groups/s  cpu {cpu:7.3f} s  | cpu s per stage: {per}')
    b, a = med['before'], med['after']
    print(f'  after/before: throughput x{a[2] / b[2]:.2f} (wall), cpu x{b[1] / a[1]:.2f} less CPU per run')
PY
