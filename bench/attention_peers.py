#!/usr/bin/env python3
"""headsep's QKV attention vs its peers on the same batch, the same weights and thread count.

For each shape B x n x d_model x heads: one seeded batch X [B, n, d_model], a randomly initialised
torch.nn.MultiheadAttention(d_model, heads) and a 1-head one (headsep's single-head baseline):
  mha.safetensors / single.safetensors  the state_dicts (headsep: -p qkv.weights / -p qkv.baseline)
  x.safetensors    X as `x` plus `features` [B*n, 3] (the seed's context axes, __metadata__ names them)
Timed on T threads (torch.set_num_threads(T), ORT intra_op_num_threads=T, headsep --threads T), in
--repeat interleaved rounds (every implementation once per round; best of the rounds):
  (a) torch MHA forward with per-head weights, alone and + entropy + all-pairs JS in torch ops;
  (b) torch scaled_dot_product_attention (fused, no weights) with the projections;
  (c) torch doing headsep's whole job: every per-report metric and the summary
      (attention_torch_peer.py; checked against headsep's --per-report CSV and --summary first);
  (d) onnxruntime: the plain, fused-QKV and Attention-23 graphs under session variants (ort_peers.py),
      each round a fresh session run until its runs settle (ort_peers.warm_up) before the timed ones;
  (e) headsep run --scenario tensor --weighting qkv (every metric and the summary), its engine time.
Agreement: ORT, SDPA and headsep (--attention maps of the first 8 reports) against torch's weights
and output, within 1e-4. Run it through bench/run_attention_peers.sh (it finds or creates the venv).
"""
import argparse
import json
import os
import re
import resource
import shutil
import subprocess
import sys
import tempfile
import time

from machine import cpu_line

try:
    import numpy as np
    import torch
    import torch.nn.functional as F
    from safetensors.torch import load_file, save_file

    import attention_torch_peer
    import ort_peers
except ImportError as e:  # pragma: no cover - environment message
    sys.exit(f"attention_peers.py: {e}; run bench/run_attention_peers.sh (it creates the venv with the peers)")

DEFAULT_SHAPES = "2048x64x64x4,256x256x256x8,65536x3x2x2"
TOL = 1e-4
HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)


def parse_shape(s):
    parts = [int(v) for v in s.lower().split("x")]
    if len(parts) != 4 or min(parts) < 1:
        raise argparse.ArgumentTypeError(f"shape '{s}': expected BxNxD_MODELxHEADS")
    B, n, d, H = parts
    if d % H:
        raise argparse.ArgumentTypeError(f"shape '{s}': heads must divide d_model")
    return B, n, d, H


def flops_per_report(n, d):
    """Projections 2·n·d·3d + output 2·n·d² + scores and A·V 4·n²·d."""
    return 2 * n * d * 3 * d + 2 * n * d * d + 4 * n * n * d


def best_time(fn, repeat, budget):
    """Best of a warm-up call and up to `repeat` more; stops early once the calls so far took
    `budget` seconds (a slow first call still counts: one-time set-up is small against it)."""
    best, spent = float("inf"), 0.0
    for _ in range(repeat + 1):
        t0 = time.perf_counter()
        fn()
        dt = time.perf_counter() - t0
        best, spent = min(best, dt), spent + dt
        if spent >= budget:
            break
    return best


# ---- (a) torch MHA with weights, and the analysis a PyTorch user would write --------------------

def torch_mha(mha, X):
    return mha(X, X, X, need_weights=True, average_attn_weights=False)


def torch_analysis(mha, X):
    """Per-head weights, entropy (nats, mean over queries), all-pairs Jensen-Shannon divergence."""
    out, w = mha(X, X, X, need_weights=True, average_attn_weights=False)  # w [B, H, n, n]
    ent = torch.special.entr(w).sum(-1)  # [B, H, n]: -sum_k a log a per query
    entropy = ent.mean(-1)  # [B, H]
    H = w.shape[1]
    js = []
    for i in range(H):
        for j in range(i + 1, H):
            m = 0.5 * (w[:, i] + w[:, j])
            # JS(P, Q) = H(M) - (H(P) + H(Q)) / 2, averaged over queries
            js.append((torch.special.entr(m).sum(-1) - 0.5 * (ent[:, i] + ent[:, j])).mean(-1))
    js = torch.stack(js, 1) if js else torch.zeros(X.shape[0], 0)
    return out, w, entropy, js


