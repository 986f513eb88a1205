"""SimilarityChart: two runs' cosine similarity and relative L2 per layer, divergence marked."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import pyqtgraph as pg
from PySide6 import QtCore, QtGui, QtWidgets

from actviz.ui.panels import style
from actviz.ui.panels.plot_panel import LayerAxis, PlotPanel

#: Colours of the two series and of the first-divergence mark.
COSINE_COLOUR = "#3b6ea5"
DISTANCE_COLOUR = "#e07b39"
DIVERGENCE_COLOUR = "#d93025"
CLICK_REACH = 0.5  #: A click this far (in layers) from a point still picks it.
#: The chart asks for at least this width, so the first divergence's name has some room.
MIN_CHART_PX = 200
TEXT_SLACK_PX = 3  #: Pixels kept free between the first divergence's name and the plot's edge.


def _series(colour: str, symbol: str, name: str) -> pg.PlotDataItem:
    return pg.PlotDataItem(
        pen=pg.mkPen(colour, width=2),
        symbol=symbol,
        symbolSize=8,
        symbolBrush=colour,
        symbolPen=pg.mkPen(colour),
        name=name,
    )


class SimilarityChart(PlotPanel):
    """Cosine similarity and relative L2 distance per layer, in depth order (``layer_clicked``)."""

    layer_clicked = QtCore.Signal(str)

    def __init__(self, parent: QtWidgets.QWidget | None = None) -> None:
        super().__init__("Similarity by depth", "layer (depth order)", "", parent)
        self.axis = LayerAxis()
        self.plot.setAxisItems({"bottom": self.axis})
        style.style_axis(self.axis, "layer (depth order)")
        self.plot.getAxis("left").setWidth(40)
        self.plot.setMouseEnabled(x=True, y=False)
        self.plot.disableAutoRange()
        # The key above the plot, not a legend inside it that would cover points.
        self.key_label = QtWidgets.QLabel(
            f'<span style="color:{COSINE_COLOUR}">&#9679; cosine similarity</span>'
            f'&nbsp;&nbsp;&nbsp;<span style="color:{DISTANCE_COLOUR}">&#9632; relative L2 '
            f"distance</span>&nbsp;&nbsp;&nbsp;"
            f'<span style="color:{DIVERGENCE_COLOUR}">&#9474; first divergence</span>',
            textFormat=QtCore.Qt.TextFormat.RichText,
            wordWrap=True,  # two lines in a narrow tab, never a sideways scroll
        )
        self.content.insertWidget(0, self.key_label)
        self.cosine_curve = _series(COSINE_COLOUR, "o", "cosine similarity")
        self.distance_curve = _series(DISTANCE_COLOUR, "s", "relative L2 distance")
        self.plot.addItem(self.cosine_curve)
        self.plot.addItem(self.distance_curve)
        dashed = pg.mkPen(DIVERGENCE_COLOUR, width=2, style=QtCore.Qt.PenStyle.DashLine)
        self.divergence_line = pg.InfiniteLine(angle=90, movable=False, pen=dashed)
        self.divergence_text = pg.TextItem("", color=DIVERGENCE_COLOUR, anchor=(0, 0))
        for item in (self.divergence_line, self.divergence_text):
            item.setVisible(False)
            self.plot.addItem(item, ignoreBounds=True)
        self._text_y = 0.0
        # The y range: its bottom, the highest point, and the top with the name's band.
        self._y_low, self._y_high, self._y_top = 0.0, 1.0, 1.0
        self.setMinimumHeight(180)
        # The name beside the divergence line is fitted to the room the plot has left.
        self.plot.vb.sigResized.connect(self._fit_divergence_text)
        self.plot.vb.sigXRangeChanged.connect(self._fit_divergence_text)
        self.plot_widget.scene().sigMouseClicked.connect(self._on_clicked)
        self.clear()  # names, calls, cosine, rel_l2, max_abs, divergence, tol: set_values

    def minimumSizeHint(self) -> QtCore.QSize:  # noqa: N802 - Qt name
        hint = super().minimumSizeHint()
        return QtCore.QSize(max(hint.width(), MIN_CHART_PX), hint.height())

    def set_comparison(self, comparison: Any) -> None:
        """Show ``comparison``: one point per layer and call, in depth order."""
        diffs: Sequence[Any] = tuple(comparison.layers)
        first = comparison.first_divergence
        at = (first.name, first.call_index) if first is not None else None
        divergence = next((i for i, d in enumerate(diffs) if (d.name, d.call_index) == at), None)
        self.set_values(
            [d.name for d in diffs],
            [d.cosine for d in diffs],
            [d.rel_l2 for d in diffs],
            [d.max_abs for d in diffs],
            calls=[d.call_index for d in diffs],
            divergence=divergence,
            tol=float(comparison.tol),
        )

    def set_values(
        self,
        names: Sequence[str],
        cosine: Sequence[float],
        rel_l2: Sequence[float],
        max_abs: Sequence[float],
        *,
        calls: Sequence[int] | None = None,
        divergence: int | None = None,
        tol: float = 0.0,
    ) -> None:
        """Show one point per layer; ``divergence``: the first past ``tol`` (None: agreed)."""
        n = len(names)
        self.names: list[str] = list(names)
        self.calls: list[int] = list(calls) if calls is not None else [0] * n
        self.cosine = np.asarray(cosine, dtype=np.float64).reshape(-1)
        self.rel_l2 = np.asarray(rel_l2, dtype=np.float64).reshape(-1)
        self.max_abs = np.asarray(max_abs, dtype=np.float64).reshape(-1)
        if not (self.cosine.size == self.rel_l2.size == self.max_abs.size == n):
            raise ValueError(f"{n} names but {self.cosine.size} / {self.rel_l2.size} values")
        #: Index of the first divergent layer (None: none past the tolerance).
        self.divergence = divergence if divergence is not None and 0 <= divergence < n else None
        self.tol = tol
        x = np.arange(n, dtype=np.float64)
        # NaN (an empty layer) breaks the line there rather than hiding the whole series.
        self.cosine_curve.setData(x, self.cosine, connect="finite")
        self.distance_curve.setData(x, self.rel_l2, connect="finite")
        self.axis.set_names([self._label(i) for i in range(n)])
        values = np.concatenate([self.cosine, self.rel_l2])
        values = values[np.isfinite(values)]
        low = min(0.0, float(values.min())) if values.size else 0.0
        high = max(1.0, float(values.max())) if values.size else 1.0
        pad = 0.06 * (high - low)
        top = high + 3 * pad  # a band above the points for the divergence's name
        self._y_low, self._y_high, self._y_top = low - pad, high, top
        self.plot.setRange(xRange=(-0.5, max(n, 1) - 0.5), yRange=(low - pad, top), padding=0.0)
        self.divergence_line.setVisible(self.divergence is not None)
        if self.divergence is not None:
            self.divergence_line.setPos(float(self.divergence))
        self._text_y = top
        self._fit_divergence_text()
        self.set_summary(self._summary_text())

    def _fit_divergence_text(self, *_args: object) -> None:
        """Name the first divergence beside its line, cut to the room there is."""
        item, d, vb = self.divergence_text, self.divergence, self.plot.vb
        area = vb.sceneBoundingRect()
        x = vb.mapViewToScene(QtCore.QPointF(float(d or 0), self._text_y)).x()
        if d is None or area.width() <= 0 or not area.left() <= x <= area.right():
            item.setVisible(False)  # no divergence, not laid out yet, or panned out of view
            return
        metrics = QtGui.QFontMetricsF(item.textItem.font())
        pad = 2 * item.textItem.document().documentMargin() + TEXT_SLACK_PX
        rooms = {"right": area.right() - x - pad, "left": x - area.left() - pad}
        n = len(self.names)
        sides = ["left", "right"] if n > 1 and d > (n - 1) / 2 else ["right", "left"]
        full = f"first divergence: {self._label(d)}"
        fits = [side for side in sides if metrics.horizontalAdvance(full) <= rooms[side]]
        side = fits[0] if fits else max(sides, key=lambda s: rooms[s])
        text = full
        if not fits:
            room = max(0.0, rooms[side])
            text = metrics.elidedText(self._label(d), QtCore.Qt.TextElideMode.ElideMiddle, room)
        if not text or metrics.horizontalAdvance(text) > rooms[side]:
            item.setVisible(False)
            return
        item.setText(text)
        item.setAnchor((1, 0) if side == "left" else (0, 0))
        span_px = self._fit_text_band(metrics.height() + pad)
        # Half a pixel under the top edge: at the edge itself, rounding put it outside.
        item.setPos(float(d), self._text_y - 0.5 * (self._text_y - self._y_low) / span_px)
        item.setVisible(True)

    def _fit_text_band(self, text_px: float) -> float:
        """Keep ``text_px`` free above the highest point; returns the plot's height in pixels."""
        span_px = max(self.plot.vb.sceneBoundingRect().height(), 1.0)
        low, high, top = self._y_low, self._y_high, self._y_top
        if span_px > 2 * text_px:
            # (top - high) / (top - low) * span_px >= text_px, solved for top.
            top = max(top, (high * span_px - low * text_px) / (span_px - text_px))
        if abs(top - self._text_y) > 1e-9:
            self._text_y = top
            self.plot.setYRange(low, top, padding=0.0)
        return span_px

    def clear(self) -> None:
        """Show no comparison."""
        self.set_values([], [], [], [])
        self.set_summary("no comparison yet")

    def _label(self, index: int) -> str:
        name, calls = self.names[index] or "(model)", self.calls
        repeated = calls.count(calls[index]) < len(calls) and any(c > 0 for c in calls)
        return f"{name} (call {calls[index]})" if repeated or calls[index] > 0 else name

    def _summary_text(self) -> str:
        if (n := len(self.names)) == 0:
            return "no layer in common"
        if (d := self.divergence) is None:
            return f"{n} layers · no layer differs beyond rel L2 {self.tol:g}"
        rel = style.format_value(float(self.rel_l2[d]))
        return f"{n} layers · first divergence at {self._label(d)} (rel L2 {rel} > {self.tol:g})"

    def index_at(self, x: float) -> int | None:
        """The layer whose point is nearest data x-coordinate ``x`` (None off the points)."""
        index = int(round(x))
        return index if 0 <= index < len(self.names) and abs(x - index) <= CLICK_REACH else None

    def hover_text(self, x: float) -> str | None:
        """``3: layer2 · cosine 0.981 · rel L2 0.192 · max |Δ| 1.52`` for the layer at ``x``."""
        if (index := self.index_at(x)) is None:
            return None
        fmt = style.format_value
        text = (
            f"{index}: {self._label(index)} · cosine {fmt(self.cosine[index])} · "
            f"rel L2 {fmt(self.rel_l2[index])} · max |Δ| {fmt(self.max_abs[index])}"
        )
        if index == self.divergence:
            text += " · first divergence"
        return text + " · click: show in Layers"

    def point_position(self, index: int) -> QtCore.QPoint:
        """Where layer ``index``'s cosine point is drawn in the viewport (tests click there)."""
        scene = self.plot.vb.mapViewToScene(QtCore.QPointF(float(index), float(self.cosine[index])))
        return self.plot_widget.mapFromScene(scene)

    def _on_clicked(self, event: Any) -> None:
        vb, scene = self.plot.vb, event.scenePos()
        inside = vb.sceneBoundingRect().contains(scene)
        index = self.index_at(vb.mapSceneToView(scene).x()) if inside else None
        if index is not None and event.button() == QtCore.Qt.MouseButton.LeftButton:
            self.layer_clicked.emit(self.names[index])
