"""headsep: how far apart do attention heads keep relations? The C++ engine from Python.

    import headsep
    res = headsep.run("ops-reports", "axis-focus", {"reports": 100_000})
    res.summary["scenarios"]            # the dict `headsep run --summary` writes
    res.rows                            # pandas.DataFrame: the rows of `--per-report x.csv`
    headsep.plugins()                   # what `headsep plugins` lists

docs/PYTHON.md describes the API, the GIL, interrupts and the development loop.
"""
from __future__ import annotations

import os as _os
import warnings as _warnings

from . import _headsep
from ._headsep import Error, UsageError, __version__

# The wheel carries the built-in plugins in headsep/plugins (the build tree links its plugin
# folder there): found without environment variables, after plugin_dirs= and HEADSEP_PLUGIN_PATH.
_headsep._set_plugin_dir(_os.path.join(_os.path.dirname(_os.path.abspath(__file__)), "plugins"))

__all__ = ["Error", "UsageError", "plugins", "__version__"]


def _dirs(plugin_dirs) -> list[str]:
    if plugin_dirs is None:
        return []
    if isinstance(plugin_dirs, (str, bytes, _os.PathLike)):
        plugin_dirs = [plugin_dirs]
    return [_os.fspath(d) for d in plugin_dirs]


def plugins(*, plugin_dirs=None) -> list[dict]:
    """The plugins `headsep plugins` lists, scenario generators first, as dicts.

    Each dict: ``name``, ``kind`` ("scenario" or "weighting"), ``version``, ``description``,
    ``file``, ``abi`` and ``parameters`` -- a list of dicts with ``name``, ``type`` ("string",
    "int", "float", "bool", as `headsep plugins NAME` prints), ``default`` (in that type; None when
    required), ``required``
    and ``help``. Folders searched: ``plugin_dirs`` (a path or a list), then HEADSEP_PLUGIN_PATH,
    then the package's own plugins. A file that fails to load is a warning, as in the CLI.
    """
    found, failures = _headsep._plugins(_dirs(plugin_dirs))
    for why in failures:
        _warnings.warn(f"headsep: skipped {why}", RuntimeWarning, stacklevel=2)
    return found
