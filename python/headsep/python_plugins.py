"""Plugins written in Python: subclass ScenarioGenerator or WeightingScheme and pass an instance
to headsep.run in place of a plugin name. The engine calls it through the same C ABI as a .so
plugin and applies the same checks (docs/PYTHON.md, "Plugins in Python").

    class Ramp(headsep.ScenarioGenerator):
        features = ("decision_axis", "evidence_axis", "condition_axis")
        random_access = True
        parameters = {"reports": 1000}

        def open(self, params):
            self.total_reports = params["reports"]

        def chunk(self, index, max_reports):
            first = index * max_reports
            n = min(max_reports, self.total_reports - first)
            if n <= 0:
                return None                      # no report left
            offsets = np.arange(n + 1) * 3       # three tokens per report
            x = np.linspace(0, 1, 3 * n)
            return headsep.Chunk(offsets, [x, 1 - x, x * x])

The helpers at the end (names starting with _) are what the extension calls.
"""
from __future__ import annotations

import dataclasses
import traceback
from typing import Any, Mapping, Optional, Sequence

import numpy as np

__all__ = ["Param", "Chunk", "Schema", "Batch", "AttentionSpec", "ScenarioGenerator", "WeightingScheme"]


class Param:
    """A declared parameter with a help text, or a required one: ``Param(type=int)``.

    ``parameters = {"reports": 100, "seed": Param(7, "random seed"), "path": Param(type=str)}``:
    a plain value is the default and gives the type (int, float, bool or str).
    """

    def __init__(self, default: Any = None, help: str = "", *, type: Optional[type] = None):
        if default is None and type is None:
            raise TypeError("Param: give a default or a type (a required parameter: Param(type=int))")
        self.default, self.help, self.type = default, help, type

    def __repr__(self) -> str:
        return f"Param({self.default!r}, {self.help!r}, type={self.type!r})"


@dataclasses.dataclass
class Chunk:
    """One chunk a ScenarioGenerator returns (a dict with these keys works too).

    offsets: n_reports + 1 integers, offsets[0] = 0, non-decreasing: report r owns tokens
        [offsets[r], offsets[r + 1]).
    features: one float array of n_tokens values per schema feature, as a 2-D array
        [n_features, n_tokens], a sequence of 1-D arrays, or a dict {feature name: array}.
    scenarios: the chunk's scenario names (names_scenarios generators), in order.
    report_ids, token_names: str (or UTF-8 bytes), all of them or None.
    embeddings: [n_tokens, d_model] floats (float32 kept), when the schema has d_model.
    given_weights: [n_scenarios, given_heads + 1, n_tokens] when the schema has given_heads.
    """

    offsets: Any
    features: Any
    scenarios: Sequence[str] = ()
    report_ids: Optional[Sequence[str]] = None
    token_names: Optional[Sequence[str]] = None
    embeddings: Any = None
    given_weights: Any = None
    source_rows: int = 0
    rows_read: int = 0


_MATRICES = ("w_q", "b_q", "w_k", "b_k", "w_v", "b_v", "w_o", "b_o", "s_w_q", "s_b_q", "s_w_k", "s_b_k", "s_w_v", "s_b_v")


@dataclasses.dataclass
class AttentionSpec:
    """A QKV attention scheme the host runs (plugin.h's headsep_attention_spec, docs/ATTENTION.md).

    X is the chunk's embeddings (input="embeddings", d_model wide) or its feature columns
    (input="features", d_model = n_features). Projections come from weights_path (a safetensors
    file, docs/SAFETENSORS.md), else from the matrices (float32, nn.Linear layout [out][in]: w_q and
    w_k [heads*d_k, d_model], w_v [heads*d_v, d_model], biases [out]; w_o [d_model, heads*d_v];
    s_* the single-head baseline's, [d_model, d_model]), else from `seed` (the host's seeded
    initialisation). d_v = 0: d_k. query: "all", "first", "last" or a token index; causal: query q
    sees keys 0..q.
    """

    d_model: int
    d_k: int = 0
    d_v: int = 0
    input: str = "embeddings"
    query: Any = "all"
    causal: bool = False
    seed: int = 1
    weights_path: Optional[str] = None
    baseline_path: Optional[str] = None
    w_q: Any = None
    b_q: Any = None
    w_k: Any = None
    b_k: Any = None
    w_v: Any = None
    b_v: Any = None
    w_o: Any = None
    b_o: Any = None
    s_w_q: Any = None
    s_b_q: Any = None
    s_w_k: Any = None
    s_b_k: Any = None
    s_w_v: Any = None
    s_b_v: Any = None


