"""headsep: how far apart do attention heads keep relations? The C++ engine from Python.

A model's heads on your texts (BERT, GPT-2, Llama family; a Hugging Face folder)::

    import headsep
    m = headsep.model("all-minilm-l6-v2")   # loads the weights once; m.info, m.tokenize(texts)
    res = m.run(["stop the pump", "restart after the check"])
    res.heads()                             # one row per (report, scenario, layer, head): entropy, ...
    res.heads().query("layer == 3").groupby("head").entropy.mean()
    res.pairs(), res.head_summary(), res.layer_summary(), res.summary, res.report_html("r.html")

Synthetic reports through a weighting scheme (``headsep run``), arrays from torch/NumPy::

    res = headsep.run("ops-reports", "axis-focus", {"reports": 100_000})
    res.rows                                # pandas.DataFrame: the rows of `--per-report x.csv`
    headsep.attention(x, weights=mha)       # an nn.MultiheadAttention on your embeddings
    headsep.plugins()                       # what `headsep plugins` lists

Entry points: model() / Model, run(), attention(), plugins(); results: Result, ModelResult,
AttentionResult; plugins in Python: ScenarioGenerator, WeightingScheme. Errors: Error (bad
data, plugin failures), UsageError (bad arguments; a ValueError). help(headsep.Model.run),
help(headsep.Result.heads) for each; docs/PYTHON.md for the whole API, the GIL and interrupts.
"""
from __future__ import annotations

import json as _json
import numbers as _numbers
import os as _os
import re as _re
import warnings as _warnings

from . import _headsep
from ._headsep import Error, UsageError, __version__
from ._result import ModelResult, Result
from .python_plugins import AttentionSpec, Batch, Chunk, Param, ScenarioGenerator, Schema, WeightingScheme  # plugins in Python

# The wheel carries the built-in plugins in headsep/plugins beside the extension (the build tree
# links its plugin folder there; an editable install keeps the extension and the plugins in
# site-packages while this file stays in the source tree): found without environment variables,
# after plugin_dirs= and HEADSEP_PLUGIN_PATH.
_headsep._set_plugin_dir(_os.path.join(_os.path.dirname(_os.path.abspath(_headsep.__file__)), "plugins"))

__all__ = ["Error", "UsageError", "Result", "ModelResult", "Model", "run", "model", "plugins", "__version__"]
__all__ += ["ScenarioGenerator", "WeightingScheme", "Chunk", "Batch", "Schema", "Param", "AttentionSpec"]


def _dirs(plugin_dirs) -> list[str]:
    if plugin_dirs is None:
        return []
    if isinstance(plugin_dirs, (str, bytes, _os.PathLike)):
        plugin_dirs = [plugin_dirs]
    return [_os.fsdecode(d) for d in plugin_dirs]


def plugins(*, plugin_dirs=None) -> list[dict]:
    """The plugins `headsep plugins` lists, scenario generators first, as dicts.

    Each dict: ``name``, ``kind`` ("scenario" or "weighting"), ``version``, ``description``,
    ``file``, ``abi`` and ``parameters`` -- a list of dicts with ``name``, ``type`` ("string",
    "int", "float", "bool", as `headsep plugins NAME` prints), ``default`` (in that type; None when
    required), ``required`` and ``help``. Folders searched: ``plugin_dirs`` (a path or a list),
    then HEADSEP_PLUGIN_PATH, then the package's own plugins. A file that fails to load is a
    warning, as in the CLI.
    """
    found, failures = _headsep._plugins(_dirs(plugin_dirs))
    for why in failures:
        _warnings.warn(f"headsep: skipped {why}", RuntimeWarning, stacklevel=2)
    return found


def _param_text(key: str, value) -> str:
    # The CLI's -p text of a value: booleans true/false, numbers as Python prints them
    # (repr: shortest round trip), sequences comma-separated.
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (int, float, str)):
        return str(value) if not isinstance(value, float) else repr(value)
    if isinstance(value, _os.PathLike):
        return _os.fspath(value)
    if isinstance(value, (list, tuple)):
        return ",".join(_param_text(key, v) for v in value)
    raise TypeError(f"params[{key!r}]: expected str, int, float, bool or a list of them, "
                    f"got {type(value).__name__}")


