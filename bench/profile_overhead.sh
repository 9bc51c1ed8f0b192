#!/usr/bin/env bash
# What --profile costs on the README's main job: ops-reports (3..6 tokens) x axis-focus x the
# summary, the same binary with and without --profile, interleaved A/B (the order flips every
# round: off,on then on,off) so the shared machine's drift hits both alike. Per run: the
# process's wall time and its CPU time (user + system, the reaped child's rusage); prints each run, the
# per-round on/off ratios and their medians, and checks the summaries (without the profile
# section) are byte-identical. Only the ratios mean anything on a loaded machine, and other
# sessions' load moves single runs by +-10 %: so, where `perf` runs, one more --profile run under
# `perf record -e cpu-clock` attributes the samples: the profiler's own code (Profiler::Impl), the
# clock reads (clock_gettime, vDSO and system call) and the stage locks (pthread_mutex_*) against
# all; an upper bound of its cost that load does not blur (the clock and lock calls of the rest of
# the program are counted too).
# Usage: bench/profile_overhead.sh [HEADSEP=build/headsep] [REPORTS=10000000] [THREADS=2] [ROUNDS=5]
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
bin=${1:-$here/build/headsep} reports=${2:-10000000} threads=${3:-2} rounds=${4:-5}
[ -x "$bin" ] || { echo "profile_overhead.sh: no headsep binary at $bin (bash scripts/setup.sh builds it)" >&2; exit 1; }
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
echo "CPU: $(python3 "$(dirname "$0")/machine.py")"
echo "job: $bin run -s ops-reports -w axis-focus -p reports=$reports -p seed=2026 --top 5 --threads $threads -q --summary S [--profile]"
/usr/bin/python3 - "$bin" "$reports" "$threads" "$rounds" "$tmp" <<'PY'
import json, os, resource, statistics as st, subprocess, sys, time
binary, reports, threads, rounds, tmp = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4]), sys.argv[5]
def run(profile, tag):
    summary = f'{tmp}/{tag}.json'
    cmd = [binary, 'run', '-s', 'ops-reports', '-w', 'axis-focus', '-p', f'reports={reports}', '-p', 'seed=2026',
           '--top', '5', '--threads', threads, '-q', '--summary', summary] + (['--profile'] if profile else [])
    t0 = time.perf_counter()
    p = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    _, err = p.communicate()
    wall = time.perf_counter() - t0
    if p.returncode != 0:
        sys.exit(f'{cmd} failed ({p.returncode}): {err.decode()[-2000:]}')
    j = json.load(open(summary))
    prof = j.pop('profile', None)
    return wall, j, prof, err.decode()
def cpu_of(f):  # CPU seconds of the children waited for during f()
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    out = f()
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return out, (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
ratios_wall, ratios_cpu, ref, same = [], [], None, True
walls = {False: [], True: []}; cpus = {False: [], True: []}
last_table = ''
for r in range(rounds):
    order = (False, True) if r % 2 == 0 else (True, False)
    res = {}
    for profile in order:
        (wall, j, prof, err), cpu = cpu_of(lambda: run(profile, f'{r}-{int(profile)}'))
        res[profile] = (wall, cpu)
        walls[profile].append(wall); cpus[profile].append(cpu)
        if ref is None: ref = j
        same = same and j == ref
        if profile: last_table = err
        print(f'round {r + 1}: {"on " if profile else "off"}  wall {wall:7.3f} s  cpu {cpu:7.3f} s', flush=True)
    ratios_wall.append(res[True][0] / res[False][0]); ratios_cpu.append(res[True][1] / res[False][1])
    print(f'round {r + 1}: on/off wall {ratios_wall[-1]:.4f}  cpu {ratios_cpu[-1]:.4f}', flush=True)
print(f'summaries identical without the profile section: {same}')
print(f'median wall: off {st.median(walls[False]):.3f} s, on {st.median(walls[True]):.3f} s; '
      f'median cpu: off {st.median(cpus[False]):.3f} s, on {st.median(cpus[True]):.3f} s')
print(f'median on/off ratio over {rounds} rounds: wall {st.median(ratios_wall):.4f} '
      f'({100 * (st.median(ratios_wall) - 1):+.2f} %), cpu {st.median(ratios_cpu):.4f} ({100 * (st.median(ratios_cpu) - 1):+.2f} %)')
print('last --profile table:\n' + last_table.rstrip())
if not same: sys.exit('the summaries differ with --profile')
PY
echo "load after: $(cut -d' ' -f1-3 /proc/loadavg)"
if command -v perf >/dev/null && perf record -q -e cpu-clock -o "$tmp/probe.data" true 2>/dev/null; then
  perf record -q -e cpu-clock -F 1999 -g -o "$tmp/perf.data" "$bin" run -s ops-reports -w axis-focus -p reports="$reports" \
    -p seed=2026 --top 5 --threads "$threads" -q --summary "$tmp/perf.json" --profile 2>/dev/null
  perf report -i "$tmp/perf.data" --children --sort sym -g none --percent-limit 0 2>/dev/null | /usr/bin/python3 -c '
import re, sys
rows = [re.match(r"\s*([\d.]+)%\s+([\d.]+)%\s+\[.\]\s+(.*)", l) for l in sys.stdin]
rows = [(float(m[1]), float(m[2]), m[3].strip()) for m in rows if m]
own = sum(s for _, s, n in rows if "Profiler::Impl" in n or "prof::StageTimer" in n)
clock = sum(c for c, _, n in rows if n.startswith("clock_gettime@"))  # inclusive: vDSO and the system call
locks = sum(s for _, s, n in rows if n.startswith(("pthread_mutex_lock", "pthread_mutex_unlock", "__GI___pthread_mutex")))
print(f"perf (cpu-clock samples of one --profile run): profiler code {own:.2f} %, clock reads {clock:.2f} %, "
      f"mutex lock/unlock {locks:.2f} %: at most {own + clock + locks:.2f} % of the run is the profiler")'
else
  echo "perf: not available here (perf record -e cpu-clock failed); no sample attribution"
fi
