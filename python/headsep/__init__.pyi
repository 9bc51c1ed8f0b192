# Type stubs of the headsep package (python/headsep/__init__.py).
import os
from typing import Any, Iterable

from ._headsep import Error as Error, UsageError as UsageError

__version__: str

def plugins(*, plugin_dirs: str | os.PathLike[str] | Iterable[str | os.PathLike[str]] | None = None) -> list[dict[str, Any]]: ...

from ._attention import AttentionResult as AttentionResult, attention as attention
