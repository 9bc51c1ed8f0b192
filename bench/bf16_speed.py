#!/usr/bin/env python3
"""bf16 stays bf16 (docs/PERFORMANCE.md): random-init Llama-shaped bf16 folders written directly
with NumPy (no torch), run through `headsep run --model`.

  speed: the Llama-3.2-1B shape (hidden 2048, 32 query / 8 key-value heads of 64, FFN 8192,
         vocab 128256; --layers of its 16, default 4 to keep it quick) held as bf16 (--dtype auto)
         and widened (--dtype f32), interleaved, best of --reps: tokens/s of each and the ratio.
  big:   the Llama-3-8B shape (hidden 4096, 32 layers, 32/8 heads, FFN 14336, vocab 128256, untied
         lm_head as the real one: ~16 GB), written once into --dir (default /work/bench-models/),
         then --reports reports of --tokens tokens through `run --model --profile`: its peak RSS
         against the safetensors bytes (the issue's budget: 1.15x + one batch's activations).

Usage: python bench/bf16_speed.py HEADSEP_BINARY speed [--layers 4] [--reps 3] [--reports 8] [--tokens 128] [--simd LEVEL]
       python bench/bf16_speed.py HEADSEP_BINARY big [--dir /work/bench-models] [--reports 2] [--tokens 128]
Token ids come from a CSV (the csv scenario's token_id feature), so no tokenizer is needed.
"""
import argparse
import json
import os
import re
import struct
import subprocess
import sys
import tempfile

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from machine import cpu_line  # noqa: E402

SHAPES = {
    "1b": dict(hidden=2048, layers=16, heads=32, kv=8, head_dim=64, ffn=8192, vocab=128256, tied=True),
    "8b": dict(hidden=4096, layers=32, heads=32, kv=8, head_dim=128, ffn=14336, vocab=128256, tied=False),
}


def bf16_bytes(a):
    """f32 array -> bf16 little-endian bytes (round to nearest even; the values are finite)."""
    u = np.ascontiguousarray(a, dtype=np.float32).view(np.uint32)
    return ((u + 0x7FFF + ((u >> 16) & 1)) >> 16).astype("<u2").tobytes()


def tensors_of(s):
    """(name, shape, std) of a Llama folder's tensors in file order (std None: ones; else Pool's 0.02)."""
    D, I, Q, KV = s["hidden"], s["ffn"], s["heads"] * s["head_dim"], s["kv"] * s["head_dim"]
    out = [("model.embed_tokens.weight", (s["vocab"], D), 0.02)]
    for l in range(s["layers"]):
        p = f"model.layers.{l}."
        out += [(p + "input_layernorm.weight", (D,), None), (p + "post_attention_layernorm.weight", (D,), None),
                (p + "self_attn.q_proj.weight", (Q, D), 0.02), (p + "self_attn.k_proj.weight", (KV, D), 0.02),
                (p + "self_attn.v_proj.weight", (KV, D), 0.02), (p + "self_attn.o_proj.weight", (D, Q), 0.02),
                (p + "mlp.gate_proj.weight", (I, D), 0.02), (p + "mlp.up_proj.weight", (I, D), 0.02),
                (p + "mlp.down_proj.weight", (D, I), 0.02)]
    out.append(("model.norm.weight", (D,), None))
    if not s["tied"]:
        out.append(("lm_head.weight", (s["vocab"], D), 0.02))
    return out


class Pool:
    """Random bf16 bytes drawn once (N(0, 1) x 0.02) and written from a moving offset: drawing 8 G
    normals on 2 shared cores took most of an hour, and the weights of a speed and memory test
    need only be random-looking and finite, not independent."""

    def __init__(self, rng, mib=256):
        self.b = np.frombuffer(bf16_bytes(rng.standard_normal(mib << 19, dtype=np.float32) * 0.02), np.uint8)
        self.off = 0

    def take(self, n):
        out = bytearray()
        while len(out) < n:
            k = min(n - len(out), len(self.b) - self.off)
            out += self.b[self.off:self.off + k].tobytes()
            self.off = (self.off + k + 2 * 7919) % (len(self.b) - 2 * 7919)  # a shifted start each pass
        return bytes(out)


