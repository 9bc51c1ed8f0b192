"""Tidy tables of a headsep.Result: ``heads()`` and ``pairs()`` (one row per head, or per pair of
heads, of every row of ``Result.rows``) and ``head_summary()`` / ``pair_summary()`` /
``layer_summary()`` (the summary's means and quantiles, one row per head, pair or layer).

Every value is one the rows or the summary hold (or, for a head's ``separation`` and ``js_mean``,
the mean over the layer's other heads of its pairs' values, summed in the order the model's
summary sums them). The tables are built column by column with NumPy from the engine's column
buffers: no Python loop runs per row, only per head, pair or statistic.

Output: a pandas.DataFrame when pandas can be imported (``output="auto"``, the default, or
``"pandas"``), else a NumPy structured array (``output="numpy"``; strings as fixed-width str)."""
from __future__ import annotations

import numpy as np

HEAD_STATS = ("entropy", "confidence", "self_weight", "prev_weight", "first_weight")
PAIR_STATS = ("js_divergence", "position_overlap", "subspace_cosine", "output_cosine", "output_distance")
QUANTILES = ("p01", "p10", "p50", "p90", "p99")
_OUTPUTS = ("auto", "pandas", "numpy")


def _label(h: int) -> str:
    return f"head{h}" if h else "single"


def resolve(output: str) -> str:
    """"pandas" or "numpy": what output= asks for ("auto": pandas when it can be imported)."""
    if output not in _OUTPUTS:
        raise ValueError(f"output: expected 'auto', 'pandas' or 'numpy', got {output!r}")
    if output == "numpy":
        return output
    try:
        import pandas  # noqa: F401
    except ImportError:
        if output == "pandas":
            raise ImportError("output='pandas' needs pandas (pip install pandas); output='numpy' gives a "
                              "NumPy structured array") from None
        return "numpy"
    return "pandas"


def table(columns: dict, output: str = "auto"):
    """A dict of equally long 1-D arrays as a pandas.DataFrame or a NumPy structured array."""
    if resolve(output) == "pandas":
        import pandas as pd

        return pd.DataFrame(columns, copy=False)
    arrays = {k: (np.asarray(v).astype(str) if np.asarray(v).dtype == object else np.asarray(v))
              for k, v in columns.items()}
    n = len(next(iter(arrays.values()))) if arrays else 0
    out = np.empty(n, dtype=[(k, a.dtype if a.dtype.itemsize else np.dtype("U1")) for k, a in arrays.items()])
    for k, a in arrays.items():
        out[k] = a
    return out


class _Rows:
    """The rows' columns of one result, by name, and what they are rows of."""

    def __init__(self, core, model: bool, output: str):
        self.numpy = resolve(output) == "numpy"  # strings as fixed-width str before they are repeated
        self.core = core
        self.model = model
        self.names = list(core.column_names())
        self.index = {n: i for i, n in enumerate(self.names)}
        self.heads = int(core.heads)
        self.axes = list(core.axes)
        self.attention = bool(core.attention)
        self.kv_head_of = list(core.kv_head_of) if model else []
        self.report = np.asarray(core.report_of()).astype(np.intp)
        self.n = len(self.report)

    def col(self, name: str) -> np.ndarray:
        return np.asarray(self.core.column(self.index[name]))

    def base(self, repeat: int) -> dict:
        """report_id, scenario (and layer) of every row, each repeated `repeat` times."""
        def strings(values):
            if self.numpy:
                return np.array(values, dtype=str) if values else np.array([], dtype="U1")
            a = np.empty(len(values), dtype=object)
            a[:] = values
            return a

        ids, scen = strings(self.core.report_ids()), strings(self.core.scenarios())
        out = {"report_id": np.repeat(ids[self.report], repeat),
               "scenario": np.repeat(scen[np.asarray(self.core.scenario_of()).astype(np.intp)], repeat)}
        if self.model:
            out["layer"] = np.repeat(np.asarray(self.core.layer_of()).astype(np.int64), repeat)
        return out

    def gather(self, names: list[str]) -> np.ndarray:
        """[rows * len(names)]: row-major (row, name) of the named columns."""
        m = np.empty((self.n, len(names)))
        for k, name in enumerate(names):
            m[:, k] = self.col(name)
        return m.ravel()

    def pair_distance(self, i: int, j: int) -> np.ndarray:
        """The context distance of heads i < j per row: separation_i_j, or head_separation with 2 heads."""
        return self.col("head_separation") if self.heads == 2 else self.col(f"separation_{i}_{j}")

    def head_mean(self, h: int, value) -> np.ndarray:
        """Per row: the mean over the other heads o of value(min(h, o), max(h, o)), summed in o
        order (the model summary's per-report separation); 0 with fewer than 2 heads."""
        acc = np.zeros(self.n)
        if self.heads < 2:
            return acc
        for o in range(1, self.heads + 1):
            if o != h:
                acc += value(min(h, o), max(h, o))
        return acc / (self.heads - 1)

    def kv(self, head: np.ndarray) -> np.ndarray:
        # A decoder's key/value head per query head; BERT's heads each read their own (h - 1).
        if self.kv_head_of:
            return np.asarray(self.kv_head_of, dtype=np.int64)[head - 1]
        return head - 1