def _params(params) -> list[str]:
    if params is None:
        return []
    if not isinstance(params, dict):
        raise TypeError(f"params: expected a dict such as {{'reports': 1000}}, got {type(params).__name__}")
    out = []
    for key, value in params.items():
        if not isinstance(key, str):
            raise TypeError(f"params: keys are parameter names ([plugin.]key), got {key!r}")
        out.append(f"{key}={_param_text(key, value)}")
    return out


def _axes(axes) -> str:
    # A spec string as --axes takes it, or {name: expression}.
    if axes is None:
        return ""
    if isinstance(axes, str):
        return axes
    if isinstance(axes, dict):
        return ";".join(f"{k}={v}" for k, v in axes.items())
    raise TypeError(f"axes: expected a spec such as 'd=decision_axis;e=evidence_axis' or a dict, "
                    f"got {type(axes).__name__}")


_U32 = 2**32 - 1
_U64 = 2**64 - 1


def _count(name: str, value, minimum: int = 0, maximum: int = _U64) -> int:
    """An int argument checked against the C++ type it becomes (ValueError naming the argument:
    never nanobind's "incompatible function arguments"); None = 0, the C++ side's default."""
    if value is None:
        return 0
    if isinstance(value, bool) or not isinstance(value, _numbers.Integral):
        raise TypeError(f"{name}: expected an int, got {type(value).__name__}")
    value = int(value)
    if value < minimum:
        raise ValueError(f"{name}: must be >= {minimum}, got {value}")
    if value > maximum:
        raise ValueError(f"{name}: must be <= {maximum}, got {value}")
    return value


def _threads(value) -> int:
    # A worker-thread count: oneTBB takes an int; more threads than this are no use to anyone.
    return _count("threads", value, 0, 65536)


def _progress(value) -> bool:
    """progress=None: on when standard error is a terminal or the code runs in a notebook (Jupyter,
    IPython's kernel), off otherwise (scripts, pipes, CI logs)."""
    if value is not None:
        if not isinstance(value, (bool, int)):
            raise TypeError(f"progress: expected True, False or None, got {type(value).__name__}")
        return bool(value)
    import sys

    err = sys.stderr
    try:
        if err is not None and err.isatty():
            return True
    except (AttributeError, ValueError):
        pass
    return "ipykernel" in sys.modules and type(err).__module__.startswith("ipykernel")


def _name_or_plugin(what: str, value):
    if value is None or isinstance(value, str):
        return value
    if isinstance(value, (bytes, int, float, dict, list, tuple)):
        raise TypeError(f"{what}: expected a plugin name (str) or a Python plugin object, got {type(value).__name__}")
    return value


def _call_text(name: str, args: list, kwargs: dict) -> str:
    parts = [repr(a) for a in args] + [f"{k}={v!r}" for k, v in kwargs.items() if v is not None]
    return f"headsep.{name}({', '.join(parts)})"


