"""Plugins written in Python: a scenario generator and two weighting schemes in NumPy.

OpsReports re-implements the built-in `ops-reports` generator (without names or embeddings) bit
for bit, Uniform the `uniform` scheme and AxisFocus the `axis-focus` scheme's default designs,
so each gives the summary its .so gives (tests/python/test_python_plugins.py checks it;
bench/python_plugin_throughput.py times them). Run it:

    PYTHONPATH=build/python python examples/python/python_plugin.py
"""
from __future__ import annotations

import numpy as np

import headsep

U = np.uint64
GOLDEN, STEP = U(0x9E3779B97F4A7C15), U(0xD1B54A32D192ED03)
TENTHS = np.array([k / 10 for k in range(19)])  # 0.0, 0.1, ..., 1.8: the same doubles as the C++ table


def mix(x: np.ndarray) -> np.ndarray:
    """splitmix64's finaliser (uint64 arithmetic wraps, as in C++)."""
    x = (x ^ (x >> U(30))) * U(0xBF58476D1CE4E5B9)
    x = (x ^ (x >> U(27))) * U(0x94D049BB133111EB)
    return x ^ (x >> U(31))


def pick16(bits: np.ndarray, n: int) -> np.ndarray:
    """Uniform integer in [0, n) from the low 16 bits."""
    return ((bits & U(0xFFFF)) * U(n)) >> U(16)


class OpsReports(headsep.ScenarioGenerator):
    """Synthetic operations reports, as the built-in ops-reports generator (NumPy)."""

    name = "py-ops-reports"
    features = ("decision_axis", "evidence_axis", "condition_axis")
    random_access = True
    parameters = {
        "reports": headsep.Param(1000, "number of reports to generate"),
        "seed": headsep.Param(1, "random seed"),
        "min_tokens": 3,
        "max_tokens": 6,
    }

    def open(self, params):
        if params["reports"] < 0 or params["min_tokens"] < 1 or params["max_tokens"] < params["min_tokens"]:
            raise ValueError(f"bad parameters {params}")
        self.total_reports = params["reports"]
        self.min, self.span = U(params["min_tokens"]), U(params["max_tokens"] - params["min_tokens"] + 1)
        with np.errstate(over="ignore"):
            self.key = mix(np.array([params["seed"]], dtype=np.int64).view(U) + GOLDEN)[0]

    def chunk(self, index, max_reports):
        first = index * max_reports
        n = min(max_reports, self.total_reports - first)
        if n <= 0:
            return None
        r = np.arange(first + 1, first + n + 1, dtype=U)
        h = mix(self.key + r * GOLDEN)  # each report's hash
        length = (self.min + (((h >> U(32)) * self.span) >> U(32))).astype(np.int64)
        offsets = np.zeros(n + 1, dtype=np.int64)
        np.cumsum(length, out=offsets[1:])
        hr = np.repeat(h, length)  # per token: its report's hash and its index i in the report
        i = (np.arange(offsets[-1]) - np.repeat(offsets[:-1], length)).astype(U)
        b = mix(hr + (i + U(1)) * STEP)
        # the first three tokens cover the three kinds, rotated; later ones are drawn
        c = np.where(i < U(3), (i + pick16(hr >> U(16), 3)) % U(3), pick16(b, 3))
        main, lo1, lo2 = TENTHS[8 + pick16(b >> U(16), 11)], TENTHS[pick16(b >> U(32), 7)], TENTHS[pick16(b >> U(48), 7)]
        f0 = np.where(c == 0, main, np.where(c == 1, lo2, lo1))
        f1 = np.where(c == 1, main, np.where(c == 0, lo1, lo2))
        f2 = np.where(c == 2, main, np.where(c == 1, lo1, lo2))
        return headsep.Chunk(offsets, [f0, f1, f2])


