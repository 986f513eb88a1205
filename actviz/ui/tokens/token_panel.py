"""Token sequences drawn: a heat map with token labels, optional per-row bars and colour bar
(token x feature maps, attention maps), and a layer panel showing a token sequence as token x
feature maps (built on first use; ``set_tokens(None)`` returns to the ordinary panel)."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np
import pyqtgraph as pg
from PySide6 import QtCore, QtGui, QtWidgets

from actviz.display.colormaps import heat_levels, resolve
from actviz.display.layer_views import LayerView
from actviz.display.mosaic import Mosaic
from actviz.display.text import MAX_TICKS, axis_ticks
from actviz.display.token_maps import TokenView, row_norms
from actviz.ui.panels import style
from actviz.ui.panels.colorbar import ColorBar, lut
from actviz.ui.panels.feature_map import LayerPanel
from actviz.ui.panels.overlay import LightPlot

#: Least height of a panel showing tokens (room for a dozen readable token labels).
MIN_TOKEN_PANEL_HEIGHT = 300
# How pyqtgraph's axes measure a label: its box in a 100 px square, centred.
_MEASURE = (QtCore.QRectF(0, 0, 100, 100), QtCore.Qt.AlignmentFlag.AlignCenter)


def bar_ticks(peak: float) -> list[tuple[float, str]]:
    """A bar axis's ticks: 0 unlabelled (labels collide in a narrow strip) and one round value
    up to 0.7 ``peak``, written short."""
    room = 0.7 * peak
    step = 10.0 ** math.floor(math.log10(room))
    nice = max(m * step for m in (1, 2, 5) if m * step <= room * (1 + 1e-9))
    return [(0.0, ""), (nice, f"{nice:.3g}")]


def _set_ticks(axis: pg.AxisItem, ticks: list | None) -> None:
    """Give ``axis`` these ticks unless it has them (redrawing text is most of a paint); a side
    axis the width they need now (found as it paints, it laid the plot out and painted again)."""
    if getattr(axis, "_actviz_ticks", "unset") != ticks:
        axis._actviz_ticks = ticks  # type: ignore[attr-defined]
        axis.setTicks(ticks)
        if ticks and axis.orientation in ("left", "right"):
            metrics = QtGui.QFontMetricsF(axis.style["tickFont"])
            widths = [metrics.boundingRect(*_MEASURE, t).width() for lv in ticks for _, t in lv]
            axis._updateMaxTextSize(max(widths, default=0.0))


class LabelledHeatCanvas(pg.GraphicsLayoutWidget):
    """Heat map with row labels, optional column labels, per-row bars and a colour bar;
    ``hovered(int, int)``: the cell under the mouse, ``(-1, -1)`` outside."""

    hovered = QtCore.Signal(int, int)
    clicked = QtCore.Signal(int, int)  #: The cell a left click was on.
    context_requested = QtCore.Signal(int, int, QtCore.QPoint)  #: A right click's cell, screen.

    def __init__(
        self,
        *,
        x_label: str = "",
        bars_label: str | None = None,
        bar_color: str = style.BAR_POSITIVE,
        colorbar: bool = False,
        parent: QtWidgets.QWidget | None = None,
    ) -> None:
        super().__init__(parent)
        self.setBackground(style.PLOT_BACKGROUND)
        self.ci.layout.setContentsMargins(2, 2, 2, 2)
        self.plot = LightPlot(x_label or None)
        self.addItem(self.plot, row=0, col=0)
        self.image = pg.ImageItem(axisOrder="row-major")
        self.plot.vb.addItem(self.image)
        self.bars_plot: LightPlot | None = None
        self.bars: pg.BarGraphItem | None = None
        self._bar_color = bar_color
        if bars_label is not None:
            self.bars_plot = LightPlot(bars_label)  # each bar beside its heat-map row
            self.addItem(self.bars_plot, row=0, col=1)
            self.bars_plot.vb.setYLink(self.plot.vb)
            self.bars_plot.getAxis("left").hide()
            self.ci.layout.setColumnStretchFactor(0, 4)
            self.ci.layout.setColumnStretchFactor(1, 1)
        self.colorbar: ColorBar | None = None
        if colorbar:
            self.colorbar = ColorBar()
            self.addItem(self.colorbar, row=0, col=2 if self.bars_plot is not None else 1)
            self.colorbar.setVisible(False)  # until there is a map
            # The strip spans the map exactly: its top and bottom are the levels' ends.
            self.plot.vb.sigResized.connect(self._fit_colorbar)
        self.heat: np.ndarray | None = None
        self.levels: tuple[float, float] = (0.0, 1.0)
        self.colormap_name = ""
        self.row_labels: tuple[str, ...] = ()
        self.col_labels: tuple[str, ...] | None = None
        self.bar_values: np.ndarray | None = None
        self.scene().sigMouseMoved.connect(lambda pos: self.hovered.emit(*self.cell_at(pos)))
        self.scene().sigMouseClicked.connect(self._on_scene_clicked)
        self.setMinimumHeight(120)

    def set_heat(
        self,
        heat: np.ndarray,
        row_labels: Sequence[str],
        *,
        col_labels: Sequence[str] | None = None,
        bars: np.ndarray | None = None,
        symmetric: bool | None = None,
        gradient: bool = False,
        levels: tuple[float, float] | None = None,
    ) -> None:
        """Show ``heat`` with its labels and ``bars``; ``symmetric`` (default: any negative)
        centres on 0; ``gradient`` uses the gradient map."""
        heat = np.ascontiguousarray(heat, dtype=np.float32)
        if symmetric is None:
            symmetric = bool((heat < 0).any())
        self.heat = heat
        self.levels = levels or heat_levels(heat, symmetric=symmetric)
        self.colormap_name = resolve("auto", signed=symmetric, gradient=gradient)
        self.row_labels = tuple(row_labels)
        self.col_labels = tuple(col_labels) if col_labels is not None else None
        rows, cols = heat.shape
        self.image.setImage(heat, levels=self.levels, lut=lut(self.colormap_name))
        self.image.setRect(QtCore.QRectF(0, 0, cols, rows))
        self._update_ticks()
        self.plot.vb.setRange(xRange=(0, cols), yRange=(0, rows), padding=0)
        if self.colorbar is not None:
            self.colorbar.setColorMap(self.colormap_name)
            self.colorbar.setLevels(self.levels)
            self.colorbar.setVisible(True)
            self._fit_colorbar()
        self.bar_values = None if bars is None else np.asarray(bars, dtype=np.float32)
        if self.bars_plot is not None and self.bar_values is None and self.bars is not None:
            self.bars_plot.vb.removeItem(self.bars)
            self.bars = None
        elif self.bars_plot is not None and self.bar_values is not None:
            shape = dict(x0=np.zeros(rows), y=np.arange(rows) + 0.5, width=self.bar_values)
            if self.bars is None:
                self.bars = pg.BarGraphItem(**shape, height=0.8, brush=self._bar_color, pen=None)
                self.bars_plot.vb.addItem(self.bars)
            else:
                self.bars.setOpts(**shape)  # refilled: no item made and added per result
            peak = float(np.nanmax(self.bar_values)) if self.bar_values.size else 1.0
            peak = peak if np.isfinite(peak) and peak > 0 else 1.0
            self.bars_plot.vb.setXRange(0, peak, padding=0.05)
            # One round value: pyqtgraph's own ticks collide in a strip this narrow.
            _set_ticks(self.bars_plot.getAxis("bottom"), [bar_ticks(peak), []])
        # Laid out and transformed now: pyqtgraph does both as it paints (an axis widened by
        # new labels, a view box's new range), and each change painted the canvas again.
        self.ci.layout.activate()
        for plot in (self.plot, self.bars_plot):
            if plot is not None:
                plot.layout().activate()
                plot.vb.prepareForPaint()

    def _update_ticks(self) -> None:
        """As many token labels as fit on the axes (rows ~12 px apart, columns ~48 px)."""
        if getattr(self, "heat", None) is None:  # pyqtgraph resizes while it is built
            return
        rect = self.plot.vb.boundingRect()
        height, width = max(rect.height(), 120.0), max(rect.width(), 160.0)
        rows = min(MAX_TICKS, max(2, int(height // 12)))
        _set_ticks(self.plot.getAxis("left"), [axis_ticks(self.row_labels, rows)])
        cols = min(MAX_TICKS, max(2, int(width // 48)))
        ticks = None if self.col_labels is None else [axis_ticks(self.col_labels, cols)]
        _set_ticks(self.plot.getAxis("bottom"), ticks)
        self.plot.layout().activate()  # an axis's new width now, not after a paint at the old

    def resizeEvent(self, event: QtGui.QResizeEvent) -> None:  # noqa: N802 - Qt name
        if not self.isVisible() or self.viewport().visibleRegion().isEmpty():
            # Off screen, pyqtgraph's costly layout waits for a paint or read (ensure_layout).
            self._layout_stale = True
            return
        self._layout_stale = False
        super().resizeEvent(event)
        self._update_ticks()

    def ensure_layout(self) -> None:
        """Fit the plots to the canvas's size if an off-screen resize left that for later."""
        if getattr(self, "_layout_stale", False):
            self._layout_stale = False
            super().resizeEvent(QtGui.QResizeEvent(self.size(), self.size()))
            self._update_ticks()

    def paintEvent(self, event: QtGui.QPaintEvent) -> None:  # noqa: N802 - Qt name
        self.ensure_layout()
        super().paintEvent(event)

    def _fit_colorbar(self, *_args: object) -> None:
        """Align the colour bar's strip with the map's top and bottom edges."""
        if self.colorbar is not None:
            self.colorbar.fit_to(self.plot.vb.sceneBoundingRect())

    def clear_heat(self) -> None:
        self.heat = None
        self.image.clear()
        if self.colorbar is not None:
            self.colorbar.setVisible(False)
        if self.bars_plot is not None and self.bars is not None:
            self.bars_plot.vb.removeItem(self.bars)
            self.bars = None

    def cell_at(self, scene_pos: QtCore.QPointF) -> tuple[int, int]:
        """``(row, col)`` of the cell at a scene position, ``(-1, -1)`` outside the map."""
        self.ensure_layout()
        if self.heat is None or not self.plot.sceneBoundingRect().contains(scene_pos):
            return (-1, -1)
        point = self.plot.vb.mapSceneToView(scene_pos)
        row, col = int(np.floor(point.y())), int(np.floor(point.x()))
        rows, cols = self.heat.shape
        return (row, col) if 0 <= row < rows and 0 <= col < cols else (-1, -1)

    def _on_scene_clicked(self, event: Any) -> None:
        if event.button() == QtCore.Qt.MouseButton.LeftButton:
            self.clicked.emit(*self.cell_at(event.scenePos()))
        elif event.button() == QtCore.Qt.MouseButton.RightButton:
            self.context_requested.emit(
                *self.cell_at(event.scenePos()), event.screenPos().toPoint()
            )

    def cell_centre(self, row: int, col: int) -> QtCore.QPoint:
        """Widget coordinates of a cell's centre (tests hover there)."""
        self.ensure_layout()
        return self.mapFromScene(self.plot.vb.mapViewToScene(QtCore.QPointF(col + 0.5, row + 0.5)))

    def leaveEvent(self, event: QtCore.QEvent) -> None:  # noqa: N802 - Qt name
        self.hovered.emit(-1, -1)
        super().leaveEvent(event)


