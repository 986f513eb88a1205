"""Old import paths the documentation once showed, kept working with a DeprecationWarning."""

from __future__ import annotations

import importlib
import warnings
from collections.abc import Callable
from typing import Any


def moved(old: str, names: dict[str, str]) -> Callable[[str], Any]:
    """A module ``__getattr__`` serving ``names`` (``{name: new module}``) with a moved warning."""

    def __getattr__(name: str) -> Any:
        if name not in names:
            raise AttributeError(f"module {old!r} has no attribute {name!r}")
        new = names[name]
        warnings.warn(f"{old}.{name} moved to {new}.{name}", DeprecationWarning, stacklevel=2)
        return getattr(importlib.import_module(new), name)

    return __getattr__
