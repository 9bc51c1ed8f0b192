# The decoder families' speed at equal FLOPs per token (bench/run_family_speed.sh): one random-init
# model per family, width 512, 4 layers, 8 heads of 64, MLPs sized so every family does the same
# products per token as Llama (SwiGLU 1536 = GELU 2304), saved by transformers; the same token ids
# (32 reports x 256) through `headsep run --model` at 1 thread, best of N, interleaved.
# Usage: python bench/family_speed.py HEADSEP_BINARY [--reps 3] [--families llama,gpt_neox,gemma2,qwen3]
import argparse
import os
import re
import subprocess
import sys
import tempfile

import numpy as np
import torch
import transformers

D, L, H, V, N, R = 512, 4, 8, 1000, 256, 32


def configs():
    c = dict(vocab_size=V, hidden_size=D, num_hidden_layers=L, num_attention_heads=H, max_position_embeddings=512)
    return {
        "llama": transformers.LlamaConfig(num_key_value_heads=H, intermediate_size=1536, **c),
        "gpt_neox": transformers.GPTNeoXConfig(intermediate_size=2304, rotary_pct=0.25, **c),
        "gemma2": transformers.Gemma2Config(num_key_value_heads=H, head_dim=64, intermediate_size=1536,
                                            query_pre_attn_scalar=64, attn_logit_softcapping=50.0, **c),
        "qwen3": transformers.Qwen3Config(num_key_value_heads=H, head_dim=64, intermediate_size=1536, **c),
        "olmo2": transformers.Olmo2Config(num_key_value_heads=H, intermediate_size=1536, **c),
        "phi3": transformers.Phi3Config(num_key_value_heads=H, intermediate_size=1536, **c),
    }


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("headsep")
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--families", default="llama,gpt_neox,gemma2,qwen3")
    a = ap.parse_args()
    names = a.families.split(",")
    with tempfile.TemporaryDirectory() as tmp:
        for n in names:
            torch.manual_seed(0)
            transformers.AutoModelForCausalLM.from_config(configs()[n]).save_pretrained(os.path.join(tmp, n))
        ids = os.path.join(tmp, "ids.csv")
        rng = np.random.default_rng(0)
        with open(ids, "w") as f:
            f.write("report_id,scenario,token,token_id,d\n")
            for r in range(R):
                for t in range(N):
                    f.write(f"r{r},x,t,{rng.integers(3, V)},{(t % 7) / 7}\n")
        best = {}
        for _ in range(a.reps):
            for n in names:
                out = subprocess.run([a.headsep, "run", "-s", "csv", "-p", f"path={ids}", "-p", "features=token_id,d",
                                      "-p", "weights=false", "--axes", "d=d", "--model", os.path.join(tmp, n),
                                      "--threads", "1"], capture_output=True, text=True, check=True).stdout
                m = re.search(r"([0-9]+) tokens/s, forward ([0-9.]+) GFLOP/s", out)
                best[n] = max(best.get(n, (0, 0)), (int(m.group(1)), float(m.group(2))))
        base = best.get("llama", (None,))[0]
        for n in names:
            tok, gf = best[n]
            rel = f"{tok / base:.2f}x llama" if base else ""
            print(f"{n:10s} {tok:6d} tokens/s  {gf:6.1f} GFLOP/s  {rel}")


if __name__ == "__main__":
    sys.exit(main())