class Schema:
    """The data a WeightingScheme is opened for: the generator's schema."""

    __slots__ = ("features", "scenarios", "given_heads", "names_scenarios", "d_model")

    def __init__(self, features, scenarios, given_heads, names_scenarios, d_model):
        self.features, self.scenarios = tuple(features), tuple(scenarios)
        self.given_heads, self.names_scenarios, self.d_model = given_heads, names_scenarios, d_model

    def feature_index(self, name: str) -> int:
        try:
            return self.features.index(name)
        except ValueError:
            raise KeyError(f"feature column '{name}' not in the data (available: {', '.join(self.features)})") from None

    def __repr__(self) -> str:
        return (f"Schema(features={self.features}, scenarios={self.scenarios}, given_heads={self.given_heads}, "
                f"names_scenarios={self.names_scenarios}, d_model={self.d_model})")


class Batch:
    """A chunk of reports as a WeightingScheme sees it (NumPy copies: keep them if you like).

    first_report: global index of report 0; offsets: [n_reports + 1] int64; features:
    [n_features, n_tokens] float64 in schema order (feature(name) picks one); scenarios: the
    chunk's data-named scenarios (indices into the schema's scenario names); given_weights:
    [n_scenarios, given_heads + 1, n_tokens] or None; embeddings: [n_tokens, d_model] float32 or None.
    """

    __slots__ = ("first_report", "offsets", "features", "feature_names", "scenarios", "given_weights", "embeddings")

    def __init__(self, first_report, offsets, features, feature_names, scenarios, given_weights, embeddings):
        self.first_report, self.offsets, self.features = first_report, offsets, features
        self.feature_names, self.scenarios = feature_names, scenarios
        self.given_weights, self.embeddings = given_weights, embeddings

    @property
    def n_reports(self) -> int:
        return len(self.offsets) - 1

    @property
    def n_tokens(self) -> int:
        return int(self.offsets[-1])

    @property
    def lengths(self) -> np.ndarray:
        """Tokens per report."""
        return np.diff(self.offsets)

    def feature(self, name: str) -> np.ndarray:
        try:
            return self.features[self.feature_names.index(name)]
        except ValueError:
            raise KeyError(f"feature column '{name}' not in the data (available: {', '.join(self.feature_names)})") from None


class _Plugin:
    name: Optional[str] = None  # [a-z0-9_-]{1,64}; None: the class name in kebab-case (MyGen -> my-gen)
    version: str = "1.0.0"
    description: Optional[str] = None  # None: the first line of the class docstring
    parameters: Mapping[str, Any] = {}

    def close(self) -> None:
        """Called once when the run ends (also after a failure)."""


class ScenarioGenerator(_Plugin):
    """Base class of a scenario generator written in Python (see the module's docstring).

    The schema is read from the instance after open(): ``features`` (names of the feature
    columns), ``scenarios`` (known up front; a random-access generator lists every one),
    ``given_heads`` (N when chunks carry single + N head weights), ``names_scenarios``,
    ``random_access`` (chunk(i, max) gives exactly reports [i*max, ...) and may be called in any
    order), ``total_reports`` (0 = unknown) and ``d_model`` (embedding width, 0 = none).
    """

    features: Sequence[str] = ()
    scenarios: Sequence[str] = ()
    given_heads: int = 0
    names_scenarios: bool = False
    random_access: bool = False
    total_reports: int = 0
    d_model: int = 0

    def open(self, params: dict) -> None:
        """Called once per run with every declared parameter (given or default), typed."""
        self.params = params

    def chunk(self, index: int, max_reports: int):
        """Returns chunk `index` (a Chunk or dict, at most max_reports reports), or None at the end."""
        raise NotImplementedError(f"{type(self).__qualname__}.chunk() is not implemented")


class WeightingScheme(_Plugin):
    """Base class of a weighting scheme written in Python.

    ``heads``: the number of heads (after open()); ``scenarios``: the scheme's own head designs
    (slot i = scenarios[i]); empty: the data's scenarios (or one named after the scheme).
    weights(batch, slot) returns [heads + 1, n_tokens] weights: row 0 the single-head baseline,
    rows 1..heads the heads; finite and >= 0 (the host checks).
    """

    heads: int = 2
    scenarios: Sequence[str] = ()

    def open(self, params: dict, schema: Schema) -> None:
        """Called once per run with the typed parameters and the generator's schema."""
        self.params, self.schema = params, schema

    def weights(self, batch: Batch, slot: int):
        raise NotImplementedError(f"{type(self).__qualname__}.weights() is not implemented")

    def attention(self):
        """An attention scheme instead of weights: None (weights() computes them), an
        AttentionSpec, or one per own scenario. Called once after open()."""
        return None


