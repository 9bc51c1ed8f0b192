"""The examples in examples/python run as documented (small sizes) and print what they promise;
attention_from_torch.py takes its NumPy path where torch is missing."""
import os
import pathlib
import subprocess
import sys

import pytest

EXAMPLES = pathlib.Path(__file__).resolve().parents[2] / "examples" / "python"


def example(name, *args):
    return subprocess.run([sys.executable, str(EXAMPLES / name), *map(str, args)], capture_output=True,
                          text=True, check=True, timeout=120).stdout


def test_seed_and_worst(tmp_path):
    out = example("seed_and_worst.py", "--reports", 2000, "--html", tmp_path / "r.html")
    assert "single_decision_axis" in out and "The worst-separated reports per head design:" in out
    assert (tmp_path / "r.html").read_text(encoding="utf-8").startswith("<!DOCTYPE html>")


def test_attention_from_torch():
    out = example("attention_from_torch.py")
    assert "head" in out


@pytest.mark.skipif(not os.environ.get("HEADSEP_MODEL_DIR"), reason="HEADSEP_MODEL_DIR is not set")
def test_model_rows():
    out = example("model_rows.py", os.environ["HEADSEP_MODEL_DIR"])
    assert out.count("looks most at") == 12 and "pump" in out
