#!/usr/bin/python3
"""Plain-NumPy float64 reference of headsep's attention (include/headsep/attention.hpp), the oracle
of tests/model/test_attention_reference.cpp.

    /usr/bin/python3 attention_reference.py IN.json OUT.json

IN.json (written by the test):
  {"d_model": D, "heads": H, "d_k": dk, "d_v": dv,
   "query": "all" | "first" | "last" | "index", "query_index": i, "mask": "none" | "causal",
   "w": {"w_q": [...], "w_k", "w_v", "b_q", "b_k", "b_v", "w_o", "b_o",
         "s_w_q", "s_w_k", "s_w_v", "s_b_q", "s_b_k", "s_b_v"},   # flat row-major; [] = zero / none
   "reports": [{"n": n, "x": [n*D values, token-major]}, ...]}

OUT.json: per report {"queries": [q, ...], "maps": [(H+1)*nq*n], "head_out": [(H+1) blocks of nq*d_v(h)],
"output": [nq*D] or []}; head 0 is the single-head baseline (d_k = d_v = D), heads 1..H are row
blocks of w_q/w_k/w_v as PyTorch's nn.MultiheadAttention splits in_proj_weight.

Per head: Q = X Wq^T + bq, K, V likewise; A = softmax(Q K^T / sqrt(d_k) + mask) (causal: key k <= q);
O = A V; output = concat(O_1..O_H) W_O^T + b_O. Query modes keep one row: first (0), last (n-1),
index (negative counts from the end, clamped to [0, n-1]). Everything in float64.
"""
import json
import math
import sys

import numpy as np


def matrix(w, name, rows, cols):
    v = w.get(name) or []
    return np.asarray(v, dtype=np.float64).reshape(rows, cols) if v else None


def vector(w, name, size):
    v = w.get(name) or []
    return np.asarray(v, dtype=np.float64) if v else np.zeros(size)


def softmax_rows(s):
    m = s.max(axis=1, keepdims=True)
    e = np.exp(s - m)
    return e / e.sum(axis=1, keepdims=True)


def query_rows(cfg, n):
    mode = cfg["query"]
    if mode == "all":
        return list(range(n))
    if mode == "first":
        q = 0
    elif mode == "last":
        q = n - 1
    else:
        q = int(cfg["query_index"])
        if q < 0:
            q += n
    return [min(max(q, 0), n - 1)]


def main(src, dst):
    with open(src) as f:
        cfg = json.load(f)
    d, heads, dk, dv = cfg["d_model"], cfg["heads"], cfg["d_k"], cfg["d_v"]
    w = cfg["w"]
    # Head 0: the baseline; heads 1..H: row blocks of the stacked projections.
    proj = [(matrix(w, "s_w_q", d, d), vector(w, "s_b_q", d), matrix(w, "s_w_k", d, d), vector(w, "s_b_k", d),
             matrix(w, "s_w_v", d, d), vector(w, "s_b_v", d), d, d)]
    wq, wk, wv = matrix(w, "w_q", heads * dk, d), matrix(w, "w_k", heads * dk, d), matrix(w, "w_v", heads * dv, d)
    bq, bk, bv = vector(w, "b_q", heads * dk), vector(w, "b_k", heads * dk), vector(w, "b_v", heads * dv)
    for h in range(heads):
        qk, vv = slice(h * dk, (h + 1) * dk), slice(h * dv, (h + 1) * dv)
        proj.append((wq[qk], bq[qk], wk[qk], bk[qk], wv[vv], bv[vv], dk, dv))
    wo = matrix(w, "w_o", d, heads * dv)
    bo = vector(w, "b_o", d)

    out = []
    for rep in cfg["reports"]:
        n = rep["n"]
        x = np.asarray(rep["x"], dtype=np.float64).reshape(n, d)
        if n == 0:
            out.append({"queries": [], "maps": [], "head_out": [], "output": []})
            continue
        qs = query_rows(cfg, n)
        maps, head_out = [], []
        for (pq, pbq, pk, pbk, pv, pbv, hk, hv) in proj:
            q = x @ pq.T + pbq
            k = x @ pk.T + pbk
            v = x @ pv.T + pbv
            s = (q @ k.T) / math.sqrt(hk)
            if cfg["mask"] == "causal":
                s = np.where(np.tril(np.ones((n, n), dtype=bool)), s, -np.inf)
            a = softmax_rows(s[qs])
            maps.append(a)
            head_out.append(a @ v)
        output = []
        if wo is not None:
            output = (np.concatenate(head_out[1:], axis=1) @ wo.T + bo).flatten().tolist()
        out.append({"queries": qs, "maps": np.concatenate([m.flatten() for m in maps]).tolist(),
                    "head_out": np.concatenate([o.flatten() for o in head_out]).tolist(), "output": output})
    with open(dst, "w") as f:
        json.dump({"reports": out}, f)


if __name__ == "__main__":
    if len(sys.argv) != 3:
        sys.exit("usage: attention_reference.py IN.json OUT.json")
    main(sys.argv[1], sys.argv[2])
