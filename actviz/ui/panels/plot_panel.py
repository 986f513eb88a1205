"""PlotPanel: a panel holding one pyqtgraph plot with a hover read-out line under it, and the
panels built on it: :class:`HistogramPanel`, and :class:`GradFlowPanel` (per-layer gradient L2
norm on a log scale, to spot vanishing/exploding flow)."""

from __future__ import annotations

import math
import re

import numpy as np
import pyqtgraph as pg
from PySide6 import QtCore, QtGui, QtWidgets

from actviz.ui.panels import style
from actviz.ui.panels.base import PanelBase
from actviz.ui.panels.overlay import layer_row
from actviz.ui.panels.view_slot import bar_series

LABEL_GAP_PX = 6  #: Pixels kept free between two bar labels.
#: A label is elided to at most this width, so one long name does not thin out the others.
MAX_LABEL_PX = 90
#: A bar is named when this many characters of its name fit, else only every k-th bar.
MIN_LABEL_CHARS = 3
VALUE_LABEL_GAP_PX = 4  #: Pixels kept free between two labels of the log-scaled value axis.
#: The layer axis's title, and the one it takes where that does not fit under the bars.
AXIS_TITLE = "layer (execution order)"
SHORT_AXIS_TITLE = "layer"


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
        self.layer_combo.textActivated.connect(self.layer_changed)
        self.content.insertLayout(0, row)
        self.curve = pg.PlotDataItem(
            stepMode="center",
            fillLevel=0,
            fillOutline=True,
            brush=pg.mkBrush(style.BAR_POSITIVE + "99"),
            pen=pg.mkPen(style.BAR_POSITIVE, width=1),
        )
        self.plot.addItem(self.curve)
        self.counts, self.edges = np.zeros(0, dtype=np.float64), np.zeros(0, dtype=np.float64)
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

    def hover_text(self, x: float) -> str | None:
        """Read-out for value ``x``: the bin holding it and its count (None outside)."""
        if self.counts.size == 0:
            return None
        index = int(np.searchsorted(self.edges, x, side="right")) - 1
        if not 0 <= index < self.counts.size:
            return None
        low, high = style.format_value(self.edges[index]), style.format_value(self.edges[index + 1])
        return f"[{low}, {high})  count {int(self.counts[index])}"


def _elide(name: str, width: float, metrics: QtGui.QFontMetricsF) -> str:
    """``name`` shortened to ``width`` pixels, keeping its trailing number ("bl…1")."""
    if metrics.horizontalAdvance(name) <= width:
        return name
    tail = re.search(r"[\d.]{0,4}$", name).group(0)  # type: ignore[union-attr]
    head = name[: len(name) - len(tail)]
    for keep in range(len(head) - 1, 0, -1) if tail else ():
        text = f"{head[:keep]}…{tail}"
        if metrics.horizontalAdvance(text) <= width:
            return text
    return metrics.elidedText(name, QtCore.Qt.TextElideMode.ElideRight, width)


def _short(name: str) -> str:
    # Only the last component fits under a bar; a bare index ("layer1.0") keeps its parent.
    parts = name.split(".")
    if len(parts) > 1 and parts[-1].isdigit():
        return ".".join(parts[-2:])
    return parts[-1] or "(model)"


