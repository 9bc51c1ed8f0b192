"""headsep.Result: a finished run (headsep.run, headsep.model(...).run; headsep.attention builds
on it too). Wraps the extension's RunResult / ModelRunResult (python/src/result.hpp)."""
from __future__ import annotations

import json as _json
import os as _os

from . import _tables


def _typed(column, dtype: str):
    """A row column (a float64 view) in its dtype: the view itself for metrics, else a copy."""
    if dtype == "float64":
        return column
    import numpy as np

    return np.asarray(column).astype(dtype)


class Result:
    """A finished run: its summary, rows, tidy tables, arrays and report.

    - ``summary``: a dict equal to ``json.load`` of ``headsep run --summary`` for the same run;
      ``summary_json()`` the identical text.
    - ``heads()`` / ``pairs()``: tidy tables, one row per (report, scenario[, layer], head) or per
      pair of heads, the rows' numbers regrouped (``res.heads().groupby("head").entropy.mean()``);
      ``head_summary()``, ``pair_summary()``, ``layer_summary()``: the summary's means and
      quantiles as tables. pandas.DataFrames, or NumPy structured arrays with ``output="numpy"``
      (and by default when pandas is not installed).
    - ``rows``: a pandas.DataFrame with the columns and values of ``--per-report x.csv``:
      report_id and scenario as str, tokens as lists of str, every metric float64; a model run's
      rows (one per report, scenario and layer) add layer and n_tokens (int64) and token_ids
      (lists of int) after scenario, in the CSV's order; a decoder's rows also hold each query
      head's key/value head (``headH_kv_head``, int64) and per pair ``headI_headJ_shared_kv``
      (bool; the CSV's true/false), beside that head's or pair's statistics (docs/MODEL.md).
    - ``arrays``: the metric columns as read-only NumPy float64 views of the engine's buffers
      (no copy), plus ``report_index`` (uint64) and ``scenario_index`` (uint32, into
      ``scenarios``) per row (and ``layer``, uint32, for a model run); for users without pandas.
    - ``report_html(path=None)``: the HTML report (docs/REPORTS.md), written to ``path`` or returned;
      Jupyter shows it inline (``_repr_html_``).
    """

    def __init__(self, core, kind: str = "run"):
        self._core = core
        self._kind = kind
        self._summary = None
        self._rows = None

    # ---- the summary -------------------------------------------------------------------------
    def summary_json(self) -> str:
        """The summary as JSON text: the bytes ``--summary`` writes (UTF-8)."""
        return self._core.summary_json()

    @property
    def summary(self) -> dict:
        """The summary as a dict (``json.loads(self.summary_json())``), computed once."""
        if self._summary is None:
            self._summary = _json.loads(self.summary_json())
        return self._summary

    @property
    def seconds(self) -> float:
        """The engine's wall time of the run, in seconds."""
        return self._core.seconds

    # ---- rows --------------------------------------------------------------------------------
    def _need_rows(self) -> None:
        if not self._core.has_rows:
            raise ValueError("this run kept no rows: run it with rows=True")

    @property
    def columns(self) -> list[str]:
        """The metric columns, in the order of ``--per-report x.csv`` (after report_id, scenario, tokens)."""
        self._need_rows()
        return list(self._core.column_names())

    @property
    def scenarios(self) -> list[str]:
        """The scenarios of the rows, in order of first appearance (``arrays["scenario_index"]``)."""
        self._need_rows()
        return list(self._core.scenarios())

    @property
    def arrays(self) -> dict:
        """Every metric column as a read-only float64 NumPy view (no copy), plus
        ``report_index`` and ``scenario_index`` per row; a decoder's ``headH_kv_head`` (int64)
        and ``headI_headJ_shared_kv`` (bool) columns as copies in their own dtypes."""
        self._need_rows()
        core = self._core
        out = {name: _typed(core.column(i), dt)
               for i, (name, dt) in enumerate(zip(core.column_names(), core.column_dtypes()))}
        out["report_index"] = core.report_of()
        out["scenario_index"] = core.scenario_of()
        if self._kind == "model":
            out["layer"] = core.layer_of()
        return out

    @property
    def rows(self):
        """A pandas.DataFrame with the columns and values of ``--per-report x.csv`` (tokens as
        lists of str), one row per (report, scenario); a model run's (ModelResult.rows) one row
        per (report, scenario, layer). Wide: one column per head and statistic; ``heads()`` and
        ``pairs()`` give the same numbers one row per head or pair. Built once; needs pandas
        (``arrays`` without)."""
        if self._rows is None:
            self._need_rows()
            try:
                import pandas as pd
            except ImportError as e:  # pragma: no cover - depends on the environment
                raise ImportError("Result.rows needs pandas (pip install 'headsep[pandas]'); "
                                  "Result.arrays gives the columns as NumPy arrays") from e
            import numpy as np

            core = self._core
            report = np.asarray(core.report_of()).astype(np.intp)
            ids = np.empty(len(core.report_ids()), dtype=object)
            ids[:] = core.report_ids()
            tokens = np.empty(len(ids), dtype=object)
            tokens[:] = core.report_tokens()
            scen = np.empty(len(core.scenarios()), dtype=object)
            scen[:] = core.scenarios()
            data = {"report_id": ids[report], "scenario": scen[np.asarray(core.scenario_of()).astype(np.intp)]}
            if self._kind == "model":  # --per-report's model columns: layer, n_tokens, tokens, token_ids
                token_ids = np.empty(len(ids), dtype=object)
                token_ids[:] = core.report_token_ids()
                data["layer"] = np.asarray(core.layer_of()).astype(np.int64)
                data["n_tokens"] = np.fromiter((len(t) for t in tokens), np.int64, len(tokens))[report]
                data["tokens"] = tokens[report]
                data["token_ids"] = token_ids[report]
            else:
                data["tokens"] = tokens[report]
            for i, (name, dt) in enumerate(zip(core.column_names(), core.column_dtypes())):
                data[name] = np.array(core.column(i), dtype=dt)
            self._rows = pd.DataFrame(data)
        return self._rows

    # ---- tidy tables ---------------------------------------------------------------------------
    def heads(self, *, baseline: bool = False, output: str = "auto"):
        """One row per (report, scenario, layer, head) -- ``layer`` and ``kv_head`` only for model
        runs -- with the head's ``entropy``, ``confidence``, ``self_weight``, ``prev_weight``,
        ``first_weight`` (attention schemes and models), ``context_AXIS`` and ``difference_AXIS``
        per axis (context minus the single-head baseline's), ``separation`` (mean context distance
        to the layer's other heads) and ``js_mean`` (mean Jensen-Shannon divergence to them):
        the numbers of ``rows``, regrouped, and those the summary averages.

            res.heads().query("layer == 3").groupby("head").entropy.mean()

        ``baseline=True`` adds the single-head baseline as head 0 (difference, separation and
        js_mean NaN, kv_head -1). ``output``: "auto" (a pandas.DataFrame when pandas can be
        imported, else a NumPy structured array), "pandas" or "numpy". Needs ``rows=True``."""
        self._need_rows()
        return _tables.heads_table(self._core, self._kind == "model", baseline, output)

    def pairs(self, *, output: str = "auto"):
        """One row per (report, scenario, layer, head_i, head_j), i < j, with the pair's
        ``context_distance`` and, for attention schemes and models, ``js_divergence``,
        ``position_overlap``, ``subspace_cosine``, ``output_cosine``, ``output_distance``
        (docs/METRICS.md); a model run's also ``shared_kv`` (both heads read one key/value head).
        ``output`` as for ``heads()``. Needs ``rows=True``."""
        self._need_rows()
        return _tables.pairs_table(self._core, self._kind == "model", output)

    def head_summary(self, *, baseline: bool = False, output: str = "auto"):
        """The summary per (scenario[, layer], head) as a table. A model run: the means over
        reports of every head statistic, context and difference per axis, ``separation``,
        ``js_mean``, and the ``entropy_pNN`` / ``separation_pNN`` quantiles over reports. Other
        runs: per head and axis the difference's mean (``difference_AXIS``), ``_std``, ``_min``,
        ``_max`` and quantiles (and the head statistics' for attention schemes)."""
        return _tables.head_summary(self.summary, self._kind, baseline, output)

    def pair_summary(self, *, output: str = "auto"):
        """The summary per (scenario[, layer], head_i, head_j): the pair statistics' means (a model
        run also ``context_distance``); empty when the run has none (not an attention scheme)."""
        return _tables.pair_summary(self.summary, self._kind, output)

    def layer_summary(self, *, output: str = "auto"):
        """The summary per (scenario, layer) of a model run: reports, tokens, ``separation`` (the
        layer's mean pairwise context distance) and the baseline's head statistics; for other runs
        one row per scenario with head_separation's mean, std, min, max and quantiles."""
        return _tables.layer_summary(self.summary, self._kind, output)

    # ---- the report --------------------------------------------------------------------------
    def report_html(self, path=None):
        """The run's HTML report: written to ``path`` (atomically; returns None), or returned as str."""
        if path is None:
            return self._core.report_html("")
        self._core.report_html(_os.fspath(path))
        return None

    def _repr_html_(self):
        # The report is a whole document with its own styles: an iframe keeps them apart from the
        # notebook's. A run without its report (report=False): Jupyter falls back to repr().
        # Within 1 MB (docs/REPORTS.md): the static SVG maps are left out (the head view holds the
        # same weights; report_html(path) writes them), and the single-quoted srcdoc escapes only
        # '&' and "'" (html.escape's '&quot;' for every SVG attribute grew the page by 60 %).
        try:
            doc = self._core.report_html("", static_maps=False)
        except ValueError:
            return None
        return ("<iframe style=\"width:100%;height:720px;border:0\" srcdoc='"
                + doc.replace("&", "&amp;").replace("'", "&#39;") + "'></iframe>")

    def __repr__(self) -> str:
        c = self._core
        heads = f"{c.heads} head{'s' if c.heads != 1 else ''}"
        axes = f"{len(c.axes)} ax{'es' if len(c.axes) != 1 else 'is'}"
        if self._kind == "model":
            what = (f"{c.model}: {c.reports:,} reports, {c.tokens:,} tokens; {c.layers} layers x {heads}; {axes}; "
                    f"rows per (report, scenario, layer)")
        else:
            what = f"{c.reports:,} reports, {c.groups:,} (report, scenario) rows; {heads}; {axes}"
        return (f"<headsep.{type(self).__name__} {what}; {self.seconds:.3f} s on {c.threads} "
                f"thread{'s' if c.threads != 1 else ''}, {c.simd}>")


