"""headsep.attention against `headsep run -s tensor -w qkv` on the same arrays written to safetensors
files (written here by hand from NumPy): the summary byte for byte, the rows equal; X read in place;
bad arguments refused as TypeError/ValueError, bad data as headsep.Error naming the report or tensor.
The torch tests (an nn.MultiheadAttention and its maps against torch's own) skip without torch."""
import json
import os
import subprocess
import sys

import numpy as np
import pandas as pd
import pytest

import headsep
from conftest import cli, csv_rows, unstamped

SEED_NAMES = ["decision_axis", "evidence_axis", "condition_axis"]


def save_safetensors(path, tensors, metadata=None):
    """The safetensors format: 8-byte little-endian header length, JSON header, raw data."""
    kinds = {np.dtype(np.float32): "F32", np.dtype(np.float64): "F64", np.dtype(np.int64): "I64"}
    header, blobs, offset = {}, [], 0
    for name, a in tensors.items():
        a = np.ascontiguousarray(a)
        blob = a.astype(a.dtype.newbyteorder("<"), copy=False).tobytes()
        header[name] = {"dtype": kinds[a.dtype], "shape": list(a.shape), "data_offsets": [offset, offset + len(blob)]}
        blobs.append(blob)
        offset += len(blob)
    if metadata:
        header["__metadata__"] = metadata
    text = json.dumps(header).encode()
    text += b" " * (-len(text) % 8)
    with open(path, "wb") as f:
        f.write(len(text).to_bytes(8, "little") + text + b"".join(blobs))


def mha_arrays(d, seed, bias=True):
    rng = np.random.default_rng(seed)
    w = {"in_proj_weight": (rng.standard_normal((3 * d, d)) * 0.4).astype(np.float32),
         "out_proj.weight": (rng.standard_normal((d, d)) * 0.4).astype(np.float32)}
    if bias:
        w["in_proj_bias"] = (rng.standard_normal(3 * d) * 0.1).astype(np.float32)
        w["out_proj.bias"] = (rng.standard_normal(d) * 0.1).astype(np.float32)
    return w


class Data:
    """B reports of n tokens (or ragged), d_model d, seed-named features, a MultiheadAttention."""

    def __init__(self, ragged=False, B=7, n=6, d=8, seed=3):
        rng = np.random.default_rng(seed)
        self.offsets = np.array([0, 1, 5, 12, 14, 21, 30], dtype=np.int64) if ragged else None
        T = int(self.offsets[-1]) if ragged else B * n
        self.x = rng.standard_normal((T, d) if ragged else (B, n, d)).astype(np.float32)
        self.f = (rng.random((T, 3)) * 2).astype(np.float32)
        self.w, self.single = mha_arrays(d, seed + 1), mha_arrays(d, seed + 2)

    def files(self, folder):
        t = {"x": self.x, "features": self.f}
        if self.offsets is not None:
            t["offsets"] = self.offsets
        paths = {k: str(folder / f"{k}.safetensors") for k in ("x", "mha", "single")}
        save_safetensors(paths["x"], t, {"features": ",".join(SEED_NAMES)})
        save_safetensors(paths["mha"], self.w)
        save_safetensors(paths["single"], self.single)
        return paths


def cli_run(folder, paths, *args):
    cli("run", "-q", "-s", "tensor", "-p", f"tensor.path={paths['x']}", "-w", "qkv", "-p", f"qkv.weights={paths['mha']}",
        *args, "--summary", "s.json", "--per-report", "r.csv", cwd=folder)
    return (folder / "s.json").read_text(encoding="utf-8"), csv_rows(folder / "r.csv")


def assert_same(res, summary, rows):
    assert unstamped(res.summary_json()) == unstamped(summary)  # the CLI's says which plugins ran: tensor and qkv
    pd.testing.assert_frame_equal(res.rows, rows, check_exact=True)


CASES = [
    # (id, ragged, CLI -p/--axes arguments, attention() keyword arguments)
    ("uniform", False, ["-p", "qkv.heads=2"], dict(heads=2)),
    ("ragged causal, baseline arrays", True, ["-p", "qkv.heads=4", "-p", "qkv.causal=true", "-p", "qkv.baseline={single}"],
     dict(heads=4, causal=True, baseline="single")),
    ("query last, baseline path", True, ["-p", "qkv.heads=2", "-p", "qkv.query=last", "-p", "qkv.baseline={single}"],
     dict(heads=2, query="last", baseline="single-path")),
    ("query index -2, weights path", False, ["-p", "qkv.heads=1", "-p", "qkv.query=-2"],
     dict(heads=1, query=-2, weights="mha-path")),
    ("embedding axes, no features", False, ["-p", "qkv.heads=2", "--axes", "a=x[0];b=x[1]+0.5*x[7]"],
     dict(heads=2, axes="a=x[0];b=x[1]+0.5*x[7]", features=None)),
]


