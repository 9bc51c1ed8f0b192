#!/usr/bin/env python3
"""A BERT encoder's heads on your texts: rows per (report, layer), the maps of one report.

    python examples/python/model_rows.py MODEL_DIR     # e.g. scripts/fetch_model.sh's MiniLM folder

The same numbers as `headsep run --model MODEL_DIR --per-report rows.csv --attention maps.jsonl`
(docs/MODEL.md lists the columns; docs/PYTHON.md the Python side).
"""
import sys

import headsep

TEXTS = {
    "pump": "pressure is too high: stop the pump until the valve check is done",
    "log": "the log shows evidence that the return condition was met",
    "hold": "decision: hold; condition: restart only after the inspection",
}


def main():
    model = headsep.model(sys.argv[1] if len(sys.argv) > 1 else "all-minilm-l6-v2")
    res = model.run(TEXTS, maps=[0], map_layers=[0])

    # Which layer keeps its heads furthest apart, report by report? (rows: report x scenario x layer)
    rows = res.rows
    best = rows.loc[rows.groupby("report_id", sort=False)["head_separation"].idxmax()]
    print(best[["report_id", "layer", "n_tokens", "head_separation"]].to_string(index=False))

    # Tidy: one row per (report, layer, head). Which heads of the last layer attend most narrowly?
    heads = res.heads()
    last = heads[heads["layer"] == heads["layer"].max()]
    print(last.groupby("head")[["entropy", "separation", "js_mean"]].mean().nsmallest(3, "entropy").round(3))

    # Report 0's layer-0 maps: [layers, heads, n, n]; where does each head's first query look?
    maps = res.maps[0]
    tokens = rows.loc[rows["report_id"] == "pump", "tokens"].iloc[0]
    for h in range(maps.shape[1]):
        print(f"head {h + 1:2d}: query {tokens[0]!r} looks most at {tokens[int(maps[0, h, 0].argmax())]!r}")


if __name__ == "__main__":
    main()
