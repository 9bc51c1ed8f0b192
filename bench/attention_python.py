#!/usr/bin/env python3
"""headsep.attention from Python against the attention peers of bench/attention_peers.py, on the
same batches, weights and thread counts: torch MultiheadAttention with per-head weights (alone and
with entropy + all-pairs JS), torch SDPA, onnxruntime (MatMul/Softmax graph; the Attention-23 op
where this onnxruntime has it), and the CLI's `headsep run -s tensor -w qkv` on the same data.

headsep.attention is timed as a user calls it: X a torch tensor (read in place through DLPack),
the nn.MultiheadAttention module itself as weights (its state_dict converted), the seed-named
feature columns converted to float64, every metric, the summary and the per-report rows
(Result.rows' columns; pandas is not timed). Its engine time (Result.seconds) is printed beside.
Agreement: the maps (maps=range(8)) and the multi-head output of the first 8 reports against
torch's need_weights=True, average_attn_weights=False, within 1e-4 absolute.

Usage: attention_python.py [--shapes 2048x64x64x4,...] [--threads 2,1] [--repeat 3] [--budget 4]
Run it through bench/run_attention_python.sh (the venv with torch, onnxruntime and the extension).
"""
import argparse
import os
import shutil
import sys
import tempfile

from machine import cpu_line

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import attention_peers as peers  # noqa: E402  (torch, numpy, the peers and their helpers)

np, torch = peers.np, peers.torch
try:
    import headsep
except ImportError as e:  # pragma: no cover - environment message
    sys.exit(f"attention_python.py: {e}; run bench/run_attention_python.sh (it builds the extension)")

SEED_NAMES = ["decision_axis", "evidence_axis", "condition_axis"]


def headsep_call(mha, X, feats, T, **kw):
    return headsep.attention(X, weights=mha, features=feats, feature_names=SEED_NAMES, threads=T, **kw)


def agreement(mha, X, feats, w_ref, out_ref, T):
    res = headsep_call(mha, X, feats, T, maps=list(range(min(8, X.shape[0]))))
    k = len(res.map_reports)
    ew = float(np.abs(res.maps - w_ref[:k].numpy()).max())
    eo = float(np.abs(res.output - out_ref[:k].numpy()).max())
    return f"{k} reports: weights max |Δ| {ew:.2g}, output {eo:.2g}" + ("" if max(ew, eo) <= peers.TOL else "  ** above tolerance **")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--shapes", default=peers.DEFAULT_SHAPES)
    ap.add_argument("--threads", default="2,1")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--budget", type=float, default=4.0)
    ap.add_argument("--seed", type=int, default=2026)
    ap.add_argument("--headsep", default=os.environ.get("HEADSEP_BIN") or os.path.join(
        os.environ.get("HEADSEP_BUILD", os.path.join(peers.ROOT, "build")), "headsep"),
        help="the CLI, timed on the same files for reference (skipped when missing)")
    a = ap.parse_args()
    shapes = [peers.parse_shape(s) for s in a.shapes.split(",") if s]
    threads = [int(t) for t in a.threads.split(",") if t]
    import onnxruntime as ort

    print(f"CPU: {cpu_line()}; torch {torch.__version__}, onnxruntime {ort.__version__}, numpy {np.__version__}, "
          f"headsep {headsep.__version__} ({headsep.__file__})")
    hs_cli = peers.Headsep(a.headsep)
    tmp = tempfile.mkdtemp(prefix="headsep-attn-python-")
    table = []
    try:
        for (B, n, d, H) in shapes:
            label = f"{B} x {n} x {d} x {H}"
            folder = os.path.join(tmp, label.replace(" ", ""))
            os.makedirs(folder)
            mha, X, sd, paths = peers.make_case(B, n, d, H, a.seed, folder)
            g = torch.Generator().manual_seed(a.seed + 1)  # make_case's features, as the CLI reads them
            feats = torch.rand(B * n, 3, generator=g) * 1.8
            print(f"\n== {label}: X {list(X.shape)} (torch float32 tensor)")
            torch.set_num_threads(max(threads))
            with torch.inference_mode():
                out_ref, w_ref = peers.torch_mha(mha, X)
            print(f"   agreement vs torch MHA: headsep.attention: {agreement(mha, X, feats, w_ref, out_ref, max(threads))}")
            models = {"onnxruntime MatMul/Softmax graph + weights": peers.onnx_graph_matmul(sd, B, n, d, H),
                      "onnxruntime Attention-23 op + weights": peers.onnx_graph_attention23(sd, B, n, d, H)}
            feeds = {"x": X.numpy()}
            for T in threads:
                torch.set_num_threads(T)
                timed, engine = {}, None
                with torch.inference_mode():
                    timed["torch MHA + weights"] = peers.best_time(lambda: peers.torch_mha(mha, X), a.repeat, a.budget)
                    timed["torch MHA + weights + entropy + JS"] = peers.best_time(
                        lambda: peers.torch_analysis(mha, X), a.repeat, a.budget)
                    timed["torch SDPA, no weights"] = peers.best_time(lambda: peers.torch_sdpa(mha, X), a.repeat, a.budget)
                for name, model in models.items():
                    try:
                        s = peers.ort_session(model, T)
                        timed[name] = peers.best_time(lambda: s.run(None, feeds), a.repeat, a.budget)
                    except Exception as e:  # an onnxruntime without the operator
                        print(f"   {name}: skipped ({str(e).splitlines()[0][:120]})")
                if not hs_cli.missing:
                    summ = os.path.join(folder, f"s{T}.json")
                    cmd = hs_cli.command(paths["x"], paths["mha"], H, T, "default", summ)
                    eng, _, how = hs_cli.time_run(cmd, summ, a.repeat, a.budget)
                    if eng is not None:
                        timed["headsep CLI run -s tensor -w qkv (engine)"] = eng
                results = []

                def call():
                    results.append(headsep_call(mha, X, feats, T))
                    if len(results) > 1:
                        results.pop(0)

                wall = peers.best_time(call, a.repeat, a.budget)
                engine = results[-1].seconds
                mine = B / wall
                print(f"-- threads {T}: headsep.attention {mine:.4g} reports/s (call {wall:.3f} s, engine {engine:.3f} s)")
                for name, dt in timed.items():
                    rate = B / dt
                    print(f"   {name:48s} {rate:12.4g} reports/s   headsep.attention / this {mine / rate:6.2f}x")
                    table.append((label, T, name, rate, mine / rate))
                table.append((label, T, "headsep.attention (torch tensor + module in)", mine, 1.0))
            del mha, X, w_ref, out_ref
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    print(f"\n| B x n x d_model x heads | threads | implementation | reports/s | headsep.attention / this |")
    print("|---|---|---|---|---|")
    for label, T, name, rate, ratio in table:
        print(f"| {label} | {T} | {name} | {peers.fmt_rate(rate)} | {ratio:.2f}x |")


if __name__ == "__main__":
    main()