class LayerAxis(pg.AxisItem):
    """A bottom axis naming the bars (every k-th where crowded), labels never overlapping."""

    def __init__(self) -> None:
        super().__init__("bottom")
        self.names: list[str] = []
        #: Width a label may take at the current step (set by :meth:`tickValues`).
        self.slot_px = float(MAX_LABEL_PX)
        self.step = 1  #: Bars between two labels at the current zoom.

    def set_names(self, names: list[str]) -> None:
        """Name bar ``i`` after ``names[i]`` (its last dotted component)."""
        self.names = list(names)
        # Room for the names from the start, so the plot does not move on the first paint.
        if (height := math.ceil(self._metrics().height())) > self.textHeight:
            self.textHeight = height
            self._updateHeight()
        self.picture = None
        self.update()

    def _metrics(self) -> QtGui.QFontMetricsF:
        return QtGui.QFontMetricsF(self.style.get("tickFont") or self.font())

    def tickValues(self, minVal: float, maxVal: float, size: float) -> list:  # noqa: N802, N803
        n = len(self.names)
        if n == 0 or maxVal <= minVal or size <= 0:
            return []
        per_bar = size / (maxVal - minVal)
        metrics = self._metrics()
        # A typical name sets the spacing, at most what a few characters need.
        widths = sorted(metrics.horizontalAdvance(_short(name)) for name in self.names)
        readable = metrics.horizontalAdvance("abcd"[: MIN_LABEL_CHARS - 1] + "…")
        typical = min(widths[len(widths) // 2], MAX_LABEL_PX, readable)
        self.step = max(1, math.ceil((typical + LABEL_GAP_PX) / max(per_bar, 1e-9)))
        self.slot_px = self.step * per_bar - LABEL_GAP_PX
        # pyqtgraph drops a label that sticks out of the axis: keep the first and last inside.
        half = min(self.slot_px, MAX_LABEL_PX) / 2 / per_bar
        first = max(0, math.ceil(minVal + half))
        last = min(n - 1, math.floor(maxVal - half))
        return [(float(self.step), [float(i) for i in range(first, last + 1, self.step)])]

    def tickStrings(self, values: list, scale: float, spacing: float) -> list[str]:  # noqa: N802
        metrics = self._metrics()
        # A little under the slot: the painter rounds its text box up to whole pixels.
        width = max(self.slot_px - 2.0, 0.0)
        out = []
        for value in values:
            index = int(round(value))
            name = _short(self.names[index]) if 0 <= index < len(self.names) else ""
            out.append(_elide(name, width, metrics))
        return out


class LogValueAxis(pg.AxisItem):
    """A left log axis labelled on whole decades only (pyqtgraph's minor labels overlap)."""

    def tickValues(self, minVal: float, maxVal: float, size: float) -> list:  # noqa: N802, N803
        if not self.logMode or maxVal <= minVal or size <= 0:
            return super().tickValues(minVal, maxVal, size)
        per_decade = size / (maxVal - minVal)
        lo, hi = math.ceil(minVal - 1e-9), math.floor(maxVal + 1e-9)
        if hi < lo:  # less than a decade in view: pyqtgraph's own ticks are fine there
            return super().tickValues(minVal, maxVal, size)
        metrics = QtGui.QFontMetricsF(self.style.get("tickFont") or self.font())
        label_px = metrics.height() + VALUE_LABEL_GAP_PX
        step = max(1, math.ceil(label_px / max(per_decade, 1e-9)))
        # A label centred on the top edge would be cut by what is above the plot.
        top = maxVal - (label_px - VALUE_LABEL_GAP_PX) / 2 / per_decade
        major = [float(v) for v in range(lo, hi + 1) if v % step == 0 and v <= top + 1e-9]
        levels = [(float(step), major or [float(lo)])]
        if step == 1 and per_decade >= 40:
            minor = [
                d + math.log10(k)
                for d in range(lo - 1, hi + 1)
                for k in range(2, 10)
                if minVal <= d + math.log10(k) <= maxVal
            ]
            levels.append((0.1, minor))  # below 1: :meth:`tickStrings` leaves them blank
        return levels

    def tickStrings(self, values: list, scale: float, spacing: float) -> list[str]:  # noqa: N802
        if not self.logMode:
            return super().tickStrings(values, scale, spacing)
        # One notation for every decade (pyqtgraph mixes "0.1" and "10¹" on one axis).
        return [""] * len(values) if spacing < 1 else [_decade(int(round(v))) for v in values]


def _decade(power: int) -> str:
    """10**power as a tick label: plain from 0.001 to 1000, else "1e-5"."""
    if 0 <= power <= 3:
        return str(10**power)
    return f"{10.0**power:.{-power}f}" if -3 <= power < 0 else f"1e{power}"


class GradFlowPanel(PlotPanel):
    """Each layer's gradient norm (log10): zeros are grey stubs, NaN/Inf full-height red bars."""

    def __init__(self, parent: QtWidgets.QWidget | None = None) -> None:
        super().__init__("Gradient flow", AXIS_TITLE, "gradient L2 norm", parent)
        self.axis, self.value_axis = LayerAxis(), LogValueAxis("left")
        self.plot.setAxisItems({"bottom": self.axis, "left": self.value_axis})
        style.style_axis(self.axis, AXIS_TITLE)
        # Its width as drawn (the label's own font and size), for the fit on resize.
        self._title_px = float(self.axis.label.boundingRect().width())
        self.plot.vb.sigResized.connect(self._fit_axis_title)
        style.style_axis(self.value_axis, "gradient L2 norm")
        self.plot.setLogMode(x=False, y=True)
        # Room for "0.0001" plus the rotated label; the auto width lets them overlap.
        self.plot.getAxis("left").setWidth(64)
        self.plot.setMouseEnabled(x=True, y=False)
        self.plot.disableAutoRange()
        self.finite_bars, self.zero_bars, self.bad_bars = bars = [
            bar_series(colour, y0=np.zeros(0), y1=np.zeros(0))
            for colour in (style.BAR_GRADIENT, style.BAR_ZERO, style.BAR_BAD)
        ]
        for item in bars:
            self.plot.addItem(item)
        self.names: list[str] = []
        self.norms = np.zeros(0, dtype=np.float64)
        self.floor = 0.0
        self.setMinimumHeight(200)
        self.clear()

    def _fit_axis_title(self, *_args: object) -> None:
        """The whole axis title where it fits under the bars, else "layer"."""
        room = self.plot.vb.sceneBoundingRect().width()
        text = AXIS_TITLE if self._title_px <= room else SHORT_AXIS_TITLE
        if self.axis.labelText != text:
            style.style_axis(self.axis, text)

    def set_norms(self, names: list[str], norms: np.ndarray) -> None:
        """Show one bar per layer (``norms`` may hold 0, NaN and Inf)."""
        norms = np.asarray(norms, dtype=np.float64).reshape(-1)
        if len(names) != norms.size:
            raise ValueError(f"{len(names)} names but {norms.size} norms")
        self.names, self.norms = list(names), norms
        x = np.arange(norms.size, dtype=np.float64)
        good = np.isfinite(norms) & (norms > 0)
        zero, bad = norms == 0, ~np.isfinite(norms)
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
        self.axis.set_names(self.names)
        self.plot.setRange(
            xRange=(-0.6, max(norms.size, 1) - 0.4), yRange=(floor, top), padding=0.0
        )
        zeros, problems = int(zero.sum()), int(bad.sum())
        summary = f"{norms.size} layers" + (f", {zeros} with zero gradient" if zeros else "")
        self.set_summary(summary + (f", {problems} NaN/Inf" if problems else ""))

    def clear(self) -> None:
        """Show no layers."""
        self.set_norms([], np.zeros(0))
        self.set_summary("no gradients")

    def hover_text(self, x: float) -> str | None:
        """Read-out for the bar nearest ``x``: its index, full layer name and norm."""
        index = int(round(x))
        if not 0 <= index < len(self.names):
            return None
        norm = float(self.norms[index])
        value = "0 (no gradient)" if norm == 0.0 else style.format_value(norm)
        return f"{index}: {self.names[index]}  ‖grad‖ {value}"
