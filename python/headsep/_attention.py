"""headsep.attention: multi-head attention measured from arrays in memory -- a NumPy array or a
torch tensor X and an nn.MultiheadAttention -- as ``headsep run -s tensor -w qkv`` measures them
from files. This module only converts types (and says when that copies); every check and every
number is the C++ engine's (python/src/attention.cpp, include/headsep/array_input.hpp).
torch is never imported: tensors and modules are recognised by their methods."""
from __future__ import annotations

import os as _os

import numpy as _np

from . import _headsep
from ._result import KeptMaps, Result


def _is_torch(obj) -> bool:
    return type(obj).__module__.split(".")[0] == "torch"


def _x_array(x, name: str):
    """x as a C-contiguous float32 CPU array. A CPU float32 contiguous tensor or array passes as it
    is (read in place); anything else is converted here, which copies (documented)."""
    if _is_torch(x) and hasattr(x, "detach"):
        t = x.detach()  # no copy; DLPack refuses tensors that require grad
        if not t.is_floating_point():
            raise TypeError(f"{name}: dtype {t.dtype}, expected a floating-point tensor")
        if t.device.type != "cpu":
            t = t.cpu()
        if str(t.dtype) != "torch.float32":
            t = t.float()
        return t if t.is_contiguous() else t.contiguous()
    if isinstance(x, (str, bytes)) or x is None:
        raise TypeError(f"{name}: expected a NumPy array or a torch tensor, got {type(x).__name__}")
    a = _np.asarray(x)
    if a.dtype.kind != "f":
        raise TypeError(f"{name}: dtype {a.dtype}, expected floating point (float32 is read in place)")
    return _np.ascontiguousarray(a, dtype=_np.float32)


def _weight_array(v, name: str):
    """One weight as a float32 NumPy array (weights are small: converting copies a little)."""
    if _is_torch(v) and hasattr(v, "detach"):
        v = v.detach().cpu()
        if not v.is_floating_point():
            raise TypeError(f"{name}: dtype {v.dtype}, expected a floating-point tensor")
        return v.float().contiguous().numpy()
    a = _np.asarray(v)
    if a.dtype.kind != "f":
        raise TypeError(f"{name}: dtype {a.dtype}, expected floating point")
    return _np.ascontiguousarray(a, dtype=_np.float32)


def _weights(obj, what: str):
    """(path or {name: float32 array} or None, the module's num_heads or None)."""
    if obj is None:
        return None, None
    if isinstance(obj, (str, _os.PathLike)):
        return _os.fspath(obj), None
    heads = None
    if callable(getattr(obj, "state_dict", None)) and hasattr(obj, "in_proj_weight"):
        heads = getattr(obj, "num_heads", None)  # an nn.MultiheadAttention (duck-typed)
        obj = obj.state_dict()
    if not hasattr(obj, "items"):
        raise TypeError(f"{what}: expected an nn.MultiheadAttention, its state_dict(), a dict of arrays or a "
                        f"safetensors path, got {type(obj).__name__}")
    out = {}
    for k, v in obj.items():
        if not isinstance(k, str):
            raise TypeError(f"{what}: tensor names must be str, got {k!r}")
        if v is None:  # a module without biases lists none
            continue
        out[k] = _weight_array(v, f"{what}: tensor '{k}'")
    return out, heads


def _int_list(v, what: str) -> list[int]:
    a = _np.asarray(v.detach().cpu().numpy() if _is_torch(v) else v)
    if a.ndim != 1:
        raise ValueError(f"{what}: expected a 1-D sequence of ints, got shape {a.shape}")
    if a.size and a.dtype == object and all(isinstance(i, int) and not isinstance(i, bool) for i in a):
        a = _np.array([int(i) for i in a], dtype=object)  # Python ints past int64/uint64: checked below
    elif a.size and a.dtype.kind not in "iu":
        raise TypeError(f"{what}: dtype {a.dtype}, expected integers")
    out = [int(i) for i in a]
    for i in out:
        if not -2**63 <= i < 2**63:
            raise ValueError(f"{what}: {i} is out of range (a 64-bit integer)")
    return out


