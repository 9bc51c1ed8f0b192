"""Plugins written in Python: the NumPy copies of ops-reports, uniform and axis-focus
(examples/python/python_plugin.py) give the built-ins' numbers bit for bit; plugins with one
mistake each are refused by the host's own checks, naming the plugin, the chunk and the cause."""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import time

import numpy as np
import pytest

import headsep
from headsep import _headsep

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "examples", "python"))
import python_plugin as ex  # noqa: E402


def summary(scenario, weighting, params=(), threads=1, chunk=0) -> dict:
    return json.loads(_headsep._summary_json(scenario, weighting, list(params), threads, chunk))


def metrics(s: dict) -> list:
    return [(x["count"], x["metrics"], x["head_separation_histogram"], x["top"]) for x in s["scenarios"]]


# ---- the same numbers as the .so plugins -----------------------------------------------------

@pytest.mark.parametrize("threads,chunk", [(1, 0), (2, 0), (2, 333)])
def test_python_ops_reports_and_uniform_equal_the_builtins(threads, chunk):
    want = summary("ops-reports", "uniform", ["reports=3000", "seed=7"], 1)
    got = summary(ex.OpsReports(), ex.Uniform(), ["reports=3000", "seed=7"], threads, chunk)
    assert metrics(got) == metrics(want)
    assert [s["scenario"] for s in got["scenarios"]] == ["py-uniform"]
    # A Python generator with the built-in weighting, and the built-in generator with a Python weighting.
    assert metrics(summary(ex.OpsReports(), "uniform", ["reports=3000", "seed=7"], threads, chunk)) == metrics(want)
    assert metrics(summary("ops-reports", ex.Uniform(), ["reports=3000", "seed=7"], threads, chunk)) == metrics(want)


@pytest.mark.parametrize("threads,chunk", [(1, 0), (2, 100)])
def test_python_axis_focus_equals_the_builtin(threads, chunk):
    want = summary("ops-reports", "axis-focus", ["reports=2000", "max_tokens=11"], 1)
    got = summary(ex.OpsReports(), ex.AxisFocus(), ["reports=2000", "max_tokens=11"], threads, chunk)
    assert [s["scenario"] for s in got["scenarios"]] == [s["scenario"] for s in want["scenarios"]]
    assert metrics(got) == metrics(want)


def test_parameters_are_declared_checked_and_typed_like_a_so():
    seen = {}

    class Spy(ex.OpsReports):
        name = "spy"
        parameters = dict(ex.OpsReports.parameters, scale=0.5, verbose=False, label="x")

        def open(self, params):
            seen.update(params)
            super().open(params)

    summary(Spy(), "uniform", ["reports=5", "spy.scale=+2.50", "verbose=yes"])
    assert seen == {"reports": 5, "seed": 1, "min_tokens": 3, "max_tokens": 6, "scale": 2.5, "verbose": True, "label": "x"}
    assert type(seen["reports"]) is int and type(seen["scale"]) is float
    with pytest.raises(headsep.UsageError, match="'reports'.*int"):
        summary(Spy(), "uniform", ["reports=many"])
    with pytest.raises(headsep.UsageError, match="colour"):
        summary(Spy(), "uniform", ["colour=red"])


# ---- refused by the host's checks, by name ---------------------------------------------------

