"""What a test must leave as it found it (the plugin's checks): model hooks, top-level widgets,
process-wide state. Only the widget checks import Qt, when called."""

from __future__ import annotations

import dataclasses
import gc
import os
import sys
import tempfile
from collections.abc import Collection
from typing import TYPE_CHECKING

import numpy as np
import torch
from torch.nn.modules import module as torch_module

if TYPE_CHECKING:  # pragma: no cover
    from PySide6.QtWidgets import QWidget

#: The per-module hook dictionaries of ``torch.nn.Module`` (full backward hooks included).
HOOK_ATTRS = (
    "_forward_hooks", "_forward_pre_hooks", "_backward_hooks", "_backward_pre_hooks",
    "_forward_hooks_with_kwargs", "_forward_pre_hooks_with_kwargs",
)  # fmt: skip
#: Hooks torch runs for every module (``register_module_forward_hook`` and friends).
_GLOBAL_HOOKS = tuple(f"_global{name}" for name in HOOK_ATTRS[:4])


def hooks_left(model: torch.nn.Module) -> list[str]:
    """One line per non-empty hook dictionary left on ``model`` or its submodules."""
    return [
        f"{name or '(model)'} still has {attr}: {dict(hooks)}"
        for name, module in model.named_modules()
        for attr in HOOK_ATTRS
        if (hooks := getattr(module, attr, None))
    ]


def assert_no_hooks(model: torch.nn.Module) -> None:
    """Fail (``AssertionError``) if any module of ``model`` still holds a hook."""
    left = hooks_left(model)
    assert not left, "; ".join(left)


@dataclasses.dataclass(frozen=True)
class ProcessState:
    """Process-wide settings a library call must not change: the switch interval, torch's
    thread count and the number of global module hooks."""

    switch_interval: float
    torch_threads: int
    global_hooks: int

    @classmethod
    def now(cls) -> ProcessState:
        """The process's state at this moment."""
        hooks = sum(len(getattr(torch_module, name, {})) for name in _GLOBAL_HOOKS)
        return cls(sys.getswitchinterval(), torch.get_num_threads(), hooks)

    def changes_since(self, before: ProcessState) -> list[str]:
        """Describe what differs from ``before`` (empty when nothing does)."""
        says = (  # one per field, in order
            "sys.getswitchinterval() changed from {!r} to {!r}",
            "torch.get_num_threads() changed from {} to {}",
            "global module hooks went from {} to {}",
        )
        pairs = zip(says, dataclasses.astuple(before), dataclasses.astuple(self), strict=True)
        return [say.format(then, now) for say, then, now in pairs if now != then]


def live_array_mib() -> dict[str, float]:
    """MiB held by live tensors and numpy arrays (``tensors``, ``arrays``), each storage counted
    once; arrays only C++ holds are missed. Slow: for checkpoints of a long run."""
    storages: dict[int, int] = {}
    buffers: dict[int, int] = {}
    for obj in gc.get_objects():
        if isinstance(obj, torch.Tensor):
            try:
                storage = obj.untyped_storage()
                storages[storage.data_ptr()] = storage.nbytes()
            except (RuntimeError, NotImplementedError):  # meta, sparse, functional tensors
                pass
            continue
        for ref in gc.get_referents(obj):
            if type(ref) is np.ndarray:
                base = ref
                while isinstance(base.base, np.ndarray):
                    base = base.base
                if base.base is None:  # owns its buffer (a view of a tensor is counted there)
                    buffers[base.__array_interface__["data"][0]] = base.nbytes
    return {"tensors": sum(storages.values()) / 2**20, "arrays": sum(buffers.values()) / 2**20}


def python_heap_mib() -> dict[str, float]:
    """Python's own object heap in MiB (``python_arenas``, ``python_heap``), left out of malloc's
    figures; empty where CPython does not say. Writes to the C stderr: for checkpoints only."""
    if (stats := getattr(sys, "_debugmallocstats", None)) is None:
        return {}
    sys.stderr.flush()
    saved = os.dup(2)
    try:
        with tempfile.TemporaryFile(mode="w+") as f:
            os.dup2(f.fileno(), 2)
            try:
                stats()
            finally:
                os.dup2(saved, 2)
            f.seek(0)
            text = f.read()
    finally:
        os.close(saved)
    out: dict[str, float] = {}
    for line in text.splitlines():
        key, _, value = line.partition("=")
        if key.strip() == "# arenas allocated current":
            out["python_arenas"] = float(value.replace(",", ""))  # 1 MiB each (64-bit, 3.10+)
        elif key.strip() == "# bytes in allocated blocks":
            out["python_heap"] = float(value.replace(",", "")) / 2**20
    return out


def flush_deletes(collect: int | None = None) -> None:
    """Run the ``deleteLater`` calls already posted (a test has no event loop of its own);
    ``collect``: then collect that garbage generation and run the deletions it posted."""
    from PySide6.QtCore import QCoreApplication, QEvent

    if QCoreApplication.instance() is None:
        return
    for _ in range(3):
        QCoreApplication.sendPostedEvents(None, QEvent.Type.DeferredDelete)
        QCoreApplication.processEvents()
    if collect is not None:
        gc.collect(collect)
        flush_deletes()


def _address(widget: QWidget) -> int:
    import shiboken6

    return int(shiboken6.getCppPointer(widget)[0])


def top_level_widgets() -> frozenset[int]:
    """The C++ addresses of the application's top-level widgets now (empty without an app);
    addresses, since holding a Python wrapper would keep a widget alive."""
    from PySide6.QtWidgets import QApplication

    if QApplication.instance() is None:
        return frozenset()
    return frozenset(_address(w) for w in QApplication.topLevelWidgets())


def leaked_widgets(before: Collection[int]) -> list[QWidget]:
    """Top-level widgets alive now that were not in ``before`` (addresses), visible or hidden,
    after posted deletions and garbage (pyqtgraph's parentless menus) are gone."""
    from PySide6.QtWidgets import QApplication

    if QApplication.instance() is None:
        return []
    known = set(before)
    # The young generations first (what the test made); a full, slow one only if still needed.
    for generation in (1, 2):
        flush_deletes(generation)
        # Counted first: a list of the widgets would keep them alive through the next pass.
        if not any(_address(w) not in known for w in QApplication.topLevelWidgets()):
            return []
    return [w for w in QApplication.topLevelWidgets() if _address(w) not in known]


def describe_widget(widget: QWidget) -> str:
    """A one-line description of ``widget`` for a failure message."""
    name = widget.objectName()
    title = widget.windowTitle() or (widget.title() if hasattr(widget, "title") else "")
    parent = widget.parent()
    parts = [
        type(widget).__name__,
        f"objectName={name!r}" if name else "",
        f"title={title!r}" if title else "",
        "visible" if widget.isVisible() else "hidden",
        f"parent={type(parent).__name__}" if parent is not None else "",
    ]
    return " ".join(p for p in parts if p)