# ---- (b) fused SDPA on the projected q/k/v ---------------------------------------------------------

def torch_sdpa(mha, X):
    B, n, d = X.shape
    H = mha.num_heads
    qkv = F.linear(X, mha.in_proj_weight, mha.in_proj_bias)  # [B, n, 3d]
    q, k, v = qkv.view(B, n, 3, H, d // H).permute(2, 0, 3, 1, 4)  # each [B, H, n, d_k]
    o = F.scaled_dot_product_attention(q, k, v)  # [B, H, n, d_k]
    return F.linear(o.transpose(1, 2).reshape(B, n, d), mha.out_proj.weight, mha.out_proj.bias)


# ---- (c) onnxruntime (graphs and session options: ort_peers.py) -------------------------------------

onnx_graph_matmul = ort_peers.graph_fused  # the names bench/attention_python.py uses
onnx_graph_attention23 = ort_peers.graph_attention23
ort_session = lambda model, threads: ort_peers.session(model, threads, "bench")  # noqa: E731


# ---- (d) headsep ---------------------------------------------------------------------------------

def run_cmd(cmd, **kw):
    return subprocess.run(cmd, capture_output=True, text=True, **kw)


class Headsep:
    """What the headsep binary can do: run qkv over the tensor plugin, --attention, fp32 peak."""

    def __init__(self, path):
        self.path = path
        self.missing = None
        self.attention_flag = False
        self.peak_per_core = None
        if not path or not os.path.exists(path):
            self.missing = f"no headsep binary at {path} (build it: cmake --build build)"
            return
        lacking = [p for p in ("qkv", "tensor") if run_cmd([path, "plugins", p]).returncode != 0]
        if lacking:
            self.missing = f"{path} has no plugin {' / '.join(lacking)} yet ('headsep plugins')"
        self.attention_flag = "--attention" in run_cmd([path, "run", "--help"]).stdout
        info = run_cmd([path, "info"]).stdout
        for line in info.splitlines():
            if "fp32 peak" in line:
                m = re.search(r"([0-9.]+)\s*GFLOP/s", line)
                if m:
                    self.peak_per_core = (float(m.group(1)), line.strip())

    def command(self, x, mha, heads, threads, chunk, summary, extra=(), baseline=None):
        return [self.path, "run", "--scenario", "tensor", "-p", f"tensor.path={x}", "--weighting", "qkv",
                "-p", f"qkv.weights={mha}", "-p", f"qkv.heads={heads}", "--threads", str(threads),
                *(["-p", f"qkv.baseline={baseline}"] if baseline else []),
                *(["--chunk", str(chunk)] if chunk != "default" else []), "--summary", summary, *extra]

    @staticmethod
    def engine_seconds(summary_path, stdout):
        """The engine's own time: the summary's, else the printed '... in X s' line."""
        try:
            with open(summary_path) as f:
                doc = json.load(f)
            stack = [doc]
            while stack:
                o = stack.pop()
                if isinstance(o, dict):
                    for k, v in o.items():
                        if k in ("seconds", "run_seconds", "elapsed_seconds", "wall_seconds", "time_s", "wall_s") and \
                                isinstance(v, (int, float)):
                            return float(v), "summary JSON"
                        stack.append(v)
                elif isinstance(o, list):
                    stack.extend(o[:4])
        except (OSError, ValueError):
            pass
        m = re.search(r"groups in ([0-9.]+) s", stdout)
        if m and float(m.group(1)) >= 0.02:  # printed to the millisecond: too coarse below ~20 ms
            return float(m.group(1)), "its printed run time"
        return None, None

    def time_run(self, cmd, summary, repeat, budget):
        """(engine seconds or None, best process seconds, how the engine time was read)."""
        best_proc, best_engine, how = float("inf"), float("inf"), None
        spent = 0.0
        for _ in range(repeat):
            t0 = time.perf_counter()
            r = run_cmd(cmd)
            dt = time.perf_counter() - t0
            if r.returncode != 0:
                raise RuntimeError(f"headsep failed ({r.returncode}): {' '.join(cmd)}\n{r.stderr.strip()}")
            eng, how = self.engine_seconds(summary, r.stdout)
            best_proc = min(best_proc, dt)
            if eng is not None:
                best_engine = min(best_engine, eng)
            spent += dt
            if spent >= budget:
                break
        return (best_engine if how else None), best_proc, how


# ---- data ----------------------------------------------------------------------------------------

def make_case(B, n, d, H, seed, folder):
    torch.manual_seed(seed)
    mha = torch.nn.MultiheadAttention(d, H, batch_first=True).eval()
    with torch.no_grad():  # non-zero biases, so a dropped bias shows in the agreement check
        mha.in_proj_bias.uniform_(-0.1, 0.1)
        mha.out_proj.bias.uniform_(-0.1, 0.1)
    X = torch.randn(B, n, d, dtype=torch.float32)
    g = torch.Generator().manual_seed(seed + 1)
    feats = torch.rand(B * n, 3, generator=g) * 1.8
    sd = {k: v.detach().contiguous() for k, v in mha.state_dict().items()}
    single = torch.nn.MultiheadAttention(d, 1, batch_first=True)  # headsep's single-head baseline (head 0)
    with torch.no_grad():
        single.in_proj_bias.uniform_(-0.1, 0.1)
    paths = {"mha": os.path.join(folder, "mha.safetensors"), "x": os.path.join(folder, "x.safetensors"),
             "x1": os.path.join(folder, "x1.safetensors"), "single": os.path.join(folder, "single.safetensors")}
    save_file(sd, paths["mha"])
    save_file({k: v.detach().contiguous() for k, v in single.state_dict().items()}, paths["single"])
    meta = {"features": "decision_axis,evidence_axis,condition_axis"}
    save_file({"x": X, "features": feats}, paths["x"], metadata=meta)
    save_file({"x": X[:1].contiguous(), "features": feats[:n].contiguous()}, paths["x1"], metadata=meta)
    return mha, X, sd, paths


def max_abs(a, b):
    return float((torch.as_tensor(a, dtype=torch.float32) - torch.as_tensor(b, dtype=torch.float32)).abs().max())


def fmt_rate(x):
    if x is None:
        return "—"
    for unit, k in (("M", 1e6), ("k", 1e3)):
        if x >= k:
            return f"{x / k:.3g} {unit}"
    return f"{x:.3g}"


# ---- main ----------------------------------------------------------------------------------------

def check_like_with_like(hs, shape, seed, folder, T):
    """headsep's --per-report rows and --summary vs the torch peer's on one small batch: lines to print."""
    B, n, d, H = shape
    mha, X, sd, paths = make_case(B, n, d, H, seed, folder)
    rows, summ = os.path.join(folder, "rows.csv"), os.path.join(folder, "summary.json")
    cmd = hs.command(paths["x"], paths["mha"], H, T, "default", summ, ["--per-report", rows], paths["single"])
    r = run_cmd(cmd)
    if r.returncode != 0:
        return [f"headsep failed: {r.stderr.strip()[:300]}"]
    peer = attention_torch_peer.TorchPeer(sd, load_file(paths["single"]), H)
    values, summary = peer(X, load_file(paths["x"])["features"])
    lines, worst = attention_torch_peer.compare(values, summary, rows, summ, H)
    return lines + [f"worst of the exact comparisons {worst:.2g} ({'within' if worst <= TOL else '** above **'} {TOL})"]


def timings(a, hs, case, T, variants):
    """{name: best wall s}, {name: best CPU s (all threads)} over a.repeat interleaved rounds."""
    mha, X, sd, paths, feeds, models = case
    B, H = X.shape[0], mha.num_heads
    feats = load_file(paths["x"])["features"]
    peer = attention_torch_peer.TorchPeer(sd, load_file(paths["single"]), H)
    impls = {"torch MHA + weights": lambda: (lambda: torch_mha(mha, X)),
             "torch MHA + weights + entropy + JS": lambda: (lambda: torch_analysis(mha, X)),
             "torch SDPA, no weights": lambda: (lambda: torch_sdpa(mha, X)),
             "torch: headsep's job (every metric + summary)": lambda: (lambda: peer(X, feats))}

    def ort_impl(model, v):
        def make():
            run = ort_peers.runner(ort_peers.session(model, T, v), feeds["x"], v)
            ort_peers.warm_up(run)
            return run
        return make
    for g, model in models.items():
        for v in variants[g]:
            impls[f"onnxruntime {g} [{v}]"] = ort_impl(model, v)
    chunk = a.chunk if a.chunk != "auto" else str(max(16, min(8192, -(-B // (8 * T)))))
    summ = os.path.join(os.path.dirname(paths["x"]), f"summary-T{T}.json")
    cmd = hs.command(paths["x"], paths["mha"], H, T, chunk, summ, baseline=paths["single"]) if not hs.missing else None
    best, cpu, notes = {}, {}, {}
    torch.set_num_threads(T)
    for r in range(a.repeat):
        for name, make in impls.items():
            with torch.inference_mode():
                fn = make()
                if r == 0 and not name.startswith("onnxruntime"):
                    fn()  # warm-up
                calls, t0, c0 = 0, time.perf_counter(), time.process_time()
                while calls == 0 or time.perf_counter() - t0 < a.min_time:  # a short call: the mean of several
                    fn()
                    calls += 1
                best[name] = min(best.get(name, float("inf")), (time.perf_counter() - t0) / calls)
                cpu[name] = min(cpu.get(name, float("inf")), (time.process_time() - c0) / calls)
            del fn
        if cmd:
            try:
                if r == 0:
                    run_cmd(cmd)  # warm the page cache
                ru0 = resource.getrusage(resource.RUSAGE_CHILDREN)
                eng, proc, how = hs.time_run(cmd, summ, 1, 0)
                ru1 = resource.getrusage(resource.RUSAGE_CHILDREN)
                used = ru1.ru_utime + ru1.ru_stime - ru0.ru_utime - ru0.ru_stime  # the whole process, start-up too
                cpu["headsep qkv + all metrics"] = min(cpu.get("headsep qkv + all metrics", float("inf")), used)
                if eng is None:  # a run under 20 ms: --profile's wall_s (to the ns, ~1 % overhead) instead
                    eng, proc, how = hs.time_run([*cmd, "--profile"], summ, 1, 0)
                    how = how and "the summary's profile.wall_s (--profile: a run under 20 ms)"
                if eng is None:
                    return best, cpu, "no engine time in its output"
                best["headsep qkv + all metrics"] = min(best.get("headsep qkv + all metrics", float("inf")), eng)
                notes["headsep"] = f"{' '.join(cmd)}  [time: {how}]"
            except RuntimeError as e:
                notes["headsep"] = f"failed: {str(e)[:600]}"
    return best, cpu, notes.get("headsep")


def headsep_maps(hs, paths, H, T, folder, w_ref, out_ref):
    """headsep's --attention maps and outputs of the first 8 reports vs torch's: a line to print."""
    maps = os.path.join(folder, "maps.jsonl")
    cmd = hs.command(paths["x"], paths["mha"], H, T, "default", maps + ".json",
                     ["--attention", maps, "--attention-reports", "first:8"], paths["single"])
    r = run_cmd(cmd)
    if r.returncode != 0:
        return f"--attention run failed: {r.stderr.strip()[:300]}"
    cnt, ew, eo = attention_torch_peer.check_headsep_maps(maps, w_ref, out_ref, H)
    return f"{cnt} reports: weights max |Δ| {ew:.2g}, output {eo:.2g}" + \
        (f"  ** above {TOL} **" if not (max(ew, eo) <= TOL) else "")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--headsep", default=os.environ.get("HEADSEP_BIN") or os.path.join(
        os.environ.get("HEADSEP_BUILD", os.path.join(ROOT, "build")), "headsep"))
    ap.add_argument("--shapes", default=DEFAULT_SHAPES, help=f"comma-separated BxNxDxH (default {DEFAULT_SHAPES})")
    ap.add_argument("--threads", default="2,1", help="comma-separated thread counts (default 2,1)")
    ap.add_argument("--repeat", type=int, default=3, help="interleaved rounds, best of them taken (default 3)")
    ap.add_argument("--min-time", type=float, default=0.25, help="seconds per timing in a round (default 0.25)")
    ap.add_argument("--chunk", default="auto",
                    help="headsep --chunk: auto = B/(8*threads) in 16..8192 (enough batches for every thread), "
                         "default = headsep's own, or a number")
    ap.add_argument("--ort-graphs", default="plain,fused,attn23", help="onnxruntime graphs (ort_peers.GRAPHS)")
    ap.add_argument("--ort-variants", default="default,bench",
                    help="session variants of the plain graph (ort_peers.VARIANTS, or 'all')")
    ap.add_argument("--ort-variants-others", default="default,bench", help="session variants of the other graphs")
    ap.add_argument("--profile-ort", metavar="DIR", help="also write ORT's profiling JSON per graph and print ms per op type")
    ap.add_argument("--check", default="48x24x32x4,6000x3x8x2",
                    help="shapes on which the torch peer's rows and summary are checked against headsep's ('' = none)")
    ap.add_argument("--seed", type=int, default=2026)
    ap.add_argument("--workdir", help="keep the generated files here (default: a temporary folder)")
    a = ap.parse_args()
    shapes = [parse_shape(s) for s in a.shapes.split(",") if s]
    thread_counts = [int(t) for t in a.threads.split(",") if t]
    every = list(ort_peers.VARIANTS)
    pick = lambda s: every if s == "all" else [v for v in s.split(",") if v]  # noqa: E731
    graphs = [g for g in a.ort_graphs.split(",") if g]
    variants = {g: pick(a.ort_variants) if g == "plain" else pick(a.ort_variants_others) for g in graphs}

    import onnxruntime as ort

    hs = Headsep(a.headsep)
    cpu = cpu_line()
    print(f"CPU: {cpu}; torch {torch.__version__}, onnxruntime {ort.__version__}, "
          f"numpy {np.__version__}; {a.repeat} interleaved rounds, best of them")
    peak_core = hs.peak_per_core[0] if hs.peak_per_core else None
    print(hs.peak_per_core[1] if hs.peak_per_core else "no fp32 peak from `headsep info`")
    if hs.missing:
        print(f"headsep: skipped — {hs.missing}")
    load0 = os.getloadavg()[0]
    if a.profile_ort:
        os.makedirs(a.profile_ort, exist_ok=True)
    tmp = a.workdir or tempfile.mkdtemp(prefix="headsep-attn-peers-")
    os.makedirs(tmp, exist_ok=True)
    results = {}
    try:
        if not hs.missing:
            for s in [parse_shape(s) for s in a.check.split(",") if s]:
                folder = os.path.join(tmp, "check-" + "x".join(map(str, s)))
                os.makedirs(folder, exist_ok=True)
                print(f"\n== like with like, {' x '.join(map(str, s))}: the torch peer vs headsep --per-report + --summary")
                torch.set_num_threads(max(thread_counts))
                for line in check_like_with_like(hs, s, a.seed, folder, max(thread_counts)):
                    print("   " + line)
        for (B, n, d, H) in shapes:
            label = f"{B} x {n} x {d} x {H}"
            folder = os.path.join(tmp, f"{B}x{n}x{d}x{H}")
            os.makedirs(folder, exist_ok=True)
            mha, X, sd, paths = make_case(B, n, d, H, a.seed, folder)
            fl = flops_per_report(n, d)
            print(f"\n== {label}: X {list(X.shape)}, {fl / 1e6:.3g} MFLOP per report; files in {folder}")
            torch.set_num_threads(max(thread_counts))
            with torch.inference_mode():
                out_ref, w_ref = torch_mha(mha, X)
                sdpa_out = torch_sdpa(mha, X)
            agree = {"torch SDPA, no weights": f"output max |Δ| {max_abs(sdpa_out, out_ref):.2g}"}
            feeds, models = {"x": X.numpy()}, {}
            for g in graphs:
                try:
                    model = ort_peers.GRAPHS[g](sd, B, n, d, H)
                    o, w = ort_peers.session(model, max(thread_counts)).run(None, feeds)
                    ew, eo = max_abs(w, w_ref), max_abs(o, out_ref)
                    agree[f"onnxruntime {g}"] = f"weights max |Δ| {ew:.2g}, output {eo:.2g}" + \
                        (f"  ** above {TOL} **" if max(ew, eo) > TOL else "")
                    models[g] = model
                    if a.profile_ort:
                        ops, path = ort_peers.profile_ops(model, feeds["x"], max(thread_counts), a.profile_ort)
                        print(f"   ORT {g}: after optimization {' '.join(ort_peers.optimized_ops(model, max(thread_counts)))}")
                        print(f"   ORT {g} profile ({path}), ms per run: " +
                              ", ".join(f"{k} {v:.1f}" for k, v in ops.items()))
                except Exception as e:  # an ORT without this operator: say so, keep going
                    agree[f"onnxruntime {g}"] = f"skipped: {str(e).splitlines()[0][:160]}"
            if not hs.missing and hs.attention_flag:
                agree["headsep"] = headsep_maps(hs, paths, H, max(thread_counts), folder, w_ref, out_ref)
            del sdpa_out, w_ref, out_ref
            for T in thread_counts:
                best, cpu_s, hs_note = timings(a, hs, (mha, X, sd, paths, feeds, models), T, variants)
                hs_t = best.get("headsep qkv + all metrics")
                peak = peak_core * T if peak_core else None
                print(f"-- threads {T}" + (f" (fp32 peak {peak:.0f} GFLOP/s)" if peak else ""))
                for name, dt in best.items():
                    rate, gf = B / dt, B / dt * fl / 1e9
                    ratio = f"{dt / hs_t:.2f}x" if hs_t else "—"
                    pct = f"{100 * gf / peak:6.1f} % peak" if peak else ""
                    cr = B / cpu_s[name] if cpu_s.get(name) else None
                    print(f"   {name:52s} {rate:12.4g} reports/s {gf:8.2f} GFLOP/s {pct}   headsep/this {ratio}"
                          f"   per CPU-second {cr or 0:10.4g}")
                    results.setdefault(T, []).append((label, name, rate, gf, ratio, cr))
                ort_best = min(((dt, k) for k, dt in best.items() if k.startswith("onnxruntime")), default=None)
                if ort_best and hs_t:
                    print(f"   best onnxruntime: {ort_best[1]}, headsep / it {ort_best[0] / hs_t:.2f}x")
                if hs_note:
                    print(f"   headsep: {hs_note}")
            for name, text in agree.items():
                print(f"   agreement vs torch MHA: {name}: {text}")
            del mha, X
    finally:
        if not a.workdir:
            shutil.rmtree(tmp, ignore_errors=True)
    print(f"\nload average (1 min) {load0:.2f} at the start, {os.getloadavg()[0]:.2f} at the end on "
          f"{os.cpu_count()} CPUs: a loaded machine slows the multi-threaded runs most")
    for T, rows in results.items():
        print(f"\n### {T} thread{'s' if T > 1 else ''} ({cpu})\n")
        print("| B x n x d_model x heads | implementation | reports/s | GFLOP/s | headsep / this | reports per CPU-second |")
        print("|---|---|---|---|---|---|")
        for label, name, rate, gf, ratio, cr in rows:
            print(f"| {label} | {name} | {fmt_rate(rate)} | {gf:.1f} | {ratio} | {fmt_rate(cr)} |")


if __name__ == "__main__":
    main()
