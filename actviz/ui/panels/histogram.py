"""HistogramPanel: the distribution of a layer's values as a filled step histogram."""

from __future__ import annotations

import numpy as np
import pyqtgraph as pg
from PySide6 import QtCore, QtWidgets

from actviz.ui.panels import style
from actviz.ui.panels.base import PanelBase


class HistogramPanel(PanelBase):
    """A step histogram (counts per bin) with a hover read-out of the bin under the mouse."""

    def __init__(self, parent: QtWidgets.QWidget | None = None) -> None:
        super().__init__("Histogram", parent)
        self.plot_widget = pg.PlotWidget(background=style.PLOT_BACKGROUND)
        self.plot = self.plot_widget.getPlotItem()
        style.style_plot(self.plot, x_label="value", y_label="count")
        self.plot.showGrid(x=False, y=True, alpha=style.GRID_ALPHA)
        self.curve = pg.PlotDataItem(
            stepMode="center",
            fillLevel=0,
            fillOutline=True,
            brush=pg.mkBrush(style.BAR_POSITIVE + "99"),
            pen=pg.mkPen(style.BAR_POSITIVE, width=1),
        )
        self.plot.addItem(self.curve)
        self.content.addWidget(self.plot_widget, 1)
        self.status_label = style.readout_label()
        self.content.addWidget(self.status_label)
        # Every move event, not the scene's rate-limited sigMouseMoved (stale last read-out).
        self._summary = ""
        self.plot_widget.viewport().installEventFilter(self)
        self.counts = np.zeros(0, dtype=np.float64)
        self.edges = np.zeros(0, dtype=np.float64)
        self._summary = ""
        self.setMinimumHeight(180)
        self.clear()

    def set_histogram(self, title: str, counts: np.ndarray, edges: np.ndarray) -> None:
        """Show ``counts`` per bin between ``edges`` (len(edges) == len(counts) + 1)."""
        counts = np.asarray(counts, dtype=np.float64).reshape(-1)
        edges = np.asarray(edges, dtype=np.float64).reshape(-1)
        if counts.size and edges.size != counts.size + 1:
            raise ValueError(f"{edges.size} edges for {counts.size} bins (need bins + 1)")
        self.counts, self.edges = counts, edges
        self.set_title(title)
        if counts.size == 0:
            self.curve.setData([], [])
            self._summary = "no finite values"
        else:
            self.curve.setData(edges, counts)
            self.plot.enableAutoRange()
            self._summary = (
                f"{int(counts.sum())} values in {counts.size} bins, "
                f"{style.format_value(edges[0])} … {style.format_value(edges[-1])}"
            )
        self.status_label.setText(self._summary)

    def clear(self) -> None:
        """Show an empty histogram."""
        self.set_histogram("Histogram", np.zeros(0), np.zeros(0))
        self._summary = ""
        self.status_label.setText("")

    def eventFilter(self, watched: QtCore.QObject, event: QtCore.QEvent) -> bool:  # noqa: N802
        if watched is self.plot_widget.viewport():
            if event.type() == QtCore.QEvent.Type.MouseMove:
                self._on_mouse_moved(self.plot_widget.mapToScene(event.position().toPoint()))
            elif event.type() == QtCore.QEvent.Type.Leave:
                self.status_label.setText(self._summary)
        return super().eventFilter(watched, event)

    def _on_mouse_moved(self, scene_pos: QtCore.QPointF) -> None:
        vb = self.plot.vb
        if self.counts.size == 0 or not vb.sceneBoundingRect().contains(scene_pos):
            self.status_label.setText(self._summary)
            return
        x = vb.mapSceneToView(scene_pos).x()
        index = int(np.searchsorted(self.edges, x, side="right")) - 1
        if 0 <= index < self.counts.size:
            self.status_label.setText(
                f"[{style.format_value(self.edges[index])}, {style.format_value(self.edges[index + 1])})"
                f"  count {int(self.counts[index])}"
            )
        else:
            self.status_label.setText(self._summary)
