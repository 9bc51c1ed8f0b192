"""headsep.model(path).run against `headsep run --model DIR --scenario text`: the same summary
(without the run's seconds and thread count), the report, errors. Needs the test model
(HEADSEP_MODEL_DIR, scripts/fetch_model.sh); the test command always provides it."""
import json
import os

import pytest

import headsep
import numpy as np

from conftest import cli, csv_rows

MODEL = os.environ.get("HEADSEP_MODEL_DIR")
pytestmark = pytest.mark.skipif(not MODEL, reason="HEADSEP_MODEL_DIR is not set (scripts/fetch_model.sh)")

TEXTS = {
    "r1": "pressure is too high: stop the pump until the valve check is done",
    "r2": "the log shows evidence that the return condition was met",
    "r3": "decision: hold; condition: restart only after the inspection",
}


def strip(summary):
    d = json.loads(summary)
    d.pop("seconds", None)
    d.pop("threads", None)
    # run.plugins names the texts' file: the CLI's t.jsonl, Python's in-memory file.
    d.pop("run", None)
    return d


def test_equals_the_cli(workdir):
    with open(workdir / "t.jsonl", "w", encoding="utf-8") as f:
        for k, v in TEXTS.items():
            f.write(json.dumps({"report_id": k, "text": v}) + "\n")
    cli("run", "--model", MODEL, "-s", "text", "-p", f"path={workdir / 't.jsonl'}", "--summary", "s.json",
        "--quiet", "--threads", "1", cwd=workdir)
    res = headsep.model(MODEL).run(TEXTS, threads=2)
    assert strip(res.summary_json()) == strip((workdir / "s.json").read_text(encoding="utf-8"))
    as_list = headsep.model(MODEL).run([(k, v) for k, v in TEXTS.items()])
    assert strip(as_list.summary_json()) == strip(res.summary_json())
    assert res.report_html().startswith("<!DOCTYPE html>")
    assert sorted(p.name for p in workdir.iterdir()) == ["s.json", "t.jsonl"]


def test_rows_and_maps_equal_the_cli(workdir):
    """Result.rows is --per-report x.csv (one row per report, scenario and layer, token ids
    included); Result.maps holds --attention's maps of the chosen reports and layers."""
    pd = pytest.importorskip("pandas")
    texts = dict(TEXTS, r4="")  # an empty text: [CLS] [SEP]
    with open(workdir / "t.jsonl", "w", encoding="utf-8") as f:
        for k, v in texts.items():
            f.write(json.dumps({"report_id": k, "text": v}) + "\n")
    cli("run", "--model", MODEL, "-s", "text", "-p", f"path={workdir / 't.jsonl'}", "--per-report", "rows.csv",
        "--attention", "maps.jsonl", "--attention-reports", "index:1,3", "--attention-layers", "0,5",
        "--quiet", cwd=workdir)
    res = headsep.model(MODEL).run(texts, maps=[3, 1], map_layers=[0, 5], threads=2, chunk=3)
    expected = csv_rows(workdir / "rows.csv")
    assert list(res.rows.columns[:6]) == ["report_id", "scenario", "layer", "n_tokens", "tokens", "token_ids"]
    pd.testing.assert_frame_equal(res.rows, expected, check_exact=True)
    assert res.arrays["layer"].tolist() == expected["layer"].tolist()
    assert list(res.map_reports) == [1, 3] and list(res.map_layers) == [0, 5]
    lines = [json.loads(x) for x in (workdir / "maps.jsonl").read_text(encoding="utf-8").splitlines()]
    for i, report in enumerate(res.map_reports):
        mine = [x for x in lines if x["report_index"] == report]
        assert [x["layer"] for x in mine] == [0, 5]
        n = len(mine[0]["tokens"])
        assert res.maps[i].shape == (2, 12, n, n) and res.maps[i].dtype == np.float32
        for k, x in enumerate(mine):  # the JSONL's shortest round-trip decimals of the same floats
            assert np.array_equal(res.maps[i][k], np.array(x["heads"], dtype=np.float32))
            assert np.array_equal(res.single_maps[i][k], np.array(x["single"], dtype=np.float32))
    bare = headsep.model(MODEL).run(texts, rows=False, report=False)
    assert bare.maps is None
    with pytest.raises(ValueError, match="rows=True"):
        bare.rows
    with pytest.raises(ValueError, match="report=True"):
        bare.report_html()
    with pytest.raises(ValueError, match="out of range"):
        headsep.model(MODEL).run(texts, maps=[4])


