"""The Atlas tab's widgets (the map, controls, legend, thumbnail strips) and its dots' colours."""

from __future__ import annotations

import html
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any

import numpy as np
import pyqtgraph as pg
from PySide6 import QtWidgets
from PySide6.QtCore import QPointF, QRectF, Qt, Signal

from actviz.data.atlas_image import SELECTED_RGB, class_colours
from actviz.data.atlas_map import points_in_polygon
from actviz.ui.atlas.map_items import RasterDots, SelectBox
from actviz.ui.host import refill_combo
from actviz.ui.panels import style

#: What the tab says before a dataset was scanned.
EMPTY_TEXT = "Scan a dataset first (Data > Scan a dataset…)"
HOVER_PX = 8.0  #: Pixels from a dot within which the pointer is over it.
#: What the line over the nearest images says until a dot is pointed at.
HOVER_HINT = "Point at an image on the map; click it to open it"
#: What the selection's title says while nothing is selected.
SELECTION_HINT = "Selection: drag a rectangle (Select) or draw a shape around images (Lasso)"
#: The frame of selected dots (the report's picture draws the same).
SELECTION_RGB = np.array(SELECTED_RGB, np.uint8)
THUMB = 72  #: Side of the thumbnails in the strips.
#: Room left beyond the input's star when the view widens to show it (a share of the span).
MARKER_MARGIN = 0.06
#: At most this many times the view's size to show the star (the dots would be specks).
MAX_WIDEN = 4.0
NARROW_TAB_PX = 560  #: Below this width the strips go under the map, not beside it.
#: The map's least size (higher with the strips under it: the page scrolls instead).
MIN_MAP_W, MIN_MAP_H, MIN_MAP_H_NARROW = 160, 200, 280
#: The colour-by choices, in the combo's order.
COLOUR_MODES = ("Class", "Prediction", "Correct", "Channel")
GREY = np.array([150, 150, 150], np.uint8)  #: Dots whose class (or prediction) is unknown.
LEVELS = 64  #: Steps of the channel colour scale: a few dozen brushes for any number of dots.


@dataclass(frozen=True)
class Colouring:
    """Per-dot ``index`` into ``palette`` (``(P, 3)`` uint8), ``legend`` rows ``(name, rgb,
    count)``, a channel's ``scale`` and a ``note`` when the mode shows nothing useful."""

    index: np.ndarray
    palette: np.ndarray
    legend: tuple[tuple[str, tuple[int, int, int], int], ...] = ()
    scale: tuple[float, float] | None = None
    note: str = ""

    def rgb(self) -> np.ndarray:
        """``(M, 3)`` uint8 colours."""
        return self.palette[self.index]


def model_labels(
    labels: np.ndarray | None, class_names: Sequence[str] | None, categories: Sequence[str] | None
) -> np.ndarray | None:
    """The folder's labels as the model's class indices, by name (-1: none; None: unknown)."""
    if labels is None or not class_names or not categories:
        return None
    where = {name: i for i, name in enumerate(categories)}
    lookup = np.array([where.get(name, -1) for name in class_names] + [-1], np.int64)
    return lookup[np.where(np.asarray(labels) >= 0, labels, len(class_names))]


def _by_category(values: np.ndarray, names: Sequence[str], note_missing: str) -> Colouring:
    n = max(len(names), int(values.max()) + 1 if values.size else 0, 1)
    palette = np.concatenate([class_colours(n), GREY[None]], axis=0)
    index = np.where(values >= 0, values, n).astype(np.int64)
    counts = np.bincount(index, minlength=n + 1)
    legend = _legend([names[i] if i < len(names) else str(i) for i in range(n)], palette, counts)
    return Colouring(index, palette, legend, note="" if legend else note_missing)


def _legend(names: Sequence[str], palette: np.ndarray, counts: np.ndarray) -> tuple:
    """The legend rows of the colours ``palette[i]`` named ``names[i]`` that dots have."""
    return tuple(
        (name, tuple(int(v) for v in palette[i]), int(counts[i]))
        for i, name in enumerate(names)
        if counts[i]
    )


