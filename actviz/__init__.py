"""actviz: a desktop activation explorer for PyTorch. Public API: :func:`capture` (what-if
``edits=`` from :mod:`actviz.edits`), :func:`compare`, :func:`module_tree`, :func:`load_model`,
:func:`load_input`, :func:`explore`."""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

__version__ = "0.1.0"
__all__ = [
    "capture", "compare", "edits", "scan", "module_tree", "load_model", "load_input", "explore",
    "visualize", "VisualizeSettings", "effects", "atlas", "concepts", "session", "tune_allocator",
    "release_memory", "__version__",
]  # fmt: skip

if TYPE_CHECKING:  # pragma: no cover
    from actviz import concepts, edits
    from actviz.core.allocator import tune_allocator
    from actviz.core.capture import capture
    from actviz.core.compare import compare
    from actviz.core.pool import release_memory
    from actviz.core.tree import module_tree
    from actviz.data.scan import scan
    from actviz.io.input_files import load_input
    from actviz.io.models.loading import load_model
    from actviz.ui.explore import explore

# Imported lazily so `import actviz` stays cheap and never pulls in Qt for scripts.
_LAZY = {
    "capture": "actviz.core.capture",
    "compare": "actviz.core.compare",
    "module_tree": "actviz.core.tree",
    "load_model": "actviz.io.models.loading",
    "load_input": "actviz.io.input_files",
    "explore": "actviz.ui.explore",
    "scan": "actviz.data.scan",
    "visualize": "actviz.analysis.visualize.feature_vis",
    "VisualizeSettings": "actviz.analysis.visualize.feature_vis",
    "effects": "actviz.analysis.effects.channel_effects",
    "tune_allocator": "actviz.core.allocator",
    "release_memory": "actviz.core.pool",
}

#: Public submodules, also imported on first use (``actviz.edits.ablate``).
_SUBMODULES = ("edits", "atlas", "concepts", "session", "testing")


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        return getattr(importlib.import_module(_LAZY[name]), name)
    if name in _SUBMODULES:
        return importlib.import_module(f"actviz.{name}")
    raise AttributeError(f"module 'actviz' has no attribute {name!r}")
