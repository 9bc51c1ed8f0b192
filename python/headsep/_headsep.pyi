# Type stubs of the extension headsep._headsep (python/src/*.cpp). Use the headsep package.
from typing import Any

__version__: str

class Error(RuntimeError):
    """A run failed: bad input data or a plugin failure (the CLI's exit status 1)."""

class UsageError(Error, ValueError):
    """A bad argument (the CLI's usage errors, exit status 2)."""

def _set_plugin_dir(dir: str) -> None: ...
def _plugins(plugin_dirs: list[str]) -> tuple[list[dict[str, Any]], list[str]]: ...
