#!/usr/bin/python3
"""Plain-NumPy float64 BERT encoder forward, the oracle of tests/model/test_bert.cpp (run with
Debian's /usr/bin/python3 and python3-numpy; no torch, no transformers).

    /usr/bin/python3 bert_reference.py MODEL_DIR IN.json OUT.json

IN.json: {"reports": [[id, id, ...], ...]}   (each report alone: positions 0..n-1, token type 0)
OUT.json: per report {"hidden": [(layers+1) * n * hidden], block 0 the embeddings after LayerNorm,
block l the output of layer l; "maps": [layers * (heads+1) * n * n], per layer head 0 the
full-width baseline softmax(Q K^T / sqrt(hidden)) with Q, K every head's concatenated, then heads
1..H, query-major}.

The weights are read from model.safetensors by parsing its header here (F32 only), the config from
config.json; GELU is the exact 0.5 x (1 + erf(x / sqrt 2)) with math.erf.
"""
import json
import math
import struct
import sys

import numpy as np


def load_safetensors(path):
    with open(path, "rb") as f:
        n = struct.unpack("<Q", f.read(8))[0]
        header = json.loads(f.read(n))
        data = f.read()
    out = {}
    for name, t in header.items():
        if name == "__metadata__" or t["dtype"] != "F32":
            continue
        b, e = t["data_offsets"]
        out[name] = np.frombuffer(data[b:e], dtype="<f4").astype(np.float64).reshape(t["shape"])
    return out


def layer_norm(x, g, b, eps):
    m = x.mean(axis=-1, keepdims=True)
    v = ((x - m) ** 2).mean(axis=-1, keepdims=True)
    return (x - m) / np.sqrt(v + eps) * g + b


def softmax(s):
    e = np.exp(s - s.max(axis=-1, keepdims=True))
    return e / e.sum(axis=-1, keepdims=True)


erf = np.vectorize(math.erf)


def main():
    model_dir, inp, outp = sys.argv[1:4]
    cfg = json.load(open(f"{model_dir}/config.json"))
    w = load_safetensors(f"{model_dir}/model.safetensors")
    D, H, L = cfg["hidden_size"], cfg["num_attention_heads"], cfg["num_hidden_layers"]
    dh, eps = D // H, cfg.get("layer_norm_eps", 1e-12)
    reports = json.load(open(inp))["reports"]
    out = []
    for ids in reports:
        n = len(ids)
        x = w["embeddings.word_embeddings.weight"][ids] + w["embeddings.position_embeddings.weight"][:n] + \
            w["embeddings.token_type_embeddings.weight"][0]
        x = layer_norm(x, w["embeddings.LayerNorm.weight"], w["embeddings.LayerNorm.bias"], eps)
        hidden, maps = [x], []
        for l in range(L):
            p = f"encoder.layer.{l}."
            lin = lambda v, name: v @ w[p + name + ".weight"].T + w[p + name + ".bias"]
            q, k, v = lin(x, "attention.self.query"), lin(x, "attention.self.key"), lin(x, "attention.self.value")
            maps.append(softmax(q @ k.T / math.sqrt(D)))  # the full-width baseline
            ctx = np.zeros((n, D))
            for h in range(H):
                s = slice(h * dh, (h + 1) * dh)
                a = softmax(q[:, s] @ k[:, s].T / math.sqrt(dh))
                maps.append(a)
                ctx[:, s] = a @ v[:, s]
            x1 = layer_norm(x + lin(ctx, "attention.output.dense"), w[p + "attention.output.LayerNorm.weight"],
                            w[p + "attention.output.LayerNorm.bias"], eps)
            inter = lin(x1, "intermediate.dense")
            inter = 0.5 * inter * (1.0 + erf(inter / math.sqrt(2.0)))
            x = layer_norm(x1 + lin(inter, "output.dense"), w[p + "output.LayerNorm.weight"],
                           w[p + "output.LayerNorm.bias"], eps)
            hidden.append(x)
        out.append({"hidden": np.concatenate([h.ravel() for h in hidden]).tolist(),
                    "maps": np.concatenate([m.ravel() for m in maps]).tolist()})
    json.dump({"reports": out}, open(outp, "w"))


if __name__ == "__main__":
    main()
