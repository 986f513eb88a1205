"""The two sides of a layer panel (:class:`ViewSlot`), the bar chart one may hold
(:class:`BarCanvas`), and what the mouse reads on them."""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np
import pyqtgraph as pg
from PySide6 import QtCore, QtWidgets

from actviz.display.colormaps import AUTO, heat_levels, resolve
from actviz.ui.panels import style
from actviz.ui.panels.canvas import ImageCanvas, _GridCellCanvas

if TYPE_CHECKING:  # the panels never import torch at run time
    from actviz.display.layer_views import LayerView
    from actviz.display.mosaic import Mosaic

logger = logging.getLogger(__name__)

#: A hyphen a wrapped line never breaks after (U+2011): "min-max" wrapped as "min-" / "max".
NB_HYPHEN = "\u2011"


def scale_legend(mosaic: Mosaic) -> str:
    """What a mosaic's colour bar and its flat tiles mean, in words (hyphens never split)."""
    if mosaic.normalize != "channel":
        text = "shared: one scale for all tiles" + ", symmetric about 0" * mosaic.symmetric
    elif mosaic.symmetric:
        text = f"per{NB_HYPHEN}channel: each tile -1..1 of its own max |x| (0 in the middle)"
    else:
        text = f"per{NB_HYPHEN}channel: each tile 0-1 of its own min{NB_HYPHEN}max"
    if n := mosaic.flat_tiles:  # e.g. a gradient an average pool spread evenly: one colour
        text += f" · {n} flat tile{'s' * (n != 1)} (one value), painted mid{NB_HYPHEN}scale"
    return text


@dataclass(frozen=True)
class Location:
    """Where the mouse is, in the data of a view (not in mosaic pixels)."""

    kind: str  # "maps" | "heatmap" | "bars"
    channel: int | None = None  # maps: channel; bars: unit
    x: int = 0
    y: int = 0


def locate_in_mosaic(view: LayerView, mosaic: Mosaic, x: float, y: float) -> Location | None:
    """Map mosaic pixel (x, y) to (channel, column, row) in ``view.data`` (C, H, W)."""
    channel = mosaic.channel_at(x, y)
    if channel is None or channel >= view.data.shape[0]:
        return None
    height, width = view.data.shape[1], view.data.shape[2]
    y0, x0 = mosaic.tile_origin(channel)
    # Tiles can be downsampled (max_tile): one tile pixel covers scale x scale data pixels.
    scale = getattr(mosaic, "scale", None)
    if scale is None:
        scale_y, scale_x = height / mosaic.tile_h, width / mosaic.tile_w
    else:
        scale_y = scale_x = scale
    data_y = min(int(int(y - y0) * scale_y), height - 1)
    data_x = min(int(int(x - x0) * scale_x), width - 1)
    return None if data_y < 0 or data_x < 0 else Location("maps", channel, data_x, data_y)


def value_at(view: LayerView | None, loc: Location) -> float | None:
    """Raw value of ``view`` at ``loc`` if the view has that kind and the index exists."""
    where = {"maps": (loc.channel, loc.y, loc.x), "heatmap": (loc.y, loc.x), "bars": (loc.channel,)}
    if view is None or view.kind != loc.kind or loc.kind not in where:
        return None
    try:
        return float(view.data[where[loc.kind]])
    except IndexError:
        return None


def data_shape(view: LayerView) -> tuple[int, ...]:
    """Per-sample shape for titles: the original shape without its batch dimension."""
    if view.kind == "scalar":
        return ()
    shape = tuple(int(d) for d in view.shape)
    return shape[1:] if len(shape) >= 2 else shape


def bar_series(color: str, **columns: np.ndarray) -> pg.BarGraphItem:
    """An empty bar series in one colour; its 1-px outline keeps sub-pixel bars drawn."""
    return pg.BarGraphItem(
        x=np.zeros(0), width=0.8, brush=color, pen=pg.mkPen(color, width=0), **columns
    )


