"""PlotPanel: a panel holding one pyqtgraph plot with a hover read-out line under it, and the
:class:`HistogramPanel` built on it."""

from __future__ import annotations

import numpy as np
import pyqtgraph as pg
from PySide6 import QtCore, QtWidgets

from actviz.ui.panels import style
from actviz.ui.panels.base import PanelBase
from actviz.ui.panels.overlay import layer_row


class PlotPanel(PanelBase):
    """A titled panel with ``self.plot`` and a read-out line (summary, or :meth:`hover_text`)."""

    def __init__(
        self, title: str, x_label: str, y_label: str, parent: QtWidgets.QWidget | None = None
    ) -> None:
        super().__init__(title, parent)
        # No menus (style_plot): a view box made without one never builds it (~1 ms a plot).
        self.plot_widget = pg.PlotWidget(background=style.PLOT_BACKGROUND, enableMenu=False)
        self.plot = self.plot_widget.getPlotItem()
        style.style_plot(self.plot, x_label=x_label, y_label=y_label)
        self.plot.showGrid(x=False, y=True, alpha=style.GRID_ALPHA)
        self.content.addWidget(self.plot_widget, 1)
        self.status_label = style.readout_label()
        self.content.addWidget(self.status_label)
        self._summary = ""
        # Every move event, not the scene's rate-limited sigMouseMoved (stale last read-out).
        self.plot_widget.viewport().installEventFilter(self)

    @property
    def summary(self) -> str:
        """The read-out shown while the mouse is not over a bar or bin."""
        return self._summary

    def set_summary(self, text: str) -> None:
        """Set the summary read-out and show it."""
        self._summary = text
        self._show_summary()

    def hover_text(self, x: float) -> str | None:
        """Read-out for data x-coordinate ``x``; None where nothing is under the mouse."""
        raise NotImplementedError

    def _show_summary(self) -> None:
        self.status_label.setText(self._summary)
        self.plot_widget.setToolTip("")

    def eventFilter(self, watched: QtCore.QObject, event: QtCore.QEvent) -> bool:  # noqa: N802
        if watched is self.plot_widget.viewport():
            if event.type() == QtCore.QEvent.Type.MouseMove:
                self._on_mouse_moved(self.plot_widget.mapToScene(event.position().toPoint()))
            elif event.type() == QtCore.QEvent.Type.Leave:
                self._show_summary()
        return super().eventFilter(watched, event)

    def _on_mouse_moved(self, scene_pos: QtCore.QPointF) -> None:
        vb = self.plot.vb
        text = None
        if vb.sceneBoundingRect().contains(scene_pos):
            text = self.hover_text(vb.mapSceneToView(scene_pos).x())
        if text is None:
            self._show_summary()
        else:
            self.status_label.setText(text)
            self.plot_widget.setToolTip(text)


class HistogramPanel(PlotPanel):
    """A step histogram (counts per bin) with a bin read-out on hover and a layer selector."""

    layer_changed = QtCore.Signal(str)

    def __init__(self, parent: QtWidgets.QWidget | None = None) -> None:
        super().__init__("Histogram", "value", "count", parent)
        row, self.layer_combo = layer_row(10)
        self.layer_combo.activated.connect(self._on_combo_activated)
        self.content.insertLayout(0, row)
        self.curve = pg.PlotDataItem(
            stepMode="center",
            fillLevel=0,
            fillOutline=True,
            brush=pg.mkBrush(style.BAR_POSITIVE + "99"),
            pen=pg.mkPen(style.BAR_POSITIVE, width=1),
        )
        self.plot.addItem(self.curve)
        self.counts = np.zeros(0, dtype=np.float64)
        self.edges = np.zeros(0, dtype=np.float64)
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
            self.set_summary("no finite values")
        else:
            self.curve.setData(edges, counts)
            self.plot.enableAutoRange()
            self.set_summary(
                f"{int(counts.sum())} values in {counts.size} bins, "
                f"{style.format_value(edges[0])} … {style.format_value(edges[-1])}"
            )

    def set_layers(self, names: list[str], current: str | None) -> None:
        """Offer ``names`` in the selector with ``current`` chosen (no ``layer_changed``)."""
        combo = self.layer_combo
        with QtCore.QSignalBlocker(combo):
            if [combo.itemText(i) for i in range(combo.count())] != list(names):
                combo.clear()
                combo.addItems(list(names))
            combo.setCurrentIndex(names.index(current) if current in names else -1)

    def current_layer(self) -> str | None:
        """The layer chosen in the selector, or None."""
        index = self.layer_combo.currentIndex()
        return self.layer_combo.itemText(index) if index >= 0 else None

    def clear(self) -> None:
        """Show an empty histogram and no layers."""
        self.set_histogram("Histogram", np.zeros(0), np.zeros(0))
        self.set_summary("")
        self.set_layers([], None)

    def _on_combo_activated(self, index: int) -> None:
        if index >= 0:
            self.layer_changed.emit(self.layer_combo.itemText(index))

    def hover_text(self, x: float) -> str | None:
        """Read-out for value ``x``: the bin holding it and its count (None outside)."""
        if self.counts.size == 0:
            return None
        index = int(np.searchsorted(self.edges, x, side="right")) - 1
        if not 0 <= index < self.counts.size:
            return None
        low, high = style.format_value(self.edges[index]), style.format_value(self.edges[index + 1])
        return f"[{low}, {high})  count {int(self.counts[index])}"