class Uniform(headsep.WeightingScheme):
    """Every head weights a report's tokens equally, as the built-in uniform scheme."""

    name = "py-uniform"
    parameters = {"heads": 2}

    def open(self, params, schema):
        self.heads = params["heads"]

    def weights(self, batch, slot):
        lengths = batch.lengths
        w = np.repeat(1.0 / lengths, lengths)
        return np.broadcast_to(w, (self.heads + 1, len(w)))


def exp_nonpositive(x: np.ndarray) -> np.ndarray:
    """axis-focus's exp for -708 <= x <= 0, operation for operation (no FMA in NumPy's ufuncs)."""
    shift = 6755399441055744.0
    t = x * 1.4426950408889634 + shift
    k = t - shift
    r = (x - k * 0.6931471803691238) - k * 1.9082149292705877e-10
    p = np.full_like(x, 1.0 / 479001600.0)
    for c in (1 / 39916800.0, 1 / 3628800.0, 1 / 362880.0, 1 / 40320.0, 1 / 5040.0, 1 / 720.0, 1 / 120.0, 1 / 24.0,
              1 / 6.0, 0.5, 1.0, 1.0):
        p = p * r + c
    ki = t.view(np.int64) - np.array(shift).view(np.int64)
    return p * ((ki + 1023) << 52).view(np.float64)


class AxisFocus(headsep.WeightingScheme):
    """axis-focus's default designs over the seed's axes: a softmax per head over one axis."""

    name = "py-axis-focus"
    heads = 2
    scenarios = ("balanced_heads", "decision_vs_condition_split", "condition_heavy_both_heads")
    DESIGNS = (((0, 0.5), (1, 0.5)), ((0, 4.0), (1, 4.0)), ((1, 2.0), (1, 4.0)))  # (axis, sharpness) per head

    def weights(self, batch, slot):
        dec = 0.0 + 1.0 * batch.feature("decision_axis")
        evc = (0.0 + 1.0 * batch.feature("evidence_axis")) + 1.0 * batch.feature("condition_axis")
        mean = ((0.0 + dec) + evc) * 0.5
        z = (dec, evc)
        rows = [self._softmax(batch, mean, 1.0)]
        rows += [self._softmax(batch, z[a], s) for a, s in self.DESIGNS[slot]]
        return np.vstack(rows)

    @staticmethod
    def _softmax(batch, z, sharpness):
        """Per report, in token order: w = s*z, m = running max, e = exp(max(w - m, -708)),
        sum = 0 + e_1 + e_2 + ..., weight = e * (1 / sum): the plugin's arithmetic."""
        lengths = batch.lengths
        n, width = len(lengths), int(lengths.max())
        report = np.repeat(np.arange(n), lengths)
        pos = np.arange(len(z)) - np.repeat(batch.offsets[:-1], lengths)
        w = np.full((n, width), -np.inf)
        w[report, pos] = sharpness * z
        m = np.maximum.accumulate(w, axis=1)[:, -1]
        e = exp_nonpositive(np.maximum(w - m[:, None], -708.0))
        e[w == -np.inf] = 0.0
        total = np.zeros(n)
        for j in range(width):
            total = total + e[:, j]
        return e[report, pos] * (1.0 / total)[report]


if __name__ == "__main__":
    for w in (Uniform(), AxisFocus()):
        builtin = w.name[len("py-"):]
        mine = headsep.run(OpsReports(), w, {"reports": 20000}, rows=False, report=False)
        theirs = headsep.run("ops-reports", builtin, {"reports": 20000}, rows=False, report=False)
        for s in mine.summary["scenarios"]:
            print(f"py-ops-reports x {w.name}: {s['scenario']}: head_separation mean {s['metrics']['head_separation']['mean']:.6f}")
        same = [a["metrics"] for a in mine.summary["scenarios"]] == [b["metrics"] for b in theirs.summary["scenarios"]]
        print(f"  the same numbers as ops-reports x {builtin}: {same} ({mine.seconds:.2f} s against {theirs.seconds:.2f} s)")