def _map_selection(maps):
    """maps=: True/False/None, or a sequence of report indices (a list of int)."""
    if isinstance(maps, bool) or maps is None:
        return bool(maps)
    if isinstance(maps, (str, bytes)):
        raise TypeError("maps: expected True/False or a sequence of report indices")
    return _int_list(maps, "maps")


def _query(q) -> str:
    if isinstance(q, bool) or not isinstance(q, (str, int, _np.integer)):
        raise TypeError(f"query: expected 'all', 'first', 'last' or a token index (int), got {type(q).__name__}")
    return str(int(q)) if not isinstance(q, str) else q


class AttentionResult(KeptMaps, Result):
    """A headsep.Result (summary, rows, arrays, report) of ``headsep.attention``, with the attention
    maps asked for by ``maps=``.

    - ``maps``: ``[reports, heads, queries, keys]`` float32 (heads 1..H, as torch's
      ``need_weights=True, average_attn_weights=False``); ragged reports: a list of
      ``[heads, queries, keys]`` arrays. ``queries`` is n with ``query="all"``, else 1.
    - ``single_maps``: the single-head baseline's maps, ``[reports, queries, keys]`` (or a list).
    - ``output``: the multi-head output ``concat_h(A_h V_h) W_O + b_O``, ``[reports, queries,
      d_model]`` (torch's ``attn_output``), when the weights have an output projection; else None.
    - ``map_reports``: the reports' indices; ``map_queries``: each one's first query token.
    None of them without ``maps=``.
    """

    def __init__(self, core, maps, x_address: int):
        super().__init__(core)
        self._maps = maps
        self._x_address = x_address  # where the engine read X (tests: in place)

    def _kept(self):
        return self._maps

    @property
    def output(self):
        return self._get("output")

    @property
    def map_queries(self):
        return self._get("queries")


