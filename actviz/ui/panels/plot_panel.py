"""PlotPanel: a panel holding one pyqtgraph plot with a hover read-out line under it."""

from __future__ import annotations

import pyqtgraph as pg
from PySide6 import QtCore, QtWidgets

from actviz.ui.panels import style
from actviz.ui.panels.base import PanelBase


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
