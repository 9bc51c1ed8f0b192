"""The torch peer that does headsep's `run -s tensor -w qkv` job: every per-report metric and the summary.

Imported by bench/attention_peers.py. Per report (uniform n, X [B, n, d_model], features [B*n, 3]):
multi-head attention with the module's weights (heads 1..H, per-head weights kept, the O_h and V_h
of each head) plus the single-head baseline of a 1-head module (head 0), then what
docs/METRICS.md defines — contexts, difference_from_single, pairwise separations, head_separation,
per head entropy / confidence / self, prev, first weight, per pair JS divergence, position overlap,
subspace / output cosine, output distance (Li et al. 2018) — and the summary over the batch (count,
mean, population std, min, max, p01..p99, a 20-bin histogram of head_separation, top-k), all in
torch. Attention in f32, per-query values summed over queries in f64, as headsep does. No output
projection: headsep computes none outside --attention either. `compare()` checks it against a
headsep --per-report CSV and --summary JSON.
"""
import csv
import json
import math

import torch
import torch.nn.functional as F

AXES = ("decision_axis", "evidence_condition_axis")  # headsep's default: decision; evidence + condition
HEAD_STATS = ("entropy", "confidence", "self_weight", "prev_weight", "first_weight")
PAIR_STATS = ("js_divergence", "position_overlap", "subspace_cosine", "output_cosine", "output_distance")
QUANTILES = (("p01", 0.01), ("p10", 0.10), ("p50", 0.50), ("p90", 0.90), ("p99", 0.99))


def head_name(h):
    return f"head{h}" if h else "single"


def pairs(H):
    return [(i, j) for i in range(1, H + 1) for j in range(i + 1, H + 1)]


def column_names(H):
    """The per-report CSV's numeric columns, in its order (contexts first, then the summary's metrics)."""
    return [f"{head_name(h)}_{a}" for h in range(H + 1) for a in AXES] + summary_metric_names(H)


def summary_metric_names(H):
    names = ["head_separation"] + [f"diff_head{h}_{a}" for h in range(1, H + 1) for a in AXES]
    names += [f"{head_name(h)}_{s}" for h in range(H + 1) for s in HEAD_STATS]
    names += [f"head{i}_head{j}_{s}" for i, j in pairs(H) for s in PAIR_STATS]
    return names


def _attention(q, k, dk):
    """softmax(q kᵀ / √d_k) per head: q, k [b, h, n, d_k] -> [b, h, n, n] (f32)."""
    return torch.softmax(torch.matmul(q, k.transpose(-1, -2)) * (1.0 / math.sqrt(dk)), dim=-1)


def _head_stats(A):
    """[b, h, n, n] -> [b, h, 5] in f64: per-query entropy, max, A[q,q], A[q,q-1] (0 at q=0), A[q,0], mean over q."""
    n = A.shape[-1]
    ent = torch.special.entr(A).sum(-1)  # [b, h, n]
    conf = A.amax(-1)
    diag = torch.diagonal(A, dim1=-2, dim2=-1)
    prev = F.pad(torch.diagonal(A, offset=-1, dim1=-2, dim2=-1), (1, 0))
    first = A[..., 0]
    return torch.stack([ent, conf, diag, prev, first], -1).double().mean(-2), ent


def _frob_cos(a, b):
    """Frobenius cosine over the last two dims (f64 sums), 0 when a norm is 0."""
    dot = (a.double() * b.double()).sum((-2, -1))
    na, nb = a.double().pow(2).sum((-2, -1)).sqrt(), b.double().pow(2).sum((-2, -1)).sqrt()
    den = na * nb
    return torch.where(den > 0, dot / torch.where(den > 0, den, torch.ones_like(den)), torch.zeros_like(den))