def attention(x, *, offsets=None, weights, heads=None, query="all", causal=False, baseline=None, maps=False,
              threads=None, axes=None, features=None, feature_names=None, report_ids=None, top=None, bins=None,
              rows=True, report=True, seed=1) -> AttentionResult:
    """Measure multi-head self-attention on embeddings in memory: every per-report metric of
    ``headsep run -s tensor -w qkv`` (contexts, difference from the single-head baseline, head
    separation, per-head entropy / confidence / self, previous and first-token weight, per-pair
    Jensen-Shannon divergence and Li et al.'s disagreements), identical to the CLI's on the same
    data and weights.

        mha = torch.nn.MultiheadAttention(64, 4, batch_first=True)
        res = headsep.attention(x, weights=mha, heads=4, maps=True)    # x [B, n, 64]
        res.rows, res.summary, res.maps                                # maps [B, 4, n, n]

    Parameters
    ----------
    x : numpy.ndarray or torch.Tensor
        Token embeddings ``[B, n, d_model]``, or ``[T, d_model]`` with ``offsets``. A C-contiguous
        float32 CPU array or tensor is read in place (not copied; it must not change during the
        call); any other dtype, layout or device is converted first, which copies it.
    offsets : sequence of int, optional
        ``[B+1]`` report boundaries for x ``[T, d_model]``: report r = rows offsets[r]..offsets[r+1].
    weights : nn.MultiheadAttention, dict, str or os.PathLike
        The module (duck-typed: its ``state_dict()``; ``batch_first`` does not matter), its
        state_dict, a dict of arrays with the same names (``in_proj_weight``, ``in_proj_bias``,
        ``out_proj.weight``, ``out_proj.bias``; or ``q/k/v_proj_weight``), or a safetensors file
        (either layout of docs/SAFETENSORS.md), as ``qkv -p weights=``.
    heads : int
        Number of heads H (default: the module's ``num_heads``); must divide d_model.
    query : str or int
        ``"all"`` (every token a query), ``"first"``, ``"last"`` or a token index (negative from
        the end), as qkv's ``query``.
    causal : bool
        Causal mask: query q sees keys 0..q.
    baseline : nn.MultiheadAttention, dict, str or None
        The single-head baseline (a 1-head MultiheadAttention of the same d_model). None: qkv's
        rule -- the weights file's ``single.*`` tensors, else seeded from ``seed`` (docs/ATTENTION.md).
    maps : bool or sequence of int
        True: keep every report's attention maps (``Result.maps``); a sequence: those report
        indices only. Maps take reports x heads x n x n floats.
    threads : int, optional
        Worker threads (default: all cores). Results do not depend on it.
    axes : str or dict, optional
        Context axes (``"a=x[0];b=x[1]+x[2]"``: embedding components or feature columns). Default:
        with ``features``, the seed's two axes (as ``headsep run``); without, ``x0=x[0];x1=x[1]``
        (the first two embedding components: pass axes for contexts that mean something).
    features : array, optional
        ``[T, F]`` (or ``[B, n, F]``) numeric columns per token for the axes, named by
        ``feature_names`` (else f0, f1, ...), as the tensor plugin's ``features`` tensor.
    report_ids : list of str, optional
        One id per report (default ``#0``, ``#1``, ...).
    top, bins : int, optional
        The summary's top reports (default 10) and histogram bins (default 20).
    rows : bool
        Keep the per-report rows (``Result.rows`` / ``Result.arrays``).
    report : bool
        Keep what ``Result.report_html()`` needs (the top reports' maps), as ``headsep.run``.
    seed : int
        qkv's ``seed``: the default baseline's initialisation.

    Returns
    -------
    AttentionResult (a headsep.Result)

    Raises
    ------
    headsep.Error
        Bad data: a NaN or inf in x (naming the row, report, token and component), in the
        features or the weights (naming the tensor and element).
    headsep.UsageError (a ValueError)
        Bad shapes, offsets, names, heads or query.
    TypeError
        A wrong type or dtype (integers for x, a str for weights' values, ...).
    """
    from . import _U32, _axes, _call_text, _count, _threads  # the package's argument helpers (headsep/__init__.py)

    xa = _x_array(x, "x")
    w, module_heads = _weights(weights, "weights")
    if w is None:
        raise TypeError("weights: required (an nn.MultiheadAttention, its state_dict, a dict of arrays or a path)")
    b, _ = _weights(baseline, "baseline")
    if heads is None:
        if module_heads is None:
            raise TypeError("heads: required (an int) unless weights is an nn.MultiheadAttention")
        heads = module_heads
    h = _count("heads", heads, 1, _U32)
    if module_heads is not None and module_heads != h:
        raise ValueError(f"heads={h}, but the module has num_heads={module_heads}")
    sel = _map_selection(maps)
    f = None
    if features is not None:
        f = (features.detach().cpu().double().contiguous().numpy() if _is_torch(features)
             else _np.ascontiguousarray(_np.asarray(features), dtype=_np.float64)
             if _np.asarray(features).dtype.kind in "fiu" else None)
        if f is None:
            raise TypeError(f"features: dtype {_np.asarray(features).dtype}, expected numbers")
    names = list(feature_names or [])
    ids = list(report_ids or [])
    if not all(isinstance(s, str) for s in names + ids):
        raise TypeError("feature_names and report_ids: expected lists of str")
    if isinstance(causal, (str, bytes)) or not isinstance(seed, int):
        raise TypeError("causal: expected a bool; seed: an int")
    seed = _count("seed", seed)
    command = _call_text("attention", [f"x {list(getattr(xa, 'shape', []))}"],
                         {"heads": h, "query": query, "causal": bool(causal) or None, "axes": axes})
    core, m, address = _headsep._attention(
        xa, None if offsets is None else _int_list(offsets, "offsets"), w, b, h, _query(query), bool(causal), sel,
        _threads(threads), _axes(axes), f, names, ids, 10 if top is None else _count("top", top),
        20 if bins is None else _count("bins", bins, 1, _U32), bool(rows), bool(report), seed, command)
    return AttentionResult(core, m, address)
