"""A bar chart of a vector for the panels (one bar per channel or unit)."""

from __future__ import annotations

import numpy as np
import pyqtgraph as pg
from PySide6 import QtCore, QtWidgets

from actviz.ui.panels import style
from actviz.ui.panels.canvas import _GridCellCanvas


def bar_series(color: str, **columns: np.ndarray) -> pg.BarGraphItem:
    """An empty bar series in one colour; its 1-px outline keeps sub-pixel bars drawn."""
    return pg.BarGraphItem(
        x=np.zeros(0), width=0.8, brush=color, pen=pg.mkPen(color, width=0), **columns
    )


class BarCanvas(_GridCellCanvas, pg.GraphicsLayoutWidget):
    """A bar chart of a vector, redrawn in place (no PlotItem: its menus are slow to build)."""

    hovered = QtCore.Signal(int)
    hover_left = QtCore.Signal()
    context_requested = QtCore.Signal(int, QtCore.QPoint)

    def __init__(
        self,
        parent: QtWidgets.QWidget | None = None,
        *,
        passive: bool = True,
        x_label: str = "unit",
        y_label: str = "value",
        positive_color: str = style.BAR_POSITIVE,
    ) -> None:
        super().__init__(parent)
        self._count = 0
        self._init_cell(passive, (2, 4, 6, 2), 0)
        self.view = pg.ViewBox(enableMenu=False)
        self.view.setMouseEnabled(x=not passive, y=not passive)
        self.view.disableAutoRange()
        self.left_axis = pg.AxisItem("left")
        self.bottom_axis = pg.AxisItem("bottom")
        for axis, label in ((self.left_axis, y_label), (self.bottom_axis, x_label)):
            style.style_axis(axis, label)
            axis.linkToView(self.view)
        self.left_axis.setGrid(int(255 * style.GRID_ALPHA))
        self.addItem(self.left_axis, row=0, col=0)
        self.addItem(self.view, row=0, col=1)
        self.addItem(self.bottom_axis, row=1, col=1)
        self.zero_line = pg.InfiniteLine(pos=0.0, angle=0, pen=pg.mkPen(style.AXIS_PEN))
        self.view.addItem(self.zero_line)
        self.positive = bar_series(positive_color, height=np.zeros(0))
        self.negative = bar_series(style.BAR_NEGATIVE, height=np.zeros(0))
        self.view.addItem(self.positive)
        self.view.addItem(self.negative)
        self.scene().sigMouseClicked.connect(self._on_scene_clicked)

    def bar_at(self, scene_pos: QtCore.QPointF) -> int | None:
        """The bar under a scene point (None: outside the bars)."""
        if self._count == 0 or not self.view.sceneBoundingRect().contains(scene_pos):
            return None
        index = int(round(self.view.mapSceneToView(scene_pos).x()))
        return index if 0 <= index < self._count else None

    def _on_scene_clicked(self, ev) -> None:
        if ev.button() != QtCore.Qt.MouseButton.RightButton:
            return
        index = self.bar_at(ev.scenePos())
        if index is not None:
            ev.accept()
            screen = ev.screenPos()
            self.context_requested.emit(index, QtCore.QPoint(int(screen.x()), int(screen.y())))

    def set_values(self, values: np.ndarray) -> None:
        """Draw one bar per entry of the 1-D array ``values`` (NaN entries draw no bar)."""
        values = np.asarray(values, dtype=np.float32).reshape(-1)
        count = values.size
        self._count = count
        x = np.arange(count, dtype=np.float64)
        clean = np.where(np.isfinite(values), values, 0.0)
        # Bars are thinner when there are few of them so two bars do not look like a wall.
        width = 0.6 if count <= 4 else 0.8
        self.positive.setOpts(x=x, height=np.clip(clean, 0.0, None), width=width)
        self.negative.setOpts(x=x, height=np.clip(clean, None, 0.0), width=width)

        ticks = [[(float(i), str(i)) for i in range(count)]] if 0 < count <= 16 else None
        self.bottom_axis.setTicks(ticks)
        if count == 0:
            self.view.setRange(xRange=(-0.5, 0.5), yRange=(0.0, 1.0), padding=0.0)
            return
        low = min(0.0, float(clean.min()))
        high = max(0.0, float(clean.max()))
        if high == low:
            high = low + 1.0
        margin = 0.08 * (high - low)
        self.view.setRange(
            xRange=(-0.6, count - 0.4),
            yRange=(low - (margin if low < 0 else 0.0), high + (margin if high > 0 else 0.0)),
            padding=0.0,
        )

    def bar_heights(self) -> np.ndarray:
        """The signed bar heights drawn, one per entry (for tests and export)."""
        positive = np.asarray(self.positive.opts["height"], dtype=np.float64)
        negative = np.asarray(self.negative.opts["height"], dtype=np.float64)
        return positive + negative

    def count(self) -> int:
        """Number of bars drawn."""
        return self._count

    def _on_scene_mouse_moved(self, scene_pos: QtCore.QPointF) -> None:
        index = self.bar_at(scene_pos)
        if index is not None:
            self._inside = True
            self.hovered.emit(index)
        else:
            self._leave()