# ---- what the extension calls (python/src/python_plugin_calls.cpp) ---------------------------

def _first_doc_line(obj) -> str:
    doc = type(obj).__doc__ or ""
    for line in doc.strip().splitlines():
        if line.strip():
            return line.strip()
    return f"Python class {type(obj).__module__}.{type(obj).__qualname__}"


def _count(name: str, v, bits: int = 64) -> int:
    """A non-negative int that fits the C ABI's field (uint32 or uint64): a ValueError naming the
    attribute, never a C++ cast error, when it does not."""
    if isinstance(v, bool) or not isinstance(v, (int, np.integer)) or v < 0:
        raise TypeError(f"`{name}` must be a non-negative int, got {v!r}")
    if int(v) >= 2**bits:
        raise ValueError(f"`{name}` must be < 2**{bits}, got {int(v)}")
    return int(v)


def _names(name: str, v) -> list:
    if isinstance(v, (str, bytes)) or not all(isinstance(s, str) for s in v):
        raise TypeError(f"`{name}` must be a sequence of str, got {v!r}")
    return list(v)


def _schema_of(gen: ScenarioGenerator) -> tuple:
    return (_names("features", gen.features), _names("scenarios", gen.scenarios), _count("given_heads", gen.given_heads, 32),
            bool(gen.names_scenarios), bool(gen.random_access), _count("total_reports", gen.total_reports),
            _count("d_model", gen.d_model, 32))


def _weighting_info(w: WeightingScheme) -> tuple:
    return _count("heads", w.heads, 32), _names("scenarios", w.scenarios)


def _matrix(spec: AttentionSpec, field: str, heads: int):
    """A float32 copy of one projection, its shape checked (the C ABI carries no sizes)."""
    v = getattr(spec, field)
    if v is None:
        return None
    d, dk, dv = spec.d_model, spec.d_k, spec.d_v or spec.d_k
    want = {"w_q": (heads * dk, d), "b_q": (heads * dk,), "w_k": (heads * dk, d), "b_k": (heads * dk,),
            "w_v": (heads * dv, d), "b_v": (heads * dv,), "w_o": (d, heads * dv), "b_o": (d,)}.get(
        field, (d, d) if field.startswith("s_w") else (d,))
    a = np.array(v, dtype=np.float32, order="C", copy=True)
    if a.shape != want:
        raise ValueError(f"attention(): {field} has shape {a.shape}; expected {want} (heads = {heads}, d_model = {d}, "
                         f"d_k = {dk}, d_v = {dv})")
    return a


def _attention_specs(w: WeightingScheme, heads: int):
    """None, or per spec (input, d_model, d_k, d_v, query, query_index, mask, seed, weights_path,
    baseline_path, [the 14 matrices or None])."""
    specs = w.attention()
    if specs is None:
        return None
    if isinstance(specs, AttentionSpec):
        specs = [specs]
    out = []
    for sp in specs:
        if not isinstance(sp, AttentionSpec):
            raise TypeError(f"attention() must return None, a headsep.AttentionSpec or a list of them, got {type(sp).__qualname__}")
        inputs = {"embeddings": 0, "features": 1}
        if sp.input not in inputs:
            raise ValueError(f"attention(): input must be 'embeddings' or 'features', got {sp.input!r}")
        queries = {"all": 0, "first": 1, "last": 2}
        q, qi = (queries[sp.query], 0) if isinstance(sp.query, str) and sp.query in queries else (3, sp.query)
        if q == 3 and (isinstance(qi, bool) or not isinstance(qi, (int, np.integer))):
            raise ValueError(f"attention(): query must be 'all', 'first', 'last' or a token index, got {sp.query!r}")
        if not -2**31 <= int(qi) < 2**31:
            raise ValueError(f"attention(): query index {int(qi)} is out of range (a 32-bit int)")
        if sp.weights_path is None and sp.w_q is not None and (sp.w_k is None or sp.w_v is None):
            raise ValueError("attention(): w_q needs w_k and w_v")
        out.append((inputs[sp.input], _count("d_model", sp.d_model, 32), _count("d_k", sp.d_k, 32), _count("d_v", sp.d_v or sp.d_k, 32), q,
                    int(qi), 1 if sp.causal else 0, int(sp.seed) & (2**64 - 1),
                    None if sp.weights_path is None else str(sp.weights_path),
                    None if sp.baseline_path is None else str(sp.baseline_path),
                    [_matrix(sp, f, heads) for f in _MATRICES]))
    return out


