"""headsep.run against `headsep run` on the same jobs: the summary byte for byte, the rows equal to
--per-report x.csv, the arrays views of the same values; the report."""
import json

import numpy as np
import pandas as pd
import pytest

import headsep
from conftest import SEED_CSV, cli, csv_rows, masked

JOBS = [
    # (CLI arguments, run() arguments)
    (["-s", "ops-reports", "-w", "axis-focus", "-p", "reports=2500", "-p", "seed=7"],
     dict(scenario="ops-reports", weighting="axis-focus", params={"reports": 2500, "seed": 7})),
    (["--input", SEED_CSV], dict(scenario=None, weighting=None, input=SEED_CSV)),
    (["--input", SEED_CSV, "--axes", "d=decision_axis;net=evidence_axis-0.5*condition_axis"],
     dict(scenario=None, weighting=None, input=SEED_CSV, axes={"d": "decision_axis", "net": "evidence_axis-0.5*condition_axis"})),
    # four heads (pairwise columns), f32, a small chunk and two threads
    (["-s", "ops-reports", "-w", "uniform", "-p", "reports=700", "-p", "heads=4", "--precision", "f32",
      "--chunk", "64", "--threads", "2", "--top", "3", "--bins", "7"],
     dict(scenario="ops-reports", weighting="uniform", params={"reports": 700, "heads": 4}, precision="f32",
          chunk=64, threads=2, top=3, bins=7)),
    # an attention scheme: head and pair statistics
    (["-s", "ops-reports", "-p", "reports=300", "-p", "d_model=16", "-w", "qkv", "-p", "heads=3"],
     dict(scenario="ops-reports", weighting="qkv", params={"reports": 300, "d_model": 16, "heads": 3})),
]


@pytest.mark.parametrize("cli_args,kwargs", JOBS, ids=["ops-reports", "seed-csv", "axes", "4-heads-f32", "qkv"])
def test_equals_the_cli(workdir, cli_args, kwargs):
    cli("run", *cli_args, "--summary", "s.json", "--per-report", "r.csv", "--quiet", cwd=workdir)
    kwargs = dict(kwargs)
    res = headsep.run(kwargs.pop("scenario"), kwargs.pop("weighting"), **kwargs)
    text = (workdir / "s.json").read_text(encoding="utf-8")
    # The same bytes but for run.execution (this run's command line and start time).
    assert masked(res.summary_json()) == masked(text)
    assert {k: v for k, v in res.summary.items() if k != "run"} == {k: v for k, v in json.loads(text).items() if k != "run"}
    expected = csv_rows(workdir / "r.csv")
    pd.testing.assert_frame_equal(res.rows, expected, check_exact=True)
    assert res.columns == list(expected.columns[3:])
    for name in res.columns:
        assert res.rows[name].dtype == np.float64
    arrays = res.arrays
    for name in res.columns:
        np.testing.assert_array_equal(arrays[name], expected[name].to_numpy())
    scen = np.array(res.scenarios, dtype=object)[arrays["scenario_index"].astype(np.intp)]
    assert list(scen) == list(expected["scenario"])


def test_arrays_are_read_only_views(workdir):
    res = headsep.run("ops-reports", "axis-focus", {"reports": 500})
    a = res.arrays["head_separation"]
    b = res.arrays["head_separation"]
    assert a.dtype == np.float64 and a.shape == (1500,)
    assert not a.flags.writeable
    assert np.shares_memory(a, b)  # both views of the engine's one buffer, not copies
    del res
    assert np.isfinite(a).all()  # the view keeps the result alive


def test_rows_false_keeps_the_summary_only(workdir):
    res = headsep.run("ops-reports", "axis-focus", {"reports": 400}, rows=False, report=False)
    full = headsep.run("ops-reports", "axis-focus", {"reports": 400})
    assert masked(res.summary_json()) == masked(full.summary_json())
    with pytest.raises(ValueError, match="report=True"):
        res.report_html()
    assert res._repr_html_() is None
    with pytest.raises(ValueError, match="rows=True"):
        res.rows
    with pytest.raises(ValueError, match="rows=True"):
        res.arrays


def test_threads_do_not_change_a_byte(workdir):
    one = headsep.run("ops-reports", "axis-focus", {"reports": 5000}, threads=1, chunk=128)
    two = headsep.run("ops-reports", "axis-focus", {"reports": 5000}, threads=2, chunk=999)
    assert masked(one.summary_json()) == masked(two.summary_json())
    pd.testing.assert_frame_equal(one.rows, two.rows, check_exact=True)


def test_report_selection_and_plugin_dirs(workdir):
    cli("run", "--input", SEED_CSV, "--report", "ops_pressure_return", "--summary", "s.json", "--quiet", cwd=workdir)
    res = headsep.run(None, None, input=SEED_CSV, reports=["ops_pressure_return"], plugin_dirs=[str(workdir)])
    assert masked(res.summary_json()) == masked((workdir / "s.json").read_text(encoding="utf-8"))
    assert set(res.rows["report_id"]) == {"ops_pressure_return"}


def test_report_html(workdir):
    res = headsep.run(None, None, input=SEED_CSV)
    doc = res.report_html()
    assert doc.startswith("<!DOCTYPE html>") and "<svg" in doc
    assert res.report_html(workdir / "r.html") is None
    assert (workdir / "r.html").read_text(encoding="utf-8") .startswith("<!DOCTYPE html>")
    inline = res._repr_html_()
    assert inline.startswith("<iframe") and "srcdoc='" in inline
    src = inline[inline.index("srcdoc='") + 8:inline.rindex("'></iframe>")]
    assert "'" not in src and src.replace("&#39;", "'").replace("&amp;", "&") == res.report_html()
    assert sorted(p.name for p in workdir.iterdir()) == ["r.html"]  # no temporary left beside it