def metrics_chunk(x, axes, w_in, b_in, s_in, s_b, H):
    """Every per-report value of a chunk x [b, n, d] -> [b, len(column_names(H))] f64."""
    b, n, d = x.shape
    dk = d // H
    qkv = F.linear(x, w_in, b_in)  # [b, n, 3d]
    q, k, v = qkv.view(b, n, 3, H, dk).permute(2, 0, 3, 1, 4)  # each [b, H, n, dk]
    A = _attention(q, k, dk)  # [b, H, n, n]
    O = torch.matmul(A, v)  # [b, H, n, dk]: each head's output rows
    q0, k0 = F.linear(x, s_in[:d], s_b[:d]), F.linear(x, s_in[d:2 * d], s_b[d:2 * d])
    A0 = _attention(q0.unsqueeze(1), k0.unsqueeze(1), d)  # [b, 1, n, n]: the baseline (d_k = d_model)
    ctx = torch.cat([A0, A], 1).double().mean(-2) @ axes.double()  # [b, H+1, 2]: mean_q Σ_k A[q,k] axis(k)
    diff = (ctx[:, 1:] - ctx[:, :1]).reshape(b, -1)
    hs0, _ = _head_stats(A0)
    hs, ent = _head_stats(A)
    pair_cols, seps = [], []
    for i, j in pairs(H):
        P, Q = A[:, i - 1], A[:, j - 1]
        js = (torch.special.entr(0.5 * (P + Q)).sum(-1) - 0.5 * (ent[:, i - 1] + ent[:, j - 1])).double().mean(-1)
        overlap = (P * Q).sum(-1).double().mean(-1)
        sub = _frob_cos(v[:, i - 1], v[:, j - 1])
        ocos = _frob_cos(O[:, i - 1], O[:, j - 1])
        odist = (O[:, i - 1] - O[:, j - 1]).norm(dim=-1).double().mean(-1)
        pair_cols.append(torch.stack([js, overlap, sub, ocos, odist], -1))
        seps.append((ctx[:, i] - ctx[:, j]).norm(dim=-1))
    sep = torch.stack(seps, -1).mean(-1) if seps else torch.zeros(b, dtype=torch.float64)
    cols = [ctx.reshape(b, -1), sep.unsqueeze(1), diff, hs0.reshape(b, -1), hs.reshape(b, -1)]
    if pair_cols:
        cols.append(torch.stack(pair_cols, 1).reshape(b, -1))
    return torch.cat(cols, 1)


def summary(values, H, bins=20, top=10):
    """The summary over the batch from the per-report values [B, columns] (f64), in torch."""
    names = summary_metric_names(H)
    m = values[:, 2 * (H + 1):]  # drop the contexts: the summary's metrics only
    mean, std = m.mean(0), m.std(0, correction=0)
    lo, hi = m.amin(0), m.amax(0)
    qs = torch.quantile(m, torch.tensor([q for _, q in QUANTILES], dtype=m.dtype), dim=0)  # linear, as numpy
    metrics = {}
    for c, name in enumerate(names):
        metrics[name] = {"mean": float(mean[c]), "std": float(std[c]), "min": float(lo[c]), "max": float(hi[c]),
                         **{label: float(qs[r, c]) for r, (label, _) in enumerate(QUANTILES)}}
    sep = m[:, 0]
    a, b = float(lo[0]), float(hi[0])
    if a == b:
        a, b = a - 0.5, b + 0.5
    counts = torch.histc(sep, bins=bins, min=a, max=b)
    edges = [a + (b - a) * i / bins for i in range(bins)] + [b]
    hist = [{"lo": edges[i], "hi": edges[i + 1], "count": int(counts[i])} for i in range(bins)]
    tv, ti = torch.topk(sep, min(top, sep.numel()))
    return {"count": int(m.shape[0]), "metrics": metrics, "head_separation_histogram": hist,
            "top": [{"report_index": int(i), "head_separation": float(v)} for v, i in zip(tv, ti)]}


