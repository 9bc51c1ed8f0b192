"""The notebook's display of a model run stays within 1 MB at 200 texts (docs/REPORTS.md, "Page
weight"): the static maps are left out (the head view's data holds the same weights) and the
srcdoc iframe escapes only '&' and "'". Needs the test model (HEADSEP_MODEL_DIR)."""
import os
import random

import pytest

import headsep

MODEL = os.environ.get("HEADSEP_MODEL_DIR")
pytestmark = pytest.mark.skipif(not MODEL, reason="HEADSEP_MODEL_DIR is not set (scripts/fetch_model.sh)")

WORDS = ("the pump pressure is high and the return condition is not met evidence from the tank sensor confirms "
         "the decision to hold cooling tower alarm resume once the flow is checked 정지결정 압력이상 복귀조건").split()


def test_notebook_display_within_1_mb():
    rng = random.Random(7)
    texts = [" ".join(rng.choice(WORDS) for _ in range(rng.randint(8, 40))) for _ in range(200)]
    res = headsep.model(MODEL).run(texts, threads=2)
    inline = res._repr_html_()
    size = len(inline.encode("utf-8"))
    assert size <= 1_000_000, f"notebook display {size / 1e6:.2f} MB"
    # What was left out is said, and the head view still holds the top report's every layer and head.
    assert "leaves the static maps out" in inline and 'id="hv-data"' in inline
    assert 'class="fig attention-map"' not in inline
    full = res.report_html()
    assert 'class="fig attention-map"' in full and "leaves the static maps out" not in full
