"""headsep.model(path).run(semantic_axes=, direction_axes=, token_axes=): the same rows and summary
as `headsep run --model --semantic-axes FILE --direction-axes FILE --token-axes all`, whether the
axes come as files or as a dict of word lists and a dict of NumPy arrays; the "no silent zeros"
warning. The tiny BERT fixture of tests/model/fixtures/axes (no downloaded model needed)."""
import json
import os
import struct
import warnings

import numpy as np
import pytest

import headsep

from conftest import cli, csv_rows

AXES = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "model", "fixtures", "axes")
MODEL = os.path.join(AXES, "bert-tiny")
TEXTS = {json.loads(x)["report_id"]: json.loads(x)["text"] for x in open(os.path.join(AXES, "texts.jsonl"))}


def safetensors_f32(path):
    """{name: array} of an f32 safetensors file (the format by hand: no safetensors package needed)."""
    raw = open(path, "rb").read()
    n = struct.unpack("<Q", raw[:8])[0]
    header = json.loads(raw[8:8 + n])
    header.pop("__metadata__", None)
    return {k: np.frombuffer(raw[8 + n + v["data_offsets"][0]:8 + n + v["data_offsets"][1]], "<f4").reshape(v["shape"])
            for k, v in header.items()}


def strip(summary):
    d = json.loads(summary)
    for k in ("seconds", "threads", "run"):
        d.pop(k, None)
    return d


def test_files_and_data_equal_the_cli(workdir):
    pytest.importorskip("pandas")
    sem, dirs = os.path.join(AXES, "semantic.json"), os.path.join(AXES, "bert-tiny.directions.safetensors")
    cli("run", "--model", MODEL, "-s", "text", "-p", f"path={os.path.join(AXES, 'texts.jsonl')}", "--per-report",
        "rows.csv", "--summary", "s.json", "--token-axes", "all", "--semantic-axes", sem, "--direction-axes", dirs,
        "--quiet", cwd=workdir)
    expected = csv_rows(workdir / "rows.csv")
    want = strip((workdir / "s.json").read_text(encoding="utf-8"))
    assert want["axes"] == ["position", "punctuation", "word_start", "certainty", "polarity", "probe", "steer"]
    from_files = headsep.model(MODEL).run(TEXTS, token_axes=True, semantic_axes=sem, direction_axes=dirs, threads=2)
    from_data = headsep.model(MODEL).run(TEXTS, token_axes=["position", "punctuation", "word_start"],
                                         semantic_axes=json.load(open(sem)), direction_axes=safetensors_f32(dirs))
    for res in (from_files, from_data):
        assert strip(res.summary_json()) == want
        assert list(res.rows.columns) == list(expected.columns)
        assert res.rows.equals(expected)
    assert from_data.summary["run"]["axes"]["sources"]["probe"] == "direction direction_axes"
    torch = pytest.importorskip("torch", reason="torch tensors as direction_axes")  # optional
    t = {k: torch.from_numpy(v.copy()) for k, v in safetensors_f32(dirs).items()}
    assert strip(headsep.model(MODEL).run(TEXTS, token_axes=True, semantic_axes=sem, direction_axes=t).summary_json()) == want


def test_bad_axes_name_the_axis():
    with pytest.raises(headsep.Error, match="semantic_axes: axis 'tone' plus: expected a non-empty list"):
        headsep.model(MODEL).run(TEXTS, semantic_axes={"tone": {"plus": [], "minus": ["bad"]}})
    with pytest.raises(headsep.Error, match=r"direction_axes: axis 'd': shape \[31\]"):
        headsep.model(MODEL).run(TEXTS, direction_axes={"d": np.ones(31, np.float32)})


def test_no_silent_zeros_warns():
    with pytest.warns(UserWarning, match=r"98 % of the tokens \(59 of 60\)"):
        res = headsep.model(MODEL).run(TEXTS, axes="decision=decision_axis")
    assert res.summary["scenarios"][0]["tokens_without_axis_value"] == 59
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        headsep.model(MODEL).run(TEXTS, token_axes=True)
