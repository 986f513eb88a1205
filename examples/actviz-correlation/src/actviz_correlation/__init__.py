"""actviz plugin: the channel-by-channel correlation matrix of a conv layer (a layer view).

Qt-free at import: the widget's module is imported when the window first shows the view.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from actviz.plugins import API_VERSION, LayerData, LayerView, Plugin, ViewSettings, paint

__all__ = ["Correlation", "correlation", "matrix_pixels", "picture", "plugin", "prepare"]

#: Smallest side of the exported picture, in pixels (each cell a square of whole pixels).
EXPORT_SIDE = 256


@dataclass(frozen=True)
class Correlation:
    """What the view shows: ``matrix[i, j]`` is r of channels ``first + i`` and ``first + j``."""

    layer: str
    matrix: np.ndarray
    first: int
    colormap: str


def correlation(maps: np.ndarray) -> np.ndarray:
    """Pearson's r of every pair of channels of ``(C, H, W)`` maps: ``(C, C)`` (NaN where a
    channel is constant)."""
    flat = np.asarray(maps, dtype=np.float64).reshape(maps.shape[0], -1)
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.atleast_2d(np.corrcoef(flat))


def accepts(layer: LayerData) -> bool:
    """Layers with channel maps and at least two channels."""
    return layer.kind == "maps" and layer.activation is not None and layer.activation.shape[0] > 1


def prepare(layer: LayerData, settings: ViewSettings) -> Correlation:
    """The correlation of the channels on the page the layer panel shows."""
    maps = layer.activation
    assert maps is not None
    first = min(settings.first_channel, maps.shape[0] - 1)
    page = maps[first : first + settings.page_size]
    # Signed values: under the "auto" colour map, the window's diverging map.
    return Correlation(layer.name, correlation(page), first, settings.resolved(signed=True))


def matrix_pixels(data: Correlation) -> np.ndarray:
    """``(C, C, 3)`` uint8: one pixel per cell, -1 and 1 at the colour map's ends."""
    return paint(data.matrix, -1.0, 1.0, data.colormap)


def picture(data: Correlation) -> np.ndarray:
    """What File > Export writes: :func:`matrix_pixels` with each cell a square of pixels."""
    pixels = matrix_pixels(data)
    scale = max(1, -(-EXPORT_SIDE // pixels.shape[0]))
    return np.repeat(np.repeat(pixels, scale, axis=0), scale, axis=1)


def _widget(context: Any) -> Any:
    from actviz_correlation.widget import CorrelationWidget

    return CorrelationWidget(context)


plugin = Plugin(
    name="actviz-correlation",
    version="0.1.0",
    api_version=API_VERSION,
    contributions=[
        LayerView(
            name="correlation",
            title="Channel correlation",
            prepare=prepare,
            widget=_widget,
            picture=picture,
            accepts=accepts,
        )
    ],
)