def run(scenario, weighting=None, params=None, *, axes=None, input=None, threads=None, simd=None,
        precision="f64", chunk=None, top=None, bins=None, rows=True, progress=None, reports=None,
        plugin_dirs=None, report=True) -> Result:
    """Run a report set through a weighting scheme: the job of ``headsep run``.

    Parameters
    ----------
    scenario : str or headsep.ScenarioGenerator or None
        Scenario generator plugin name (``headsep.plugins()``), or a Python plugin object.
        None with ``input=``.
    weighting : str or headsep.WeightingScheme or None
        Weighting scheme plugin name, or a Python plugin object. None: ``table`` when the data
        carries weights (the seed's CSV).
    params : dict, optional
        Plugin parameters, ``{"reports": 100000, "axis-focus.sharpness": 2}`` (``-p key=value``).
    axes : str or dict, optional
        Context axes, ``"d=decision_axis;ec=evidence_axis+condition_axis"`` or ``{"d": "decision_axis"}``
        (default: the seed's two axes).
    input : str or os.PathLike, optional
        A CSV in the seed schema: ``scenario="csv", params={"path": input}``, weighting ``table``.
    threads : int, optional
        Worker threads (default: all cores). Results do not depend on it.
    simd : str, optional
        "scalar", "sse2", "avx2" or "avx512" (default: the best, or $HEADSEP_SIMD).
    precision : str
        "f64" (the seed's arithmetic) or "f32".
    chunk : int, optional
        Reports per batch (default 8192; attention schemes by the embedding width).
    top, bins : int, optional
        The summary's top reports per scenario (default 10) and histogram bins (default 20).
    rows : bool
        Keep every (report, scenario) row for ``Result.rows`` / ``Result.arrays`` (memory grows
        with the reports; False keeps only the summary and the report).
    progress : bool or None
        The CLI's progress bar (reports done, rate, ETA) on ``sys.stderr``, drawn once a run has
        taken a second. None (default): on in a terminal or a notebook, off otherwise.
    report : bool
        Keep what ``Result.report_html()`` needs (the report's sink, as ``--report-html``);
        False saves its time when no report is wanted.
    reports : list of str, optional
        Report ids to analyse (``--report``); default all.
    plugin_dirs : path or list of paths, optional
        Folders searched for plugins first (``--plugin-dir``).

    Returns
    -------
    headsep.Result

    Raises
    ------
    headsep.Error
        Bad input data or a plugin failure (the CLI's message).
    headsep.UsageError (a ValueError)
        A bad argument: unknown plugin parameter, bad axes, bad precision.
    TypeError
        An argument of the wrong type.
    KeyboardInterrupt
        Ctrl-C: the run stops within a second; nothing is kept.

    The GIL is released for the whole run; the engine's threads never hold it.
    """
    scenario = _name_or_plugin("scenario", scenario)
    weighting = _name_or_plugin("weighting", weighting)
    if input is not None and not isinstance(input, (str, _os.PathLike)):
        raise TypeError(f"input: expected a path, got {type(input).__name__}")
    if not isinstance(precision, str):
        raise TypeError(f"precision: expected 'f64' or 'f32', got {type(precision).__name__}")
    if simd is not None and not isinstance(simd, str):
        raise TypeError(f"simd: expected a level name, got {type(simd).__name__}")
    if reports is not None and (isinstance(reports, str) or not all(isinstance(r, str) for r in reports)):
        raise TypeError("reports: expected a list of report ids (str)")
    top_ = 10 if top is None else _count("top", top)
    bins_ = 20 if bins is None else _count("bins", bins, 1, _U32)
    command = _call_text("run", [a for a in (scenario, weighting) if isinstance(a, str)],
                         {"params": params, "axes": axes, "input": input})
    core = _headsep._run(scenario, weighting, _params(params), _axes(axes),
                         "" if input is None else _os.fspath(input), list(reports or []), _dirs(plugin_dirs),
                         _threads(threads), simd or "", precision, _count("chunk", chunk, 1),
                         top_, bins_, bool(rows), bool(report), _progress(progress), command)
    return Result(core)


