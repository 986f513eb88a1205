"""pyqtgraph views of the one colour registry, :mod:`actviz.display.colormaps`.

The panels paint index images through :func:`indexed_lut` and colour bars through
:func:`colormap`; both come from the registry's tables, so the window shows exactly the colours
an export writes.
"""

from __future__ import annotations

from functools import cache

import numpy as np
import pyqtgraph as pg

from actviz.display.colormaps import COLORMAPS as COLORMAPS
from actviz.display.colormaps import DEFAULT_ACTIVATION_CMAP as DEFAULT_ACTIVATION_CMAP
from actviz.display.colormaps import OVERLAY_CMAP as OVERLAY_CMAP
from actviz.display.colormaps import PAD_INDEX as PAD_INDEX
from actviz.display.colormaps import indexed_table, table
from actviz.display.colormaps import to_indices as to_indices

# pyqtgraph ImageItem is fastest with a LUT of at most 256 entries.
LUT_SIZE = 256


@cache
def colormap(name: str) -> pg.ColorMap:
    """The pyqtgraph ColorMap of registry map ``name`` (for colour bars).

    Raises
    ------
    ValueError
        If ``name`` is not in :data:`COLORMAPS`.
    """
    rgb = table(name)
    return pg.ColorMap(pos=np.linspace(0.0, 1.0, len(rgb)), color=rgb, name=name)


@cache
def lut(name: str) -> np.ndarray:
    """The (256, 4) uint8 RGBA table of map ``name`` for float images (shared, read-only)."""
    rgb = table(name)
    out = np.empty((LUT_SIZE, 4), dtype=np.uint8)
    out[:, :3] = rgb
    out[:, 3] = 255
    out.setflags(write=False)
    return out


def indexed_lut(name: str) -> np.ndarray:
    """The (256, 4) table for index images of map ``name``: 0..254 through the map,
    :data:`PAD_INDEX` transparent (the plot background shows through). Shared, read-only."""
    return indexed_table(name)