@pytest.mark.parametrize("ragged,cli_args,kwargs", [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_equals_the_cli(workdir, ragged, cli_args, kwargs):
    data = Data(ragged)
    paths = data.files(workdir)
    summary, rows = cli_run(workdir, paths, *[a.format(**paths) for a in cli_args])
    kw = dict(kwargs)
    kw["weights"] = paths["mha"] if kw.get("weights") == "mha-path" else data.w
    kw["baseline"] = {"single": data.single, "single-path": paths["single"]}.get(kw.get("baseline"))
    if "features" not in kw:
        kw.update(features=data.f, feature_names=SEED_NAMES)
    res = headsep.attention(data.x, offsets=data.offsets, threads=2, **kw)
    assert isinstance(res, headsep.Result)
    assert_same(res, summary, rows)
    assert res.maps is None


def test_default_axes_without_features_are_the_first_two_components(workdir):
    data = Data()
    paths = data.files(workdir)
    summary, rows = cli_run(workdir, paths, "-p", "qkv.heads=2", "--axes", "x0=x[0];x1=x[1]")
    assert_same(headsep.attention(data.x, weights=data.w, heads=2), summary, rows)


def test_x_is_read_in_place_and_other_layouts_are_converted():
    data = Data()
    res = headsep.attention(data.x, weights=data.w, heads=2)
    assert res._x_address == data.x.ctypes.data  # the engine's first batch points into the caller's array
    # A strided view, float64 and float16 are converted first (a documented copy), same numbers
    # where the conversion is exact.
    wide = np.zeros((7, 6, 16), dtype=np.float32)
    wide[:, :, ::2] = data.x
    view = wide[:, :, ::2]
    res2 = headsep.attention(view, weights=data.w, heads=2)
    assert res2._x_address != view.ctypes.data
    assert res2.summary_json() == res.summary_json()
    assert headsep.attention(data.x.astype(np.float64), weights=data.w, heads=2).summary_json() == res.summary_json()


def test_no_copy_of_x_in_memory():
    # 64 MiB of X (made in place: no float64 intermediate raises the peak first). The process's
    # peak memory grows by far less than X during the run, since batches borrow X; the control,
    # a reversed view that must be converted, grows by a whole copy. Each in a child process of
    # its own, so each peak is that run's.
    code = """
import resource, sys, numpy as np, headsep
peak = lambda: resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
x = np.empty((4096, 64, 64), np.float32)
np.random.default_rng(0).standard_normal(dtype=np.float32, out=x)
w = {"in_proj_weight": np.eye(64, dtype=np.float32).repeat(3, 0) * 0.1, "out_proj.weight": np.eye(64, dtype=np.float32)}
headsep.attention(x[:2], weights=w, heads=4, threads=1)   # warm-up: code and plugins loaded
arg = x if sys.argv[1] == "in-place" else x[:, :, ::-1]
before = peak()
res = headsep.attention(arg, weights=w, heads=4, threads=1, rows=False)
print(peak() - before, x.nbytes // 1024, res._x_address == x.ctypes.data)
"""
    def grown(mode):
        out = subprocess.run([sys.executable, "-c", code, mode], capture_output=True, text=True, check=True)
        kib, x_kib, same = out.stdout.split()
        return int(kib), int(x_kib), same == "True"

    in_place, x_kib, same = grown("in-place")
    copied, _, copy_same = grown("copy")
    assert same and not copy_same
    assert copied >= x_kib * 3 // 4, f"the control copied X but the peak grew by {copied} KiB only"
    assert in_place < x_kib // 2, f"peak memory grew by {in_place} KiB for {x_kib} KiB of X"


def test_maps_selection_and_shapes():
    data = Data()
    full = headsep.attention(data.x, weights=data.w, heads=2, maps=True)
    assert full.maps.shape == (7, 2, 6, 6) and full.maps.dtype == np.float32
    assert full.single_maps.shape == (7, 6, 6)
    assert full.output.shape == (7, 6, 8)
    np.testing.assert_allclose(full.maps.sum(-1), 1.0, atol=1e-5)
    some = headsep.attention(data.x, weights=data.w, heads=2, maps=[5, 0])
    assert list(some.map_reports) == [0, 5]
    np.testing.assert_array_equal(some.maps, full.maps[[0, 5]])
    last = headsep.attention(data.x, weights=data.w, heads=2, maps=True, query="last")
    assert last.maps.shape == (7, 2, 1, 6)
    assert list(last.map_queries) == [5] * 7
    np.testing.assert_allclose(last.maps[:, :, 0], full.maps[:, :, 5], atol=1e-6)
    ragged = Data(ragged=True)
    r = headsep.attention(ragged.x, offsets=ragged.offsets, weights=ragged.w, heads=2, maps=True)
    assert isinstance(r.maps, list) and [m.shape for m in r.maps][:2] == [(2, 1, 1), (2, 4, 4)]
    assert headsep.attention(data.x, weights=data.w, heads=2, maps=[]).maps.shape == (0, 2, 6, 6)
    one = headsep.attention(ragged.x, offsets=ragged.offsets, weights=ragged.w, heads=2, maps=[1])
    assert isinstance(one.maps, list) and one.maps[0].shape == (2, 4, 4)  # ragged input: always a list
    no_out = {k: v for k, v in data.w.items() if not k.startswith("out_proj")}
    assert headsep.attention(data.x, weights=no_out, heads=2, maps=True).output is None


@pytest.mark.parametrize("call,kind,text", [
    (lambda d: headsep.attention(d.x[0, 0], weights=d.w, heads=2), ValueError, "expected [B, n, d_model]"),
    (lambda d: headsep.attention(d.x.reshape(42, 8), weights=d.w, heads=2), ValueError, "give offsets [B+1]"),
    (lambda d: headsep.attention(d.x.reshape(42, 8), offsets=[0, 5, 5, 42], weights=d.w, heads=2), ValueError,
     "report 1 has no tokens"),
    (lambda d: headsep.attention(d.x.reshape(42, 8), offsets=[0, 41], weights=d.w, heads=2), ValueError,
     "offsets[1] = 41, but x has 42 token rows"),
    (lambda d: headsep.attention(d.x.astype(np.int32), weights=d.w, heads=2), TypeError, "expected floating point"),
    (lambda d: headsep.attention("x", weights=d.w, heads=2), TypeError, "expected a NumPy array or a torch tensor"),
    (lambda d: headsep.attention(d.x, weights=d.w, heads=3), ValueError, "heads = 3 does not divide d_model = 8"),
    (lambda d: headsep.attention(d.x, weights=d.w, heads=2, query=1.5), TypeError, "query"),
    (lambda d: headsep.attention(d.x, weights=d.w, heads=2, query="middle"), ValueError, "query must be"),
    (lambda d: headsep.attention(d.x, weights=[1, 2], heads=2), TypeError, "expected an nn.MultiheadAttention"),
    (lambda d: headsep.attention(d.x, weights={**d.w, "in_proj_weight": d.w["in_proj_weight"][:16]}, heads=2),
     ValueError, "tensor 'in_proj_weight': shape [16, 8], expected [3*d_model, d_model] = [24, 8]"),
    (lambda d: headsep.attention(d.x, weights={**d.w, "in_proj_wieght": d.w["in_proj_weight"]}, heads=2),
     ValueError, "tensor 'in_proj_wieght': unexpected tensor"),
    (lambda d: headsep.attention(d.x, weights={**d.w, "in_proj_bias": np.arange(24)}, heads=2), TypeError,
     "expected floating point"),
    (lambda d: headsep.attention(d.x, weights=d.w, heads=2, maps=[7]), ValueError, "report index 7 is out of range"),
    (lambda d: headsep.attention(d.x, weights=d.w, heads=2, axes="a=risk"), headsep.Error, "column 'risk'"),
    (lambda d: headsep.attention(d.x, weights=d.w, heads=2, features=d.f[:5]), ValueError, "features: shape (5, 3)"),
    (lambda d: headsep.attention(d.x, weights="/nonexistent.safetensors", heads=2), headsep.Error,
     "/nonexistent.safetensors"),
], ids=["1-d", "2-d without offsets", "empty report", "offsets end", "int dtype", "str", "heads", "query type",
        "query value", "weights type", "weight shape", "weight name", "weight dtype", "maps index", "axis column",
        "features shape", "weights file"])
def test_bad_arguments_are_refused(call, kind, text):
    with pytest.raises(kind) as e:
        call(Data())
    assert text in str(e.value)


def test_non_finite_data_names_the_report():
    data = Data()
    data.x[2, 4, 3] = np.nan  # report #2, token 4 = row 16
    with pytest.raises(headsep.Error) as e:
        headsep.attention(data.x, weights=data.w, heads=2)
    assert str(e.value) == "x: row 16 (report #2, token 4), component 3: NaN (values must be finite)"
    data = Data()
    data.x[6, 0, 0] = np.inf
    with pytest.raises(headsep.Error, match=r"report 'g', token 0\), component 0: inf"):
        headsep.attention(data.x, weights=data.w, heads=2, report_ids=list("abcdefg"))
    data = Data()
    data.w["out_proj.weight"][1, 2] = np.nan
    with pytest.raises(headsep.Error, match=r"weights: tensor 'out_proj.weight': element \[1, 2\] is NaN"):
        headsep.attention(data.x, weights=data.w, heads=2)


def test_importing_and_running_never_imports_torch():
    code = ("import sys, numpy as np, headsep\n"
            "x = np.ones((2, 3, 4), np.float32)\n"
            "w = {'in_proj_weight': np.ones((12, 4), np.float32) * 0.1}\n"
            "headsep.attention(x, weights=w, heads=2, maps=True)\n"
            "print('torch' in sys.modules)\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


# ---- torch (skipped without it; bench/ and /work/.venv-torch run them) ----------------------------

def torch_case(d=16, H=4, B=3, n=7, seed=0, batch_first=True):
    torch = pytest.importorskip("torch")
    torch.manual_seed(seed)
    mha = torch.nn.MultiheadAttention(d, H, batch_first=batch_first).eval()
    with torch.no_grad():  # non-zero biases, so a dropped bias shows
        mha.in_proj_bias.uniform_(-0.2, 0.2)
        mha.out_proj.bias.uniform_(-0.2, 0.2)
    return torch, mha, torch.randn(B, n, d)


def torch_maps(torch, mha, x, **kw):
    with torch.no_grad():
        xt = x if mha.batch_first else x.transpose(0, 1)
        out, w = mha(xt, xt, xt, need_weights=True, average_attn_weights=False, **kw)
    return (out if mha.batch_first else out.transpose(0, 1)).numpy(), w.numpy()


@pytest.mark.parametrize("causal", [False, True])
def test_torch_module_maps_equal_torch(causal):
    torch, mha, x = torch_case()
    mask = torch.nn.Transformer.generate_square_subsequent_mask(7) if causal else None
    out, w = torch_maps(torch, mha, x, attn_mask=mask)
    res = headsep.attention(x, weights=mha, causal=causal, maps=True)
    assert res.maps.shape == w.shape == (3, 4, 7, 7)
    np.testing.assert_allclose(res.maps, w, rtol=0, atol=1e-6)
    np.testing.assert_allclose(res.output, out, rtol=0, atol=1e-5)
    assert res._x_address == x.data_ptr()  # a float32 CPU tensor: read in place through DLPack


def test_torch_ragged_queries_and_layouts():
    torch, mha, _ = torch_case(batch_first=False)
    xr = torch.randn(12, 16)
    res = headsep.attention(xr, offsets=torch.tensor([0, 5, 12]), weights=mha, maps=True, query=-1)
    for r, (a, b) in enumerate([(0, 5), (5, 12)]):
        _, w = torch_maps(torch, mha, xr[None, a:b])
        np.testing.assert_allclose(res.maps[r][:, 0], w[0][:, -1], atol=1e-6)
    # The module, its state_dict and its arrays give the same bytes; so do float64 and
    # requires_grad tensors (converted / detached).
    x = torch.randn(4, 5, 16, requires_grad=True)
    base = headsep.attention(x, weights=mha)
    sd = headsep.attention(x.detach().double(), weights=mha.state_dict(), heads=4)
    arrays = headsep.attention(x.detach().numpy(), weights={k: v.numpy() for k, v in mha.state_dict().items()}, heads=4)
    assert base.summary_json() == sd.summary_json() == arrays.summary_json()
    with pytest.raises(ValueError, match="num_heads=4"):
        headsep.attention(x, weights=mha, heads=2)


def test_torch_module_equals_the_cli_on_its_saved_state_dict(workdir):
    torch, mha, x = torch_case()
    save_safetensors(workdir / "mha.safetensors", {k: v.numpy() for k, v in mha.state_dict().items()})
    save_safetensors(workdir / "x.safetensors", {"x": x.numpy()})
    summary, rows = cli_run(workdir, {"x": workdir / "x.safetensors", "mha": workdir / "mha.safetensors"},
                            "-p", "qkv.heads=4", "--axes", "x0=x[0];x1=x[1]")
    assert_same(headsep.attention(x, weights=mha), summary, rows)
