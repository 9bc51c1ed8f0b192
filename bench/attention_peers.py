#!/usr/bin/env python3
"""headsep's QKV attention vs its peers on the same batch, the same weights and thread count.

For each shape B x n x d_model x heads this builds one seeded batch X [B, n, d_model] and a
randomly initialised torch.nn.MultiheadAttention(d_model, heads, batch_first=True), writes
  mha.safetensors  the module's state_dict (safetensors.torch.save_file), read by headsep's qkv
  x.safetensors    X as tensor `x` [B, n, d_model] plus `features` [B*n, 3] with __metadata__
                   features=decision_axis,evidence_axis,condition_axis (the seed's context axes)
and times, on T threads (torch.set_num_threads(T), ORT intra_op_num_threads=T, headsep --threads T):
  (a) torch MHA forward, need_weights=True, average_attn_weights=False (per-head weights), alone
      and followed by per-head entropy + all-pairs Jensen-Shannon divergence in torch ops;
  (b) torch scaled_dot_product_attention (fused, no weights) on the projected q/k/v, with the
      input and output projections;
  (c) onnxruntime on an ONNX graph (opset 17, built with onnx.helper: one fused QKV MatMul, the
      1/sqrt(d_k) scale folded into W_q, MatMul, Softmax, MatMul, output MatMul) that outputs the
      per-head weights; and, when this onnxruntime runs it, the opset-23 Attention operator with
      qk_matmul_output_mode=3 (per-head softmax weights as a second output);
  (d) headsep run --scenario tensor --weighting qkv (every metric: contexts, separation, entropy,
      confidence, positional weights, JS divergence, Li et al. disagreements, the summary).
Each timing is the best of --repeat runs (fewer when one run exceeds --budget seconds), after a
warm-up on a slice. headsep's time is its engine's own (the summary's time if it reports one,
else the "... in X s" line it prints, else the process time minus that of the same run on one
report). Agreement: ORT, SDPA and headsep (--attention maps of the first 8 reports) against
torch's weights and attn_output, within 1e-4 absolute.

Usage: attention_peers.py [--headsep build/headsep] [--shapes 2048x64x64x4,...] [--threads 2,1]
                          [--repeat 3] [--budget 4] [--chunk auto|N] [--workdir DIR]
Run it through bench/run_attention_peers.sh (creates the venv with torch, onnxruntime, onnx,
safetensors on first use).
"""
import argparse
import json
import math
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time

try:
    import numpy as np
    import torch
    import torch.nn.functional as F
    from safetensors.torch import save_file
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


# ---- (c) onnxruntime -----------------------------------------------------------------------------

