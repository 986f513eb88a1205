"""The colour bar beside an image canvas (the colour map's strip and its value axis), and the
pyqtgraph tables of :mod:`actviz.display.colormaps`: the window shows an export's colours."""

from __future__ import annotations

import math
from functools import cache

import numpy as np
import pyqtgraph as pg
from PySide6 import QtCore, QtGui

from actviz.display.colormaps import table
from actviz.ui.panels import style

LUT_SIZE = 256  # pyqtgraph ImageItem is fastest with a LUT of at most 256 entries.
STRIP_WIDTH = 10  #: Widths of a colour bar's strip and of its value axis, pixels.
AXIS_WIDTH = 46
_COLOR_TABLES: dict[bytes, list[int]] = {}
TICK_SPACING_PX = 32  #: Least pixels between two labelled values of a colour bar.
_TICK_LENGTH = 4
#: Laid-out value axes by (width, height, range, words, font), most recently used last.
_PICTURES: dict[tuple, QtGui.QPicture] = {}
_PICTURES_KEPT = 64


@cache
def lut(name: str) -> np.ndarray:
    """The (256, 4) uint8 RGBA table of map ``name`` for float images (shared, read-only)."""
    out = np.empty((LUT_SIZE, 4), dtype=np.uint8)
    out[:, :3] = table(name)
    out[:, 3] = 255
    out.setflags(write=False)
    return out


def color_table(table: np.ndarray) -> list[int]:
    """The QImage colour table (0xAARRGGBB ints) of a (256, 4) RGBA uint8 table, cached."""
    key = table.tobytes()
    if (cached := _COLOR_TABLES.get(key)) is None:
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
        # A premultiplied copy (it owns its pixels): scaled in 10 us where RGBA8888 takes 0.7 ms.
        self._image = QtGui.QImage(
            rgba.data, 1, rgba.shape[0], 4, QtGui.QImage.Format.Format_RGBA8888
        ).convertToFormat(QtGui.QImage.Format.Format_ARGB32_Premultiplied)
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
            )
            sized.setDevicePixelRatio(ratio)
        painter.drawImage(rect.topLeft(), sized)
        painter.setPen(self._pen)
        painter.drawRect(rect)


def nice_ticks(low: float, high: float, most: int) -> list[float]:
    """At most ``most`` round values (1, 2 or 5 times a power of ten) from ``low`` to ``high``."""
    span = high - low
    if not (math.isfinite(span) and span > 0):
        return [low] if math.isfinite(low) else []
    most = max(2, most)
    power = 10.0 ** math.floor(math.log10(span / most))
    for step in (m * power for m in (1.0, 2.0, 5.0, 10.0, 20.0)):
        first = math.ceil(low / step - 1e-9)
        count = math.floor(high / step + 1e-9) - first + 1
        if count <= most:
            return [(first + i) * step for i in range(count)]
    return [low, high]


def tick_texts(values: list[float], step: float) -> list[str]:
    """``values`` written alike, with the decimals ``step`` needs."""
    if values and (max(abs(v) for v in values) >= 1e5 or step < 1e-4):
        return ["0" if v == 0 else _short_e(f"{v:.2g}") for v in values]
    decimals = max(0, -math.floor(math.log10(step) + 1e-9))
    return ["0" if abs(v) < step * 1e-6 else f"{v:.{decimals}f}" for v in values]


def _short_e(text: str) -> str:
    mantissa, _, exponent = text.partition("e")
    return f"{mantissa}e{int(exponent)}" if exponent else text