class _Axis(pg.AxisItem):
    """An axis whose label is laid out once it is styled, not at each of pyqtgraph's setters."""

    styled = False

    def _updateLabel(self) -> None:  # noqa: N802 - pyqtgraph's name
        if self.styled:
            super()._updateLabel()


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
        self.left_axis, self.bottom_axis = _Axis("left"), _Axis("bottom")
        for axis, label in ((self.left_axis, y_label), (self.bottom_axis, x_label)):
            style.style_axis(axis, label)
            axis.styled = True
            axis._updateLabel()  # noqa: SLF001 - the one layout of its label
            axis.linkToView(self.view)
        self.left_axis.setGrid(int(255 * style.GRID_ALPHA))
        self.addItem(self.left_axis, row=0, col=0)
        self.addItem(self.view, row=0, col=1)
        self.addItem(self.bottom_axis, row=1, col=1)
        self.zero_line = pg.InfiniteLine(pos=0.0, angle=0, pen=pg.mkPen(style.AXIS_PEN))
        self.positive = bar_series(positive_color, height=np.zeros(0))
        self.negative = bar_series(style.BAR_NEGATIVE, height=np.zeros(0))
        for item in (self.zero_line, self.positive, self.negative):
            self.view.addItem(item)
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
        if (index := self.bar_at(ev.scenePos())) is not None:
            ev.accept()
            screen = ev.screenPos()
            self.context_requested.emit(index, QtCore.QPoint(int(screen.x()), int(screen.y())))

    def set_values(self, values: np.ndarray) -> None:
        """Draw one bar per entry of the 1-D array ``values`` (NaN entries draw no bar)."""
        values = np.asarray(values, dtype=np.float32).reshape(-1)
        self._count = count = values.size
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
        low, high = min(0.0, float(clean.min())), max(0.0, float(clean.max()))
        if high == low:
            high = low + 1.0
        margin = 0.08 * (high - low)
        self.view.setRange(
            xRange=(-0.6, count - 0.4),
            yRange=(low - (margin if low < 0 else 0.0), high + (margin if high > 0 else 0.0)),
            padding=0.0,
        )

    def count(self) -> int:
        """Number of bars drawn."""
        return self._count

    def _on_scene_mouse_moved(self, scene_pos: QtCore.QPointF) -> None:
        if (index := self.bar_at(scene_pos)) is not None:
            self._inside = True
            self.hovered.emit(index)
        else:
            self._leave()


