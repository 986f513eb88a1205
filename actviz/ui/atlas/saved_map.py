"""The Atlas map a session file keeps, and how it is matched and put back (the selection as
image indices in the scan, with the scan's cache key and image count)."""

from __future__ import annotations

from typing import Any

import numpy as np
from PySide6.QtCore import QSignalBlocker

__all__ = ["apply_choices", "as_int", "made_of", "rows_of", "rows_of_indices", "saved_map"]


def saved_map(atlas: Any, view: Any, selection: np.ndarray) -> dict[str, Any]:
    """The session file's record of ``atlas`` as ``view`` shows it, with map rows
    ``selection`` selected."""
    key = getattr(atlas.scan, "cache_path", None)
    return {
        "layer": atlas.layer,
        "method": atlas.projection.method,
        "colour": view.colour_combo.currentText(),
        "channel": int(view.channel_spin.value()),
        "selection": [int(i) for i in atlas.embeddings.indices[selection]],
        "scan_key": str(key) if key else None,
        "images": int(atlas.scan.count),
    }


def made_of(saved: dict[str, Any], scan: Any) -> bool:
    """Whether ``scan`` is the one the saved map was made of."""
    key = saved.get("scan_key")
    if key and str(getattr(scan, "cache_path", None) or "") != str(key):
        return False
    return as_int(saved.get("images")) in (None, int(scan.count))


def apply_choices(view: Any, saved: dict[str, Any]) -> None:
    """The saved method and colouring in ``view``'s controls (without rebuilding)."""
    method = str(saved.get("method", "")).upper()
    methods = [view.method_combo.itemText(i) for i in range(view.method_combo.count())]
    if method in methods:
        view.set_choices(view.method_combo, methods, method)
    colour = saved.get("colour")
    if isinstance(colour, str) and view.colour_combo.findText(colour) >= 0:
        with QSignalBlocker(view.colour_combo):
            view.colour_combo.setCurrentText(colour)
        view.channel_spin.setEnabled(colour == "Channel")


def rows_of(atlas: Any) -> dict[int, int]:
    """The map row of each image, by its index in the scan."""
    return {int(i): r for r, i in enumerate(atlas.embeddings.indices)}


def rows_of_indices(atlas: Any, indices: Any) -> np.ndarray:
    """Map rows of the images at data ``indices`` (those without a row left out)."""
    row_of = rows_of(atlas)
    rows = [row_of.get(i) for i in (as_int(v) for v in indices) if i is not None]
    return np.array([r for r in rows if r is not None], np.int64)


def as_int(value: Any) -> int | None:
    """``value`` as an int when it is one (JSON from a session file), else None."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value
    if isinstance(value, float) and value.is_integer():
        return int(value)
    return None