def colouring(
    mode: str,
    count: int,
    *,
    labels: np.ndarray | None = None,
    class_names: Sequence[str] | None = None,
    predictions: np.ndarray | None = None,
    categories: Sequence[str] | None = None,
    channel_values: np.ndarray | None = None,
) -> Colouring:
    """Colours of ``count`` dots for one of :data:`COLOUR_MODES`.

    ``mode``: "Class" (``labels``, ``class_names``), "Prediction" (``predictions``,
    ``categories``), "Correct" (prediction == class) or "Channel" (``channel_values``)."""
    grey = Colouring(np.zeros(count, np.int64), GREY[None])
    if mode == "Class":
        if labels is None:
            return replace(grey, note="The folder has no class folders.")
        return _by_category(np.asarray(labels), list(class_names or ()), "No classes.")
    if mode == "Prediction":
        if predictions is None:
            return replace(grey, note="No classifier layer in the scan: no predictions.")
        return _by_category(np.asarray(predictions), list(categories or ()), "No predictions.")
    if mode == "Correct":
        truth = model_labels(labels, class_names, categories)
        if predictions is None or truth is None:
            need = "Needs class folders named like the model's classes and a classifier layer."
            return replace(grey, note=need)
        known = truth >= 0
        right = known & (np.asarray(predictions) == truth)
        index = np.where(known, np.where(right, 0, 1), 2).astype(np.int64)
        palette = np.array([(60, 170, 75), (220, 50, 50), GREY], np.uint8)  # green, red, grey
        names = ("correct", "wrong", "class unknown to the model")
        return Colouring(index, palette, _legend(names, palette, np.bincount(index, minlength=3)))
    if mode == "Channel":
        if channel_values is None:
            return grey
        v = np.asarray(channel_values, np.float64)
        finite = np.isfinite(v)
        lo, hi = (float(v[finite].min()), float(v[finite].max())) if finite.any() else (0.0, 0.0)
        t = (v - lo) / (hi - lo) if hi > lo else np.zeros_like(v)
        index = np.clip(np.rint(np.nan_to_num(t) * (LEVELS - 1)), 0, LEVELS - 1).astype(np.int64)
        return Colouring(index, viridis(LEVELS), scale=(lo, hi))
    raise ValueError(f"unknown colour mode {mode!r}; one of {', '.join(COLOUR_MODES)}")


def viridis(levels: int) -> np.ndarray:
    """``(levels, 3)`` uint8 steps of viridis (the channel scale and its colour bar)."""
    from actviz.display.colormaps import table

    lut = table("viridis")[:, :3]
    return lut[np.linspace(0, len(lut) - 1, levels).round().astype(np.int64)].astype(np.uint8)


