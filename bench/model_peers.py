#!/usr/bin/env python3
"""headsep's forward + every head metric vs PyTorch's forward with the attention maps kept,
on the same safetensors, the same token ids and the same thread count; prints the ratios.

    bench/run_model_peers.sh [--threads 2] [--shapes 64x64,128x32,16x1024,64x1]
    bench/run_model_peers.sh --arch gpt2|llama [--shapes 128x32,128x1]   # decoders (transformers)

Decoders (--arch gpt2 / llama): a randomly initialised model of realistic shape is made at run
time with transformers' config class (width 768, 12 heads, 4 layers; Llama with 4 key/value
heads, SwiGLU 2048), saved as safetensors in a temp folder, and timed three ways on the same ids:
headsep, transformers' eager forward with output_attentions=True, and a plain-torch forward
written here that keeps the maps (torch_decoder).
Real dimensions (--arch gpt2-small / llama-1b / qwen2-0.5b, issue 51): GPT-2 small (768 wide,
12 layers x 12 heads), a Llama-3.2-1B-shaped model (2048 wide, 16 layers, 32 query / 8 key-value
heads, FFN 8192, vocab 128256) and a Qwen2-0.5B-shaped one (896 wide, 24 layers, 14 / 2 heads,
FFN 4864, q/k/v biases, vocab 151936), random init; timed as headsep, transformers eager with
output_attentions=True and transformers SDPA (no maps). --layers N keeps the widths with fewer layers.

A shape NxB is reports of N tokens in batches of B. Token ids are random vocabulary ids (numpy,
fixed seed; [CLS] first, [SEP] last) written to a file both read: the cost does not depend on
which words they are. torch runs a plain eager BERT written here (no transformers package):
nn.functional linear / layer_norm / gelu (exact erf), softmax maps kept per layer as
output_attentions would; and the same forward through F.scaled_dot_product_attention without maps
(the fastest way torch gives only the hidden states). Also checked: headsep's last hidden state
of report 0 against both.
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile
import time

from machine import cpu_line

import numpy as np
import torch
import torch.nn.functional as F
from safetensors.torch import load_file


def run_peer(a, model, ids_path, n, b, hidden_path):
    """headsep's side (bench/model_peer): its JSON line."""
    out = subprocess.run([a.peer, "--model", model, "--ids", ids_path, "--n", str(n), "--batch", str(b),
                          "--threads", str(a.threads), "--repeat", str(a.repeat), "--hidden", hidden_path],
                         capture_output=True, text=True)
    if out.returncode:
        sys.exit(f"model_peer failed: {out.stderr}")
    return json.loads(out.stdout)


def torch_bert(w, cfg, sdpa=False):
    """The eager forward keeping every layer's maps, or (sdpa) F.scaled_dot_product_attention
    without maps: the fastest forward a torch user can write to get only the hidden states."""
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
            if sdpa:
                ctx = F.scaled_dot_product_attention(q, k, v).transpose(1, 2).reshape(B, N, D)
            else:
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


REAL = ("gpt2-small", "llama-1b", "qwen2-0.5b")


def make_decoder(arch, folder, layers=None):
    import transformers
    torch.manual_seed(0)
    if arch == "gpt2":
        cfg = transformers.GPT2Config(n_embd=768, n_head=12, n_layer=4, n_positions=1024, vocab_size=50257,
                                      resid_pdrop=0, embd_pdrop=0, attn_pdrop=0)
    elif arch == "llama":
        cfg = transformers.LlamaConfig(hidden_size=768, num_attention_heads=12, num_key_value_heads=4,
                                       num_hidden_layers=4, intermediate_size=2048, vocab_size=32000,
                                       max_position_embeddings=2048)
    elif arch == "gpt2-small":
        cfg = transformers.GPT2Config(n_embd=768, n_head=12, n_layer=layers or 12, n_positions=1024,
                                      vocab_size=50257, resid_pdrop=0, embd_pdrop=0, attn_pdrop=0)
    elif arch == "llama-1b":  # Llama-3.2-1B's config.json shapes
        cfg = transformers.LlamaConfig(hidden_size=2048, num_attention_heads=32, num_key_value_heads=8, head_dim=64,
                                       num_hidden_layers=layers or 16, intermediate_size=8192, vocab_size=128256,
                                       max_position_embeddings=2048, tie_word_embeddings=True,
                                       rope_parameters={"rope_type": "default", "rope_theta": 500000.0})
    else:  # qwen2-0.5b: Qwen2-0.5B's config.json shapes
        cfg = transformers.Qwen2Config(hidden_size=896, num_attention_heads=14, num_key_value_heads=2,
                                       num_hidden_layers=layers or 24, intermediate_size=4864, vocab_size=151936,
                                       max_position_embeddings=2048, tie_word_embeddings=True,
                                       rope_parameters={"rope_type": "default", "rope_theta": 1000000.0})
    model = transformers.AutoModelForCausalLM.from_config(cfg, attn_implementation="eager").eval()
    model.save_pretrained(folder, safe_serialization=True)
    return model, cfg