class Model:
    """A model folder loaded once: ``m = headsep.model(path)``, then ``m.run(texts)`` as often as
    you like (the weights and the tokenizer are reused, not read again), from several threads at
    once if you wish. A Hugging Face folder (config.json, safetensors weights, tokenizer.json or
    vocab.txt): a BERT encoder, GPT-2, or a Llama-family decoder (docs/MODEL.md).

        m = headsep.model("all-minilm-l6-v2")
        m                                    # family, layers x heads, key/value heads, dtype, tokenizer
        m.tokenize(["stop the pump"])        # [{'ids': [...], 'tokens': ['[CLS]', 'stop', ...], ...}]
        res = m.run(texts)                   # a headsep.ModelResult
        res.heads().query("layer == 3").groupby("head").entropy.mean()
    """

    def __init__(self, path, dtype="auto"):
        if not isinstance(path, (str, _os.PathLike)):
            raise TypeError(f"model: expected a folder path, got {type(path).__name__}")
        if dtype not in ("auto", "f32", "bf16"):
            raise ValueError(f"model: dtype must be 'auto', 'f32' or 'bf16', got {dtype!r}")
        self.path = _os.fspath(path)
        self.dtype = dtype
        self._core = _headsep._load_model(self.path, dtype)
        self._info = None

    @property
    def info(self) -> dict:
        """What the folder holds: ``name``, ``path``, ``family`` (config.json's model_type),
        ``layers``, ``heads``, ``kv_heads``, ``head_dim``, ``hidden``, ``vocab_size``,
        ``max_positions``, ``causal``, ``sliding_window``, ``dtype`` (the weights' stored element
        types, e.g. "F32" or "BF16"; ``compute_dtype``: the dtype the products' weights are held in,
        "f32", "bf16" or "f16", activations and sums always f32), ``tokenizer``
        ("wordpiece", "bpe-byte-level", "bpe-byte-fallback", "unigram"), ``max_tokens`` (texts are cut there)
        and ``max_tokens_from`` (which file said so)."""
        if self._info is None:
            self._info = self._core.info()
        return dict(self._info)

    @property
    def config(self) -> dict:
        """The folder's config.json as a dict (as transformers' ``model.config``, read anew)."""
        with open(_os.path.join(self.path, "config.json"), encoding="utf-8") as f:
            return _json.load(f)

    def __repr__(self) -> str:
        i = self.info
        kv = f", {i['kv_heads']} key/value heads" if i["kv_heads"] != i["heads"] else ""
        return (f"<headsep.Model {i['name']!r} ({i['family']}): {i['layers']} layers x {i['heads']} heads{kv}, "
                f"hidden {i['hidden']}, {i['dtype']} weights, {i['tokenizer']} tokenizer, "
                f"max {i['max_tokens']} tokens; {self.path}>")

    def tokenize(self, texts, *, max_tokens=None):
        """Token ids and tokens of texts, with the model's own tokenizer exactly as ``run`` uses it
        (``headsep tokenize --model DIR``): per text a dict ``{"ids": [...], "tokens": [...],
        "truncated": bool}``; a single str gives one dict. ``max_tokens``: the truncation length
        (special tokens included; default: the folder's, ``info["max_tokens"]``)."""
        one = isinstance(texts, str)
        items = [texts] if one else list(texts)
        for i, t in enumerate(items):
            if not isinstance(t, str):
                raise TypeError(f"texts[{i}]: expected a str, got {type(t).__name__}")
        n = _count("max_tokens", max_tokens, 0, _U32)
        if n == 1:
            raise ValueError("max_tokens: must be 0 (the folder's) or >= 2, got 1")
        out = self._core.tokenize(items, n)
        return out[0] if one else out

    def run(self, texts, *, lexicon=None, axes=None, threads=None, maps=None, map_layers=None, rows=True,
            report=True, top=None, chunk=None, plugin_dirs=None, progress=None, semantic_axes=None,
            direction_axes=None, token_axes=None) -> ModelResult:
        """Every (layer, head) of the model measured on text reports: ``headsep run --model``.

        Parameters
        ----------
        texts : sequence of str, dict or sequence of tuples
            The reports: texts (ids "0", "1", ...), ``{report_id: text}``, or tuples
            ``(report_id, text)`` / ``(report_id, text, scenario)``.
        lexicon : path, optional
            CSV ``word,AXIS1,...`` giving words' context-axis values (default: the built-in
            ops lexicon). A lexicon of other axes needs ``axes=`` naming them (the error says which).
        axes : str or dict, optional
            Context axes from the lexicon's columns (default, when no axis source is given: the
            lexicon's three relations with ``lexicon=``, else the token classes).
        semantic_axes : path or dict, optional
            Semantic axes from pole words, ``{"certainty": {"plus": [...], "minus": [...]}}`` or a
            JSON file of that form (``--semantic-axes``; docs/METRICS.md).
        direction_axes : path or dict, optional
            Direction axes: a safetensors file, or ``{name: array}`` of NumPy arrays / torch
            tensors, each [hidden] or [layers, hidden] (``--direction-axes``).
        token_axes : bool, str or sequence of str, optional
            Token-class axes: True for all (position, punctuation, word_start), or their names.
        threads : int, optional
            Worker threads (default: all cores). Results do not depend on it.
        maps : bool or sequence of int, optional
            True: keep every report's attention maps (``Result.maps``, as ``--attention
            --attention-reports all``); a sequence: those reports (indices into ``texts``).
            With ``report=True`` they are also whole in the report's head view.
        map_layers : sequence of int, optional
            The layers whose maps are kept (default: all).
        rows : bool
            Keep one row per (report, scenario, layer): ``Result.rows`` / ``Result.arrays`` (the
            columns of ``--per-report x.csv``) and the tidy ``Result.heads()`` / ``pairs()``.
        report : bool
            Keep what ``Result.report_html()`` needs (the top reports' maps), as the CLI's report.
        top, chunk : int, optional
            Reports ranked per scenario (default 10); reports per batch (default 128).
        progress : bool or None
            The CLI's progress bar on ``sys.stderr`` (None: on in a terminal or a notebook).

        Returns a headsep.ModelResult: ``summary`` (the ``--summary`` JSON of a model run),
        ``rows``, ``arrays``, ``heads()``, ``pairs()``, ``head_summary()``, ``layer_summary()``,
        ``maps``, ``report_html()``. The texts reach the engine through an in-memory file (memfd):
        nothing is written to disk; errors in them are named ``texts[KEY]``.
        """
        records, keys = _text_records(texts)
        sel = _map_selection(maps)
        bad = [] if isinstance(sel, bool) else [i for i in sel if not 0 <= i < len(records)]
        if bad:
            raise ValueError(f"maps: report index {bad[0]} is out of range ({len(records)} reports)")
        layers = [] if map_layers is None else _int_list(map_layers, "map_layers")
        bad = [x for x in layers if not 0 <= x < self.info["layers"]]
        if bad:
            raise ValueError(f"map_layers: layer {bad[0]} is out of range (the model has {self.info['layers']} layers)")
        params = ["text.format=jsonl"]
        if lexicon is not None:
            if not isinstance(lexicon, (str, _os.PathLike)):
                raise TypeError(f"lexicon: expected a path to a CSV word,AXIS1,..., got {type(lexicon).__name__}")
            params.append(f"text.lexicon={_os.fspath(lexicon)}")
        fd = _os.memfd_create("headsep-texts")
        try:
            with _os.fdopen(_os.dup(fd), "w", encoding="utf-8") as f:
                for rec in records:
                    f.write(_json.dumps(rec, ensure_ascii=False))
                    f.write("\n")
            params.insert(0, f"text.path=/proc/self/fd/{fd}")
            n = len(records)
            command = f"headsep.model({self.path!r}).run({n} text{'s' if n != 1 else ''})"
            try:
                core = _headsep._model_run(self._core, "text", params, _axes(axes), _dirs(plugin_dirs),
                                           _threads(threads), _count("chunk", chunk, 1),
                                           10 if top is None else _count("top", top), bool(rows), bool(report),
                                           sel, layers, command, n, _progress(progress),
                                           **_model_axes(semantic_axes, direction_axes, token_axes))
            except Error as e:
                raise _located(e, fd, keys, records) from None
        finally:
            _os.close(fd)
        result = ModelResult(core)
        _warn_axis_coverage(result.summary)
        return result