class KeptMaps:
    """The accessors of the attention maps a run kept (``maps=``): ``_kept()`` gives the
    extension's dict, or None when the run kept none."""

    def _kept(self):
        raise NotImplementedError

    def _get(self, key):
        m = self._kept()
        return None if m is None else m[key]

    @property
    def maps(self):
        return self._get("maps")

    @property
    def single_maps(self):
        return self._get("single")

    @property
    def map_reports(self):
        return self._get("reports")


class ModelResult(KeptMaps, Result):
    """A headsep.Result of ``headsep.model(path).run``: rows per (report, scenario, layer) as
    ``--per-report`` writes them, and the attention maps asked for by ``maps=`` (as ``--attention``):

    - ``maps``: a list, one ``[layers, heads, n, n]`` float32 array per kept report (reports
      differ in length), layers as ``map_layers``, heads 1..H, query-major as torch's
      ``output_attentions``;
    - ``single_maps``: the single-head baseline's maps, one ``[layers, n, n]`` array per report;
    - ``map_reports``: the kept reports' indices (run order); ``map_layers``: the kept layers.
    None of them without ``maps=``. ``kv_head_of``: a decoder's key/value head per query head.
    """

    def __init__(self, core):
        super().__init__(core, kind="model")

    def _kept(self):
        return self._core.maps

    @property
    def rows(self):
        """A pandas.DataFrame, ``--per-report x.csv`` of the model run: one row per (report, scenario, layer),
        report_id, scenario, layer, n_tokens, tokens, token_ids, then per head its contexts,
        differences and statistics and per pair its statistics (docs/MODEL.md). ``heads()`` and
        ``pairs()`` give the same numbers one row per (report, scenario, layer, head) or pair."""
        return Result.rows.fget(self)

    @property
    def map_layers(self):
        return self._get("layers")

    @property
    def kv_head_of(self):
        """A decoder's key/value head per query head, a list: ``maps[r][l, h - 1]`` (head h) reads
        key/value head ``kv_head_of[h - 1]`` (the summary's ``kv_head_of``, the maps file's field);
        None for BERT, whose heads each have their own."""
        return self.summary.get("kv_head_of")