def onnx_graph_matmul(sd, B, n, d, H):
    """MatMul/Softmax graph, fixed shapes, outputs (attn_output [B,n,d], weights [B,H,n,n])."""
    import onnx
    from onnx import TensorProto, helper, numpy_helper

    dk = d // H
    w_in = sd["in_proj_weight"].numpy().astype(np.float32).copy()  # [3d, d]
    b_in = sd["in_proj_bias"].numpy().astype(np.float32).copy()
    scale = 1.0 / math.sqrt(dk)
    w_in[:d] *= scale  # fold the score scale into W_q, b_q
    b_in[:d] *= scale
    inits = [
        numpy_helper.from_array(np.ascontiguousarray(w_in.T), "w_in_t"),  # [d, 3d]
        numpy_helper.from_array(b_in, "b_in"),
        numpy_helper.from_array(np.ascontiguousarray(sd["out_proj.weight"].numpy().T), "w_out_t"),
        numpy_helper.from_array(sd["out_proj.bias"].numpy().astype(np.float32), "b_out"),
        numpy_helper.from_array(np.array([d, d, d], dtype=np.int64), "split3"),
        numpy_helper.from_array(np.array([B, n, H, dk], dtype=np.int64), "heads_shape"),
        numpy_helper.from_array(np.array([B, n, d], dtype=np.int64), "model_shape"),
    ]
    nodes = [
        helper.make_node("MatMul", ["x", "w_in_t"], ["qkv0"]),
        helper.make_node("Add", ["qkv0", "b_in"], ["qkv"]),
        helper.make_node("Split", ["qkv", "split3"], ["q0", "k0", "v0"], axis=2),
        helper.make_node("Reshape", ["q0", "heads_shape"], ["q1"]),
        helper.make_node("Reshape", ["k0", "heads_shape"], ["k1"]),
        helper.make_node("Reshape", ["v0", "heads_shape"], ["v1"]),
        helper.make_node("Transpose", ["q1"], ["q"], perm=[0, 2, 1, 3]),  # [B, H, n, dk]
        helper.make_node("Transpose", ["k1"], ["kt"], perm=[0, 2, 3, 1]),  # [B, H, dk, n]
        helper.make_node("Transpose", ["v1"], ["v"], perm=[0, 2, 1, 3]),
        helper.make_node("MatMul", ["q", "kt"], ["scores"]),
        helper.make_node("Softmax", ["scores"], ["weights"], axis=-1),
        helper.make_node("MatMul", ["weights", "v"], ["ctx0"]),  # [B, H, n, dk]
        helper.make_node("Transpose", ["ctx0"], ["ctx1"], perm=[0, 2, 1, 3]),
        helper.make_node("Reshape", ["ctx1", "model_shape"], ["ctx"]),
        helper.make_node("MatMul", ["ctx", "w_out_t"], ["out0"]),
        helper.make_node("Add", ["out0", "b_out"], ["out"]),
    ]
    graph = helper.make_graph(
        nodes, "mha_weights",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [B, n, d])],
        [helper.make_tensor_value_info("out", TensorProto.FLOAT, [B, n, d]),
         helper.make_tensor_value_info("weights", TensorProto.FLOAT, [B, H, n, n])],
        inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = min(model.ir_version, 10)
    onnx.checker.check_model(model)
    return model


def onnx_graph_attention23(sd, B, n, d, H):
    """ONNX Attention (opset 23) on 3-D q/k/v, qk_matmul_output_mode=3: softmax weights out."""
    import onnx
    from onnx import TensorProto, helper, numpy_helper

    inits = [
        numpy_helper.from_array(np.ascontiguousarray(sd["in_proj_weight"].numpy().T), "w_in_t"),
        numpy_helper.from_array(sd["in_proj_bias"].numpy().astype(np.float32), "b_in"),
        numpy_helper.from_array(np.ascontiguousarray(sd["out_proj.weight"].numpy().T), "w_out_t"),
        numpy_helper.from_array(sd["out_proj.bias"].numpy().astype(np.float32), "b_out"),
        numpy_helper.from_array(np.array([d, d, d], dtype=np.int64), "split3"),
    ]
    nodes = [
        helper.make_node("MatMul", ["x", "w_in_t"], ["qkv0"]),
        helper.make_node("Add", ["qkv0", "b_in"], ["qkv"]),
        helper.make_node("Split", ["qkv", "split3"], ["q", "k", "v"], axis=2),
        helper.make_node("Attention", ["q", "k", "v"], ["ctx", "", "", "weights"],
                         q_num_heads=H, kv_num_heads=H, qk_matmul_output_mode=3),
        helper.make_node("MatMul", ["ctx", "w_out_t"], ["out0"]),
        helper.make_node("Add", ["out0", "b_out"], ["out"]),
    ]
    graph = helper.make_graph(
        nodes, "mha_attention23",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [B, n, d])],
        [helper.make_tensor_value_info("out", TensorProto.FLOAT, [B, n, d]),
         helper.make_tensor_value_info("weights", TensorProto.FLOAT, [B, H, n, n])],
        inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 23)])
    model.ir_version = min(model.ir_version, 10)
    return model


