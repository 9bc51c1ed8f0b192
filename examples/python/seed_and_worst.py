#!/usr/bin/env python3
"""The seed exercise from Python, a DataFrame of the worst-separated reports, the report inline.

    pip install '.[pandas]'                    # or: PYTHONPATH=build/python (docs/PYTHON.md)
    python examples/python/seed_and_worst.py [--reports N] [--html run.html]

In Jupyter, run the cells and leave `res` as a cell's last line: the HTML report shows inline.
"""
import argparse
import pathlib

import headsep

SEED_CSV = pathlib.Path(__file__).resolve().parents[2] / "data" / "qkv-multihead-report-scenarios.csv"


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--reports", type=int, default=100_000)
    ap.add_argument("--html", default="", help="write the synthetic run's HTML report here")
    args = ap.parse_args()

    # 1. The seed exercise: the seed's CSV, its weights (the table weighting), its two axes.
    seed = headsep.run(None, None, input=SEED_CSV)
    rows = seed.rows
    focus = rows[rows["report_id"] == "ops_pressure_return"]
    print("The seed's report, one row per head design:")
    print(focus[["scenario", "tokens", "single_decision_axis", "single_evidence_condition_axis",
                 "head_separation"]].to_string(index=False))
    print()

    # 2. A synthetic report set through a weighting scheme that separates relations.
    res = headsep.run("ops-reports", "axis-focus", {"reports": args.reports, "seed": 1, "names": True})
    print(f"{args.reports} reports x {len(res.scenarios)} head designs in {res.seconds:.3f} s")

    # 3. The worst-separated reports: the smallest head_separation per head design, as a DataFrame.
    df = res.rows
    worst = (df.sort_values("head_separation", kind="stable")
               .groupby("scenario", sort=False)
               .head(3)[["scenario", "report_id", "tokens", "head_separation"]])
    print("The worst-separated reports per head design:")
    print(worst.to_string(index=False))

    # NumPy without pandas: the same column as a view of the engine's buffer.
    sep = res.arrays["head_separation"]
    print(f"mean head_separation over every (report, design): {sep.mean():.6f}")

    # 4. The report: inline in Jupyter (`res`), or a file.
    if args.html:
        res.report_html(args.html)
        print(f"wrote {args.html}")


if __name__ == "__main__":
    main()
