#!/usr/bin/env python3
"""A seed-schema CSV for the scale-out tests: REPORTS reports of 2..6 tokens, each under one or two
of three scenarios (so batches break where the scenario list changes), quoted ids and token names
with commas, quotes and non-ASCII text, 2 heads. Deterministic. Usage: make_csv.py PATH REPORTS [BAD_ROW] [--newlines]
BAD_ROW: that data row gets a non-numeric decision_axis (a bad input row in the middle).
--newlines: some ids and token names hold newlines and quotes inside their quotes, and some rows
are followed by blank lines (byte ranges must find record boundaries from the quote state)."""
import random
import sys

newlines = "--newlines" in sys.argv
args = [a for a in sys.argv[1:] if a != "--newlines"]
path, reports = args[0], int(args[1])
bad = int(args[2]) if len(args) > 2 else -1
rng = random.Random(7)
scen = ["balanced_heads", "decision_focused", "evidence, split"]
row = 0
with open(path, "w", encoding="utf-8", newline="") as f:
    f.write("report_id,scenario,token,decision_axis,evidence_axis,condition_axis,single_weight,head1_weight,head2_weight\n")
    for r in range(reports):
        rid = f'"rep ""{r}"", ops"' if r % 7 == 0 else f"rep{r}"
        if newlines and r % 5 == 0:
            rid = f'"rep\n""{r}""\n,ops"'
        names = scen[:1] if (r // 40) % 3 == 0 else scen[1:] if (r // 40) % 3 == 1 else scen
        n = 2 + rng.randrange(5)
        toks = [("정지결정" if t == 0 else f'"tok,{t}"' if t % 2 else f"t{t}") for t in range(n)]
        if newlines and r % 3 == 0:
            toks[1] = f'"line one\nline ""two"",\n{r}"'
        feats = [[rng.uniform(-2, 2) for _ in range(3)] for _ in range(n)]
        for s in names:
            sname = f'"{s}"' if "," in s else s
            for t in range(n):
                w = [rng.uniform(0.01, 1) for _ in range(3)]
                d = "oops" if row == bad else f"{feats[t][0]:.6g}"
                f.write(f"{rid},{sname},{toks[t]},{d},{feats[t][1]:.6g},{feats[t][2]:.6g},{w[0]:.6g},{w[1]:.6g},{w[2]:.6g}\n")
                if newlines and row % 97 == 0:
                    f.write("\n")
                row += 1
