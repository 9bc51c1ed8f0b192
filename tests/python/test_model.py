"""headsep.model(path).run against `headsep run --model DIR --scenario text`: the same summary
(without the run's seconds and thread count), the report, errors. Needs the test model
(HEADSEP_MODEL_DIR, scripts/fetch_model.sh); the test command always provides it."""
import json
import os

import pytest

import headsep
from conftest import cli

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


def test_errors(tmp_path):
    with pytest.raises(headsep.Error):
        headsep.model(tmp_path).run(["text"])
    with pytest.raises(TypeError):
        headsep.model(MODEL).run("one text, not a list")
    with pytest.raises(ValueError):
        headsep.model(MODEL).run([])