class BadGen(headsep.ScenarioGenerator):
    """One mistake per mode: 4 reports of 2-4 tokens per chunk."""

    features = ("decision_axis", "evidence_axis", "condition_axis")
    random_access = True
    parameters = {"mode": "ok", "reports": 10}

    def open(self, params):
        self.mode, self.total_reports = params["mode"], params["reports"]
        if self.mode == "dup-feature":
            self.features = ("decision_axis", "evidence_axis", "decision_axis")
        if self.mode == "empty-scenario":
            self.scenarios = ("a", "")
        if self.mode == "unknown-total":
            self.total_reports = 0

    def chunk(self, index, max_reports):
        first = index * max_reports
        n = min(max_reports, max(self.total_reports, 10) - first)
        if n <= 0 or (self.mode == "end-early" and index == 1):
            return None
        if self.mode == "short" or (self.mode == "unknown-total" and index == 0):
            n -= 1
        if self.mode == "raise" and index == 1:
            return 1 / 0
        lengths = 2 + (np.arange(first, first + n) % 3)
        off = np.concatenate([[0], np.cumsum(lengths)])
        t = off[-1]
        cols = [np.arange(t) % 5 / 2, np.arange(t) % 3 / 3, 1 - np.arange(t) % 4 / 4]
        c = {"offsets": off, "features": cols}
        if self.mode == "nan":
            cols[1][off[2] + 1] = np.nan
        if self.mode == "inf":
            cols[0][0] = np.inf
        if self.mode == "size":
            cols[2] = cols[2][:-1]
        if self.mode == "missing":
            c["features"] = {"decision_axis": cols[0], "condition_axis": cols[2]}
        if self.mode == "extra-feature":
            c["features"] = cols + [cols[0]]
        if self.mode == "unknown-feature":
            c["features"] = {"decision_axis": cols[0], "risk": cols[1]}
        if self.mode == "float-offsets":
            c["offsets"] = off.astype(float)
        if self.mode == "negative-offsets":
            c["offsets"] = -off
        if self.mode == "decreasing":
            c["offsets"] = off[::-1].copy()
        if self.mode == "ids":
            c["report_ids"] = [f"r{first + i}" for i in range(n - 1)]
        if self.mode == "bad-utf8":
            c["report_ids"] = [b"\xffbad"] + [f"r{i}".encode() for i in range(n - 1)]
        if self.mode == "token-names":
            c["token_names"] = ["tok"] * (t + 1)
        if self.mode == "undeclared-scenario":
            c["scenarios"] = ["surprise"]
        if self.mode == "embeddings":
            c["embeddings"] = np.zeros((t, 4))
        if self.mode == "not-a-chunk":
            return [off, cols]
        return c


GEN = "scenario plugin 'bad-gen' (Python class test_python_plugins.BadGen)"
W = "weighting plugin 'bad-weights' (Python class test_python_plugins.BadWeights)"


@pytest.mark.parametrize("mode,expect", [
    ("short", "chunk 0 holds 3 reports instead of 4"),
    ("end-early", "chunk 1: next_chunk returned END, but reports 4..7 are still to come"),
    ("unknown-total", "chunk 1 holds 4 reports, but chunk 0 holds 3 < max_reports = 4 reports, so it must be the last"),
    ("nan", "report '#2' (report 3 of the chunk): feature 'evidence_axis' of token 2 is nan"),
    ("inf", "feature 'decision_axis' of token 1 is inf"),
    ("size", "chunk 0 is malformed: feature 'condition_axis' has 10 values for 11 tokens"),
    ("missing", "chunk 0 is malformed: feature 'evidence_axis' was not written"),
    ("extra-feature", "feature(3): the schema has 3 features"),
    ("unknown-feature", "feature 'risk' is not in the schema's features"),
    ("dup-feature", "describe(): feature 'decision_axis' is listed twice"),
    ("empty-scenario", "describe(): scenario name 2 of 2 (scenario_names[1]) is empty"),
    ("float-offsets", "offsets must be a 1-D array of integers, got dtype float64"),
    ("negative-offsets", "offsets[1] = -2 is negative"),
    ("decreasing", "token_offset[0] must be 0"),
    ("ids", "3 report ids for 4 reports"),
    ("bad-utf8", "report_id(): id 1 of the chunk, '\\xffbad', is not valid UTF-8"),
    ("token-names", "12 token names for 11 tokens"),
    ("undeclared-scenario", "names scenario 'surprise', which describe() did not list"),
    ("embeddings", "embeddings of shape (11, 4); expected [n_tokens, d_model = 0]"),
    ("not-a-chunk", "chunk() must return a headsep.Chunk, a dict or None, got list"),
])
def test_a_python_generator_s_mistakes_are_refused_by_name(mode, expect):
    with pytest.raises(headsep.Error) as e:
        summary(BadGen(), "uniform", [f"mode={mode}"], 1, 4)
    assert GEN in str(e.value)
    assert expect in str(e.value)


