"""onnxruntime peers of headsep's QKV attention: three graph forms and the session options a user can set.

Imported by bench/attention_peers.py (also runnable alone: `ort_peers.py --profile DIR` writes ORT's
profiling JSON of each graph and prints the time per operator type). Graphs, all outputting the
multi-head output [B, n, d] and the per-head softmax weights [B, H, n, n] (opset 17 unless noted):
  plain     the graph a user writes: Q, K, V each MatMul + Add, Reshape to [0, 0, H, d_k] (batch
            dynamic), Transpose (K straight to [B, H, d_k, n]), MatMul, Mul 1/sqrt(d_k), Softmax,
            MatMul, Transpose, Reshape [0, 0, d], output MatMul + Add;
  fused     one QKV MatMul [d, 3d] + Add, Split, Reshape to the fixed [B, n, H, d_k], scale folded
            into W_q (attention_peers.py's graph until now);
  attn23    the fused projection, Split, then opset 23's Attention with qk_matmul_output_mode=3.
Session variants: see VARIANTS (graph_optimization_level, execution_mode, inter/intra threads,
memory pattern / arena, spinning, IO binding).
"""
import math
import os
import time

import numpy as np


def _w(sd, name):
    return sd[name].detach().numpy().astype(np.float32)


def _model(nodes, inits, B, n, d, H, opset, name, dynamic):
    import onnx
    from onnx import TensorProto, helper

    b = "B" if dynamic else B
    graph = helper.make_graph(
        nodes, name, [helper.make_tensor_value_info("x", TensorProto.FLOAT, [b, n, d])],
        [helper.make_tensor_value_info("out", TensorProto.FLOAT, [b, n, d]),
         helper.make_tensor_value_info("weights", TensorProto.FLOAT, [b, H, n, n])], inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    model.ir_version = min(model.ir_version, 10)
    if opset <= 22:
        onnx.checker.check_model(model)
    return model


def graph_plain(sd, B, n, d, H):
    """The issue's plain graph: separate projections, dynamic batch, Mul by 1/sqrt(d_k)."""
    from onnx import helper, numpy_helper as nh

    dk = d // H
    w_in, b_in = _w(sd, "in_proj_weight"), _w(sd, "in_proj_bias")
    inits = [nh.from_array(np.ascontiguousarray(w_in[i * d:(i + 1) * d].T), f"w_{c}") for i, c in enumerate("qkv")]
    inits += [nh.from_array(b_in[i * d:(i + 1) * d].copy(), f"b_{c}") for i, c in enumerate("qkv")]
    inits += [nh.from_array(np.ascontiguousarray(_w(sd, "out_proj.weight").T), "w_o"),
              nh.from_array(_w(sd, "out_proj.bias"), "b_o"),
              nh.from_array(np.array([0, 0, H, dk], dtype=np.int64), "heads_shape"),
              nh.from_array(np.array([0, 0, d], dtype=np.int64), "model_shape"),
              nh.from_array(np.array(1.0 / math.sqrt(dk), dtype=np.float32), "scale")]
    nodes = []
    for c, perm in (("q", [0, 2, 1, 3]), ("k", [0, 2, 3, 1]), ("v", [0, 2, 1, 3])):
        nodes += [helper.make_node("MatMul", ["x", f"w_{c}"], [f"{c}0"]),
                  helper.make_node("Add", [f"{c}0", f"b_{c}"], [f"{c}1"]),
                  helper.make_node("Reshape", [f"{c}1", "heads_shape"], [f"{c}2"]),
                  helper.make_node("Transpose", [f"{c}2"], [c], perm=perm)]
    nodes += [helper.make_node("MatMul", ["q", "k"], ["s0"]),
              helper.make_node("Mul", ["s0", "scale"], ["s"]),
              helper.make_node("Softmax", ["s"], ["weights"], axis=-1),
              helper.make_node("MatMul", ["weights", "v"], ["c0"]),
              helper.make_node("Transpose", ["c0"], ["c1"], perm=[0, 2, 1, 3]),
              helper.make_node("Reshape", ["c1", "model_shape"], ["c"]),
              helper.make_node("MatMul", ["c", "w_o"], ["o0"]),
              helper.make_node("Add", ["o0", "b_o"], ["out"])]
    return _model(nodes, inits, B, n, d, H, 17, "mha_plain", dynamic=True)


def _fused_inits(sd, B, n, d, H, fold_scale):
    from onnx import numpy_helper as nh

    w_in, b_in = _w(sd, "in_proj_weight").copy(), _w(sd, "in_proj_bias").copy()
    if fold_scale:
        s = 1.0 / math.sqrt(d // H)
        w_in[:d] *= s
        b_in[:d] *= s
    return [nh.from_array(np.ascontiguousarray(w_in.T), "w_in_t"), nh.from_array(b_in, "b_in"),
            nh.from_array(np.ascontiguousarray(_w(sd, "out_proj.weight").T), "w_out_t"),
            nh.from_array(_w(sd, "out_proj.bias"), "b_out"),
            nh.from_array(np.array([d, d, d], dtype=np.int64), "split3"),
            nh.from_array(np.array([B, n, H, d // H], dtype=np.int64), "heads_shape"),
            nh.from_array(np.array([B, n, d], dtype=np.int64), "model_shape")]


def graph_fused(sd, B, n, d, H):
    """One QKV MatMul + Split, fixed shapes, the scale folded into W_q (the bench's graph until now)."""
    from onnx import helper

    nodes = [helper.make_node("MatMul", ["x", "w_in_t"], ["qkv0"]),
             helper.make_node("Add", ["qkv0", "b_in"], ["qkv"]),
             helper.make_node("Split", ["qkv", "split3"], ["q0", "k0", "v0"], axis=2)]
    for c, perm in (("q", [0, 2, 1, 3]), ("k", [0, 2, 3, 1]), ("v", [0, 2, 1, 3])):
        nodes += [helper.make_node("Reshape", [f"{c}0", "heads_shape"], [f"{c}1"]),
                  helper.make_node("Transpose", [f"{c}1"], [c], perm=perm)]
    nodes += [helper.make_node("MatMul", ["q", "k"], ["scores"]),
              helper.make_node("Softmax", ["scores"], ["weights"], axis=-1),
              helper.make_node("MatMul", ["weights", "v"], ["ctx0"]),
              helper.make_node("Transpose", ["ctx0"], ["ctx1"], perm=[0, 2, 1, 3]),
              helper.make_node("Reshape", ["ctx1", "model_shape"], ["ctx"]),
              helper.make_node("MatMul", ["ctx", "w_out_t"], ["out0"]),
              helper.make_node("Add", ["out0", "b_out"], ["out"])]
    return _model(nodes, _fused_inits(sd, B, n, d, H, True), B, n, d, H, 17, "mha_fused", dynamic=False)


def graph_attention23(sd, B, n, d, H):
    """Fused projection + Split + ONNX Attention (opset 23) with qk_matmul_output_mode=3 (softmax out)."""
    from onnx import helper

    nodes = [helper.make_node("MatMul", ["x", "w_in_t"], ["qkv0"]),
             helper.make_node("Add", ["qkv0", "b_in"], ["qkv"]),
             helper.make_node("Split", ["qkv", "split3"], ["q", "k", "v"], axis=2),
             helper.make_node("Attention", ["q", "k", "v"], ["ctx", "", "", "weights"],
                              q_num_heads=H, kv_num_heads=H, qk_matmul_output_mode=3),
             helper.make_node("MatMul", ["ctx", "w_out_t"], ["out0"]),
             helper.make_node("Add", ["out0", "b_out"], ["out"])]
    return _model(nodes, _fused_inits(sd, B, n, d, H, False)[:5], B, n, d, H, 23, "mha_attention23", dynamic=False)


GRAPHS = {"plain": graph_plain, "fused": graph_fused, "attn23": graph_attention23}

# name -> (description, session option settings); T = the thread count of the timing.
VARIANTS = {
    "default": "intra_op_num_threads=T, everything else ORT's default (ENABLE_ALL, sequential)",
    "bench": "the bench's old set-up: + inter_op 1, ORT_SEQUENTIAL, ENABLE_ALL (explicitly)",
    "opt-disable": "graph_optimization_level=ORT_DISABLE_ALL",
    "opt-basic": "graph_optimization_level=ORT_ENABLE_BASIC",
    "opt-extended": "graph_optimization_level=ORT_ENABLE_EXTENDED",
    "parallel": "execution_mode=ORT_PARALLEL, inter_op_num_threads=T",
    "no-mempattern-arena": "enable_mem_pattern=False, enable_cpu_mem_arena=False",
    "no-spin": "session.intra_op.allow_spinning=0",
    "iobinding": "default options, run_with_iobinding into preallocated output arrays",
}


def session(model, threads, variant="default", profile_dir=None):
    import onnxruntime as ort

    so = ort.SessionOptions()
    so.intra_op_num_threads = threads
    so.log_severity_level = 3
    if variant == "bench":
        so.inter_op_num_threads = 1
        so.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
        so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    elif variant.startswith("opt-"):
        so.graph_optimization_level = {"opt-disable": ort.GraphOptimizationLevel.ORT_DISABLE_ALL,
                                       "opt-basic": ort.GraphOptimizationLevel.ORT_ENABLE_BASIC,
                                       "opt-extended": ort.GraphOptimizationLevel.ORT_ENABLE_EXTENDED}[variant]
    elif variant == "parallel":
        so.execution_mode = ort.ExecutionMode.ORT_PARALLEL
        so.inter_op_num_threads = threads
    elif variant == "no-mempattern-arena":
        so.enable_mem_pattern = False
        so.enable_cpu_mem_arena = False
    elif variant == "no-spin":
        so.add_session_config_entry("session.intra_op.allow_spinning", "0")
    if profile_dir:
        so.enable_profiling = True
        so.profile_file_prefix = os.path.join(profile_dir, "ort")
    return ort.InferenceSession(model.SerializeToString(), so, providers=["CPUExecutionProvider"])


def runner(sess, X, variant):
    """A no-argument callable that runs the session once on X (IO binding: into fixed arrays)."""
    import onnxruntime as ort

    feeds = {"x": X}
    if variant != "iobinding":
        return lambda: sess.run(None, feeds)
    B, n, d = X.shape
    H = sess.get_outputs()[1].shape[1]
    out, w = np.empty((B, n, d), np.float32), np.empty((B, H, n, n), np.float32)
    io = sess.io_binding()
    x_value = ort.OrtValue.ortvalue_from_numpy(X)
    io.bind_ortvalue_input("x", x_value)
    io.bind_output("out", "cpu", 0, np.float32, out.shape, out.ctypes.data)
    io.bind_output("weights", "cpu", 0, np.float32, w.shape, w.ctypes.data)
    keep = (x_value, out, w)  # ORT holds raw pointers into these: they live as long as the callable

    def run():
        sess.run_with_iobinding(io)
        return keep
    return run


def warm_up(run, most=8, settle=0.05):
    """Run a fresh session until it is in its steady state: at least three runs, then on while a
    run is more than `settle` faster than the one before (at most `most`). A session's first
    runs plan its memory pattern and grow its arena: on the 256² batch (Xeon, one thread) run 1 of
    a session took 1.1-1.3 s, run 2 0.85-0.90 s, runs 3 on 0.62-0.72 s — timing the second run, as
    this bench did until 2026-12-04, put every onnxruntime peer 25-40 % under its steady state."""
    last = float("inf")
    for i in range(most):
        t0 = time.perf_counter()
        run()
        dt = time.perf_counter() - t0
        if i >= 2 and dt > last * (1 - settle):
            return
        last = dt


def profile_ops(model, X, threads, folder, runs=3):
    """ORT's profiling JSON for `runs` runs: {op type: ms per run}, the file's path."""
    import json

    s = session(model, threads, "default", folder)
    for _ in range(runs + 1):
        s.run(None, {"x": X})
    path = s.end_profiling()
    per_op = {}
    for ev in json.load(open(path)):
        if ev.get("cat") == "Node" and ev.get("name", "").endswith("_kernel_time"):
            op = ev.get("args", {}).get("op_name", "?")
            per_op[op] = per_op.get(op, 0.0) + ev["dur"] / 1000.0 / (runs + 1)
    return dict(sorted(per_op.items(), key=lambda kv: -kv[1])), path


def optimized_ops(model, threads):
    """The node types of the graph ORT runs after its optimizations (ENABLE_ALL)."""
    import tempfile

    import onnx
    import onnxruntime as ort

    so = ort.SessionOptions()
    so.intra_op_num_threads = threads
    so.log_severity_level = 3  # not the warning that an ENABLE_ALL model is hardware-specific
    with tempfile.TemporaryDirectory() as t:
        so.optimized_model_filepath = os.path.join(t, "opt.onnx")
        ort.InferenceSession(model.SerializeToString(), so, providers=["CPUExecutionProvider"])
        g = onnx.load(so.optimized_model_filepath).graph
        return [f"{nd.op_type}{'(' + nd.domain + ')' if nd.domain else ''}" for nd in g.node]