class TorchPeer:
    """headsep's qkv job in torch: weights from the module's and the baseline's state_dicts."""

    def __init__(self, sd, single_sd, H, chunk=0):
        self.w_in, self.b_in = sd["in_proj_weight"].float(), sd["in_proj_bias"].float()
        self.s_in, self.s_b = single_sd["in_proj_weight"].float(), single_sd["in_proj_bias"].float()
        self.H, self.chunk = H, chunk

    def rows(self, X, features):
        B, n, _ = X.shape
        f = features.view(B, n, 3)
        axes = torch.stack([f[..., 0], f[..., 1] + f[..., 2]], -1)  # [B, n, 2]
        # Chunks of about 32 MiB of attention maps (headsep's batches are ~1 MiB of projections).
        step = self.chunk or max(1, min(B, (32 << 20) // (4 * (self.H + 1) * n * n)))
        out = [metrics_chunk(X[s:s + step], axes[s:s + step], self.w_in, self.b_in, self.s_in, self.s_b, self.H)
               for s in range(0, B, step)]
        return torch.cat(out, 0)

    def __call__(self, X, features):
        with torch.inference_mode():
            v = self.rows(X, features)
            return v, summary(v, self.H)


# ---- agreement with headsep -------------------------------------------------------------------

def read_headsep_csv(path, H):
    names = column_names(H)
    with open(path, newline="") as f:
        rows = list(csv.DictReader(f))
    return torch.tensor([[float(r[c]) for c in names] for r in rows], dtype=torch.float64)


def compare(values, summ, csv_path, summary_path, H):
    """Max |Δ| of every per-report column and every summary field vs headsep; lines to print."""
    names = column_names(H)
    ref = read_headsep_csv(csv_path, H)
    if ref.shape != values.shape:
        return [f"shape mismatch: headsep {tuple(ref.shape)}, torch {tuple(values.shape)}"], float("inf")
    d = (ref - values).abs().amax(0)
    worst = int(d.argmax())
    lines = [f"per-report values: {len(names)} columns x {ref.shape[0]} reports, max |Δ| {float(d.max()):.2g} "
             f"({names[worst]})"]
    doc = json.load(open(summary_path))
    sc = doc["scenarios"][0]
    exact = sc["metrics"]["head_separation"].get("quantiles_exact", True)
    dm = {k: 0.0 for k in ("mean", "std", "min", "max")}
    dq, rq = 0.0, 0.0
    for name, ours in summ["metrics"].items():
        theirs = sc["metrics"][name]
        for k in dm:
            dm[k] = max(dm[k], abs(ours[k] - theirs[k]))
        for label, _ in QUANTILES:
            dq = max(dq, abs(ours[label] - theirs[label]))
            rq = max(rq, abs(ours[label] - theirs[label]) / max(abs(theirs[label]), 1e-12))
    lines.append("summary moments max |Δ| " + ", ".join(f"{k} {v:.2g}" for k, v in dm.items()))
    lines.append(f"quantiles ({'exact on both sides: linear interpolation' if exact else 'headsep: relative-error sketch, torch: exact linear'}) "
                 f"max |Δ| {dq:.2g}, max relative {rq:.2g}")
    hc = [b["count"] for b in sc["head_separation_histogram"]]
    tc = [b["count"] for b in summ["head_separation_histogram"]]
    moved = sum(abs(a - b) for a, b in zip(hc, tc)) // 2
    lines.append(f"histogram of head_separation: {len(hc)} bins, {moved} of {summ['count']} reports in another bin")
    ti = [t["report_index"] for t in sc["top"]]
    oi = [t["report_index"] for t in summ["top"]]
    tv = max((abs(a["head_separation"] - b["head_separation"]) for a, b in zip(sc["top"], summ["top"])), default=0.0)
    lines.append(f"top-{len(ti)}: {'same reports, same order' if ti == oi else f'headsep {ti} vs torch {oi}'}, values max |Δ| {tv:.2g}")
    return lines, max(float(d.max()), *dm.values(), dq if exact else 0.0)


def check_headsep_maps(path, w_ref, out_ref, H):
    """headsep --attention maps (JSON lines) vs torch: max |Δ| of heads' maps and the multi-head output vs torch, over the reports in the file."""
    err_w = err_o = 0.0
    count = 0
    with open(path) as f:
        for line in f:
            rec = json.loads(line)
            i = rec["report_index"]
            heads = torch.tensor(rec["heads"], dtype=torch.float64)  # [H, queries, n]
            ref = w_ref[i].double()
            if heads.shape != ref.shape:
                raise RuntimeError(f"report {i}: heads {heads.shape} vs torch {ref.shape}")
            err_w = max(err_w, float((heads - ref).abs().max()))
            if rec.get("output") is not None:
                err_o = max(err_o, float((torch.tensor(rec["output"], dtype=torch.float64) - out_ref[i].double()).abs().max()))
            else:
                err_o = float("nan")
            count += 1
    return count, err_w, err_o
