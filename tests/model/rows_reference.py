#!/usr/bin/python3
"""The oracle of tests/model/test_model_rows.cpp: `run --model`'s --per-report rows and --attention
maps recomputed from their own token ids by a plain-NumPy float64 forward (bert_reference.py's
pieces; no torch), every layer and head, every metric of docs/METRICS.md.

    /usr/bin/python3 rows_reference.py MODEL_DIR ROWS.jsonl MAPS.jsonl LEXICON.csv

The context axes are the lexicon's columns: a token whose string is a lexicon word carries its
values (the test's texts use words that are whole vocabulary tokens), every other token 0.
Prints one JSON object: per quantity the largest absolute difference, and counts of what was
compared ({"rows": R, "maps": M, ...}). Exit 1 when a row or map has no counterpart.
"""
import json
import math
import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bert_reference import erf, layer_norm, load_safetensors, softmax  # noqa: E402


def forward(w, cfg, ids):
    """Per layer: [(A_h, V_h)] for h = 0 (the full-width baseline, no values) .. H."""
    D, H, L = cfg["hidden_size"], cfg["num_attention_heads"], cfg["num_hidden_layers"]
    dh, eps = D // H, cfg.get("layer_norm_eps", 1e-12)
    n = len(ids)
    x = w["embeddings.word_embeddings.weight"][ids] + w["embeddings.position_embeddings.weight"][:n] + \
        w["embeddings.token_type_embeddings.weight"][0]
    x = layer_norm(x, w["embeddings.LayerNorm.weight"], w["embeddings.LayerNorm.bias"], eps)
    layers = []
    for l in range(L):
        p = f"encoder.layer.{l}."

        def lin(v, name):
            return v @ w[p + name + ".weight"].T + w[p + name + ".bias"]

        q, k, v = lin(x, "attention.self.query"), lin(x, "attention.self.key"), lin(x, "attention.self.value")
        heads = [(softmax(q @ k.T / math.sqrt(D)), None)]
        ctx = np.zeros((n, D))
        for h in range(H):
            s = slice(h * dh, (h + 1) * dh)
            a = softmax(q[:, s] @ k[:, s].T / math.sqrt(dh))
            heads.append((a, v[:, s]))
            ctx[:, s] = a @ v[:, s]
        layers.append(heads)
        x1 = layer_norm(x + lin(ctx, "attention.output.dense"), w[p + "attention.output.LayerNorm.weight"],
                        w[p + "attention.output.LayerNorm.bias"], eps)
        inter = lin(x1, "intermediate.dense")
        inter = 0.5 * inter * (1.0 + erf(inter / math.sqrt(2.0)))
        x = layer_norm(x1 + lin(inter, "output.dense"), w[p + "output.LayerNorm.weight"],
                       w[p + "output.LayerNorm.bias"], eps)
    return layers


def plogp(a):
    return np.where(a > 0, a * np.log(np.where(a > 0, a, 1.0)), 0.0)


def head_stats(a):
    n = a.shape[0]
    prev = np.array([a[q, q - 1] if q > 0 else 0.0 for q in range(n)])
    return {"entropy": float(-plogp(a).sum(axis=1).mean()), "confidence": float(a.max(axis=1).mean()),
            "self_weight": float(np.diag(a).mean()), "prev_weight": float(prev.mean()),
            "first_weight": float(a[:, 0].mean())}


def cosine(x, y):
    nx, ny = np.linalg.norm(x), np.linalg.norm(y)
    return float((x * y).sum() / (nx * ny)) if nx > 0 and ny > 0 else 0.0


def pair_stats(ai, vi, aj, vj):
    m = (ai + aj) / 2
    js = (-plogp(m).sum(axis=1) + (plogp(ai).sum(axis=1) + plogp(aj).sum(axis=1)) / 2).mean()
    oi, oj = ai @ vi, aj @ vj
    return {"js_divergence": max(float(js), 0.0), "position_overlap": float((ai * aj).sum(axis=1).mean()),
            "subspace_cosine": cosine(vi, vj), "output_cosine": cosine(oi, oj),
            "output_distance": float(np.linalg.norm(oi - oj, axis=1).mean())}


def main(model_dir, rows_path, maps_path, lexicon_path):
    cfg = json.load(open(f"{model_dir}/config.json"))
    w = load_safetensors(f"{model_dir}/model.safetensors")
    H = cfg["num_attention_heads"]
    lines = open(lexicon_path).read().split("\n")
    axis_names = lines[0].split(",")[1:]
    lexicon = {f[0]: [float(v) for v in f[1:]] for f in (ln.split(",") for ln in lines[1:] if ln)}
    rows = [json.loads(ln) for ln in open(rows_path)]
    maps = {(m["report_index"], m["layer"]): m for m in (json.loads(ln) for ln in open(maps_path))}
    err, counts, cache = {}, {"rows": 0, "maps": 0, "reports": 0}, {}

    def note(what, got, want):
        err[what] = max(err.get(what, 0.0), float(np.max(np.abs(np.asarray(got, float) - np.asarray(want, float)))))

    for row in rows:
        ids = row["token_ids"]
        if row["n_tokens"] != len(ids) or len(row["tokens"]) != len(ids):
            sys.exit(f"row of report {row['report_id']}: n_tokens, tokens and token_ids disagree")
        key = tuple(ids)
        if key not in cache:
            cache[key] = forward(w, cfg, ids)
            counts["reports"] += 1
        heads = cache[key][row["layer"]]
        axis = np.array([lexicon.get(t, [0.0] * len(axis_names)) for t in row["tokens"]])  # n x C
        ctx = [(a @ axis).mean(axis=0) for a, _ in heads]  # per head: C
        note("context", row["single_head_context"], ctx[0])
        note("context", row["head_contexts"], ctx[1:])
        note("difference", row["difference_from_single"], np.concatenate([c - ctx[0] for c in ctx[1:]]))
        dist = [float(np.linalg.norm(ctx[i] - ctx[j])) for i in range(1, H + 1) for j in range(i + 1, H + 1)]
        note("separation", row["pairwise_separation"], dist)
        note("separation", [row["head_separation"]], [sum(dist) / len(dist)])
        for h in range(H + 1):
            want = head_stats(heads[h][0])
            got = row["attention"]["heads"]["single" if h == 0 else f"head{h}"]
            for k, v in want.items():
                note(k, [got[k]], [v])
        for i in range(1, H + 1):
            for j in range(i + 1, H + 1):
                want = pair_stats(heads[i][0], heads[i][1], heads[j][0], heads[j][1])
                got = row["attention"]["pairs"][f"head{i}_head{j}"]
                for k, v in want.items():
                    note(k, [got[k]], [v])
        counts["rows"] += 1
    for (index, layer), m in maps.items():
        heads = cache.get(tuple(m["token_ids"])) or forward(w, cfg, m["token_ids"])
        note("maps", m["single"], heads[layer][0][0])
        for h in range(H):
            note("maps", m["heads"][h], heads[layer][h + 1][0])
        counts["maps"] += 1
    print(json.dumps({"max_abs": err, "counts": counts}))


if __name__ == "__main__":
    main(*sys.argv[1:5])
