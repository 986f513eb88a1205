"""The colour bar beside an image canvas: the colour map's strip and its value axis."""

from __future__ import annotations

import numpy as np
import pyqtgraph as pg
from PySide6 import QtCore, QtGui

from actviz.ui.panels import style
from actviz.ui.panels.colormap_views import lut

__all__ = ["COLORBAR_AXIS_WIDTH", "COLORBAR_WIDTH", "ColorBar", "color_table"]

COLORBAR_WIDTH = 10
COLORBAR_AXIS_WIDTH = 46
_COLOR_TABLES: dict[bytes, list[int]] = {}


def color_table(table: np.ndarray) -> list[int]:
    """The QImage colour table (0xAARRGGBB ints) of a (256, 4) RGBA uint8 table, cached."""
    key = table.tobytes()
    cached = _COLOR_TABLES.get(key)
    if cached is None:
        rgba = table.astype(np.uint32)
        argb = (rgba[:, 3] << 24) | (rgba[:, 0] << 16) | (rgba[:, 1] << 8) | rgba[:, 2]
        cached = _COLOR_TABLES[key] = [int(v) for v in argb]
    return cached


class _GradientStrip(pg.GraphicsWidget):
    """The coloured strip of a colour bar: the LUT painted bottom (low) to top (high)."""

    def __init__(self, width: int) -> None:
        super().__init__()
        self.setFixedWidth(width)
        self._image: QtGui.QImage | None = None
        self._sized: QtGui.QImage | None = None  # _image at the size it is drawn
        self._pen = pg.mkPen(style.AXIS_PEN)  # made once: painted again with every frame

    def set_lut(self, table: np.ndarray) -> None:
        rgba = np.ascontiguousarray(table[::-1, None, :4], dtype=np.uint8)  # high values on top
        self._buffer = rgba  # QImage does not own the memory
        self._image = QtGui.QImage(
            rgba.data, 1, rgba.shape[0], 4, QtGui.QImage.Format.Format_RGBA8888
        )
        self._sized = None
        self.update()

    def paint(self, painter: QtGui.QPainter, *args) -> None:
        if self._image is None:
            return
        rect = self.boundingRect()
        # Scaled once per size and map, not on every paint (it repaints with every frame).
        ratio = painter.device().devicePixelRatioF() if painter.device() is not None else 1.0
        size = (max(1, round(rect.width() * ratio)), max(1, round(rect.height() * ratio)))
        sized = getattr(self, "_sized", None)
        if sized is None or (sized.width(), sized.height()) != size:
            sized = self._sized = self._image.scaled(
                *size,
                QtCore.Qt.AspectRatioMode.IgnoreAspectRatio,
                QtCore.Qt.TransformationMode.FastTransformation,
            ).convertToFormat(QtGui.QImage.Format.Format_ARGB32_Premultiplied)
            sized.setDevicePixelRatio(ratio)
        painter.drawImage(rect.topLeft(), sized)
        painter.setPen(self._pen)
        painter.drawRect(rect)


class ColorBar(pg.GraphicsLayout):
    """A light colour bar: the colour map as a strip with a value axis beside it (a
    ``pg.ColorBarItem`` is a full PlotItem, slow to build for a grid of dozens of layers)."""

    def __init__(self, width: int = COLORBAR_WIDTH, axis_width: int = COLORBAR_AXIS_WIDTH):
        super().__init__()
        self.margins = (4.0, 4.0)
        self.layout.setContentsMargins(0, 4, 0, 4)
        self.layout.setSpacing(0)
        self.strip = _GradientStrip(width)
        self.axis = pg.AxisItem("right")
        style.style_axis(self.axis)
        self.axis.setWidth(axis_width)
        self.addItem(self.strip, row=0, col=0)
        self.addItem(self.axis, row=0, col=1)
        self._levels = (0.0, 1.0)
        self._labels: tuple[str, str] | None = None
        self.axis.setRange(*self._levels)

    def set_margins(self, top: float, bottom: float) -> None:
        """Space above and below the strip: the canvas makes it span its image exactly."""
        self.margins = (float(top), float(bottom))
        self.layout.setContentsMargins(0, top, 0, bottom)

    def setColorMap(self, name: str) -> None:  # noqa: N802 - mirrors pg.ColorBarItem
        """Paint the strip with colour map ``name``."""
        self.strip.set_lut(lut(name))

    def setLevels(  # noqa: N802 - mirrors pg.ColorBarItem
        self, values: tuple[float, float], labels: tuple[str, str] | None = None
    ) -> None:
        """Label the bar from ``values[0]`` (bottom) to ``values[1]`` (top), or with ``labels``."""
        low, high = float(values[0]), float(values[1])
        if labels == self._labels and self._close_to_shown(low, high):
            return  # an axis relayout is costly; a change under 1% is not readable
        self._levels = (low, high)
        self._labels = labels
        self.axis.setRange(*self._levels)
        if labels is None:
            self.axis.setTicks(None)
        else:
            self.axis.setTicks([[(self._levels[0], labels[0]), (self._levels[1], labels[1])]])

    def levels(self) -> tuple[float, float]:
        """The (low, high) values written on the bar."""
        return self._levels

    def _close_to_shown(self, low: float, high: float) -> bool:
        """Whether (low, high) is within 1% of the span of the range already on the bar."""
        shown_low, shown_high = self._levels
        tolerance = 0.01 * max(abs(shown_high - shown_low), abs(high - low))
        return abs(low - shown_low) <= tolerance and abs(high - shown_high) <= tolerance