def test_a_decoder_folder(workdir):
    """A Llama-family decoder (the test fixture: 4 query heads on 2 key/value heads, byte-fallback
    BPE tokenizer.json) through headsep.model: rows equal the CLI's CSV."""
    pd = pytest.importorskip("pandas")
    llama = os.path.join(os.environ["HEADSEP_SOURCE_DIR"], "tests", "model", "fixtures", "decoder", "llama")
    with open(workdir / "t.jsonl", "w", encoding="utf-8") as f:
        for k, v in TEXTS.items():
            f.write(json.dumps({"report_id": k, "text": v}) + "\n")
    cli("run", "--model", llama, "-s", "text", "-p", f"path={workdir / 't.jsonl'}", "--per-report", "rows.csv",
        "--attention", "maps.jsonl", "--attention-reports", "first:1", "--quiet", cwd=workdir)
    res = headsep.model(llama).run(TEXTS, maps=[0])
    pd.testing.assert_frame_equal(res.rows, csv_rows(workdir / "rows.csv"), check_exact=True)
    # Each query head's key/value head (int64) beside its statistics, and per pair whether its
    # heads share one (bool): heads 1-2 read kv head 0, heads 3-4 kv head 1.
    rows = res.rows
    assert [rows[f"head{h}_kv_head"].dtype.name for h in (1, 4)] == ["int64", "int64"]
    assert [set(rows[f"head{h}_kv_head"].tolist()) for h in range(1, 5)] == [{0}, {0}, {1}, {1}]
    assert "single_kv_head" not in rows
    cols = list(rows.columns)
    assert cols.index("head2_kv_head") == cols.index("head2_first_weight") + 1
    assert cols.index("head1_head2_shared_kv") == cols.index("head1_head2_output_distance") + 1
    shared = {f"{i}_{j}": set(rows[f"head{i}_head{j}_shared_kv"].tolist())
              for i in range(1, 5) for j in range(i + 1, 5)}
    assert shared == {"1_2": {True}, "1_3": {False}, "1_4": {False}, "2_3": {False}, "2_4": {False}, "3_4": {True}}
    assert rows["head3_head4_shared_kv"].dtype == bool
    assert res.arrays["head3_kv_head"].dtype.name == "int64"
    assert res.arrays["head1_entropy"].dtype.name == "float64"
    assert res.rows["token_ids"][0][0] == 1  # <s>, the template's BOS
    assert res.maps[0].shape[:2] == (2, 4)  # 2 layers x 4 query heads
    # Which key/value head each map's head reads: the Python result and every line of the CLI's maps.
    assert res.kv_head_of == [0, 0, 1, 1]
    lines = [json.loads(x) for x in open(workdir / "maps.jsonl", encoding="utf-8")]
    assert [x["layer"] for x in lines] == [0, 1]
    assert all(x["kv_head_of"] == [0, 0, 1, 1] and len(x["heads"]) == 4 for x in lines)
    assert list(lines[0]) == ["report_id", "report_index", "scenario", "layer", "tokens", "token_ids", "queries",
                              "single", "heads", "kv_head_of"]
    assert headsep.model(MODEL).run(["a text"]).kv_head_of is None  # BERT


def test_errors(tmp_path):
    with pytest.raises(headsep.Error):
        headsep.model(tmp_path).run(["text"])
    with pytest.raises(TypeError):
        headsep.model(MODEL).run("one text, not a list")
    with pytest.raises(ValueError):
        headsep.model(MODEL).run([])