def test_an_exception_in_chunk_names_the_plugin_the_chunk_and_the_line():
    with pytest.raises(headsep.Error) as e:
        summary(BadGen(), "uniform", ["mode=raise"], 2, 4)
    m = str(e.value)
    assert m.startswith(GEN + ": chunk 1: next_chunk failed: chunk(1, 4) raised ZeroDivisionError: division by zero")
    assert f"(at {__file__}:" in m and "in chunk)" in m


class BadWeights(headsep.WeightingScheme):
    """Uniform weights, or one mistake."""

    parameters = {"how": "ok"}
    scenarios = ("only",)

    def open(self, params, schema):
        self.how = params["how"]
        assert schema.features == ("decision_axis", "evidence_axis", "condition_axis")

    def weights(self, batch, slot):
        n = batch.lengths
        w = np.vstack([np.repeat(1.0 / n, n)] * 3)
        if self.how == "negative":
            w[2, 1] = -0.5
        if self.how == "nan":
            w[1, 0] = np.nan
        if self.how == "rows":
            return w[:2]
        if self.how == "raise":
            raise RuntimeError(f"no weights for report {batch.first_report}")
        if self.how == "text":
            return np.array([["a"] * batch.n_tokens] * 3)
        return w


@pytest.mark.parametrize("how,expect", [
    ("negative", "report '#0', scenario 'only': head2 weight of token 2 is -0.5 (weights must be finite and >= 0)"),
    ("nan", "report '#0', scenario 'only': head1 weight of token 1 is nan"),
    ("rows", "weights() returned shape (2, 11); expected (heads + 1, n_tokens) = (3, 11)"),
    ("raise", "weights(reports 0..3, slot 0) raised RuntimeError: no weights for report 0 (at "),
    ("text", "weights() returned dtype <U1, not numbers"),
])
def test_a_python_weighting_s_mistakes_are_refused_by_name(how, expect):
    with pytest.raises(headsep.Error) as e:
        summary(BadGen(), BadWeights(), [f"how={how}"], 2, 4)
    assert W in str(e.value)
    assert expect in str(e.value)


def test_registration_applies_the_descriptor_checks():
    class Named(BadGen):
        name = "bad.name"

    with pytest.raises(headsep.Error, match=r"Python class test_python_plugins\..*Named: invalid plugin name"):
        _headsep._register_plugin(Named())

    class Reserved(BadGen):
        name = "scenario"

    with pytest.raises(headsep.Error, match="reserved"):
        _headsep._register_plugin(Reserved())

    class ListParam(BadGen):
        parameters = {"items": [1, 2]}

    with pytest.raises(TypeError, match="parameter 'items': type list is not one of int, float, bool, str"):
        _headsep._register_plugin(ListParam())

    class InfDefault(BadGen):
        parameters = {"scale": float("inf")}

    with pytest.raises(headsep.Error, match="scale"):
        _headsep._register_plugin(InfDefault())
    with pytest.raises(TypeError, match="got int"):
        _headsep._register_plugin(3)

    class Uniform(ex.Uniform):
        name = "uniform"

    with pytest.raises(headsep.Error, match=r"two plugins are named 'uniform': .*uniform\.so and Python class"):
        summary("ops-reports", Uniform())
    assert _headsep._register_plugin(BadGen()) == "bad-gen"

    class HTTPReports2Go(BadGen):
        pass

    assert _headsep._register_plugin(HTTPReports2Go()) == "http-reports2-go"