class ValueAxis(pg.GraphicsWidget):
    """The values beside a colour bar, laid out once per size and range (pyqtgraph's AxisItem
    re-lays them at every paint after a resize)."""

    def __init__(self, width: int) -> None:
        super().__init__()
        self.setFixedWidth(width)
        self._range = (0.0, 1.0)
        self._words: tuple[str, str] | None = None
        self._picture: QtGui.QPicture | None = None
        self._font = style.tick_font()
        self._line_pen, self._text_pen = pg.mkPen(style.AXIS_PEN), pg.mkPen(style.TEXT)

    def show_range(self, low: float, high: float, words: tuple[str, str] | None = None) -> None:
        """Values from ``low`` to ``high``, or ``words`` at the bottom and top (None: numbers)."""
        self._range, self._words, self._picture = (float(low), float(high)), words, None
        self.update()

    def ticks(self) -> list[tuple[float, str]]:
        """``(value, text)`` of what is written, for the current height."""
        low, high = self._range
        if self._words is not None:
            return [(low, self._words[0]), (high, self._words[1])]
        values = nice_ticks(low, high, int(self.boundingRect().height() // TICK_SPACING_PX) + 1)
        step = values[1] - values[0] if len(values) > 1 else abs(high - low) or 1.0
        return list(zip(values, tick_texts(values, step), strict=True))

    def resizeEvent(self, event: object) -> None:  # noqa: N802 - Qt name
        self._picture = None
        super().resizeEvent(event)

    def paint(self, painter: QtGui.QPainter, *args: object) -> None:
        if self._picture is None:
            # Shared: the bars of a grid mostly have one height and one range (0..1 per tile).
            rect = self.boundingRect()
            size = (round(rect.width(), 2), round(rect.height(), 2))
            key = (*size, self._range, self._words, self._font.key())
            picture = _PICTURES.pop(key, None)
            self._picture = picture if picture is not None else self._layout()
            _PICTURES[key] = self._picture
            if len(_PICTURES) > _PICTURES_KEPT:
                del _PICTURES[next(iter(_PICTURES))]  # the least recently used
        self._picture.play(painter)

    def _layout(self) -> QtGui.QPicture:
        picture = QtGui.QPicture()
        painter = QtGui.QPainter(picture)
        try:
            rect = self.boundingRect()
            painter.setPen(self._line_pen)
            painter.drawLine(QtCore.QPointF(0.0, rect.top()), QtCore.QPointF(0.0, rect.bottom()))
            low, high = self._range
            span = high - low
            painter.setFont(self._font)
            half, left = QtGui.QFontMetricsF(self._font).height() / 2, _TICK_LENGTH + 2
            align = int(QtCore.Qt.AlignmentFlag.AlignLeft | QtCore.Qt.AlignmentFlag.AlignVCenter)
            for value, text in self.ticks():
                y = rect.bottom() - ((value - low) / span if span else 0.5) * rect.height()
                painter.setPen(self._line_pen)
                painter.drawLine(QtCore.QPointF(0.0, y), QtCore.QPointF(_TICK_LENGTH, y))
                # Kept inside the bar's height: the end values sit at its edges.
                top = min(max(y - half, rect.top()), rect.bottom() - 2 * half)
                painter.setPen(self._text_pen)
                painter.drawText(
                    QtCore.QRectF(left, top, rect.width() - left, 2 * half), align, text
                )
        finally:
            painter.end()
        return picture


class ColorBar(pg.GraphicsLayout):
    """A colour map strip with a :class:`ValueAxis` (``pg.ColorBarItem`` is slow to build)."""

    def __init__(self, width: int = STRIP_WIDTH, axis_width: int = AXIS_WIDTH):
        super().__init__()
        self.margins = (4.0, 4.0)
        self.layout.setContentsMargins(0, 4, 0, 4)
        self.layout.setSpacing(0)
        self.strip, self.axis = _GradientStrip(width), ValueAxis(axis_width)
        self.addItem(self.strip, row=0, col=0)
        self.addItem(self.axis, row=0, col=1)
        self._levels = (0.0, 1.0)
        self._labels: tuple[str, str] | None = None

    def set_margins(self, top: float, bottom: float) -> None:
        """Space above and below the strip: the canvas makes it span its image exactly."""
        self.margins = (float(top), float(bottom))
        self.layout.setContentsMargins(0, top, 0, bottom)

    def fit_to(self, span: QtCore.QRectF, room: float = math.inf) -> None:
        """Margins that make the strip span ``span`` (scene), together at most ``room``."""
        cell = self.sceneBoundingRect()
        if span.isEmpty() or cell.isEmpty():
            return
        top, bottom = max(0.0, span.top() - cell.top()), max(0.0, cell.bottom() - span.bottom())
        if top + bottom > room:
            top, bottom = top * room / (top + bottom), bottom * room / (top + bottom)
        if abs(self.margins[0] - top) > 0.5 or abs(self.margins[1] - bottom) > 0.5:
            self.set_margins(top, bottom)

    def setColorMap(self, name: str) -> None:  # noqa: N802 - mirrors pg.ColorBarItem
        """Paint the strip with colour map ``name``."""
        self.strip.set_lut(lut(name))

    def setLevels(  # noqa: N802 - mirrors pg.ColorBarItem
        self, values: tuple[float, float], labels: tuple[str, str] | None = None
    ) -> None:
        """Label the bar from ``values[0]`` (bottom) to ``values[1]`` (top), or with ``labels``;
        an empty range is widened about its value (a constant map still gets a readable bar)."""
        low, high = float(values[0]), float(values[1])
        if not high > low:
            span = abs(low) * 0.01 or 1.0
            low, high = low - span, high + span
        shown_low, shown_high = self._levels
        tolerance = 0.01 * max(abs(shown_high - shown_low), abs(high - low))
        close = abs(low - shown_low) <= tolerance and abs(high - shown_high) <= tolerance
        if labels == self._labels and close:
            return  # live frames mostly repeat the range; under 1% is not readable
        self._levels, self._labels = (low, high), labels
        self.axis.show_range(low, high, labels)

    def levels(self) -> tuple[float, float]:
        """The (low, high) values written on the bar."""
        return self._levels
