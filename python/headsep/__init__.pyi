# Type stubs of the headsep package (python/headsep/__init__.py; docstrings there).
import os
from typing import Any, Iterable, Mapping, Sequence

import numpy as np
import numpy.typing as npt

from ._headsep import Error as Error, UsageError as UsageError
from .python_plugins import (AttentionSpec as AttentionSpec, Batch as Batch, Chunk as Chunk, Param as Param,
                             ScenarioGenerator as ScenarioGenerator, Schema as Schema, WeightingScheme as WeightingScheme)

__version__: str

_Path = str | os.PathLike[str]
_Param = str | int | float | bool | Sequence[str | int | float | bool]

class Result:
    def summary_json(self) -> str: ...
    @property
    def summary(self) -> dict[str, Any]: ...
    @property
    def seconds(self) -> float: ...
    @property
    def columns(self) -> list[str]: ...
    @property
    def scenarios(self) -> list[str]: ...
    @property
    def arrays(self) -> dict[str, npt.NDArray[Any]]: ...
    @property
    def rows(self) -> Any: ...  # pandas.DataFrame
    def report_html(self, path: _Path | None = None) -> str | None: ...
    def _repr_html_(self) -> str: ...

def run(scenario: str | Any | None, weighting: str | Any | None = None, params: Mapping[str, _Param] | None = None, *,
        axes: str | Mapping[str, str] | None = None, input: _Path | None = None, threads: int | None = None,
        simd: str | None = None, precision: str = "f64", chunk: int | None = None, top: int | None = None,
        bins: int | None = None, rows: bool = True, progress: bool = False, reports: Sequence[str] | None = None,
        plugin_dirs: _Path | Iterable[_Path] | None = None, report: bool = True) -> Result: ...

class Model:
    path: str
    def __init__(self, path: _Path) -> None: ...
    def run(self, texts: Sequence[str] | Mapping[str, str] | Sequence[tuple[str, str] | tuple[str, str, str]], *,
            lexicon: _Path | None = None, axes: str | Mapping[str, str] | None = None, threads: int | None = None,
            maps: bool | Sequence[int] | None = None, map_layers: Sequence[int] | None = None, rows: bool = True,
            report: bool = True, top: int | None = None, chunk: int | None = None,
            plugin_dirs: _Path | Iterable[_Path] | None = None,
            semantic_axes: _Path | Mapping[str, Mapping[str, Sequence[str]]] | None = None,
            direction_axes: _Path | Mapping[str, Any] | None = None,
            token_axes: bool | str | Sequence[str] | None = None) -> ModelResult: ...

class ModelResult(Result):
    @property
    def maps(self) -> list[npt.NDArray[np.float32]] | None: ...  # per report [layers, heads, n, n]
    @property
    def single_maps(self) -> list[npt.NDArray[np.float32]] | None: ...  # per report [layers, n, n]
    @property
    def map_reports(self) -> npt.NDArray[np.uint64] | None: ...
    @property
    def map_layers(self) -> npt.NDArray[np.uint32] | None: ...
    @property
    def kv_head_of(self) -> list[int] | None: ...

def model(path: _Path) -> Model: ...
def plugins(*, plugin_dirs: _Path | Iterable[_Path] | None = None) -> list[dict[str, Any]]: ...

# headsep.attention (python/headsep/_attention.py): arrays in, every metric of `run -s tensor -w qkv` out.
class AttentionResult(Result):
    @property
    def maps(self) -> npt.NDArray[np.float32] | list[npt.NDArray[np.float32]] | None: ...
    @property
    def single_maps(self) -> npt.NDArray[np.float32] | list[npt.NDArray[np.float32]] | None: ...
    @property
    def output(self) -> npt.NDArray[np.float32] | list[npt.NDArray[np.float32]] | None: ...
    @property
    def map_reports(self) -> npt.NDArray[np.uint64] | None: ...
    @property
    def map_queries(self) -> npt.NDArray[np.uint32] | None: ...

def attention(x: Any, *, offsets: Sequence[int] | npt.NDArray[Any] | None = None,
              weights: Any | Mapping[str, Any] | _Path, heads: int | None = None, query: str | int = "all",
              causal: bool = False, baseline: Any | Mapping[str, Any] | _Path | None = None,
              maps: bool | Sequence[int] = False, threads: int | None = None, axes: str | Mapping[str, str] | None = None,
              features: Any | None = None, feature_names: Sequence[str] | None = None,
              report_ids: Sequence[str] | None = None, top: int | None = None, bins: int | None = None,
              rows: bool = True, report: bool = True, seed: int = 1) -> AttentionResult: ...
