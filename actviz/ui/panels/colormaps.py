"""Colour maps the panels offer, as pyqtgraph ColorMaps and 256-entry lookup tables.

Every name here loads offline: the perceptual maps ship inside pyqtgraph's ``colors/maps``
folder and "gray" is built in code, so no matplotlib is needed.
"""

from __future__ import annotations

from functools import cache

import numpy as np
import pyqtgraph as pg

# Index images are made in the core (off the GUI thread); re-exported for the panels.
from actviz.core.index_images import PAD_INDEX as PAD_INDEX
from actviz.core.index_images import to_indices as to_indices

#: Names offered to the user, default first.
COLORMAPS: list[str] = ["viridis", "inferno", "magma", "plasma", "gray"]

#: Default map for activations and for gradient magnitudes (distinct so the two read apart).
DEFAULT_ACTIVATION_CMAP = "viridis"
#: Map used for heat overlays (saliency, Grad-CAM); pyqtgraph ships "turbo", a smooth jet.
OVERLAY_CMAP = "turbo"

# pyqtgraph ImageItem is fastest with a LUT of at most 256 entries.
LUT_SIZE = 256


@cache
def colormap(name: str) -> pg.ColorMap:
    """Return the pyqtgraph ColorMap called ``name``.

    Parameters
    ----------
    name
        One of :data:`COLORMAPS`, or any other map pyqtgraph ships (e.g. "turbo").

    Raises
    ------
    ValueError
        If no map of that name can be loaded.
    """
    if name == "gray":
        return pg.ColorMap(pos=[0.0, 1.0], color=[(0, 0, 0), (255, 255, 255)], name="gray")
    try:
        cmap = pg.colormap.get(name)
    except (FileNotFoundError, KeyError, ValueError) as exc:
        raise ValueError(f"unknown colour map {name!r}; choose from {COLORMAPS}") from exc
    if cmap is None:
        raise ValueError(f"unknown colour map {name!r}; choose from {COLORMAPS}")
    return cmap


@cache
def _lut_cached(name: str) -> np.ndarray:
    table = colormap(name).getLookupTable(nPts=LUT_SIZE, alpha=True, mode="byte")
    table = np.ascontiguousarray(table, dtype=np.uint8)
    table.setflags(write=False)
    return table


def lut(name: str) -> np.ndarray:
    """Return the (256, 4) uint8 RGBA lookup table of colour map ``name``.

    The array is shared and read-only; copy it before changing it.
    """
    return _lut_cached(name)


@cache
def _indexed_lut_cached(name: str) -> np.ndarray:
    table = np.zeros((LUT_SIZE, 4), dtype=np.uint8)
    table[:PAD_INDEX] = colormap(name).getLookupTable(nPts=PAD_INDEX, alpha=True, mode="byte")
    table[PAD_INDEX] = 0  # transparent: the plot background shows through
    table.setflags(write=False)
    return table


def indexed_lut(name: str) -> np.ndarray:
    """Return the (256, 4) uint8 table for index images of colour map ``name``.

    Entries 0..254 run through the colour map (0 = low end, 254 = high end); entry
    :data:`PAD_INDEX` is transparent. The array is shared and read-only.
    """
    return _indexed_lut_cached(name)