class ViewSlot(QtWidgets.QWidget):
    """One side of a LayerPanel: a caption and canvases, each made on first use."""

    hovered = QtCore.Signal(object)  # Location
    hover_left = QtCore.Signal()
    clicked = QtCore.Signal(object)  # Location
    select_clicked = QtCore.Signal(object, bool)  # Location, extend (Shift)
    context_requested = QtCore.Signal(object, QtCore.QPoint)  # Location, screen position
    resized = QtCore.Signal()

    def __init__(
        self,
        caption: str,
        bar_color: str,
        parent: QtWidgets.QWidget | None = None,
        *,
        gradient: bool = False,
    ):
        super().__init__(parent)
        layout = style.bare_box(self, spacing=1, vertical=True)
        self.caption = style.caption_label(caption)
        layout.addWidget(self.caption)
        self.stack = QtWidgets.QStackedWidget()
        layout.addWidget(self.stack, 1)
        self.placeholder = style.caption_label("no data")
        self.placeholder.setAlignment(QtCore.Qt.AlignmentFlag.AlignCenter)
        self.stack.addWidget(self.placeholder)
        #: What the colour bar means (mosaics only).
        self.legend = style.caption_label(wrap=True, visible=False)
        layout.addWidget(self.legend)
        self._bar_color, self._unit_label = bar_color, "unit"  # the bars'
        self._gradient, self._choice = gradient, AUTO  # the colour map's
        self.image_canvas: ImageCanvas | None = None
        self.bar_canvas: BarCanvas | None = None
        self.scalar_label: QtWidgets.QLabel | None = None
        self.view: LayerView | None = None
        self.mosaic: Mosaic | None = None

    def _images(self) -> ImageCanvas:
        if self.image_canvas is None:
            self.image_canvas = ImageCanvas(passive=True, cmap=self.colormap(), fit_width=True)
            self.image_canvas.resized.connect(self.resized)
            self.image_canvas.hovered.connect(self._on_image_hovered)
            self.image_canvas.hover_left.connect(self.hover_left)
            self.image_canvas.clicked.connect(lambda x, y: self._emit_at(self.clicked, x, y))
            self.image_canvas.select_clicked.connect(
                lambda x, y, extend: self._emit_at(self.select_clicked, x, y, extend)
            )
            self.image_canvas.context_requested.connect(
                lambda x, y, screen: self._emit_at(self.context_requested, x, y, screen)
            )
            self.stack.addWidget(self.image_canvas)
        return self.image_canvas

    def _bars(self) -> BarCanvas:
        if self.bar_canvas is None:
            self.bar_canvas = BarCanvas(
                passive=True, positive_color=self._bar_color, x_label=self._unit_label
            )
            self.bar_canvas.hovered.connect(
                lambda index: self.hovered.emit(Location("bars", int(index)))
            )
            self.bar_canvas.hover_left.connect(self.hover_left)
            self.bar_canvas.context_requested.connect(
                lambda index, pos: self.context_requested.emit(Location("bars", int(index)), pos)
            )
            self.stack.addWidget(self.bar_canvas)
        return self.bar_canvas

    def set_unit_label(self, label: str) -> None:
        """The bars' axis label ("unit", "channel" for a pool's, "class" for class scores)."""
        self._unit_label = label
        if self.bar_canvas is not None:
            style.style_axis(self.bar_canvas.bottom_axis, label)

    def _scalar(self) -> QtWidgets.QLabel:
        if self.scalar_label is None:
            self.scalar_label = QtWidgets.QLabel(
                styleSheet=f"color: {style.TEXT}; font-size: 22pt; font-weight: bold;",
                alignment=QtCore.Qt.AlignmentFlag.AlignCenter,
                textInteractionFlags=QtCore.Qt.TextInteractionFlag.TextSelectableByMouse,
            )
            self.stack.addWidget(self.scalar_label)
        return self.scalar_label

    def show_view(
        self, view: LayerView | None, mosaic: Mosaic | None, choice: str | None = None
    ) -> None:
        """Show ``view`` (maps: ``mosaic``'s page) in colour map ``choice`` (None: the side's)."""
        self.view, self.mosaic = view, mosaic
        kind = view.kind if view is not None else None
        if kind == "maps" and mosaic is None:
            logger.warning("maps view without a mosaic: nothing to draw")
            return self._show_placeholder("no mosaic")
        if kind in ("maps", "heatmap"):
            shown = canvas = self._images()
            canvas.set_colormap(self.colormap(choice))
            if mosaic is not None and kind == "maps":
                # The float image is made only if someone reads it.
                canvas.set_image(
                    mosaic.indices, mosaic.levels, mosaic.scale_range, source=lambda: mosaic.image
                )
                m, ids = mosaic, mosaic.tile_channels if mosaic.order is not None else None
                canvas.grid.set_tiles(  # its gaps and channel numbers over the image
                    m.rows, m.cols, m.tile_h, m.tile_w, m.pad, m.channels, m.first_channel, ids
                )
                self.legend.setText(scale_legend(mosaic))
            else:
                data = np.ascontiguousarray(view.data, dtype=np.float32)
                levels = heat_levels(data)
                canvas.clear_tiles()
                canvas.set_image(data, levels, levels, lock_aspect=False)
            self.legend.setVisible(kind == "maps")
        elif kind == "bars":
            unit = "channel" if len(view.shape) == 4 else "unit"  # a pool's (N, C, 1, 1): channels
            if self._unit_label not in ("class", unit):
                self.set_unit_label(unit)
            (shown := self._bars()).set_values(view.data)
        elif kind == "scalar":
            (shown := self._scalar()).setText(f"{float(np.asarray(view.data).reshape(-1)[0]):.6g}")
        elif view is None:
            shown = self.placeholder
        else:
            logger.warning("unknown view kind %r", kind)
            return self._show_placeholder(f"cannot show {kind!r}")
        self.stack.setCurrentWidget(shown)

    def _show_placeholder(self, text: str) -> None:
        self.placeholder.setText(text)
        self.stack.setCurrentWidget(self.placeholder)

    def expect_mosaic_shape(self, shape: tuple[int, int]) -> bool:
        """Make room for a mosaic of ``shape`` that a later pass shows; False: no change."""
        canvas = self.image_canvas
        shown = canvas is not None and self.stack.currentWidget() is canvas
        return shown and canvas.expect_shape(shape)

    def image_width(self) -> int:
        """Screen pixels the image (a mosaic) fills across (0 while it is not shown)."""
        canvas = self.image_canvas
        return 0 if canvas is None or not canvas.isVisible() else canvas.image_area_width()

    def mark_channels(self, channels: list[int]) -> None:
        """Outline the tiles of ``channels`` on the mosaic shown ([] removes the outlines)."""
        m = self.mosaic if self.view is not None and self.view.kind == "maps" else None
        if self.image_canvas is not None:
            tiles = [m.tile_origin(c) for c in channels if m.shows(c)] if m is not None else []
            self.image_canvas.set_marks([QtCore.QRectF(x, y, m.tile_w, m.tile_h) for y, x in tiles])

    def colormap(self, choice: str | None = None) -> str:
        """The map this side paints: ``choice`` (None: the side's), resolved for what it shows."""
        mosaic = self.mosaic if self.view is not None and self.view.kind == "maps" else None
        signed = mosaic is not None and mosaic.symmetric
        return resolve(choice or self._choice, signed=signed, gradient=self._gradient)

    def set_colormap(self, choice: str) -> None:
        """Paint with ``choice``: a map's name, or "auto" (see :func:`resolve`)."""
        self._choice = choice
        if self.image_canvas is not None:
            self.image_canvas.set_colormap(self.colormap())

    def clear(self) -> None:
        self.view = self.mosaic = None
        self.legend.setVisible(False)
        if self.image_canvas is not None:
            self.image_canvas.clear_image()
        if self.bar_canvas is not None:
            self.bar_canvas.set_values(np.zeros(0, dtype=np.float32))
        self._show_placeholder("no data")

    def locate(self, x: float, y: float) -> Location | None:
        """Map a pixel of the image canvas to a location in the view's data."""
        if (view := self.view) is None:
            return None
        if view.kind == "maps" and self.mosaic is not None:
            return locate_in_mosaic(view, self.mosaic, x, y)
        if view.kind == "heatmap":
            rows, cols = view.data.shape
            if 0 <= int(y) < rows and 0 <= int(x) < cols:
                return Location("heatmap", None, int(x), int(y))
        return None

    def _on_image_hovered(self, x: float, y: float) -> None:
        if (loc := self.locate(x, y)) is None:
            self.hover_left.emit()
        else:
            self.hovered.emit(loc)

    def _emit_at(self, signal: QtCore.SignalInstance, x: float, y: float, *extra: object) -> None:
        if (loc := self.locate(x, y)) is not None:
            signal.emit(loc, *extra)