def _model_axes(semantic_axes, direction_axes, token_axes) -> dict:
    # The semantic, direction and token-class axes as _model_run takes them (docs/METRICS.md).
    out = {}
    if isinstance(semantic_axes, dict):
        out["semantic_json"] = _json.dumps(semantic_axes, ensure_ascii=False)
    elif semantic_axes is not None:
        out["semantic_path"] = _os.fspath(semantic_axes)
    if isinstance(direction_axes, dict):
        import numpy as np
        names, arrays = [], []
        for name, v in direction_axes.items():
            if hasattr(v, "detach"):  # a torch tensor
                v = v.detach().cpu().float().numpy()
            names.append(str(name))
            arrays.append(np.ascontiguousarray(np.asarray(v, dtype=np.float32)))
        out["direction_names"], out["directions"] = names, arrays
    elif direction_axes is not None:
        out["direction_path"] = _os.fspath(direction_axes)
    if token_axes is True:
        out["token_axes"] = "all"
    elif isinstance(token_axes, str):
        out["token_axes"] = token_axes
    elif token_axes not in (None, False):
        out["token_axes"] = ",".join(token_axes)
    return out


def _warn_axis_coverage(summary):
    # No silent zeros: as the CLI's warning line when over half of the tokens are 0 on every axis.
    tokens = sum(sc["tokens"] for sc in summary["scenarios"])
    without = sum(sc.get("tokens_without_axis_value", 0) for sc in summary["scenarios"])
    if tokens and 2 * without > tokens:
        import warnings
        warnings.warn(f"{100 * without / tokens:.0f} % of the tokens ({without} of {tokens}) are 0 on every axis, so "
                      "most contexts and separations are 0: pass token_axes=True, semantic_axes= or direction_axes= "
                      "(docs/METRICS.md)", stacklevel=3)


