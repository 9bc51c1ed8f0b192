"""The ``headsep`` command as the package installs it: the console script and ``python -m headsep``.

Both run the executable's own app (runtime/cli, linked into the extension: the same options, the
same outputs byte for byte) in this process, with the package's plugins. Python plugins: every
``*.py`` file directly in a ``--plugin-dir`` folder or a ``HEADSEP_PLUGIN_PATH`` folder (names
starting with ``_`` or ``.`` skipped) is imported, and each ``headsep.ScenarioGenerator`` /
``headsep.WeightingScheme`` subclass it defines is instantiated with no arguments and registered
under its name, beside the folders' ``.so`` plugins (docs/PYTHON.md, "The headsep command").
"""
from __future__ import annotations

import importlib.util
import inspect
import os
import sys
from typing import Optional, Sequence

from . import _headsep
from .python_plugins import ScenarioGenerator, WeightingScheme, _describe_exception


def _module_name(path: str) -> str:
    # The file's stem when it names no module already imported (messages say "Python class
    # ramp.Ramp"), else a name of its own, so that a plugin file never replaces a module.
    stem = os.path.splitext(os.path.basename(path))[0]
    name = stem if stem.isidentifier() else "headsep_plugin_" + "".join(c if c.isalnum() else "_" for c in stem)
    n = 1
    base = name
    while name in sys.modules and getattr(sys.modules[name], "__file__", None) != path:
        n += 1
        name = f"{base}_{n}"
    return name


def _load(path: str):
    name = _module_name(path)
    if name in sys.modules:
        return sys.modules[name]  # loaded by an earlier registry of this process (run --model loads twice)
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module  # dataclasses and pickling look classes up by their module
    folder = os.path.dirname(path)
    sys.path.insert(0, folder)  # as for a script: its helper modules beside it import
    try:
        spec.loader.exec_module(module)
    except BaseException:
        del sys.modules[name]
        raise
    finally:
        sys.path.remove(folder)
    return module


def plugin_objects(folders: Sequence[str]) -> list:
    """[(file, instance)] of every plugin class the ``*.py`` files of `folders` define, in folder
    order, then file name, then definition order. Raises RuntimeError naming the file when one
    cannot be imported or a class cannot be instantiated (the extension makes it the command's
    error, exit status 1)."""
    out = []
    seen = set()
    for folder in folders:
        if not os.path.isdir(folder):
            continue
        for entry in sorted(os.listdir(folder)):
            path = os.path.realpath(os.path.join(folder, entry))
            if entry[:1] in ("_", ".") or not entry.endswith(".py") or not os.path.isfile(path) or path in seen:
                continue
            seen.add(path)
            shown = os.path.join(folder, entry)
            try:
                module = _load(path)
                classes = [c for c in vars(module).values()
                           if inspect.isclass(c) and c.__module__ == module.__name__
                           and issubclass(c, (ScenarioGenerator, WeightingScheme)) and not inspect.isabstract(c)]
                out.extend((shown, cls()) for cls in classes)
            except Exception as e:  # noqa: BLE001 -- any failure of the user's file is its message
                raise RuntimeError(f"could not load {shown}: {_describe_exception(e)}") from None
    return out


def main(argv: Optional[Sequence[str]] = None) -> int:
    """``headsep ARGS``: runs the command line (default ``sys.argv[1:]``) and returns its exit
    status (0 ok, 1 bad input or plugin error, 2 usage error), as the executable does."""
    args = list(sys.argv[1:] if argv is None else argv)
    sys.stdout.flush()
    return _headsep._cli_main(["headsep"] + args)