class TokenLayerPanel(LayerPanel):
    """A :class:`LayerPanel` that can show a token view (see the module docstring)."""

    def __init__(self, name: str, parent: QtWidgets.QWidget | None = None, **kwargs) -> None:
        super().__init__(name, parent, **kwargs)
        self.token_view: TokenView | None = None
        self.token_box: QtWidgets.QWidget | None = None
        self.token_canvas: LabelledHeatCanvas | None = None
        self.token_grad_canvas: LabelledHeatCanvas | None = None
        #: Edited minus unedited ``(T, D)`` while the difference view shows, else None.
        self.difference_heat: np.ndarray | None = None

    def _build_token_box(self) -> None:
        box = self.token_box = QtWidgets.QWidget()
        row = style.bare_box(box, spacing=6)
        self.token_canvas = LabelledHeatCanvas(x_label="feature", bars_label="norm")
        self.token_canvas.hovered.connect(lambda r, c: self._on_token_hovered(r, c, False))
        self.token_canvas.clicked.connect(self._on_token_clicked)
        self.token_canvas.context_requested.connect(self._on_token_context)
        row.addWidget(self.token_canvas, 1)
        self.content.insertWidget(0, box, 1)

    def prepare_tokens(self, view: TokenView | None) -> bool:
        """Build one token plot ``view`` needs (one a pass); False when all are there."""
        if view is None or self.token_grad_canvas is not None:
            return False
        if self.token_box is None:
            self._build_token_box()
            self.token_box.setVisible(False)  # type: ignore[union-attr]  # until set_tokens
            return True
        self.token_grad_canvas = canvas = LabelledHeatCanvas(
            x_label="feature", bars_label="|grad| norm", bar_color=style.BAR_GRADIENT
        )
        canvas.hovered.connect(lambda r, c: self._on_token_hovered(r, c, True))
        canvas.setVisible(False)  # until set_tokens shows a gradient
        self.token_box.layout().addWidget(canvas, 1)  # type: ignore[union-attr]
        return True

    def _slots_stretch(self, stretch: int) -> None:
        # The hidden mosaic row would keep its stretch and half the panel.
        for i in range(self.content.count()):
            row = self.content.itemAt(i).layout()
            if row is not None and row.indexOf(self.activation_slot) >= 0:
                self.content.setStretch(i, stretch)

    def set_tokens(self, view: TokenView | None) -> None:
        """Show ``view`` instead of the mosaic slots (None: the ordinary panel)."""
        self.token_view, self.difference_heat = view, None
        if view is None:
            if self.token_box is not None:
                self.token_box.setVisible(False)
                self._slots_stretch(1)
                self.activation_slot.setVisible(True)
                self._update_gradient_visibility()
            return
        while self.prepare_tokens(view):  # the plots not built yet
            pass
        assert self.token_canvas is not None and self.token_grad_canvas is not None
        self.activation_slot.setVisible(False)
        self.gradient_slot.setVisible(False)
        self.token_box.setVisible(True)  # type: ignore[union-attr]
        self._slots_stretch(0)
        columns = None if view.columns is None else [str(c) for c in view.columns]
        if (axis := self.token_canvas.plot.getAxis("bottom")).labelText != view.unit:
            style.style_axis(axis, view.unit)  # "concept" while a dictionary's page shows
        self.token_canvas.set_heat(view.heat, view.tokens, col_labels=columns, bars=view.norms)
        if view.grad_heat is not None:
            self.token_grad_canvas.set_heat(
                view.grad_heat, view.tokens, bars=view.grad_norms, symmetric=False, gradient=True
            )
        self._update_gradient_visibility()
        self.set_minimum_panel_height(MIN_TOKEN_PANEL_HEIGHT)
        self.status_label.setText(self._token_description())

    def set_difference(
        self, view: LayerView, mosaic: Mosaic | None, colormap: str | None = None
    ) -> None:
        """As :meth:`LayerPanel.set_difference`; a token view shows it in its own heat map."""
        super().set_difference(view, mosaic, colormap)
        if (tv := self.token_view) is None or self.token_canvas is None or view.kind != "heatmap":
            return
        if (data := np.asarray(view.data, dtype=np.float32)).shape != tv.heat.shape:
            return
        self.difference_heat = data
        norms = row_norms(data)
        self.token_canvas.set_heat(data, tv.tokens, bars=norms, symmetric=True)
        self.status_label.setText(self._token_description())

    def _token_description(self) -> str:
        if (view := self.token_view) is None:
            return ""
        t, d = view.shape[1], view.shape[2]
        batch = f" (sample {view.sample} of {view.shape[0]})" if view.shape[0] > 1 else ""
        if view.columns is not None:  # a page of a dictionary's concepts
            return f"{t} tokens x {len(view.columns)} of {d} {view.unit}s{batch}, most active first"
        edited = "edited − unedited: " if self.difference_heat is not None else ""
        # Black rows read alike; no gradient at all (a causal model's later tokens) is said.
        n = 0 if view.grad_norms is None else int(np.count_nonzero(view.grad_norms == 0))
        zero = f" · gradient exactly 0 at {n} of {t} tokens" if n else ""
        return f"{edited}{t} tokens x {d} features{batch}{zero}"

    def _on_token_hovered(self, row: int, col: int, gradient: bool) -> None:
        if (view := self.token_view) is None:
            return
        diff = self.difference_heat
        if row < 0:
            text = ""
        elif diff is not None and not gradient:
            value = float(diff[row, col])
            text = f"token {row} {view.tokens[row]!r}, feature {col}: edited − unedited {value:.4g}"
        else:
            text = view.describe(row, col, gradient=gradient)
        self.status_label.setText(text or self._token_description())

    def _on_token_clicked(self, _row: int, col: int) -> None:
        if (view := self.token_view) is not None and view.columns is not None and col >= 0:
            self.tile_clicked.emit(self.name, int(view.columns[col]))  # a concept: its view

    def _on_token_context(self, _row: int, col: int, screen: QtCore.QPoint) -> None:
        if (view := self.token_view) is None or col < 0:
            return
        if view.columns is not None:  # a concept's column: its menu
            self.tiles_context_requested.emit(self.name, [int(view.columns[col])], screen)
        else:  # a feature's (an image panel's channel): ablate, scale, patch, show concepts
            self.channels_context_requested.emit(self.name, [col], screen)

    def _update_gradient_visibility(self) -> None:
        if (view := getattr(self, "token_view", None)) is None:  # in LayerPanel.__init__
            super()._update_gradient_visibility()
            return
        # Never shown first by the base class: a shown widget lays out all visible ancestors.
        self.gradient_slot.setHidden(True)
        if self.token_grad_canvas is not None:
            shown = self._gradients_visible and view.grad_heat is not None
            self.token_grad_canvas.setVisible(shown)

    def _show_description(self) -> None:
        if getattr(self, "token_view", None) is not None:
            self.status_label.setText(self._token_description())
        else:
            super()._show_description()

    def clear(self) -> None:
        self.set_tokens(None)
        super().clear()