def _located(e: Exception, fd: int, keys: list, records: list[dict]) -> Exception:
    """The error with the texts' in-memory file (/proc/self/fd/N:LINE) named as the caller knows
    it: texts[KEY] (report 'ID'); line LINE of that file is records[LINE - 1]."""
    path = _re.escape(f"/proc/self/fd/{fd}")

    def where(m) -> str:
        if m.group(1) is None:
            return "texts"
        i = int(m.group(1)) - 1
        if not 0 <= i < len(records):
            return "texts"
        return f"texts[{keys[i]!r}] (report {records[i]['report_id']!r})"

    msg = _re.sub(path + r"(?::(\d+))?", where, str(e))
    return type(e)(msg)


def _text_records(texts) -> tuple[list[dict], list]:
    """(JSON-lines records for the text generator, the caller's key of each: index or dict key)."""
    if isinstance(texts, str):
        raise TypeError("texts: expected a sequence of texts (a single str is one text: pass [text])")
    items = texts.items() if isinstance(texts, dict) else enumerate(texts)
    out, keys = [], []
    for key, value in items:
        if isinstance(value, str):
            rec = {"report_id": str(key), "text": value}
        elif isinstance(value, tuple) and len(value) in (2, 3) and all(isinstance(v, str) for v in value):
            rec = {"report_id": value[0], "text": value[1]}
            if len(value) == 3:
                if not value[2]:
                    raise ValueError(f"texts[{key!r}]: the scenario (the tuple's third item) is empty")
                rec["scenario"] = value[2]
        else:
            raise TypeError(f"texts[{key!r}]: expected a str or a (report_id, text[, scenario]) tuple, "
                            f"got {type(value).__name__}")
        for field in ("report_id", "text", "scenario"):
            bad = _surrogate(rec.get(field, ""))
            if bad is not None:
                raise ValueError(f"texts[{key!r}]: the {field.replace('_', ' ')} is not valid Unicode "
                                 f"(a lone surrogate U+{ord(rec[field][bad]):04X} at character {bad})")
        if out and ("scenario" in rec) != ("scenario" in out[0]):
            raise ValueError(f"texts[{key!r}]: {'has' if 'scenario' in rec else 'has no'} scenario, but "
                             f"texts[{keys[0]!r}] {'has none' if 'scenario' in rec else 'has one'}: give every "
                             f"report a scenario (id, text, scenario) or none")
        out.append(rec)
        keys.append(key)
    if not out:
        raise ValueError("texts: no reports")
    return out, keys


def _surrogate(s: str):
    """The index of s's first lone surrogate (text UTF-8 cannot carry), or None."""
    try:
        s.encode("utf-8")
        return None
    except UnicodeEncodeError as e:
        return e.start


def model(path, dtype="auto") -> Model:
    """Loads a model folder (BERT, GPT-2, Llama family) once: ``m = headsep.model(path)``, then
    ``m.run(texts)``, ``m.tokenize(texts)``, ``m.info`` (headsep.Model). ``dtype``: how a
    model's weights are held and multiplied, as ``run --model --dtype``: "auto" (as stored: bf16
    and f16 stay so), "f32" or "bf16" (docs/MODEL.md)."""
    return Model(path, dtype)


# headsep.attention: arrays in (NumPy / torch), python/headsep/_attention.py.
from ._attention import AttentionResult, _int_list, _map_selection, attention  # noqa: E402

__all__ += ["attention", "AttentionResult"]