def write_shard(path, items, rng):
    """One safetensors file of bf16 tensors, written tensor by tensor (64 MiB at a time)."""
    header, off = {}, 0
    for name, shape, _ in items:
        n = int(np.prod(shape)) * 2
        header[name] = {"dtype": "BF16", "shape": list(shape), "data_offsets": [off, off + n]}
        off += n
    h = json.dumps(header, separators=(",", ":")).encode()
    h += b" " * (-len(h) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(h)) + h)
        for name, shape, std in items:
            n = int(np.prod(shape)) * 2
            if not std:  # a norm's weight: ones
                f.write(bf16_bytes(np.ones(n // 2, np.float32)))
                continue
            for o in range(0, n, 64 << 20):
                f.write(rng.take(min(64 << 20, n - o)))


def write_llama(d, s, shard_bytes=4 << 30):
    """config.json and bf16 safetensors (sharded with an index when larger than shard_bytes)."""
    os.makedirs(d, exist_ok=True)
    cfg = {"architectures": ["LlamaForCausalLM"], "model_type": "llama", "hidden_size": s["hidden"],
           "num_hidden_layers": s["layers"], "num_attention_heads": s["heads"], "num_key_value_heads": s["kv"],
           "head_dim": s["head_dim"], "intermediate_size": s["ffn"], "vocab_size": s["vocab"], "rms_norm_eps": 1e-5,
           "max_position_embeddings": 8192, "rope_parameters": {"rope_type": "default", "rope_theta": 500000.0},
           "hidden_act": "silu", "tie_word_embeddings": s["tied"], "torch_dtype": "bfloat16"}
    items = tensors_of(s)
    shards, cur, size = [], [], 0
    for it in items:
        n = int(np.prod(it[1])) * 2
        if cur and size + n > shard_bytes:
            shards.append(cur)
            cur, size = [], 0
        cur.append(it)
        size += n
    shards.append(cur)
    rng = Pool(np.random.default_rng(0))
    if len(shards) == 1:
        write_shard(os.path.join(d, "model.safetensors"), shards[0], rng)
    else:
        wm = {}
        for i, sh in enumerate(shards):
            fn = f"model-{i + 1:05d}-of-{len(shards):05d}.safetensors"
            write_shard(os.path.join(d, fn), sh, rng)
            wm.update({name: fn for name, _, _ in sh})
        with open(os.path.join(d, "model.safetensors.index.json"), "w") as f:
            json.dump({"metadata": {}, "weight_map": wm}, f, indent=1)
    with open(os.path.join(d, "config.json"), "w") as f:  # last: a folder with it is complete
        json.dump(cfg, f, indent=1)


def ids_csv(path, vocab, reports, tokens):
    rng = np.random.default_rng(0)
    with open(path, "w") as f:
        f.write("report_id,scenario,token,token_id,d\n")
        for r in range(reports):
            for t in range(tokens):
                f.write(f"r{r},x,t,{rng.integers(3, vocab)},{(t % 7) / 7}\n")


def run(headsep, model, ids, dtype, threads, profile=False, simd=None):
    cmd = [headsep, "run", "-s", "csv", "-p", f"path={ids}", "-p", "features=token_id,d", "-p", "weights=false",
           "--axes", "d=d", "--model", model, "--dtype", dtype, "--threads", str(threads),
           *(["--simd", simd] if simd else [])]
    p = subprocess.run(cmd + (["--profile"] if profile else []), capture_output=True, text=True, check=True)
    m = re.search(r"([0-9]+) tokens/s, forward ([0-9.]+) GFLOP/s", p.stdout)
    mem = re.search(r"weights: .*", p.stderr)
    return int(m.group(1)), float(m.group(2)), mem.group(0) if mem else ""


def speed(a):
    s = dict(SHAPES["1b"], layers=a.layers)
    with tempfile.TemporaryDirectory() as tmp:
        model, ids = os.path.join(tmp, "llama-1b"), os.path.join(tmp, "ids.csv")
        write_llama(model, s)
        ids_csv(ids, s["vocab"], a.reports, a.tokens)
        best, mem = {}, {}
        for _ in range(a.reps):
            for dt in ("auto", "f32"):
                tok, gf, m = run(a.headsep, model, ids, dt, a.threads, profile=True, simd=a.simd)
                best[dt] = max(best.get(dt, (0, 0)), (tok, gf))
                mem[dt] = m
    print(cpu_line())
    print(f"Llama-3.2-1B shape, {a.layers} of 16 layers, bf16 folder; {a.reports} reports x {a.tokens} tokens, "
          f"{a.threads} thread(s), best of {a.reps} (interleaved)" + (f", --simd {a.simd}" if a.simd else ""))
    for dt, label in (("auto", "bf16 (--dtype auto)"), ("f32", "f32  (--dtype f32) ")):
        print(f"  {label}: {best[dt][0]:6d} tokens/s  {best[dt][1]:6.1f} GFLOP/s   {mem[dt]}")
    print(f"  bf16 / f32: {best['auto'][0] / best['f32'][0]:.2f}x")


def big(a):
    s = SHAPES["8b"]
    model = os.path.join(a.dir, "llama-8b-shape-bf16")
    if not os.path.exists(os.path.join(model, "config.json")):
        print(f"writing {model} (~16 GB of bf16)...", file=sys.stderr)
        write_llama(model, s)
    with tempfile.TemporaryDirectory() as tmp:
        ids = os.path.join(tmp, "ids.csv")
        ids_csv(ids, s["vocab"], a.reports, a.tokens)
        cmd = [a.headsep, "run", "-s", "csv", "-p", f"path={ids}", "-p", "features=token_id,d", "-p", "weights=false",
               "--axes", "d=d", "--model", model, "--threads", str(a.threads), "--profile"]
        p = subprocess.run(cmd, capture_output=True, text=True)
        print(cpu_line())
        print(f"Llama-3-8B shape, bf16 folder ({model}); {a.reports} reports x {a.tokens} tokens, {a.threads} thread(s)")
        print("\n".join(l for l in p.stdout.splitlines() if "tokens/s" in l))
        print("\n".join(l for l in p.stderr.splitlines() if l.startswith("weights:")))
        if p.returncode:
            print(p.stderr[-2000:], file=sys.stderr)
            return p.returncode
    return 0


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("headsep")
    ap.add_argument("what", choices=("speed", "big"))
    ap.add_argument("--layers", type=int, default=4)
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--reports", type=int, default=None)
    ap.add_argument("--tokens", type=int, default=128)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--simd", help="headsep --simd level (e.g. avx2: the widening bf16 path a CPU without AVX512-BF16 runs)")
    ap.add_argument("--dir", default="/work/bench-models")
    a = ap.parse_args()
    if a.what == "speed":
        a.reports = a.reports or 8
        return speed(a)
    a.reports = a.reports or 2
    return big(a)


if __name__ == "__main__":
    sys.exit(main())
