#!/usr/bin/env python3
"""A torch nn.MultiheadAttention analysed by headsep in three lines, then its heads compared.

    python examples/python/attention_from_torch.py          # needs headsep; torch if installed

Without torch the same weights come as a dict of NumPy arrays (the state_dict's names): the
numbers do not depend on where the arrays come from. docs/PYTHON.md, "Attention from tensors".
"""
import numpy as np

import headsep

B, n, d, H = 256, 32, 64, 4
try:
    import torch

    torch.manual_seed(0)
    mha = torch.nn.MultiheadAttention(d, H, batch_first=True).eval()   # your model's layer.self_attn
    x = torch.randn(B, n, d)                                           # its input embeddings
except ImportError:
    rng = np.random.default_rng(0)
    a = np.sqrt(6 / (d + 3 * d))
    mha = {"in_proj_weight": rng.uniform(-a, a, (3 * d, d)).astype(np.float32),
           "out_proj.weight": rng.uniform(-0.1, 0.1, (d, d)).astype(np.float32)}
    x = rng.standard_normal((B, n, d)).astype(np.float32)

# The three lines: weights, X in (read in place), every metric of `headsep run -w qkv` out.
res = headsep.attention(x, weights=mha, heads=H, maps=[0])
sep = res.summary["scenarios"][0]["metrics"]["head_separation"]
print(f"{res.summary['groups']} reports; head_separation mean {sep['mean']:.4f}, std {sep['std']:.4f}")
cols = ["report_id", "head_separation"] + [f"head{h}_entropy" for h in range(1, H + 1)] + ["head1_head2_js_divergence"]
print(res.rows.nlargest(5, "head_separation")[cols].to_string(index=False))

# Report #0's maps, [heads, queries, keys]: which head looks where.
maps = res.maps[0]
for h in range(H):
    print(f"head {h + 1}: entropy of query 0 = {-(maps[h, 0] * np.log(maps[h, 0] + 1e-30)).sum():.3f} nats, "
          f"weight on the token itself (mean) = {np.diagonal(maps[h]).mean():.3f}")