def test_required_parameter_and_sequential_generator_with_given_weights():
    class Seeded(headsep.ScenarioGenerator):
        """Two scenarios per report, weights in the data (given_heads = 2), read in order."""

        features = ("decision_axis", "evidence_axis", "condition_axis")
        scenarios = ("a", "b")
        given_heads = 2
        names_scenarios = True
        parameters = {"reports": headsep.Param(type=int, help="how many")}

        def open(self, params):
            self.total_reports = params["reports"]
            self.done = 0

        def chunk(self, index, max_reports):
            assert index == self.done  # sequential: in order
            n = min(max_reports, self.total_reports - index * max_reports)
            if n <= 0:
                return None
            self.done += 1
            off = np.arange(n + 1) * 3
            x = np.tile([1.3, 0.2, 0.1], n)
            g = np.tile([1 / 3, 1 / 3, 1 / 3], (2, 3, n))
            return headsep.Chunk(off, [x, x[::-1].copy(), x], scenarios=["a", "b"], given_weights=g,
                                 report_ids=[f"r{index}-{i}" for i in range(n)], token_names=["t"] * (3 * n))

    with pytest.raises(headsep.UsageError, match="reports"):
        summary(Seeded(), "table")
    s = summary(Seeded(), "table", ["reports=7"], 2, 3)
    assert [(x["scenario"], x["count"]) for x in s["scenarios"]] == [("a", 7), ("b", 7)]
    assert s["scenarios"][0]["top"][0]["report_id"] == "r0-0"