def heads_table(core, model: bool, baseline: bool = False, output: str = "auto"):
    r = _Rows(core, model, output)
    first = 0 if baseline else 1
    hs = list(range(first, r.heads + 1))
    k = len(hs)
    out = r.base(k)
    head = np.tile(np.arange(first, r.heads + 1, dtype=np.int64), r.n)
    out["head"] = head
    if model:
        out["kv_head"] = np.where(head > 0, r.kv(np.maximum(head, 1)), -1)
    if r.attention:
        for s in HEAD_STATS:
            out[s] = r.gather([f"{_label(h)}_{s}" for h in hs])
    for a in r.axes:
        out[f"context_{a}"] = r.gather([f"{_label(h)}_{a}" for h in hs])
    for a in r.axes:
        d = np.empty((r.n, k))
        for c, h in enumerate(hs):
            d[:, c] = r.col(f"diff_head{h}_{a}") if h else np.nan
        out[f"difference_{a}"] = d.ravel()
    sep = np.empty((r.n, k))
    for c, h in enumerate(hs):
        sep[:, c] = r.head_mean(h, r.pair_distance) if h else np.nan
    out["separation"] = sep.ravel()
    if r.attention:
        js = np.empty((r.n, k))
        for c, h in enumerate(hs):
            js[:, c] = r.head_mean(h, lambda i, j: r.col(f"head{i}_head{j}_js_divergence")) if h else np.nan
        out["js_mean"] = js.ravel()
    return table(out, output)


def pairs_table(core, model: bool, output: str = "auto"):
    r = _Rows(core, model, output)
    pairs = [(i, j) for i in range(1, r.heads + 1) for j in range(i + 1, r.heads + 1)]
    out = r.base(len(pairs))
    hi = np.array([p[0] for p in pairs], dtype=np.int64)
    hj = np.array([p[1] for p in pairs], dtype=np.int64)
    out["head_i"] = np.tile(hi, r.n)
    out["head_j"] = np.tile(hj, r.n)
    if model:
        out["shared_kv"] = r.kv(out["head_i"]) == r.kv(out["head_j"])
    m = np.empty((r.n, len(pairs)))
    for c, (i, j) in enumerate(pairs):
        m[:, c] = r.pair_distance(i, j)
    out["context_distance"] = m.ravel()
    if r.attention:
        for s in PAIR_STATS:
            out[s] = r.gather([f"head{i}_head{j}_{s}" for i, j in pairs])
    return table(out, output)


# ---- the summary's tables ------------------------------------------------------------------------

def _columns(records: list[dict]) -> dict:
    keys = list(records[0]) if records else []
    return {k: np.array([rec[k] for rec in records], dtype=object if isinstance(records[0][k], str) else None)
            for k in keys}


def _quantiles(dst: dict, prefix: str, q: dict) -> None:
    for name in QUANTILES:
        dst[f"{prefix}_{name}"] = q.get(name, np.nan)  # empty when a scenario had no report


def _stats(dst: dict, name: str, m: dict) -> None:
    # An engine summary's metric: mean as `name`, then std, min, max and the quantiles.
    dst[name] = m["mean"]
    for k in ("std", "min", "max") + QUANTILES:
        dst[f"{name}_{k}"] = m[k]


