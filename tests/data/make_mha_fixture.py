#!/usr/bin/env python3
"""Makes the committed safetensors fixtures of tests/model/test_safetensors.cpp.

    /usr/bin/python3 tests/data/make_mha_fixture.py      # Debian: apt-get install python3-torch

Writes, next to this script:
  mha_small.safetensors         torch.nn.MultiheadAttention(8, 2).state_dict()  (random biases too)
  mha_small_single.safetensors  torch.nn.MultiheadAttention(8, 1).state_dict()  (the 1-head baseline)
  mha_small_dtypes.safetensors  one tensor per dtype (F16, BF16, F64, I64, BOOL) for the converters
  mha_small_expected.json       the tensors' values, and per case (X, mask) PyTorch's attention:
                                need_weights=True, average_attn_weights=False, batch_first=True

The safetensors files are written by hand (write_safetensors below: the format is 8 bytes of
little-endian header length, a JSON header, the raw little-endian bytes), exactly as
safetensors.torch.save_file lays them out: names sorted, data in name order, header padded with
spaces to a multiple of 8 bytes. No `safetensors` package is needed.

Expected outputs are computed by running the same modules in float64 on the float32 weights and
float32 inputs (both exactly representable in float64), so they are the exact attention of the
stored values up to float64 rounding — the reference a float32 implementation is held to.
Every number is written with Python's repr (shortest round-trip), so float32 values read back
bit-exact. Deterministic: torch.manual_seed(SEED); rerunning rewrites identical files.
"""
import copy
import json
import os
import struct

import torch

SEED = 20240607
D_MODEL, HEADS = 8, 2
CASES = [(1, "none"), (2, "none"), (5, "none"), (3, "causal"), (5, "causal")]
HERE = os.path.dirname(os.path.abspath(__file__))

DTYPES = {torch.float32: "F32", torch.float16: "F16", torch.bfloat16: "BF16", torch.float64: "F64",
          torch.int64: "I64", torch.int32: "I32", torch.uint8: "U8", torch.bool: "BOOL"}


def tensor_bytes(t):
    t = t.detach().contiguous().cpu()
    if t.dtype in (torch.float16, torch.bfloat16):
        return t.view(torch.int16).numpy().astype("<i2").tobytes()  # numpy has no bfloat16
    return t.numpy().astype(t.numpy().dtype.newbyteorder("<")).tobytes()


def write_safetensors(path, tensors, metadata=None):
    header, blobs, offset = {}, [], 0
    for name in sorted(tensors):
        t = tensors[name]
        b = tensor_bytes(t)
        header[name] = {"dtype": DTYPES[t.dtype], "shape": list(t.shape), "data_offsets": [offset, offset + len(b)]}
        blobs.append(b)
        offset += len(b)
    if metadata:
        header["__metadata__"] = metadata
    h = json.dumps(header, separators=(",", ":")).encode()
    h += b" " * (-len(h) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(h)))
        f.write(h)
        for b in blobs:
            f.write(b)


def values(t):
    return {"shape": list(t.shape), "data": [float(v) for v in t.detach().double().flatten().tolist()]}


def randomise_biases(m):
    with torch.no_grad():  # nn.MultiheadAttention starts with zero biases: make them count
        m.in_proj_bias.uniform_(-0.5, 0.5)
        m.out_proj.bias.uniform_(-0.5, 0.5)


def main():
    torch.manual_seed(SEED)
    mha = torch.nn.MultiheadAttention(D_MODEL, HEADS, batch_first=True)
    single = torch.nn.MultiheadAttention(D_MODEL, 1, batch_first=True)
    randomise_biases(mha)
    randomise_biases(single)
    meta = {"format": "pt", "generator": "tests/data/make_mha_fixture.py"}
    write_safetensors(os.path.join(HERE, "mha_small.safetensors"), mha.state_dict(), meta)
    write_safetensors(os.path.join(HERE, "mha_small_single.safetensors"), single.state_dict(), meta)

    # Converter checks: rounded copies of real weights plus edge values of each type.
    w = mha.state_dict()["in_proj_weight"][:4].flatten()
    f16_edges = torch.tensor([0.0, -0.0, 2.0 ** -24, 3 * 2.0 ** -24, 2.0 ** -14 - 2.0 ** -24, 2.0 ** -14, 65504.0,
                              -65504.0, 1.0 / 3], dtype=torch.float32)
    bf16_edges = torch.tensor([0.0, -0.0, 2.0 ** -133, 2.0 ** -126, 3.3895313892515355e38, -1.5, 1.0 / 3],
                              dtype=torch.float32)
    dtypes = {
        "w.f16": torch.cat([w, f16_edges]).half(),
        "w.bf16": torch.cat([w, bf16_edges]).bfloat16().reshape(-1, 1),
        "w.f64": w.double().reshape(4, -1) / 3,
        "ids.i64": torch.arange(6, dtype=torch.int64).reshape(2, 3),
        "mask.bool": torch.tensor([True, False, True]),
    }
    write_safetensors(os.path.join(HERE, "mha_small_dtypes.safetensors"), dtypes)

    mha64, single64 = copy.deepcopy(mha).double(), copy.deepcopy(single).double()
    cases = []
    for n, mask in CASES:
        x = torch.randn(1, n, D_MODEL, dtype=torch.float32)
        m = torch.triu(torch.ones(n, n, dtype=torch.bool), 1) if mask == "causal" else None
        x64 = x.double()
        with torch.no_grad():
            out, a = mha64(x64, x64, x64, need_weights=True, average_attn_weights=False, attn_mask=m)
            _, a1 = single64(x64, x64, x64, need_weights=True, average_attn_weights=False, attn_mask=m)
        cases.append({"n": n, "mask": mask, "x": x[0].double().tolist(), "attn_weights": a[0].tolist(),
                      "single_attn_weights": a1[0, 0].tolist(), "attn_output": out[0].tolist()})

    expected = {
        "generator": "tests/data/make_mha_fixture.py",
        "torch": torch.__version__,
        "seed": SEED,
        "d_model": D_MODEL,
        "heads": HEADS,
        "precision": "float64 forward of the float32 weights and inputs",
        "tensors": {k: values(v) for k, v in mha.state_dict().items()},
        "single_tensors": {k: values(v) for k, v in single.state_dict().items()},
        # Converted values (what reading the dtype file as f32 must give), by torch's own casts.
        "dtypes": {k: values(v.float()) for k, v in dtypes.items() if v.is_floating_point()},
        "cases": cases,
    }
    with open(os.path.join(HERE, "mha_small_expected.json"), "w") as f:
        json.dump(expected, f, indent=1)
        f.write("\n")


if __name__ == "__main__":
    main()
