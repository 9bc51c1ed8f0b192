#!/usr/bin/env python3
"""The main job (scripts/run.sh: ops-reports x axis-focus, seed 2026, --top 5) through Python and
through the CLI in the same run, interleaved; prints each side's median wall time and the ratio
(target: Python within 5 % of the CLI), and checks that both summaries are the same bytes.

    PYTHONPATH=build/python build/pyvenv/bin/python bench/python_vs_cli.py [--reports N] [--repeat R]

The CLI is timed as a process (start-up, plugin loading, the run, writing --summary); Python as
the headsep.run call (plugin loading, the run) plus summary_json(), the interpreter already up.
Both wall time and CPU time (user + sys of every thread: getrusage) are shown; on a shared,
loaded machine the wall time measures the neighbours, the CPU time the work.
Env: HEADSEP_CLI (default build/headsep), HEADSEP_BENCH_REPORTS (default 10 000 000).
"""
import argparse
import os
import pathlib
import resource
import statistics
import subprocess
import sys
import tempfile
import time

import headsep
from machine import cpu_line

ROOT = pathlib.Path(__file__).resolve().parents[1]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--reports", type=int, default=int(os.environ.get("HEADSEP_BENCH_REPORTS", 10_000_000)))
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--threads", type=int, default=0)
    ap.add_argument("--rows", action="store_true", help="Python keeps the rows too (the CLI: --per-report x.csv)")
    ap.add_argument("--no-report", action="store_true",
                    help="Python without the report's sink (report=False): the CLI's --summary run has none")
    args = ap.parse_args()
    cli = os.environ.get("HEADSEP_CLI", str(ROOT / "build" / "headsep"))
    params = {"reports": args.reports, "seed": 2026}
    cli_t, py_t, cli_c, py_c = [], [], [], []

    def cpu(who):
        r = resource.getrusage(who)
        return r.ru_utime + r.ru_stime

    with tempfile.TemporaryDirectory() as tmp:
        summary = pathlib.Path(tmp) / "s.json"
        cmd = [cli, "run", "--scenario", "ops-reports", "--weighting", "axis-focus", "-p", f"reports={args.reports}",
               "-p", "seed=2026", "--top", "5", "--summary", str(summary), "--quiet", "--threads", str(args.threads)]
        if args.rows:
            cmd += ["--per-report", str(pathlib.Path(tmp) / "r.csv")]
        for i in range(args.repeat):
            # Alternate which side goes first: a shared machine drifts.
            for side in (("cli", "py") if i % 2 == 0 else ("py", "cli")):
                if side == "cli":
                    c0, t0 = cpu(resource.RUSAGE_CHILDREN), time.perf_counter()
                    subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL)
                    cli_t.append(time.perf_counter() - t0)
                    cli_c.append(cpu(resource.RUSAGE_CHILDREN) - c0)
                else:
                    c0, t0 = cpu(resource.RUSAGE_SELF), time.perf_counter()
                    res = headsep.run("ops-reports", "axis-focus", params, top=5, rows=args.rows, report=not args.no_report,
                                      threads=args.threads or None)
                    text = res.summary_json()
                    py_t.append(time.perf_counter() - t0)
                    py_c.append(cpu(resource.RUSAGE_SELF) - c0)
                    del res
        same = text == summary.read_text(encoding="utf-8")
    c, p = statistics.median(cli_t), statistics.median(py_t)
    cc, pc = statistics.median(cli_c), statistics.median(py_c)
    print(f"main job: {args.reports} reports x 3 head designs, {args.repeat} runs each; CPU: {cpu_line()}; "
          f"Python rows={args.rows} report={not args.no_report}")
    print(f"  CLI    wall median {c:.3f} s (runs {', '.join(f'{t:.3f}' for t in cli_t)}), CPU median {cc:.3f} s")
    print(f"  Python wall median {p:.3f} s (runs {', '.join(f'{t:.3f}' for t in py_t)}), CPU median {pc:.3f} s")
    print(f"  Python / CLI: wall {p / c:.3f} ({(p / c - 1) * 100:+.1f} %), CPU {pc / cc:.3f} ({(pc / cc - 1) * 100:+.1f} %); "
          f"target within 5 %.  load average {os.getloadavg()[0]:.1f}.  summaries identical: {same}")
    return 0 if same else 1


if __name__ == "__main__":
    sys.exit(main())
