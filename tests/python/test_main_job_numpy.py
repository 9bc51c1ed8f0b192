"""bench/main_job_numpy.py, the NumPy peer of the main job (issue 27): its summary agrees with
`headsep run --summary` in the sketch's regime and in the exact one, and its check refuses a
summary with one number, one histogram count or one top report changed."""
from __future__ import annotations

import copy
import json
import os
import subprocess
import sys

import pytest

from conftest import CLI, SOURCE, cli

sys.path.insert(0, str(SOURCE / "bench"))
import main_job_numpy as peer  # noqa: E402


@pytest.mark.parametrize("reports,chunk", [(20000, 6000), (3000, 1 << 20)])  # sketch mode; exact (<= 4096)
def test_the_peer_agrees_with_headsep_end_to_end(reports, chunk):
    p = subprocess.run([sys.executable, str(SOURCE / "bench" / "main_job_numpy.py"), "--headsep", CLI,
                        "--reports", str(reports), "--threads", "1,2", "--repeat", "1", "--chunk", str(chunk)],
                       capture_output=True, text=True)
    assert p.returncode == 0, p.stdout + p.stderr
    exact = "exact" if reports <= 4096 else "within the sketch accuracy"
    assert f"quantiles and histogram {exact}" in p.stdout
    assert "headsep 2T, its run" in p.stdout and "numpy, 1 thread" in p.stdout


@pytest.fixture(scope="module")
def job(tmp_path_factory):
    path = tmp_path_factory.mktemp("s") / "s.json"
    cli("run", "--scenario", "ops-reports", "--weighting", "axis-focus", "-p", "reports=20000", "-p", "seed=2026",
        "--top", "5", "--summary", path)
    parts, scenarios, heads = peer.generate(20000, 2026, 8192)
    ours, values, _ = peer.numpy_job(parts, scenarios, heads, 20000, 5)
    return json.loads(path.read_text()), ours, values, scenarios, heads


def test_the_check_passes_on_the_real_pair(job):
    hs, ours, values, scenarios, heads = job
    assert peer.compare(hs, ours, values, scenarios, heads) == []


def changed(hs, edit):
    h = copy.deepcopy(hs)
    edit(h["scenarios"][1])
    return h


@pytest.mark.parametrize("edit,says", [
    (lambda s: s["metrics"]["head_separation"].update(mean=s["metrics"]["head_separation"]["mean"] * (1 + 1e-8)), "head_separation mean"),
    (lambda s: s["metrics"]["diff_head2_decision_axis"].update(std=s["metrics"]["diff_head2_decision_axis"]["std"] * (1 + 1e-8)), "diff_head2_decision_axis std"),
    (lambda s: s["metrics"]["head_separation"].update(p50=s["metrics"]["head_separation"]["p50"] * 1.02), "head_separation p50"),
    (lambda s: s["top"].reverse(), "top 1"),
    (lambda s: s["top"][4].update(report_index=s["top"][4]["report_index"] + 1, report_id=f"#{s['top'][4]['report_index'] + 1}"), "top 5"),
    (lambda s: (s["head_separation_histogram"][3].update(count=s["head_separation_histogram"][3]["count"] + 40),
                s["head_separation_histogram"][4].update(count=s["head_separation_histogram"][4]["count"] - 40)), "histogram"),
    (lambda s: s.update(count=s["count"] - 1), "count"),
])
def test_the_check_refuses_one_changed_number(job, edit, says):
    hs, ours, values, scenarios, heads = job
    bad = peer.compare(changed(hs, edit), ours, values, scenarios, heads)
    assert bad and all(b.startswith("decision_vs_condition_split") for b in bad) and any(says in b for b in bad), bad


def test_the_bench_names_the_core_generation_behind_a_cloud_cpu_name():
    # bench/machine.py: "AMD EPYC" is a Zen 3 (AVX2 only) or a Zen 4 (AVX-512); the numbers differ.
    import machine
    assert machine.amd_generation(25, 1) == "Zen 3"     # EPYC 7003 (Milan)
    assert machine.amd_generation(25, 0x21) == "Zen 3"  # Ryzen 5000
    assert machine.amd_generation(25, 17) == "Zen 4"    # EPYC 9004 (Genoa)
    assert machine.amd_generation(25, 0xA0) == "Zen 4"  # EPYC 97x4 (Bergamo)
    assert machine.amd_generation(23, 0x31) == "Zen 2"
    assert machine.amd_generation(6, 106) is None       # an Intel family
    assert machine.vector_isa({"avx2"}) == "AVX2, no AVX-512"
    assert machine.vector_isa({"avx2", "avx512f"}) == "AVX-512"
    line = machine.cpu_line()
    assert f"{os.cpu_count()} CPUs" in line and ("AVX" in line)