class AtlasView(QtWidgets.QWidget):
    """The tab: controls, the map, its legend, and the strips beside it.

    Signals: ``options_changed`` (layer or method), ``colour_changed``, ``hovered(int)`` (-1:
    none), ``clicked(int)``, ``rect_selected(QRectF)``, ``lasso_selected(ndarray)`` (``(K, 2)``
    vertices), in view coordinates."""

    options_changed = Signal()
    colour_changed = Signal()
    hovered = Signal(int)
    clicked = Signal(int)
    rect_selected = Signal(object)
    lasso_selected = Signal(object)

    def __init__(self, parent: QtWidgets.QWidget | None = None) -> None:
        super().__init__(parent)
        self.coords = np.zeros((0, 2), np.float64)
        # Below its layout's least size the tab scrolls (a tab's minimum size is every tab's).
        root = style.bare_box(self, vertical=True)
        content = QtWidgets.QWidget()
        root.addWidget(style.scroll_area(content, frameless=True))
        outer = QtWidgets.QVBoxLayout(content)
        self.layer_combo = QtWidgets.QComboBox()
        self.layer_combo.setToolTip("The layer whose view of the dataset the map shows")
        tip = "PCA: exact, fast. UMAP (pip install actviz[atlas]): keeps neighbourhoods, slower"
        self.method_combo = QtWidgets.QComboBox(toolTip=tip)
        self.colour_combo = QtWidgets.QComboBox()
        self.colour_combo.addItems(COLOUR_MODES)
        self.colour_combo.setToolTip("Colour the images by class, prediction, correctness, or "
                                     "one channel's mean activation")  # fmt: skip
        self.channel_spin = QtWidgets.QSpinBox(prefix="ch ", enabled=False)
        # Tool buttons: a push button's least width (80 px) would widen the tab's second row.
        self.select_button = _text_button(
            "Select", "Drag a rectangle on the map to select images (off: drag pans)"
        )
        self.lasso_button = _text_button(
            "Lasso", "Draw a free shape around images on the map to select them (off: drag pans)"
        )
        style.fit_combo(self.layer_combo, 12)
        # Tooltips, not captions, in two short rows: the tab's minimum width stays small.
        for row in (
            (self.layer_combo, self.method_combo),
            (self.colour_combo, self.channel_spin, self.select_button, self.lasso_button),
        ):
            bar = QtWidgets.QHBoxLayout()
            for w in row:
                bar.addWidget(w)
            bar.addStretch(1)
            outer.addLayout(bar)
        self.status_label = style.ElidedLabel("")
        outer.addWidget(self.status_label)

        self.stack = QtWidgets.QStackedWidget()
        self.empty_label = _wrapped(EMPTY_TEXT, alignment=Qt.AlignmentFlag.AlignCenter)
        self.stack.addWidget(self.empty_label)

        split = QtWidgets.QSplitter(Qt.Orientation.Horizontal, childrenCollapsible=False)
        left = QtWidgets.QWidget()
        lv = style.bare_box(left, vertical=True)
        self.box = SelectBox()
        self.plot = pg.PlotWidget(viewBox=self.box, background=style.PLOT_BACKGROUND)
        style.style_plot(self.plot.getPlotItem())  # no menus, which would outlive the window
        self.plot.getPlotItem().hideAxis("left")
        self.plot.getPlotItem().hideAxis("bottom")
        self.plot.setMinimumSize(MIN_MAP_W, MIN_MAP_H)
        self.dots = RasterDots()
        self.neighbour_dots = pg.ScatterPlotItem(
            size=11, pen=pg.mkPen("k", width=1.5), brush=pg.mkBrush(0, 0, 0, 0)
        )
        # The selection: a black square under each selected dot, one image like the dots.
        self.selected_dots = RasterDots(dot=9)
        self.selected_dots.setZValue(-1)
        self.marker = pg.ScatterPlotItem(
            size=20, symbol="star", pen=pg.mkPen("k", width=1.5), brush=pg.mkBrush(255, 215, 0)
        )
        self.marker.setZValue(10)
        for item in (self.dots, self.selected_dots, self.neighbour_dots, self.marker):
            self.plot.addItem(item)
        lv.addWidget(self.plot, 1)
        self.legend_label = _wrapped("", textFormat=Qt.TextFormat.RichText)
        lv.addWidget(self.legend_label)
        self.colour_bar = QtWidgets.QWidget(visible=False)
        cb = style.bare_box(self.colour_bar)
        self.bar_low, self.bar_high = QtWidgets.QLabel(""), QtWidgets.QLabel("")
        self.bar_image = QtWidgets.QLabel(scaledContents=True)
        self.bar_image.setFixedHeight(12)
        for w, stretch in ((self.bar_low, 0), (self.bar_image, 1), (self.bar_high, 0)):
            cb.addWidget(w, stretch)
        lv.addWidget(self.colour_bar)
        split.addWidget(left)

        right = QtWidgets.QWidget()
        rv = style.bare_box(right, vertical=True)
        self.hover_label = _wrapped(HOVER_HINT)
        self.nearest_title = _wrapped("Nearest in the dataset")
        self.selection_title = _wrapped(SELECTION_HINT)
        self.nearest_strip, self.selection_strip = style.ThumbList(THUMB), style.ThumbList(THUMB)
        for strip in (self.nearest_strip, self.selection_strip):
            # One row of thumbnails with their captions: less cut them in half.
            strip.setMinimumHeight(THUMB + strip.fontMetrics().height() + 16)
        self.channel_list = QtWidgets.QListWidget()
        # The labels keep their height; the strips and the list share the rest.
        rv.addWidget(self.hover_label)
        rv.addWidget(self.nearest_title)
        rv.addWidget(self.nearest_strip, 1)
        rv.addWidget(self.selection_title)
        rv.addWidget(self.selection_strip, 1)
        rv.addWidget(_wrapped("Channels that set the selection apart (click: its channel view)"))
        rv.addWidget(self.channel_list, 1)
        split.addWidget(right)
        split.setStretchFactor(0, 3)
        split.setStretchFactor(1, 1)
        split.setSizes([3000, 1000])  # the map gets most of the width from the start
        self.split = split
        self.stack.addWidget(split)
        outer.addWidget(self.stack, 1)

        self.layer_combo.currentIndexChanged.connect(lambda _i: self.options_changed.emit())
        self.method_combo.currentIndexChanged.connect(lambda _i: self.options_changed.emit())
        self.colour_combo.currentIndexChanged.connect(self._on_colour_mode)
        self.channel_spin.valueChanged.connect(lambda _v: self.colour_changed.emit())
        self.select_button.toggled.connect(self._on_select_toggled)
        self.lasso_button.toggled.connect(self._on_select_toggled)
        self.box.rect_selected.connect(self.rect_selected.emit)
        self.box.lasso_selected.connect(self.lasso_selected.emit)
        scene = self.plot.scene()
        scene.sigMouseMoved.connect(self._on_mouse_moved)
        scene.sigMouseClicked.connect(self._on_mouse_clicked)
        self._hovered = -1

    def resizeEvent(self, event: Any) -> None:  # noqa: N802 (Qt's name)
        super().resizeEvent(event)
        # The strips beside the map on a wide tab, under it on a narrow one.
        narrow = event.size().width() < NARROW_TAB_PX
        if self.is_narrow() == narrow:
            return
        self.split.setOrientation(Qt.Orientation.Vertical if narrow else Qt.Orientation.Horizontal)
        # Down a narrow tab, the map over the strips (3:2); across, most of the width.
        self.split.setSizes([3000, 2000] if narrow else [3000, 1000])
        self.plot.setMinimumHeight(MIN_MAP_H_NARROW if narrow else MIN_MAP_H)

    def is_narrow(self) -> bool:
        """Whether the strips are under the map (a tab under :data:`NARROW_TAB_PX` wide)."""
        return self.split.orientation() == Qt.Orientation.Vertical

    def show_empty(self, text: str = EMPTY_TEXT) -> None:
        """The message instead of a map."""
        self.empty_label.setText(text)
        self.stack.setCurrentIndex(0)

    def show_map(self) -> None:
        self.stack.setCurrentIndex(1)

    #: ``(combo, items, current)``: fill a combo without announcing it (the owner rebuilds).
    set_choices = staticmethod(refill_combo)

    def set_coords(self, coords: np.ndarray, colours: Colouring) -> None:
        """Put the dots at ``coords`` (M, 2) in ``colours``; the old map's marks go."""
        self.coords, self._hovered = np.asarray(coords, np.float64)[:, :2], -1
        # Their places were on the map before: left there, the refit would cover them too.
        self.set_marker(None)
        self.neighbour_dots.setData([], [])
        self.selected_dots.set_data(np.zeros((0, 2)), np.zeros((0, 3), np.uint8))
        self.set_colours(colours, refit=True)

    def set_colours(self, colours: Colouring, *, refit: bool = False) -> None:
        self.dots.set_data(self.coords, colours.rgb())
        if refit and len(self.coords):
            self.box.autoRange(padding=0.05)
        legend = "  ".join(
            f'<span style="color: rgb{rgb}">&#9632;</span> {html.escape(name, quote=False)} ({count})'
            for name, rgb, count in colours.legend
        )
        self.legend_label.setText(legend or colours.note)
        if colours.scale is not None:
            lo, hi = colours.scale
            self.bar_image.setPixmap(style.rgb_pixmap(colours.palette[None, :, :3]))
            self.bar_low.setText(f"{lo:.3g}")
            self.bar_high.setText(f"{hi:.3g}")
        self.colour_bar.setVisible(colours.scale is not None)

    def set_marker(self, xy: np.ndarray | None) -> bool:
        """Mark the input's place (None: off the map), widening at most :data:`MAX_WIDEN`
        times; whether it is in view."""
        if xy is None:
            self.marker.setData([], [])
            return False
        x, y = float(xy[0]), float(xy[1])
        self.marker.setData([x], [y])
        if not (np.isfinite(x) and np.isfinite(y)):
            return False
        (x0, x1), (y0, y1) = self.box.viewRange()
        if x0 <= x <= x1 and y0 <= y <= y1:
            return True
        # The view grows (never shrinks), the star MARKER_MARGIN from the edge.
        nx0, nx1 = min(x0, x), max(x1, x)
        ny0, ny1 = min(y0, y), max(y1, y)
        mx, my = MARKER_MARGIN * (nx1 - nx0), MARKER_MARGIN * (ny1 - ny0)
        xr = (nx0 - (mx if x < x0 else 0), nx1 + (mx if x > x1 else 0))
        yr = (ny0 - (my if y < y0 else 0), ny1 + (my if y > y1 else 0))
        if xr[1] - xr[0] > MAX_WIDEN * (x1 - x0) or yr[1] - yr[0] > MAX_WIDEN * (y1 - y0):
            return False
        self.box.setRange(xRange=xr, yRange=yr, padding=0)
        return True

    def marker_position(self) -> tuple[float, float] | None:
        x, y = self.marker.getData()
        return (float(x[0]), float(y[0])) if len(x) else None

    def mark_rows(self, item: pg.ScatterPlotItem | RasterDots, rows: Sequence[int]) -> None:
        """Mark dots ``rows`` with ``item`` (the neighbours' rings, the selection's rims)."""
        rows = np.asarray(rows, np.int64)
        if isinstance(item, RasterDots):
            rgb = np.broadcast_to(SELECTION_RGB, (len(rows), 3))
            item.set_data(self.coords[rows].reshape(-1, 2), rgb)
        else:
            item.setData(x=self.coords[rows, 0], y=self.coords[rows, 1])

    def row_at(self, view: QPointF) -> int:
        """The dot nearest ``view`` (view coordinates) within :data:`HOVER_PX`, else -1."""
        if not len(self.coords):
            return -1
        px, py = self.box.viewPixelSize()
        if px <= 0 or py <= 0:
            return -1
        d = ((self.coords[:, 0] - view.x()) / px) ** 2 + ((self.coords[:, 1] - view.y()) / py) ** 2
        row = int(np.argmin(d))
        return row if d[row] <= HOVER_PX**2 else -1

    def widget_pos_of(self, row: int) -> Any:
        """Where dot ``row`` is in the plot widget's own coordinates (tests point there)."""
        return self.plot.mapFromScene(self.box.mapViewToScene(QPointF(*self.coords[row, :2])))

    def rows_in(self, rect: QRectF) -> np.ndarray:
        """The dots inside ``rect`` (view coordinates)."""
        x, y = self.coords[:, 0], self.coords[:, 1]
        inside = (x >= rect.left()) & (x <= rect.right()) & (y >= rect.top()) & (y <= rect.bottom())
        return np.flatnonzero(inside)

    def rows_in_shape(self, shape: np.ndarray) -> np.ndarray:
        """The dots inside the closed ``(K, 2)`` polygon ``shape`` (view coordinates)."""
        return np.flatnonzero(points_in_polygon(self.coords, shape))

    def _on_mouse_moved(self, scene_pos: QPointF) -> None:
        if self.stack.currentIndex() != 1:
            return
        if (row := self.row_at(self.box.mapSceneToView(scene_pos))) != self._hovered:
            self._hovered = row
            self.hovered.emit(row)

    def _on_mouse_clicked(self, ev: Any) -> None:
        if ev.button() != Qt.MouseButton.LeftButton or self.stack.currentIndex() != 1:
            return
        if (row := self.row_at(self.box.mapSceneToView(ev.scenePos()))) >= 0:
            ev.accept()
            self.clicked.emit(row)

    def _on_colour_mode(self, _index: int) -> None:
        self.channel_spin.setEnabled(self.colour_combo.currentText() == "Channel")
        self.colour_changed.emit()

    def _on_select_toggled(self, on: bool) -> None:
        # One selection tool at a time; neither: a drag pans.
        if on:
            other = self.lasso_button if self.sender() is self.select_button else self.select_button
            other.setChecked(False)
        rect, lasso = self.select_button.isChecked(), self.lasso_button.isChecked()
        self.box.mode = "rect" if rect else "lasso" if lasso else ""


def _text_button(text: str, tip: str) -> QtWidgets.QToolButton:
    """A checkable button showing ``text``, as narrow as its text."""
    only = Qt.ToolButtonStyle.ToolButtonTextOnly
    return QtWidgets.QToolButton(text=text, toolTip=tip, checkable=True, toolButtonStyle=only)


def _wrapped(text: str, **properties: Any) -> QtWidgets.QLabel:
    """A word-wrapped label (its text never widens the tab)."""
    return QtWidgets.QLabel(text, wordWrap=True, **properties)
