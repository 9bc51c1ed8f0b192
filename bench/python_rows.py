#!/usr/bin/env python3
"""Time per kept row of ``headsep.run(..., rows=True)`` from 10^5 to 10^7 rows: it must stay flat
(rows kept in linear time, issue 47). Each size runs the main job (ops-reports x axis-focus, 3
scenarios: rows = 3 x reports) with rows on and off in the same process; the difference is what
keeping the rows costs. The last column times building ``Result.rows`` (the DataFrame) too.

    PYTHONPATH=build/python build/pyvenv/bin/python bench/python_rows.py [--max-rows 10000000] [--threads 2]
"""
import argparse
import time

import headsep
from machine import cpu_line

SIZES = (100_000, 300_000, 1_000_000, 3_000_000, 10_000_000)


def run(reports: int, rows: bool, threads: int):
    t = time.perf_counter()
    res = headsep.run("ops-reports", "axis-focus", {"reports": reports, "seed": 7}, rows=rows, threads=threads)
    return res, time.perf_counter() - t


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--max-rows", type=int, default=SIZES[-1])
    ap.add_argument("--threads", type=int, default=2)
    a = ap.parse_args()
    print(cpu_line())
    print(f"{'rows':>10} {'rows on s':>10} {'rows off s':>10} {'ns/row kept':>12} {'DataFrame s':>12} {'ns/row df':>10}")
    for size in (s for s in SIZES if s <= a.max_rows):
        reports = size // 3
        res, on = run(reports, True, a.threads)
        _, off = run(reports, False, a.threads)
        n = len(res.arrays["report_index"])
        assert n == 3 * reports, (n, reports)
        t = time.perf_counter()
        frame = res.rows
        df = time.perf_counter() - t
        assert len(frame) == n
        print(f"{n:>10} {on:>10.3f} {off:>10.3f} {1e9 * (on - off) / n:>12.1f} {df:>12.3f} {1e9 * df / n:>10.1f}", flush=True)
        del res, frame


if __name__ == "__main__":
    main()
