"""Shared fixtures of the Python package's tests: the CLI to compare with, the repository's data,
a fresh working folder. CTest sets HEADSEP_CLI, HEADSEP_SOURCE_DIR and PYTHONPATH (tests/python/
CMakeLists.txt); HEADSEP_MODEL_DIR comes from the test command (scripts/fetch_model.sh)."""
import json
import os
import pathlib
import subprocess

import pytest

SOURCE = pathlib.Path(os.environ.get("HEADSEP_SOURCE_DIR", pathlib.Path(__file__).resolve().parents[2]))
CLI = os.environ.get("HEADSEP_CLI", str(SOURCE / "build" / "headsep"))
SEED_CSV = SOURCE / "data" / "qkv-multihead-report-scenarios.csv"


def cli(*args, cwd=None, check=True):
    """Runs the headsep executable; returns the CompletedProcess."""
    return subprocess.run([CLI, *map(str, args)], cwd=cwd, capture_output=True, text=True, check=check)


def masked(summary):
    """A summary JSON text without run.execution (command line, start time, threads, ranks, SIMD
    level, chunk: docs/SUMMARY.md), everything else in its order: what two runs of one job share."""
    d = json.loads(summary)
    d.get("run", {}).pop("execution", None)
    return json.dumps(d)


def unstamped(summary):
    """A summary JSON text without the stamp (schema_version, kind, run): the measured part."""
    d = json.loads(summary)
    for k in ("schema_version", "kind", "run"):
        d.pop(k, None)
    return json.dumps(d)


def csv_rows(path):
    """--per-report x.csv as the DataFrame Result.rows must equal: ids and scenarios as str,
    tokens and a model run's token_ids (JSON arrays in the CSV) as lists."""
    import pandas as pd

    df = pd.read_csv(path, dtype={"report_id": str, "scenario": str}, keep_default_na=False)
    df["tokens"] = df["tokens"].map(json.loads)
    if "token_ids" in df:
        df["token_ids"] = df["token_ids"].map(json.loads)
    # Metric columns are float64 in Result.rows; read_csv makes a column of whole numbers (a
    # uniform weighting's differences, all 0) int64: the same values, compared as float64. A
    # decoder's headH_kv_head stays int64 (and its true/false headI_headJ_shared_kv reads as bool).
    for name in df.columns[df.columns.get_loc("tokens") + 1 + ("token_ids" in df):]:
        if df[name].dtype.kind == "i" and not name.endswith("_kv_head"):
            df[name] = df[name].astype("float64")
    return df


@pytest.fixture
def workdir(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    return tmp_path
