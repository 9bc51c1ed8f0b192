#!/usr/bin/env python3
"""headsep's BERT forward + every head metric vs PyTorch's forward with the attention maps kept,
on the same safetensors, the same token ids and the same thread count; prints the ratios.

    bench/run_model_peers.sh [--threads 2] [--shapes 64x64,128x32,16x1024,64x1]

A shape NxB is reports of N tokens in batches of B. Token ids are random vocabulary ids (numpy,
fixed seed; [CLS] first, [SEP] last) written to a file both read: the cost does not depend on
which words they are. torch runs a plain eager BERT written here (no transformers package):
nn.functional linear / layer_norm / gelu (exact erf), softmax maps kept per layer as
output_attentions would. Also checked: headsep's last hidden state of report 0 against torch's.
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile
import time

import numpy as np
import torch
import torch.nn.functional as F
from safetensors.torch import load_file


def torch_bert(w, cfg):
    D, H, L = cfg["hidden_size"], cfg["num_attention_heads"], cfg["num_hidden_layers"]
    dh, eps = D // H, cfg.get("layer_norm_eps", 1e-12)

    def forward(ids):  # ids [B, N] int64
        B, N = ids.shape
        x = w["embeddings.word_embeddings.weight"][ids] + w["embeddings.position_embeddings.weight"][:N] + \
            w["embeddings.token_type_embeddings.weight"][0]
        x = F.layer_norm(x, (D,), w["embeddings.LayerNorm.weight"], w["embeddings.LayerNorm.bias"], eps)
        maps = []
        for l in range(L):
            p = f"encoder.layer.{l}."
            lin = lambda v, n: F.linear(v, w[p + n + ".weight"], w[p + n + ".bias"])
            q = lin(x, "attention.self.query").view(B, N, H, dh).transpose(1, 2)
            k = lin(x, "attention.self.key").view(B, N, H, dh).transpose(1, 2)
            v = lin(x, "attention.self.value").view(B, N, H, dh).transpose(1, 2)
            a = torch.softmax(q @ k.transpose(-1, -2) / dh ** 0.5, dim=-1)
            maps.append(a)  # kept, as output_attentions=True keeps them
            ctx = (a @ v).transpose(1, 2).reshape(B, N, D)
            x = F.layer_norm(x + lin(ctx, "attention.output.dense"), (D,), w[p + "attention.output.LayerNorm.weight"],
                             w[p + "attention.output.LayerNorm.bias"], eps)
            h = F.gelu(lin(x, "intermediate.dense"))
            x = F.layer_norm(x + lin(h, "output.dense"), (D,), w[p + "output.LayerNorm.weight"],
                             w[p + "output.LayerNorm.bias"], eps)
        return x, maps

    return forward


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", required=True)
    ap.add_argument("--peer", required=True, help="headsep's build/bench/model_peer")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--shapes", default="64x64,128x32,16x1024,64x1")
    ap.add_argument("--tokens", type=int, default=16384, help="tokens per shape (rounded to whole batches)")
    ap.add_argument("--repeat", type=int, default=3)
    a = ap.parse_args()
    torch.set_num_threads(a.threads)
    cfg = json.load(open(os.path.join(a.model, "config.json")))
    w = load_file(os.path.join(a.model, "model.safetensors"))
    fwd = torch_bert(w, cfg)
    rng = np.random.default_rng(1)
    print(f"torch {torch.__version__}, {a.threads} threads; headsep = forward + every head metric; "
          f"torch = forward with attention maps kept")
    print(f"{'shape':>10} {'torch tok/s':>12} {'headsep tok/s':>14} {'ratio':>6} {'GFLOP/s':>8} {'% peak':>7} {'max |dh|':>9}")
    with tempfile.TemporaryDirectory() as tmp:
        for shape in a.shapes.split(","):
            n, b = (int(x) for x in shape.split("x"))
            batches = max(1, a.tokens // (n * b))
            if b == 1:
                batches = max(batches, 64)
            ids = rng.integers(1000, 29000, size=(batches * b, n)).astype(np.uint32)
            ids[:, 0], ids[:, -1] = 101, 102
            path, hid = os.path.join(tmp, "ids.bin"), os.path.join(tmp, "hidden.bin")
            ids.tofile(path)
            out = subprocess.run([a.peer, "--model", a.model, "--ids", path, "--n", str(n), "--batch", str(b),
                                  "--threads", str(a.threads), "--repeat", str(a.repeat), "--hidden", hid],
                                 capture_output=True, text=True)
            if out.returncode:
                sys.exit(f"model_peer failed: {out.stderr}")
            hs = json.loads(out.stdout)
            t = torch.from_numpy(ids.astype(np.int64))
            best = 1e300
            with torch.inference_mode():
                for _ in range(a.repeat):
                    t0 = time.perf_counter()
                    for i in range(batches):
                        x, maps = fwd(t[i * b:(i + 1) * b])
                    best = min(best, time.perf_counter() - t0)
                ref, _ = fwd(t[:1])
            diff = float(np.abs(np.fromfile(hid, dtype=np.float32).reshape(n, -1) - ref[0].numpy()).max())
            tt = batches * b * n / best
            peak = hs["peak_per_core"] * a.threads
            print(f"{shape:>10} {tt:12.0f} {hs['tokens_per_s']:14.0f} {hs['tokens_per_s'] / tt:6.2f} "
                  f"{hs['gflops']:8.1f} {100 * hs['gflops'] / peak:6.1f}% {diff:9.2e}", flush=True)
    print(f"peak: {hs['peak_per_core']:.1f} GFLOP/s per core x {a.threads} (measured FMA chains, {hs['simd']})")


if __name__ == "__main__":
    main()
