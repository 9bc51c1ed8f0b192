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
            maps: bool | None = None, top: int | None = None, chunk: int | None = None,
            plugin_dirs: _Path | Iterable[_Path] | None = None) -> Result: ...

def model(path: _Path) -> Model: ...
def plugins(*, plugin_dirs: _Path | Iterable[_Path] | None = None) -> list[dict[str, Any]]: ...