def _bytes_list(what: str, v) -> list:
    if isinstance(v, (str, bytes)):
        raise TypeError(f"chunk(): `{what}` must be a sequence of str, not a single string")
    return [s if isinstance(s, bytes) else str(s).encode("utf-8") for s in v]


def _float_column(what: str, a) -> np.ndarray:
    a = np.asarray(a)
    if a.ndim != 1:
        raise ValueError(f"chunk(): {what} must be 1-D, got shape {a.shape}")
    if a.dtype.kind not in "fiub":
        raise TypeError(f"chunk(): {what} has dtype {a.dtype}, not numbers")
    return np.ascontiguousarray(a, dtype=np.float64)


def _chunk_parts(c, gen: ScenarioGenerator, d_model: int) -> tuple:
    """(offsets uint64, [feature columns or None], scenarios, report ids, token names,
    embeddings float32 2-D, [(slot, row, weights)], source_rows, rows_read)."""
    if isinstance(c, Mapping):
        c = Chunk(**c)
    elif not isinstance(c, Chunk):
        raise TypeError(f"chunk() must return a headsep.Chunk, a dict or None, got {type(c).__qualname__}")
    off = np.asarray(c.offsets)
    if off.ndim != 1 or off.dtype.kind not in "iu":
        raise TypeError(f"chunk(): offsets must be a 1-D array of integers, got dtype {off.dtype}, shape {off.shape}")
    if off.dtype.kind == "i" and off.size and off.min() < 0:
        i = int(np.flatnonzero(off < 0)[0])
        raise ValueError(f"chunk(): offsets[{i}] = {int(off[i])} is negative")
    off = np.ascontiguousarray(off, dtype=np.uint64)
    feats = c.features
    names = list(gen.features)
    if isinstance(feats, Mapping):
        unknown = [k for k in feats if k not in names]
        if unknown:
            raise KeyError(f"chunk(): feature '{unknown[0]}' is not in the schema's features ({', '.join(names)})")
        cols = [None if k not in feats else _float_column(f"feature '{k}'", feats[k]) for k in names]
    else:
        if isinstance(feats, np.ndarray) and feats.ndim != 2:
            raise ValueError(f"chunk(): features must be [n_features, n_tokens], got shape {feats.shape}")
        cols = [_float_column(f"feature {i} ('{names[i]}')" if i < len(names) else f"feature {i}", a)
                for i, a in enumerate(feats)]
    ids = None if c.report_ids is None else _bytes_list("report_ids", c.report_ids)
    toks = None if c.token_names is None else _bytes_list("token_names", c.token_names)
    emb = None
    if c.embeddings is not None:
        emb = np.ascontiguousarray(c.embeddings, dtype=np.float32)
        if emb.ndim != 2 or emb.shape[1] != d_model:
            raise ValueError(f"chunk(): embeddings of shape {emb.shape}; expected [n_tokens, d_model = {d_model}]")
    given = []
    if c.given_weights is not None:
        g = np.asarray(c.given_weights, dtype=np.float64)
        if g.ndim != 3:
            raise ValueError(f"chunk(): given_weights of shape {g.shape}; expected [n_scenarios, given_heads + 1, n_tokens]")
        given = [(s, h, np.ascontiguousarray(g[s, h])) for s in range(g.shape[0]) for h in range(g.shape[1])]
    return (off, cols, _bytes_list("scenarios", c.scenarios), ids, toks, emb, given, _count("source_rows", c.source_rows),
            _count("rows_read", c.rows_read))


def _weights_array(w, heads: int, n_tokens: int) -> np.ndarray:
    a = np.asarray(w)
    if a.dtype.kind not in "fiub":
        raise TypeError(f"weights() returned dtype {a.dtype}, not numbers")
    if a.shape != (heads + 1, n_tokens):
        raise ValueError(f"weights() returned shape {a.shape}; expected (heads + 1, n_tokens) = ({heads + 1}, {n_tokens}): "
                         f"row 0 the single-head baseline, rows 1..{heads} the heads")
    return np.ascontiguousarray(a, dtype=np.float64)


def _describe_exception(e: BaseException) -> str:
    """'ValueError: msg (at file.py:12 in chunk)': the exception and the innermost frame."""
    what = "".join(traceback.format_exception_only(type(e), e)).strip().splitlines()[-1]
    frames = traceback.extract_tb(e.__traceback__)
    if frames:
        f = frames[-1]
        what += f" (at {f.filename}:{f.lineno} in {f.name})"
    return what
