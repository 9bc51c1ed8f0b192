"""Errors from Python: headsep.Error with the CLI's message for bad input and plugin failures,
headsep.UsageError (a ValueError) for bad arguments, TypeError for wrong types; plugins()."""
import pytest

import headsep
from conftest import SEED_CSV, SOURCE, cli


def cli_error(*args):
    p = cli(*args, check=False)
    assert p.returncode in (1, 2), p.stderr
    return p.returncode, p.stderr.strip().removeprefix("headsep: ").removeprefix("error: ")


def test_unknown_plugin_is_an_error():
    with pytest.raises(headsep.Error, match="no scenario plugin named 'nope'") as e:
        headsep.run("nope", "axis-focus")
    assert not isinstance(e.value, ValueError)


def test_unknown_parameter_is_a_usage_error():
    with pytest.raises(headsep.UsageError, match="no parameter 'bogus'") as e:
        headsep.run("ops-reports", "axis-focus", {"bogus": 1})
    assert isinstance(e.value, ValueError) and isinstance(e.value, headsep.Error)
    rc, msg = cli_error("run", "-s", "ops-reports", "-w", "axis-focus", "-p", "bogus=1", "--quiet")
    assert rc == 2 and str(e.value) in msg


def test_bad_csv_names_file_line_and_column(workdir):
    bad = workdir / "bad.csv"
    text = SEED_CSV.read_text(encoding="utf-8").splitlines()
    header = text[0].split(",")
    row = text[1].split(",")
    row[header.index("evidence_axis")] = "abc"
    bad.write_text("\n".join([text[0], ",".join(row)] + text[2:]) + "\n", encoding="utf-8")
    with pytest.raises(headsep.Error) as e:
        headsep.run(None, None, input=bad)
    assert "bad.csv:2: column 'evidence_axis'" in str(e.value)
    rc, msg = cli_error("run", "--input", bad, "--quiet", "--summary", workdir / "s.json")
    # the same message: the file, line and column, not the plugin that read it
    assert rc == 1 and str(e.value) in msg
    assert sorted(p.name for p in workdir.iterdir()) == ["bad.csv"]


def test_bad_arguments():
    with pytest.raises(TypeError, match="params"):
        headsep.run("ops-reports", "axis-focus", [("reports", 1)])
    with pytest.raises(TypeError, match="threads"):
        headsep.run("ops-reports", "axis-focus", threads="2")
    with pytest.raises(ValueError, match="chunk"):
        headsep.run("ops-reports", "axis-focus", chunk=0)
    with pytest.raises(headsep.UsageError, match="f64 or f32"):
        headsep.run("ops-reports", "axis-focus", precision="f16")
    with pytest.raises(headsep.UsageError, match="plugin_dirs"):
        headsep.run("ops-reports", "axis-focus", plugin_dirs=["/no/such/folder"])
    with pytest.raises(TypeError):
        headsep.run(42, "axis-focus")


def test_plugins_lists_what_the_cli_lists():
    found = headsep.plugins()
    listing = cli("plugins").stdout.splitlines()[1:]
    names = [line.split()[1] for line in listing if line and not line.startswith(" ")]
    assert [p["name"] for p in found] == names
    af = next(p for p in found if p["name"] == "axis-focus")
    assert af["kind"] == "weighting" and af["version"]
    text = cli("plugins", "axis-focus").stdout
    for q in af["parameters"]:
        assert q["name"] in text and q["type"] in text
        if not q["required"]:
            assert isinstance(q["default"], {"int": int, "float": float, "bool": bool, "string": str}[q["type"]])
    reports = next(q for q in next(p for p in found if p["name"] == "ops-reports")["parameters"] if q["name"] == "reports")
    assert reports["default"] == 1000 and reports["type"] == "int"


def test_plugin_path_is_searched(monkeypatch, tmp_path):
    monkeypatch.setenv("HEADSEP_PLUGIN_PATH", str(tmp_path))
    (tmp_path / "broken.so").write_bytes(b"not a shared library")
    with pytest.warns(RuntimeWarning, match="broken.so"):
        found = headsep.plugins()
    assert "ops-reports" in [p["name"] for p in found]


def test_a_text_with_no_token_is_refused_by_report():
    # Issue 52: GPT-2 adds no special token, so an empty text is a zero-length sequence: refused
    # (as transformers refuses it) naming the report, with no crash, alone or beside real texts.
    m = headsep.model(SOURCE / "tests/model/fixtures/decoder/gpt2")
    for texts in ([""], ["stop the line", ""]):
        with pytest.raises(headsep.Error, match="no token to measure"):
            m.run(texts, threads=1)