def torch_decoder(model, arch, cfg):
    """Plain torch (no transformers modules in the loop): the same weights, causal maps kept."""
    sd = {k: v for k, v in model.state_dict().items()}
    if arch == "gpt2":
        D, H, L, eps = cfg.n_embd, cfg.n_head, cfg.n_layer, cfg.layer_norm_epsilon
        dh = D // H
        g = lambda n: sd["transformer." + n]

        def forward(ids):
            B, N = ids.shape
            mask = torch.full((N, N), float("-inf")).triu(1)
            x = g("wte.weight")[ids] + g("wpe.weight")[:N]
            maps = []
            for l in range(L):
                p = f"h.{l}."
                h = F.layer_norm(x, (D,), g(p + "ln_1.weight"), g(p + "ln_1.bias"), eps)
                qkv = torch.addmm(g(p + "attn.c_attn.bias"), h.view(-1, D), g(p + "attn.c_attn.weight")).view(B, N, 3, H, dh)
                q, k, v = (qkv[:, :, i].transpose(1, 2) for i in range(3))
                a = torch.softmax(q @ k.transpose(-1, -2) / dh ** 0.5 + mask, dim=-1)
                maps.append(a)
                ctx = (a @ v).transpose(1, 2).reshape(-1, D)
                x = x + torch.addmm(g(p + "attn.c_proj.bias"), ctx, g(p + "attn.c_proj.weight")).view(B, N, D)
                h = F.layer_norm(x, (D,), g(p + "ln_2.weight"), g(p + "ln_2.bias"), eps).view(-1, D)
                h = F.gelu(torch.addmm(g(p + "mlp.c_fc.bias"), h, g(p + "mlp.c_fc.weight")), approximate="tanh")
                x = x + torch.addmm(g(p + "mlp.c_proj.bias"), h, g(p + "mlp.c_proj.weight")).view(B, N, D)
            return F.layer_norm(x, (D,), g("ln_f.weight"), g("ln_f.bias"), eps), maps
        return forward
    D, H, KV, L, eps = cfg.hidden_size, cfg.num_attention_heads, cfg.num_key_value_heads, cfg.num_hidden_layers, cfg.rms_norm_eps
    dh = D // H
    inv = 1.0 / (cfg.rope_parameters["rope_theta"] ** (torch.arange(0, dh, 2).float() / dh))
    g = lambda n: sd["model." + n]
    rms = lambda x, w: w * (x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps))

    def rope(x, cos, sin):
        x1, x2 = x[..., : dh // 2], x[..., dh // 2:]
        return x * cos + torch.cat([-x2, x1], -1) * sin

    def forward(ids):
        B, N = ids.shape
        mask = torch.full((N, N), float("-inf")).triu(1)
        ang = torch.arange(N).float()[:, None] * inv[None]
        cos, sin = torch.cat([ang, ang], -1).cos(), torch.cat([ang, ang], -1).sin()
        x = g("embed_tokens.weight")[ids]
        maps = []
        for l in range(L):
            p = f"layers.{l}."
            h = rms(x, g(p + "input_layernorm.weight"))
            q = F.linear(h, g(p + "self_attn.q_proj.weight")).view(B, N, H, dh).transpose(1, 2)
            k = F.linear(h, g(p + "self_attn.k_proj.weight")).view(B, N, KV, dh).transpose(1, 2)
            v = F.linear(h, g(p + "self_attn.v_proj.weight")).view(B, N, KV, dh).transpose(1, 2)
            q, k = rope(q, cos, sin), rope(k, cos, sin)
            k, v = k.repeat_interleave(H // KV, 1), v.repeat_interleave(H // KV, 1)
            a = torch.softmax(q @ k.transpose(-1, -2) / dh ** 0.5 + mask, dim=-1)
            maps.append(a)
            x = x + F.linear((a @ v).transpose(1, 2).reshape(B, N, D), g(p + "self_attn.o_proj.weight"))
            h = rms(x, g(p + "post_attention_layernorm.weight"))
            x = x + F.linear(F.silu(F.linear(h, g(p + "mlp.gate_proj.weight"))) * F.linear(h, g(p + "mlp.up_proj.weight")),
                             g(p + "mlp.down_proj.weight"))
        return rms(x, g("norm.weight")), maps
    return forward


def best_time(fn, t, batches, b, repeat):
    best = 1e300
    with torch.inference_mode():
        for _ in range(repeat):
            t0 = time.perf_counter()
            for i in range(batches):
                fn(t[i * b:(i + 1) * b])
            best = min(best, time.perf_counter() - t0)
    return best


def best_times(fn, t, batches, b, repeat):
    """best_time's wall seconds and the process CPU seconds (every thread's) of the best-CPU round."""
    best, best_cpu = 1e300, 1e300
    with torch.inference_mode():
        for _ in range(repeat):
            t0, c0 = time.perf_counter(), time.process_time()
            for i in range(batches):
                fn(t[i * b:(i + 1) * b])
            best, best_cpu = min(best, time.perf_counter() - t0), min(best_cpu, time.process_time() - c0)
    return best, best_cpu


def run_decoder(a):
    torch.set_num_threads(a.threads)
    rng = np.random.default_rng(1)
    real = a.arch in REAL
    with tempfile.TemporaryDirectory() as tmp:
        folder = os.path.join(tmp, a.arch)
        model, cfg = make_decoder(a.arch, folder, a.layers)
        plain = None if real else torch_decoder(model, a.arch, cfg)
        base = model.base_model  # no LM head: headsep computes no logits either
        hf = lambda ids: base(ids, output_attentions=True, use_cache=False)

        def sdpa(ids):  # the same model through SDPA: hidden states only, no maps
            return base(ids, use_cache=False)
        print(f"CPU: {cpu_line()}")
        D, H, L = cfg.hidden_size, cfg.num_attention_heads, cfg.num_hidden_layers
        kv = getattr(cfg, "num_key_value_heads", H)
        print(f"torch {torch.__version__}, {a.threads} threads, {a.arch} {D} wide x {H} heads ({kv} key/value) x {L} "
              f"layers (random init); headsep = forward + every head metric of every layer; hf = transformers eager, "
              f"output_attentions=True; " + ("sdpa = transformers SDPA, no maps" if real else
                                              "torch = plain forward keeping the maps") +
              f"; best of {a.repeat}")
        third = "sdpa tok/s" if real else "torch tok/s"
        print(f"{'shape':>10} {'hf tok/s':>10} {third:>12} {'headsep tok/s':>14} {'vs hf':>6} "
              f"{'vs ' + third.split()[0]:>8} {'GFLOP/s':>8} {'% peak':>7} {'max |dh|':>9}"
              f" | per CPU-second: {'vs hf':>6} {'vs ' + third.split()[0]:>8} {'% peak':>7}")
        for shape in a.shapes.split(","):
            n, b = (int(x) for x in shape.split("x"))
            batches = max(1, a.tokens // (n * b))
            if b == 1:
                batches = max(batches, 16)
            ids = rng.integers(0, cfg.vocab_size, size=(batches * b, n)).astype(np.uint32)
            path, hid = os.path.join(tmp, "ids.bin"), os.path.join(tmp, "hidden.bin")
            ids.tofile(path)
            hs = run_peer(a, folder, path, n, b, hid)
            t = torch.from_numpy(ids.astype(np.int64))
            tokens = batches * b * n
            w_hf, c_hf = best_times(hf, t, batches, b, a.repeat)
            if real:
                model.set_attn_implementation("sdpa")
                w_pl, c_pl = best_times(sdpa, t, batches, b, a.repeat)
                model.set_attn_implementation("eager")
            else:
                w_pl, c_pl = best_times(plain, t, batches, b, a.repeat)
            t_hf, t_pl = tokens / w_hf, tokens / w_pl
            with torch.inference_mode():
                ref = base(t[:1], use_cache=False).last_hidden_state
                refs = [ref] if real else [ref, plain(t[:1])[0]]
            mine = np.fromfile(hid, dtype=np.float32).reshape(n, -1)
            diff = max(float(np.abs(mine - r[0].numpy()).max()) for r in refs)
            peak = hs["peak_per_core"] * a.threads
            r = hs["tokens_per_s"]
            c_me = hs["cpu_seconds"]
            peak_cpu = 100 * hs["gflops"] * hs["seconds"] / c_me / hs["peak_per_core"]
            print(f"{shape:>10} {t_hf:10.0f} {t_pl:12.0f} {r:14.0f} {r / t_hf:6.2f} {r / t_pl:8.2f} "
                  f"{hs['gflops']:8.1f} {100 * hs['gflops'] / peak:6.1f}% {diff:9.2e}"
                  f" | {' ' * 16}{c_hf / c_me:6.2f} {c_pl / c_me:8.2f} {peak_cpu:6.1f}%", flush=True)
    print(f"peak: {hs['peak_per_core']:.1f} GFLOP/s per core x {a.threads} (measured FMA chains, {hs['simd']}); "
          f"per CPU-second: the same work's process CPU seconds (every thread's), which other processes on a "
          f"shared host do not inflate; % peak there is GFLOP per CPU-second / the per-core peak")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", help="BERT folder (--arch bert)")
    ap.add_argument("--arch", default="bert", choices=["bert", "gpt2", "llama", *REAL])
    ap.add_argument("--layers", type=int, help="decoders of real dimensions: this many layers instead of the model's")
    ap.add_argument("--peer", required=True, help="headsep's build/bench/model_peer")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--shapes", default="64x64,128x32,16x1024,64x1")
    ap.add_argument("--tokens", type=int, default=16384, help="tokens per shape (rounded to whole batches)")
    ap.add_argument("--repeat", type=int, default=3)
    a = ap.parse_args()
    if a.arch != "bert":
        return run_decoder(a)
    if not a.model:
        sys.exit("--model DIR is needed with --arch bert")
    torch.set_num_threads(a.threads)
    cfg = json.load(open(os.path.join(a.model, "config.json")))
    w = load_file(os.path.join(a.model, "model.safetensors"))
    fwd, fast = torch_bert(w, cfg), torch_bert(w, cfg, sdpa=True)
    rng = np.random.default_rng(1)
    print(f"CPU: {cpu_line()}")
    print(f"torch {torch.__version__}, {a.threads} threads; headsep = forward + every head metric; "
          f"torch = forward with attention maps kept; sdpa = torch's scaled_dot_product_attention "
          f"forward, no maps (both best of {a.repeat}, timed in alternating rounds)")
    print(f"{'shape':>10} {'torch tok/s':>12} {'sdpa tok/s':>11} {'headsep tok/s':>14} {'vs torch':>8} {'vs sdpa':>7} "
          f"{'GFLOP/s':>8} {'% peak':>7} {'max |dh|':>9}")
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
            hs = run_peer(a, a.model, path, n, b, hid)
            t = torch.from_numpy(ids.astype(np.int64))
            best = {"maps": 1e300, "sdpa": 1e300}
            with torch.inference_mode():
                for _ in range(a.repeat):
                    for name, f in (("maps", fwd), ("sdpa", fast)):
                        t0 = time.perf_counter()
                        for i in range(batches):
                            f(t[i * b:(i + 1) * b])
                        best[name] = min(best[name], time.perf_counter() - t0)
                ref, _ = fwd(t[:1])
                ref2, _ = fast(t[:1])
            mine = np.fromfile(hid, dtype=np.float32).reshape(n, -1)
            diff = max(float(np.abs(mine - ref[0].numpy()).max()), float(np.abs(mine - ref2[0].numpy()).max()))
            tt, ts = (batches * b * n / best[k] for k in ("maps", "sdpa"))
            r = hs["tokens_per_s"]
            peak = hs["peak_per_core"] * a.threads
            print(f"{shape:>10} {tt:12.0f} {ts:11.0f} {r:14.0f} {r / tt:8.2f} {r / ts:7.2f} "
                  f"{hs['gflops']:8.1f} {100 * hs['gflops'] / peak:6.1f}% {diff:9.2e}", flush=True)
    print(f"peak: {hs['peak_per_core']:.1f} GFLOP/s per core x {a.threads} (measured FMA chains, {hs['simd']})")


if __name__ == "__main__":
    main()