class SeededQkv(headsep.WeightingScheme):
    """The built-in qkv's seeded scheme as an attention spec (d_k = d_model / heads)."""

    heads = 4
    scenarios = ("qkv",)
    parameters = {"matrices": False}

    def open(self, params, schema):
        self.d = schema.d_model
        self.matrices = params["matrices"]

    def attention(self):
        if not self.matrices:
            return headsep.AttentionSpec(d_model=self.d, d_k=self.d // 4, seed=1)
        g = np.random.default_rng(5)
        m = lambda *shape: g.standard_normal(shape) / 8  # noqa: E731
        return headsep.AttentionSpec(d_model=self.d, d_k=4, w_q=m(16, self.d), w_k=m(16, self.d), w_v=m(16, self.d),
                                     b_v=m(16), query="last", causal=True)

    def weights(self, batch, slot):
        raise AssertionError("an attention scheme's weights are the host's")


def test_a_python_attention_spec_is_run_by_the_host():
    params = ["reports=300", "d_model=16"]
    want = summary("ops-reports", "qkv", params + ["qkv.heads=4"])
    got = summary("ops-reports", SeededQkv(), params, 2, 64)
    assert metrics(got) == metrics(want)
    a = summary("ops-reports", SeededQkv(), params + ["matrices=true"], 1)
    assert metrics(summary("ops-reports", SeededQkv(), params + ["matrices=true"], 2, 7)) == metrics(a)
    assert metrics(a) != metrics(want)

    class Wrong(SeededQkv):
        def attention(self):
            return headsep.AttentionSpec(d_model=self.d, d_k=4, w_q=np.zeros((15, self.d)), w_k=np.zeros((16, self.d)),
                                         w_v=np.zeros((16, self.d)))

    with pytest.raises(headsep.Error, match=r"open\(\) raised ValueError: attention\(\): w_q has shape \(15, 16\); "
                                             r"expected \(16, 16\)"):
        summary("ops-reports", Wrong(), params)


# ---- through headsep.run -------------------------------------------------------------------

def test_python_plugins_through_headsep_run():
    want = headsep.run("ops-reports", "axis-focus", {"reports": 2000, "seed": 3}, rows=False, report=False)
    got = headsep.run(ex.OpsReports(), ex.AxisFocus(), {"reports": 2000, "seed": 3}, rows=False, report=False,
                      threads=2, chunk=100)
    assert got.summary["scenarios"] == want.summary["scenarios"]
    with pytest.raises(headsep.Error, match=r"scenario plugin 'bad-gen' \(Python class test_python_plugins.BadGen\): "
                                             r"chunk 1: next_chunk failed: chunk\(1, 4\) raised ZeroDivisionError"):
        headsep.run(BadGen(), "uniform", {"mode": "raise"}, threads=1, chunk=4, rows=False, report=False)
    with pytest.raises(TypeError, match="expected a plugin name or an instance of a headsep.ScenarioGenerator"):
        headsep.run(object(), "uniform")


SLOW = textwrap.dedent("""
    import signal, sys, time, numpy as np, headsep
    signal.signal(signal.SIGINT, signal.default_int_handler)
    class Slow(headsep.ScenarioGenerator):
        features = ("decision_axis", "evidence_axis", "condition_axis")
        random_access = True
        def chunk(self, index, max_reports):
            time.sleep(0.01)
            x = np.ones(3 * max_reports)
            return headsep.Chunk(np.arange(max_reports + 1) * 3, [x, x, x])
    print("running", flush=True)
    try:
        headsep.run(Slow(), "uniform", threads=2, chunk=64, rows=False, report=False)
    except KeyboardInterrupt:
        print("KeyboardInterrupt", flush=True)
        sys.exit(3)
""")


def test_ctrl_c_stops_a_run_of_a_python_plugin_within_a_second(tmp_path):
    p = subprocess.Popen([sys.executable, "-c", SLOW], cwd=tmp_path, stdout=subprocess.PIPE, text=True,
                         env=dict(os.environ))
    assert p.stdout.readline().strip() == "running"
    time.sleep(1.0)
    assert p.poll() is None  # an endless generator: still running
    t0 = time.monotonic()
    p.send_signal(signal.SIGINT)
    out, _ = p.communicate(timeout=30)
    assert p.returncode == 3 and out.strip() == "KeyboardInterrupt"
    assert time.monotonic() - t0 < 1.0


RAISES = textwrap.dedent("""
    import signal, sys, time, numpy as np, headsep
    signal.signal(signal.SIGINT, signal.default_int_handler)
    class Raises(headsep.ScenarioGenerator):
        features = ("decision_axis", "evidence_axis", "condition_axis")
        random_access = True
        def chunk(self, index, max_reports):
            time.sleep(0.05)  # both worker threads inside the plugin when they raise
            raise KeyboardInterrupt
    caught = 0
    try:
        headsep.run(Raises(), "uniform", threads=2, chunk=64, rows=False, report=False)
    except KeyboardInterrupt:
        caught += 1
        try:
            for _ in range(50):  # a second interrupt, pending, would be raised in here
                time.sleep(0.01)
        except KeyboardInterrupt:
            caught += 1
    except headsep.Error as e:
        print("Error", e, flush=True)
    try:
        time.sleep(0.2)
    except KeyboardInterrupt:
        caught += 1
    print("caught", caught, flush=True)
""")


def test_a_plugin_raising_keyboard_interrupt_makes_run_raise_exactly_one(tmp_path):
    p = subprocess.run([sys.executable, "-c", RAISES], cwd=tmp_path, capture_output=True, text=True,
                       env=dict(os.environ), timeout=60)
    assert p.returncode == 0, p.stderr
    assert p.stdout.strip() == "caught 1"


def test_plugin_integers_past_the_abi_fields_are_named():
    class Huge(headsep.ScenarioGenerator):
        features = ("decision_axis", "evidence_axis", "condition_axis")
        random_access = True

        def open(self, params):
            self.total_reports = 2**70

        def chunk(self, index, max_reports):
            return None

    with pytest.raises(headsep.Error, match=r"open\(\) raised ValueError: `total_reports` must be < 2\*\*64, got 1180591620717411303424"):
        headsep.run(Huge(), "uniform", rows=False, report=False)

    class Wide(headsep.WeightingScheme):
        heads = 2**40

        def weights(self, batch, slot):
            return None

    with pytest.raises(headsep.Error, match=r"`heads` must be < 2\*\*32"):
        headsep.run("ops-reports", Wide(), rows=False, report=False)