def _model_heads(summary: dict, baseline: bool) -> list[dict]:
    axes, kv_of = summary["axes"], summary.get("kv_head_of")
    out = []
    for sc in summary["scenarios"]:
        for layer in sc["layers"]:
            heads = ([layer["baseline"]] if baseline else []) + layer["heads"]
            for h in heads:
                n = h["head"]
                rec = {"scenario": sc["name"], "layer": layer["layer"], "head": n,
                       "kv_head": -1 if n == 0 else kv_of[n - 1] if kv_of else n - 1, "reports": sc["reports"]}
                rec.update({s: h[s] for s in HEAD_STATS})
                rec.update({f"context_{a}": v for a, v in zip(axes, h["context"])})
                rec.update({f"difference_{a}": v for a, v in zip(axes, h.get("difference", [np.nan] * len(axes)))})
                rec["separation"] = h.get("separation", np.nan)
                rec["js_mean"] = h.get("js_divergence_mean", np.nan)
                _quantiles(rec, "entropy", h["entropy_quantiles"])
                _quantiles(rec, "separation", h.get("separation_quantiles", {}))
                out.append(rec)
    return out


def _engine_heads(summary: dict, baseline: bool) -> list[dict]:
    axes, heads = summary["axes"], summary["heads"]
    out = []
    for sc in summary["scenarios"]:
        metrics = sc["metrics"]
        for h in range(0 if baseline else 1, heads + 1):
            rec = {"scenario": sc["scenario"], "head": h, "reports": sc["count"]}
            for s in HEAD_STATS:
                if f"{_label(h)}_{s}" in metrics:
                    _stats(rec, s, metrics[f"{_label(h)}_{s}"])
            for a in axes:
                if h:
                    _stats(rec, f"difference_{a}", metrics[f"diff_head{h}_{a}"])
                else:
                    for k in ("",) + tuple(f"_{x}" for x in ("std", "min", "max") + QUANTILES):
                        rec[f"difference_{a}{k}"] = np.nan
            out.append(rec)
    return out


def head_summary(summary: dict, kind: str, baseline: bool = False, output: str = "auto"):
    recs = _model_heads(summary, baseline) if kind == "model" else _engine_heads(summary, baseline)
    return table(_columns(recs), output)


def pair_summary(summary: dict, kind: str, output: str = "auto"):
    out = []
    for sc in summary["scenarios"]:
        if kind == "model":
            kv_of = summary.get("kv_head_of")
            for layer in sc["layers"]:
                for p in layer.get("pairs", []):
                    i, j = p["heads"]
                    rec = {"scenario": sc["name"], "layer": layer["layer"], "head_i": i, "head_j": j,
                           "shared_kv": bool(kv_of and kv_of[i - 1] == kv_of[j - 1]), "reports": sc["reports"],
                           "context_distance": p["context_distance"]}
                    rec.update({s: p[s] for s in PAIR_STATS})
                    out.append(rec)
        else:
            metrics, heads = sc["metrics"], summary["heads"]
            for i in range(1, heads + 1):
                for j in range(i + 1, heads + 1):
                    if f"head{i}_head{j}_{PAIR_STATS[0]}" not in metrics:
                        continue  # not an attention scheme: the summary holds no pair statistics
                    rec = {"scenario": sc["scenario"], "head_i": i, "head_j": j, "reports": sc["count"]}
                    for s in PAIR_STATS:
                        _stats(rec, s, metrics[f"head{i}_head{j}_{s}"])
                    out.append(rec)
    return table(_columns(out), output)


def layer_summary(summary: dict, kind: str, output: str = "auto"):
    out = []
    for sc in summary["scenarios"]:
        if kind == "model":
            for layer in sc["layers"]:
                rec = {"scenario": sc["name"], "layer": layer["layer"], "reports": sc["reports"],
                       "tokens": sc["tokens"], "separation": layer["separation"]}
                base = layer["baseline"]
                rec.update({f"baseline_{s}": base[s] for s in HEAD_STATS})
                out.append(rec)
        else:
            rec = {"scenario": sc["scenario"], "reports": sc["count"]}
            _stats(rec, "head_separation", sc["metrics"]["head_separation"])
            out.append(rec)
    return table(_columns(out), output)