def ort_session(model, threads):
    import onnxruntime as ort

    so = ort.SessionOptions()
    so.intra_op_num_threads = threads
    so.inter_op_num_threads = 1
    so.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
    so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    so.log_severity_level = 3
    return ort.InferenceSession(model.SerializeToString(), so, providers=["CPUExecutionProvider"])


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

    def command(self, x, mha, heads, threads, chunk, summary, extra=()):
        return [self.path, "run", "--scenario", "tensor", "-p", f"tensor.path={x}", "--weighting", "qkv",
                "-p", f"qkv.weights={mha}", "-p", f"qkv.heads={heads}", "--threads", str(threads),
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
                        if k in ("seconds", "run_seconds", "elapsed_seconds", "wall_seconds", "time_s") and \
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
    paths = {"mha": os.path.join(folder, "mha.safetensors"), "x": os.path.join(folder, "x.safetensors"),
             "x1": os.path.join(folder, "x1.safetensors")}
    save_file(sd, paths["mha"])
    meta = {"features": "decision_axis,evidence_axis,condition_axis"}
    save_file({"x": X, "features": feats}, paths["x"], metadata=meta)
    save_file({"x": X[:1].contiguous(), "features": feats[:n].contiguous()}, paths["x1"], metadata=meta)
    return mha, X, sd, paths


def max_abs(a, b):
    return float((torch.as_tensor(a, dtype=torch.float32) - torch.as_tensor(b, dtype=torch.float32)).abs().max())


def check_headsep_maps(path, w_ref, out_ref, H):
    """Max |Δ| of heads' maps and the multi-head output vs torch, over the reports in the file."""
    err_w = err_o = 0.0
    count = 0
    with open(path) as f:
        for line in f:
            rec = json.loads(line)
            i = rec["report_index"]
            heads = np.asarray(rec["heads"], dtype=np.float64)  # [H, queries, n]
            ref = w_ref[i].numpy()
            if heads.shape != ref.shape:
                raise RuntimeError(f"report {i}: heads {heads.shape} vs torch {ref.shape}")
            err_w = max(err_w, float(np.abs(heads - ref).max()))
            if rec.get("output") is not None:
                err_o = max(err_o, float(np.abs(np.asarray(rec["output"]) - out_ref[i].numpy()).max()))
            else:
                err_o = float("nan")
            count += 1
    return count, err_w, err_o


def fmt_rate(x):
    if x is None:
        return "—"
    for unit, k in (("M", 1e6), ("k", 1e3)):
        if x >= k:
            return f"{x / k:.3g} {unit}"
    return f"{x:.3g}"


# ---- main ----------------------------------------------------------------------------------------

def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--headsep", default=os.environ.get("HEADSEP_BIN") or os.path.join(
        os.environ.get("HEADSEP_BUILD", os.path.join(ROOT, "build")), "headsep"))
    ap.add_argument("--shapes", default=DEFAULT_SHAPES, help=f"comma-separated BxNxDxH (default {DEFAULT_SHAPES})")
    ap.add_argument("--threads", default="2,1", help="comma-separated thread counts (default 2,1)")
    ap.add_argument("--repeat", type=int, default=3, help="runs per timing, best taken (default 3)")
    ap.add_argument("--budget", type=float, default=4.0, help="seconds after which a timing stops repeating")
    ap.add_argument("--chunk", default="auto",
                    help="headsep --chunk: auto = B/(8*threads) in 16..8192 (enough batches for every thread), "
                         "default = headsep's own, or a number")
    ap.add_argument("--seed", type=int, default=2026)
    ap.add_argument("--workdir", help="keep the generated files here (default: a temporary folder)")
    a = ap.parse_args()
    shapes = [parse_shape(s) for s in a.shapes.split(",") if s]
    thread_counts = [int(t) for t in a.threads.split(",") if t]

    import onnxruntime as ort

    hs = Headsep(a.headsep)
    peak_note = None
    if hs.peak_per_core:
        peak_core = hs.peak_per_core[0]
        peak_note = f"fp32 peak from `headsep info`: {hs.peak_per_core[1]}"
    else:  # measured here: a large sgemm on one thread (close to, not equal to, the FMA peak)
        torch.set_num_threads(1)
        m = torch.randn(1024, 1024)
        torch.mm(m, m)
        dt = best_time(lambda: torch.mm(m, m), 5, 10)
        peak_core = 2 * 1024 ** 3 / dt / 1e9
        peak_note = (f"fp32 peak: {peak_core:.1f} GFLOP/s per core, measured here with a 1024³ torch sgemm on one "
                     f"thread (`headsep info` has no 'fp32 peak' line yet) — an sgemm, so a slight underestimate")

    cpu = "unknown CPU"
    try:
        cpu = next(l.split(":", 1)[1].strip() for l in open("/proc/cpuinfo") if l.startswith("model name"))
    except (OSError, StopIteration):
        pass
    print(f"CPU: {cpu}; torch {torch.__version__}, onnxruntime {ort.__version__}, numpy {np.__version__}")
    print(peak_note)
    load0 = os.getloadavg()[0]
    print("GFLOP/s count per report: projections 2·n·d·3d + output 2·n·d² + scores and A·V 4·n²·d "
          "(headsep computes the single-head baseline on top: +6·n·d² + 4·n²·d, and no output projection "
          "outside --attention)")
    if hs.missing:
        print(f"headsep: skipped — {hs.missing}")
    elif not hs.attention_flag:
        print("headsep: agreement check skipped — `headsep run` has no --attention flag yet")

    tmp = a.workdir or tempfile.mkdtemp(prefix="headsep-attn-peers-")
    os.makedirs(tmp, exist_ok=True)
    results = {}  # (threads) -> list of rows
    try:
        for (B, n, d, H) in shapes:
            label = f"{B} x {n} x {d} x {H}"
            folder = os.path.join(tmp, f"{B}x{n}x{d}x{H}")
            os.makedirs(folder, exist_ok=True)
            mha, X, sd, paths = make_case(B, n, d, H, a.seed, folder)
            fl = flops_per_report(n, d)
            print(f"\n== {label}: X {list(X.shape)}, {fl / 1e6:.3g} MFLOP per report; files in {folder}")

            # References and agreement (torch is the reference).
            torch.set_num_threads(max(thread_counts))
            with torch.inference_mode():
                out_ref, w_ref = torch_mha(mha, X)
                sdpa_out = torch_sdpa(mha, X)
            agree = {"torch SDPA, no weights": f"output max |Δ| {max_abs(sdpa_out, out_ref):.2g}"}
            models = {"onnxruntime MatMul/Softmax graph + weights": onnx_graph_matmul(sd, B, n, d, H),
                      "onnxruntime Attention-23 op + weights": onnx_graph_attention23(sd, B, n, d, H)}
            feeds = {"x": X.numpy()}
            sessions = {}
            for name, model in models.items():
                try:
                    s = ort_session(model, max(thread_counts))
                    o, w = s.run(None, feeds)
                    ew, eo = max_abs(w, w_ref), max_abs(o, out_ref)
                    agree[name] = f"weights max |Δ| {ew:.2g}, output {eo:.2g}"
                    if max(ew, eo) > TOL:
                        agree[name] += f"  ** above {TOL} **"
                    sessions[name] = model
                except Exception as e:  # an ORT without this operator: say so, keep going
                    agree[name] = f"skipped: {str(e).splitlines()[0][:160]}"
            del sdpa_out

            for T in thread_counts:
                torch.set_num_threads(T)
                rows = results.setdefault(T, [])
                timed = {}
                with torch.inference_mode():
                    timed["torch MHA + weights"] = best_time(lambda: torch_mha(mha, X), a.repeat, a.budget)
                    timed["torch MHA + weights + entropy + JS"] = best_time(lambda: torch_analysis(mha, X), a.repeat, a.budget)
                    timed["torch SDPA, no weights"] = best_time(lambda: torch_sdpa(mha, X), a.repeat, a.budget)
                for name, model in sessions.items():
                    s = ort_session(model, T)
                    timed[name] = best_time(lambda: s.run(None, feeds), a.repeat, a.budget)
                    del s

                hs_rate, hs_note = None, None
                if not hs.missing:
                    chunk = a.chunk if a.chunk != "auto" else str(max(16, min(8192, -(-B // (8 * T)))))
                    summ = os.path.join(folder, f"summary-T{T}.json")
                    cmd = hs.command(paths["x"], paths["mha"], H, T, chunk, summ)
                    try:
                        run_cmd(cmd)  # warm the page cache
                        eng, proc, how = hs.time_run(cmd, summ, a.repeat, a.budget)
                        if eng is None:  # process time minus a one-report run (start-up, loading)
                            cmd1 = hs.command(paths["x1"], paths["mha"], H, T, chunk, summ + ".1")
                            _, proc1, _ = hs.time_run(cmd1, summ + ".1", a.repeat, a.budget)
                            eng, how = max(proc - proc1, 1e-9), "process time minus a 1-report run"
                        timed["headsep qkv + all metrics"] = eng
                        hs_note = f"{' '.join(cmd)}  [time: {how}; process {proc:.3f} s]"
                        if hs.attention_flag and T == thread_counts[0]:
                            maps = os.path.join(folder, "maps.jsonl")
                            r = run_cmd(cmd + ["--attention", maps, "--attention-reports", "first:8"])
                            if r.returncode != 0:
                                agree["headsep qkv + all metrics"] = f"--attention run failed: {r.stderr.strip()[:300]}"
                            else:
                                cnt, ew, eo = check_headsep_maps(maps, w_ref, out_ref, H)
                                agree["headsep qkv + all metrics"] = (
                                    f"{cnt} reports: weights max |Δ| {ew:.2g}, output {eo:.2g}" +
                                    (f"  ** above {TOL} **" if not (max(ew, eo) <= TOL) else ""))
                    except Exception as e:
                        hs_note = f"failed: {str(e)[:600]}"
                if "headsep qkv + all metrics" in timed:
                    hs_rate = B / timed["headsep qkv + all metrics"]

                peak = peak_core * T
                print(f"-- threads {T} (fp32 peak {peak:.0f} GFLOP/s)")
                for name, dt in timed.items():
                    rate = B / dt
                    gf = rate * fl / 1e9
                    ratio = f"{hs_rate / rate:.2f}x" if hs_rate else "—"
                    print(f"   {name:45s} {rate:12.4g} reports/s {gf:8.2f} GFLOP/s {100 * gf / peak:6.1f} % peak"
                          f"   headsep/this {ratio}")
                    rows.append((label, name, rate, gf, 100 * gf / peak, ratio))
                if hs_note:
                    print(f"   headsep: {hs_note}")
                elif hs.missing:
                    rows.append((label, "headsep qkv + all metrics", None, None, None, "—"))
            for name, text in agree.items():
                print(f"   agreement vs torch MHA: {name}: {text}")
            del mha, X, w_ref, out_ref
    finally:
        if not a.workdir:
            shutil.rmtree(tmp, ignore_errors=True)

    print(f"\nload average (1 min) {load0:.2f} at the start, {os.getloadavg()[0]:.2f} at the end on "
          f"{os.cpu_count()} CPUs: a loaded machine slows the multi-threaded runs most")
    for T, rows in results.items():
        print(f"\n### {T} thread{'s' if T > 1 else ''} ({cpu}; fp32 peak {peak_core * T:.0f} GFLOP/s)\n")
        print("| B x n x d_model x heads | implementation | reports/s | GFLOP/s | % of fp32 peak | headsep / this |")
        print("|---|---|---|---|---|---|")
        for label, name, rate, gf, pct, ratio in rows:
            if rate is None:
                print(f"| {label} | {name} | — (not built) | | | |")
            else:
                print(f"| {label} | {name} | {fmt_rate(rate)} | {gf:.1f} | {pct:.1f} % | {ratio} |")
    if len(results) > 1 and all(T in results for T in (1, 2)):
        print("\n1 -> 2 thread scaling (reports/s at 2 threads / at 1 thread):")
        one = {(l, n): r for l, n, r, *_ in results[1] if r}
        for l, n, r, *_ in results[2]:
            if r and (l, n) in one:
                print(f"   {l:24s} {n:45s} {r / one[(l, n)]:.2f}x")


if __name__ == "__main__":
    main()
