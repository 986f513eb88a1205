"""GradFlowPanel: per-layer gradient L2 norm on a log scale, to spot vanishing/exploding flow."""

from __future__ import annotations

import numpy as np
import pyqtgraph as pg
from PySide6 import QtCore, QtWidgets

from actviz.ui.panels import style
from actviz.ui.panels.base import PanelBase

# Names fit under the bars only for a handful of layers; beyond, indices + hover/tooltip.
_MAX_NAMED_TICKS = 6


def _short(name: str) -> str:
    # Only the last component fits under a bar; a bare index ("layer1.0") keeps its parent.
    parts = name.split(".")
    if len(parts) > 1 and parts[-1].isdigit():
        return ".".join(parts[-2:])
    return parts[-1] or "(model)"


class GradFlowPanel(PanelBase):
    """Bar chart of the gradient norm of each layer in execution order, y in log10 scale.

    Bars are drawn in log10 space from a floor half a decade under the smallest positive
    norm; zero norms are grey stubs at the floor and NaN/Inf norms are full-height red bars,
    so a broken layer is impossible to miss. Hover names the layer and its norm.
    """

    def __init__(self, parent: QtWidgets.QWidget | None = None) -> None:
        super().__init__("Gradient flow", parent)
        self.plot_widget = pg.PlotWidget(background=style.PLOT_BACKGROUND)
        self.plot = self.plot_widget.getPlotItem()
        style.style_plot(self.plot, x_label="layer (execution order)", y_label="gradient L2 norm")
        self.plot.setLogMode(x=False, y=True)
        # Room for "0.0001" plus the rotated label; the auto width lets them overlap.
        self.plot.getAxis("left").setWidth(64)
        self.plot.setMouseEnabled(x=True, y=False)
        self.plot.disableAutoRange()
        self.plot.showGrid(x=False, y=True, alpha=style.GRID_ALPHA)
        empty = np.zeros(0)
        self.finite_bars = pg.BarGraphItem(
            x=empty,
            y0=empty,
            y1=empty,
            width=0.8,
            brush=style.BAR_GRADIENT,
            pen=pg.mkPen(style.BAR_GRADIENT, width=0),
        )
        self.zero_bars = pg.BarGraphItem(
            x=empty,
            y0=empty,
            y1=empty,
            width=0.8,
            brush=style.BAR_ZERO,
            pen=pg.mkPen(style.BAR_ZERO, width=0),
        )
        self.bad_bars = pg.BarGraphItem(
            x=empty,
            y0=empty,
            y1=empty,
            width=0.8,
            brush=style.BAR_BAD,
            pen=pg.mkPen(style.BAR_BAD, width=0),
        )
        for item in (self.finite_bars, self.zero_bars, self.bad_bars):
            self.plot.addItem(item)
        self.content.addWidget(self.plot_widget, 1)
        self.status_label = style.readout_label()
        self.content.addWidget(self.status_label)
        # Every move event, not the scene's rate-limited sigMouseMoved (stale last read-out).
        self._summary = ""
        self.plot_widget.viewport().installEventFilter(self)
        self.names: list[str] = []
        self.norms = np.zeros(0, dtype=np.float64)
        self.floor = 0.0
        self.setMinimumHeight(200)
        self.clear()

    def set_norms(self, names: list[str], norms: np.ndarray) -> None:
        """Show one bar per layer.

        Parameters
        ----------
        names
            Layer names in execution order.
        norms
            Gradient L2 norm per layer (same length); 0, NaN and Inf are allowed.
        """
        norms = np.asarray(norms, dtype=np.float64).reshape(-1)
        if len(names) != norms.size:
            raise ValueError(f"{len(names)} names but {norms.size} norms")
        self.names = list(names)
        self.norms = norms
        x = np.arange(norms.size, dtype=np.float64)
        good = np.isfinite(norms) & (norms > 0)
        zero = norms == 0
        bad = ~np.isfinite(norms)
        logs = np.log10(norms[good]) if good.any() else np.zeros(0)
        if logs.size:
            floor = float(np.floor(logs.min() - 0.5))
            top = float(np.ceil(logs.max() + 0.25))
        else:
            floor, top = -1.0, 1.0
        top = max(top, floor + 1.0)
        self.floor = floor
        stub = 0.02 * (top - floor)
        self.finite_bars.setOpts(x=x[good], y0=np.full(good.sum(), floor), y1=logs)
        self.zero_bars.setOpts(
            x=x[zero], y0=np.full(zero.sum(), floor), y1=np.full(zero.sum(), floor + stub)
        )
        self.bad_bars.setOpts(x=x[bad], y0=np.full(bad.sum(), floor), y1=np.full(bad.sum(), top))
        bottom = self.plot.getAxis("bottom")
        if 0 < norms.size <= _MAX_NAMED_TICKS:
            bottom.setTicks([[(float(i), _short(n)) for i, n in enumerate(names)]])
        else:
            bottom.setTicks(None)
        self.plot.setRange(
            xRange=(-0.6, max(norms.size, 1) - 0.4), yRange=(floor, top), padding=0.0
        )
        problems = int(bad.sum())
        summary = f"{norms.size} layers"
        if zero.any():
            summary += f", {int(zero.sum())} with zero gradient"
        if problems:
            summary += f", {problems} NaN/Inf"
        self.status_label.setText(summary)
        self._summary = summary

    def clear(self) -> None:
        """Show no layers."""
        self.set_norms([], np.zeros(0))
        self.status_label.setText("no gradients")
        self._summary = "no gradients"

    def hover_text(self, index: int) -> str:
        """Read-out for bar ``index``: full layer name and its norm."""
        norm = float(self.norms[index])
        if norm == 0.0:
            value = "0 (no gradient)"
        else:
            value = style.format_value(norm)
        return f"{index}: {self.names[index]}  ‖grad‖ {value}"

    def eventFilter(self, watched: QtCore.QObject, event: QtCore.QEvent) -> bool:  # noqa: N802
        if watched is self.plot_widget.viewport():
            if event.type() == QtCore.QEvent.Type.MouseMove:
                self._on_mouse_moved(self.plot_widget.mapToScene(event.position().toPoint()))
            elif event.type() == QtCore.QEvent.Type.Leave:
                self.status_label.setText(self._summary)
        return super().eventFilter(watched, event)

    def _on_mouse_moved(self, scene_pos: QtCore.QPointF) -> None:
        vb = self.plot.vb
        if not self.names or not vb.sceneBoundingRect().contains(scene_pos):
            self.status_label.setText(self._summary)
            return
        index = int(round(vb.mapSceneToView(scene_pos).x()))
        if 0 <= index < len(self.names):
            text = self.hover_text(index)
            self.status_label.setText(text)
            self.plot_widget.setToolTip(text)
        else:
            self.status_label.setText(self._summary)
            self.plot_widget.setToolTip("")
