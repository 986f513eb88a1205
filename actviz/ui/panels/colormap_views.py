"""pyqtgraph tables of :mod:`actviz.display.colormaps`: the window shows an export's colours."""

from __future__ import annotations

from functools import cache

import numpy as np

from actviz.display.colormaps import COLORMAPS as COLORMAPS
from actviz.display.colormaps import DEFAULT_ACTIVATION_CMAP as DEFAULT_ACTIVATION_CMAP
from actviz.display.colormaps import OVERLAY_CMAP as OVERLAY_CMAP
from actviz.display.colormaps import PAD_INDEX as PAD_INDEX
from actviz.display.colormaps import indexed_table, table
from actviz.display.colormaps import to_indices as to_indices

#: The (256, 4) table for index images of a map (:data:`PAD_INDEX` transparent).
indexed_lut = indexed_table

# pyqtgraph ImageItem is fastest with a LUT of at most 256 entries.
LUT_SIZE = 256


@cache
def lut(name: str) -> np.ndarray:
    """The (256, 4) uint8 RGBA table of map ``name`` for float images (shared, read-only)."""
    rgb = table(name)
    out = np.empty((LUT_SIZE, 4), dtype=np.uint8)
    out[:, :3] = rgb
    out[:, 3] = 255
    out.setflags(write=False)
    return out