def short_value(value: float) -> str:
    """``format_value`` in fewer characters (``2.74e-6`` for ``2.743e-06``)."""
    text = style.format_value(value)
    if "e" not in text or "n" in text:  # ordinary magnitudes, nan and inf stay
        return text
    mantissa, exponent = f"{float(value):.2e}".split("e")
    return f"{mantissa}e{int(exponent)}"


def hover_text(
    loc: Location,
    activation: LayerView | None,
    gradient: LayerView | None,
    *,
    tile_unit: str = "",
    unit_names: tuple[str, ...] = (),
    short: bool = False,
) -> str:
    """The read-out at ``loc`` (``ch 12  (x=3, y=7)  value 0.532``; ``short``: fewer characters)."""
    fmt = short_value if short else style.format_value
    if loc.kind == "maps":
        at = f"({loc.x},{loc.y})" if short else f" (x={loc.x}, y={loc.y})"
        where = f"{tile_unit or 'ch'} {loc.channel} {at}"
    elif loc.kind == "heatmap":
        where = f"({loc.y},{loc.x})" if short else f"(row={loc.y}, col={loc.x})"
    elif unit_names and loc.channel is not None and loc.channel < len(unit_names):
        where = f"class {loc.channel}: {unit_names[loc.channel]}"
    else:  # a pool's (N, C, 1, 1) bars are channels
        where = f"{'ch' if len(getattr(activation, 'shape', ())) == 4 else 'unit'} {loc.channel}"
    parts = [where]
    if (value := value_at(activation, loc)) is not None:
        parts.append(fmt(value) if short else f"value {fmt(value)}")
    if (grad := value_at(gradient, loc)) is not None:
        parts.append(f"{'|g|' if short else '|grad|'} {fmt(grad)}")
    return (" " if short else "  ").join(parts)


class TileSelection:
    """Channels picked with Ctrl+click (toggle) and Shift+click (range), in channel order."""

    def __init__(self) -> None:
        self.channels: list[int] = []
        self.anchor: int | None = None

    def set(self, channels: list[int]) -> None:
        """Pick exactly ``channels``."""
        self.channels = sorted(dict.fromkeys(int(c) for c in channels))
        self.anchor = self.channels[-1] if self.channels else None

    def click(self, channel: int, extend: bool) -> None:
        """Toggle ``channel``; ``extend``: add the range from the last channel picked."""
        if extend and self.anchor is not None:
            low, high = sorted((self.anchor, channel))
            anchor, chosen = self.anchor, set(self.channels) | set(range(low, high + 1))
        else:
            anchor, chosen = channel, set(self.channels) ^ {channel}
        self.set(list(chosen))
        self.anchor = anchor
