"""Throughput of a plugin written in Python against the same plugin as a .so, at 1 and 2 threads.

The generator is examples/python/python_plugin.py's OpsReports (NumPy, bit for bit the built-in
ops-reports), the weighting its Uniform (the built-in uniform): each job runs once with the .so
and once with the Python plugin in its place, same data, same engine; the summaries must be equal.
Prints reports/s and the Python/.so ratio. The GIL lets one Python call run at a time, so a
Python plugin's share of the work does not scale with threads (docs/PYTHON.md, "Plugins in Python").

    PYTHONPATH=build/python python bench/python_plugin_throughput.py   # HEADSEP_BENCH_REPORTS=1000000
"""
from __future__ import annotations

import json
import os
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "examples", "python"))
import python_plugin as ex  # noqa: E402

from headsep import _headsep  # noqa: E402
from machine import cpu_line  # noqa: E402


def timed(scenario, weighting, params, threads, repeat):
    best, out = float("inf"), None
    for _ in range(repeat):
        t = time.perf_counter()
        out = _headsep._summary_json(scenario, weighting, params, threads, 0)
        best = min(best, time.perf_counter() - t)
    return best, json.loads(out)


def main() -> None:
    reports = int(os.environ.get("HEADSEP_BENCH_REPORTS", "1000000"))
    repeat = int(os.environ.get("HEADSEP_BENCH_REPEAT", "3"))
    params = [f"reports={reports}"]
    print(f"CPU: {cpu_line()}; {reports} reports, best of {repeat}; chunk 8192")
    jobs = [("generator", ("ops-reports", "uniform"), (ex.OpsReports(), "uniform")),
            ("weighting", ("ops-reports", "uniform"), ("ops-reports", ex.Uniform())),
            ("both", ("ops-reports", "uniform"), (ex.OpsReports(), ex.Uniform()))]
    print(f"{'Python plugin':14} {'threads':>7} {'.so reports/s':>14} {'Python reports/s':>17} {'Python/.so':>11}")
    for what, so, py in jobs:
        for threads in (1, 2):
            t_so, s_so = timed(*so, params, threads, repeat)
            t_py, s_py = timed(*py, params, threads, repeat)
            same = [s["metrics"] for s in s_so["scenarios"]] == [s["metrics"] for s in s_py["scenarios"]]
            if not same:
                raise SystemExit(f"{what}: the Python plugin's summary differs from the .so's")
            print(f"{what:14} {threads:>7} {reports / t_so:>14,.0f} {reports / t_py:>17,.0f} {t_so / t_py:>10.1%}")


if __name__ == "__main__":
    main()
