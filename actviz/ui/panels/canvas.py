"""Reusable pyqtgraph canvases the panels are built from.

- :class:`ImageCanvas`: one ImageItem in an aspect-locked ViewBox with a colour bar beside it
  (as tall as the image and right next to it: an image narrower than its canvas is centred
  together with its bar; zoomed in, it widens up to the whole canvas), optionally a
  :class:`TileGrid` over a mosaic (gaps and channel numbers) and a height that follows its
  width (``fit_width``: the image fills the width).
- :class:`BarCanvas`: a bar chart of a 1-D vector (positive and negative bars coloured apart).

Both can be *passive* (for cells of a scrollable grid): mouse wheel events are left to the
scroll area instead of zooming, and there is no context menu.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np
import pyqtgraph as pg
from PySide6 import QtCore, QtGui, QtWidgets

from actviz.ui.panels import style
from actviz.ui.panels.colormap_views import DEFAULT_ACTIVATION_CMAP, indexed_lut, lut, to_indices
from actviz.ui.panels.deferred import DeferredCall
from actviz.ui.panels.light_paint import LightPaint

_COLORBAR_WIDTH = 10
_COLORBAR_AXIS_WIDTH = 46
#: Canvas margins (left/right, top/bottom: room for the colour bar's end labels) and the
#: spacing between the image and its colour bar, in pixels.
_CANVAS_MARGIN = 1
_CANVAS_MARGIN_V = 7
_CANVAS_SPACING = 2
#: Channel numbers are drawn on tiles at least this many screen pixels wide ...
LABEL_MIN_TILE_PX = 40
#: ... on at most this many tiles (those in view).
MAX_TILE_LABELS = 256
#: Pictures up to this many pixels skip pyqtgraph's rescaling render (ClickableImageItem).
_RGB_FAST_MAX_PIXELS = 512 * 512


class ClickableImageItem(pg.ImageItem):
    """An ImageItem that reports left clicks in image pixel coordinates (x = column, y = row)."""

    sigClicked = QtCore.Signal(float, float)

    def paint(self, painter: QtGui.QPainter, *args) -> None:
        # Shrinking with nearest-neighbour drops whole rows, so some 1-px tile separators of a
        # mosaic vanish; filter when shrinking, keep crisp pixels when enlarging.
        transform = painter.deviceTransform()
        scale = max(abs(transform.m11()), abs(transform.m12()))
        painter.setRenderHint(QtGui.QPainter.RenderHint.SmoothPixmapTransform, scale < 1.0)
        super().paint(painter, *args)

    def render(self) -> None:
        if self._render_indexed() or self._render_rgb():
            return
        super().render()
        qimage = self.qimage
        if qimage is not None and qimage.format() == QtGui.QImage.Format.Format_Indexed8:
            # pyqtgraph turns a uint8 image with a table into an indexed QImage; Qt draws that
            # through its slow generic path (converting on every scaled draw, ~5-10 ms for a
            # large mosaic). Converting once per update to premultiplied ARGB is ~1 ms.
            self.qimage = qimage.convertToFormat(QtGui.QImage.Format.Format_ARGB32_Premultiplied)

    def _render_indexed(self) -> bool:
        """Render a uint8 index image through its 256-entry table without pyqtgraph's
        general path (level checks, a Python colour-table build per render): ~0.3 ms instead
        of ~1 ms for a 512x512 mosaic, on the GUI thread of every live frame."""
        image, table = self.image, self.lut
        if not (
            isinstance(image, np.ndarray)
            and image.ndim == 2
            and image.dtype == np.uint8
            and image.size
            and self.levels is None
            and self.axisOrder == "row-major"
            and isinstance(table, np.ndarray)
            and table.shape == (256, 4)
            and table.dtype == np.uint8
        ):
            return False
        data = np.ascontiguousarray(image)
        height, width = data.shape
        indexed = QtGui.QImage(
            data.data, width, height, data.strides[0], QtGui.QImage.Format.Format_Indexed8
        )
        indexed.setColorTable(_color_table(table))
        # The conversion copies, so ``data`` may go; drawing premultiplied ARGB is the fast path.
        self.qimage = indexed.convertToFormat(QtGui.QImage.Format.Format_ARGB32_Premultiplied)
        self._renderRequired = False
        self._unrenderable = False
        return True

    def _render_rgb(self) -> bool:
        """Render a small (H, W, 3|4) uint8 picture shown at its full 0-255 range straight
        into a QImage: pyqtgraph's general path rescales it through its levels first (~0.5 ms
        for a 64x64 live frame in the input preview, every frame). Large pictures keep that
        path, which downsamples them to the screen first."""
        image, levels = self.image, self.levels
        if not (
            isinstance(image, np.ndarray)
            and image.ndim == 3
            and image.shape[2] in (3, 4)
            and image.dtype == np.uint8
            and image.size
            and image.shape[0] * image.shape[1] <= _RGB_FAST_MAX_PIXELS
            and self.axisOrder == "row-major"  # (a colour table is for 2-D images only)
            and (levels is None or np.array_equal(np.asarray(levels, dtype=float), [0.0, 255.0]))
        ):
            return False
        data = np.ascontiguousarray(image)
        height, width, channels = data.shape
        fmt = (
            QtGui.QImage.Format.Format_RGB888
            if channels == 3
            else QtGui.QImage.Format.Format_RGBA8888
        )
        picture = QtGui.QImage(data.data, width, height, data.strides[0], fmt)
        # The conversion copies, so ``data`` may go; drawing premultiplied ARGB is the fast path.
        self.qimage = picture.convertToFormat(QtGui.QImage.Format.Format_ARGB32_Premultiplied)
        self._renderRequired = False
        self._unrenderable = False
        return True

    #: Left click with Ctrl (``extend`` False: toggle) or Shift (``extend`` True: range).
    sigSelectClicked = QtCore.Signal(float, float, bool)
    #: Right click at image pixel (x, y), screen position (global pixels).
    sigContextClicked = QtCore.Signal(float, float, QtCore.QPoint)

    def mouseClickEvent(self, ev) -> None:  # noqa: N802 - pyqtgraph's name
        if self.image is None:
            ev.ignore()
            return
        pos = ev.pos()
        mods = ev.modifiers()
        if ev.button() == QtCore.Qt.MouseButton.LeftButton:
            ev.accept()
            shift = bool(mods & QtCore.Qt.KeyboardModifier.ShiftModifier)
            if shift or mods & QtCore.Qt.KeyboardModifier.ControlModifier:
                self.sigSelectClicked.emit(float(pos.x()), float(pos.y()), shift)
            else:
                self.sigClicked.emit(float(pos.x()), float(pos.y()))
        elif ev.button() == QtCore.Qt.MouseButton.RightButton:
            ev.accept()
            screen = ev.screenPos()
            self.sigContextClicked.emit(
                float(pos.x()), float(pos.y()), QtCore.QPoint(int(screen.x()), int(screen.y()))
            )
        else:
            ev.ignore()


_COLOR_TABLES: dict[bytes, list[int]] = {}


def _color_table(table: np.ndarray) -> list[int]:
    """The QImage colour table (0xAARRGGBB ints) of a (256, 4) RGBA uint8 table, cached."""
    key = table.tobytes()
    cached = _COLOR_TABLES.get(key)
    if cached is None:
        rgba = table.astype(np.uint32)
        argb = (rgba[:, 3] << 24) | (rgba[:, 0] << 16) | (rgba[:, 1] << 8) | rgba[:, 2]
        cached = _COLOR_TABLES[key] = [int(v) for v in argb]
    return cached


class _GradientStrip(pg.GraphicsWidget):
    """The coloured strip of a colour bar: the LUT painted bottom (low) to top (high)."""

    def __init__(self, width: int) -> None:
        super().__init__()
        self.setFixedWidth(width)
        self._image: QtGui.QImage | None = None
        self._sized: QtGui.QImage | None = None  # _image at the size it is drawn
        self._pen = pg.mkPen(style.AXIS_PEN)  # made once: painted again with every frame

    def set_lut(self, table: np.ndarray) -> None:
        rgba = np.ascontiguousarray(table[::-1, None, :4], dtype=np.uint8)  # high values on top
        self._buffer = rgba  # QImage does not own the memory
        self._image = QtGui.QImage(
            rgba.data, 1, rgba.shape[0], 4, QtGui.QImage.Format.Format_RGBA8888
        )
        self._sized = None
        self.update()

    def paint(self, painter: QtGui.QPainter, *args) -> None:
        if self._image is None:
            return
        rect = self.boundingRect()
        # Repainted with every frame of the image beside it: scaled once per size (and map)
        # into a strip drawn pixel for pixel, not scaled from 1x256 on every paint.
        ratio = painter.device().devicePixelRatioF() if painter.device() is not None else 1.0
        size = (max(1, round(rect.width() * ratio)), max(1, round(rect.height() * ratio)))
        sized = getattr(self, "_sized", None)
        if sized is None or (sized.width(), sized.height()) != size:
            sized = self._sized = self._image.scaled(
                *size,
                QtCore.Qt.AspectRatioMode.IgnoreAspectRatio,
                QtCore.Qt.TransformationMode.FastTransformation,
            ).convertToFormat(QtGui.QImage.Format.Format_ARGB32_Premultiplied)
            sized.setDevicePixelRatio(ratio)
        painter.drawImage(rect.topLeft(), sized)
        painter.setPen(self._pen)
        painter.drawRect(rect)


class ColorBar(pg.GraphicsLayout):
    """A light colour bar: the colour map as a strip with a value axis beside it.

    pyqtgraph's ColorBarItem is a full PlotItem (about 40 ms to build, with menus); this is a
    strip and one AxisItem (a few ms), which matters for a grid of dozens of layers.
    """

    def __init__(self, width: int = _COLORBAR_WIDTH, axis_width: int = _COLORBAR_AXIS_WIDTH):
        super().__init__()
        self.margins = (4.0, 4.0)
        self.layout.setContentsMargins(0, 4, 0, 4)
        self.layout.setSpacing(0)
        self.strip = _GradientStrip(width)
        self.axis = pg.AxisItem("right")
        style.style_axis(self.axis)
        self.axis.setWidth(axis_width)
        self.addItem(self.strip, row=0, col=0)
        self.addItem(self.axis, row=0, col=1)
        self._levels = (0.0, 1.0)
        self._labels: tuple[str, str] | None = None
        self.axis.setRange(*self._levels)

    def set_margins(self, top: float, bottom: float) -> None:
        """Space above and below the strip: the canvas makes it span its image exactly."""
        self.margins = (float(top), float(bottom))
        self.layout.setContentsMargins(0, top, 0, bottom)

    def setColorMap(self, name: str) -> None:  # noqa: N802 - mirrors pg.ColorBarItem
        """Paint the strip with colour map ``name``."""
        self.strip.set_lut(lut(name))

    def setLevels(  # noqa: N802 - mirrors pg.ColorBarItem
        self, values: tuple[float, float], labels: tuple[str, str] | None = None
    ) -> None:
        """Label the bar from ``values[0]`` (bottom) to ``values[1]`` (top).

        ``labels`` replaces the numbers with words at both ends, for scales that are not one
        value range (per-channel normalisation: each tile has its own min and max).
        """
        low, high = float(values[0]), float(values[1])
        if labels == self._labels and self._close_to_shown(low, high):
            # Re-laying out the axis costs ~5 ms per canvas; live frames mostly repeat the
            # same range, and a change under 1% of the span is not readable on the ticks.
            return
        self._levels = (low, high)
        self._labels = labels
        self.axis.setRange(*self._levels)
        if labels is None:
            self.axis.setTicks(None)
        else:
            self.axis.setTicks([[(self._levels[0], labels[0]), (self._levels[1], labels[1])]])

    def levels(self) -> tuple[float, float]:
        """The (low, high) values written on the bar."""
        return self._levels

    def _close_to_shown(self, low: float, high: float) -> bool:
        """Whether (low, high) is within 1% of the span of the range already on the bar."""
        shown_low, shown_high = self._levels
        tolerance = 0.01 * max(abs(shown_high - shown_low), abs(high - low))
        return abs(low - shown_low) <= tolerance and abs(high - shown_high) <= tolerance


class TileGrid:
    """Lines between the tiles of a mosaic and channel numbers on tiles large enough.

    The lines are one ``QGraphicsPathItem`` with a cosmetic pen in the background colour, in
    the image's own coordinates: a gap of at least one screen pixel at every zoom (the mosaic's
    one-pixel NaN padding alone vanishes when the image is drawn smaller than its pixels).
    Channel numbers are drawn in screen pixels at each tile's corner when a tile is at least
    :data:`LABEL_MIN_TILE_PX` wide on screen (at most :data:`MAX_TILE_LABELS`, those in view),
    into one pixmap shown by a ``QGraphicsPixmapItem`` that ignores the view's scaling; it is
    redrawn when the tiles or the view's transform change, not on every paint.

    Both items are plain Qt items: no Python runs while a scene paints, so a scene painting
    after its canvas was dropped (a closed window's last paint) cannot call into a freed object.
    """

    def __init__(self, view: pg.ViewBox) -> None:
        self._view = view
        self._pen = pg.mkPen(style.PLOT_BACKGROUND, width=1)
        self._pen.setCosmetic(True)
        self._lines: list[QtCore.QLineF] = []
        self._rect = QtCore.QRectF()
        self._tiles: tuple[int, int, int, int, int, int, int] | None = None
        # The channel of each tile when they are not consecutive (sorted by effect).
        self._channel_ids: tuple[int, ...] | None = None
        self._font = QtGui.QFont()
        self._font.setPointSize(style.TICK_POINT_SIZE - 1)
        self.path_item = QtWidgets.QGraphicsPathItem()
        self.path_item.setPen(self._pen)
        self.path_item.setZValue(10)
        self.label_item = QtWidgets.QGraphicsPixmapItem()
        self.label_item.setFlag(
            QtWidgets.QGraphicsItem.GraphicsItemFlag.ItemIgnoresTransformations, True
        )
        self.label_item.setZValue(11)
        view.addItem(self.path_item, ignoreBounds=True)
        view.addItem(self.label_item, ignoreBounds=True)
        #: What the label pixmap was drawn for: redrawn only when it changes.
        self._label_key: tuple | None = None
        #: The labels wait for the canvas to come into view (see :meth:`_update_labels`).
        self.labels_stale = False
        # Drawn once after the pass that moved the view (a resize changes its transform a few
        # times per canvas; drawing each time took most of a window resize).
        self._labels_later = DeferredCall(view, self._update_labels)
        view.sigTransformChanged.connect(self._labels_later.request)

    def set_tiles(
        self,
        rows: int,
        cols: int,
        tile_h: int,
        tile_w: int,
        pad: int,
        channels: int,
        first_channel: int,
        channel_ids: tuple[int, ...] | None = None,
    ) -> None:
        """Lay the grid over a mosaic of ``rows x cols`` tiles of ``tile_h x tile_w`` pixels
        ``pad`` apart, showing ``channels`` channels from ``first_channel`` (or the channels
        ``channel_ids``, in tile order: the numbers drawn are theirs)."""
        tiles = (rows, cols, tile_h, tile_w, pad, channels, first_channel)
        if tiles == self._tiles and channel_ids == self._channel_ids:
            return
        self._tiles = tiles
        self._channel_ids = channel_ids
        width = cols * (tile_w + pad) - pad
        height = rows * (tile_h + pad) - pad
        half = pad / 2.0
        lines = [
            QtCore.QLineF(c * (tile_w + pad) - half, 0.0, c * (tile_w + pad) - half, height)
            for c in range(1, cols)
        ]
        lines += [
            QtCore.QLineF(0.0, r * (tile_h + pad) - half, width, r * (tile_h + pad) - half)
            for r in range(1, rows)
        ]
        self._lines = lines
        self._rect = QtCore.QRectF(0.0, 0.0, float(width), float(height))
        path = QtGui.QPainterPath()
        for line in lines:
            path.moveTo(line.p1())
            path.lineTo(line.p2())
        self.path_item.setPath(path)
        self._update_labels()

    def clear(self) -> None:
        """No grid (an image that is not a mosaic)."""
        if self._tiles is None:
            return
        self._tiles = None
        self._lines = []
        self._rect = QtCore.QRectF()
        self.path_item.setPath(QtGui.QPainterPath())
        self._update_labels()

    def lines(self) -> list[QtCore.QLineF]:
        """The grid lines, in image coordinates."""
        return list(self._lines)

    def _device_transform(self) -> QtGui.QTransform | None:
        """Image coordinates to the viewport's pixels, as painted now (None: not in a view)."""
        scene = self.path_item.scene()
        views = scene.views() if scene is not None else []
        if not views:
            return None
        return self.path_item.sceneTransform() * views[0].viewportTransform()

    def tile_screen_px(self, transform: QtGui.QTransform | None = None) -> float:
        """Screen width of one tile under ``transform`` (default: as the item is drawn now)."""
        if self._tiles is None:
            return 0.0
        if transform is None:
            transform = self._device_transform()
            if transform is None:
                return 0.0
        scale = math.hypot(transform.m11(), transform.m12())
        return scale * self._tiles[3]

    def labels(self, transform: QtGui.QTransform | None = None) -> list[tuple[int, QtCore.QPointF]]:
        """``(channel, screen point of its tile's corner)`` for the numbers drawn now: none
        when tiles are under :data:`LABEL_MIN_TILE_PX`, else the tiles in view (capped)."""
        if transform is None:
            transform = self._device_transform()
        if self._tiles is None or transform is None:
            return []
        if self.tile_screen_px(transform) < LABEL_MIN_TILE_PX:
            return []
        rows, cols, tile_h, tile_w, pad, channels, first = self._tiles
        visible = self._view.viewRect()
        out: list[tuple[int, QtCore.QPointF]] = []
        for i in range(channels):
            x0 = (i % cols) * (tile_w + pad)
            y0 = (i // cols) * (tile_h + pad)
            if not visible.intersects(QtCore.QRectF(x0, y0, tile_w, tile_h)):
                continue
            channel = self._channel_ids[i] if self._channel_ids is not None else first + i
            out.append((channel, transform.map(QtCore.QPointF(x0, y0))))
            if len(out) >= MAX_TILE_LABELS:
                break
        return out

    def _update_labels(self, *_args: object) -> None:
        scene = self.path_item.scene()
        views = scene.views() if scene is not None else []
        # The viewport's region: the view's own is empty (its viewport covers it all).
        if views and views[0].viewport().visibleRegion().isEmpty():
            # Out of view (a panel scrolled away): drawn when it is painted again.
            self.labels_stale = True
            return
        self.labels_stale = False
        transform = self._device_transform()
        if transform is None or self._tiles is None:
            self._label_key = None
            self.label_item.setPixmap(QtGui.QPixmap())
            return
        view = self._view.viewRect()
        ratio = views[0].devicePixelRatioF() if views else 1.0
        key = (
            self._tiles,
            self._channel_ids,
            tuple(round(v, 4) for v in (transform.m11(), transform.m12(), transform.m21(),
                                        transform.m22(), transform.dx(), transform.dy())),
            (view.x(), view.y(), view.width(), view.height()),
            ratio,
        )  # fmt: skip
        if key == self._label_key:
            return
        self._label_key = key
        labels = self.labels(transform)
        if not labels:
            self.label_item.setPixmap(QtGui.QPixmap())
            return
        pixmap, top_left = self._render_labels(labels, ratio)
        # The item sits at the image's origin and ignores the view's scaling: its own
        # coordinates are screen pixels from where that origin is drawn.
        origin = transform.map(QtCore.QPointF(0.0, 0.0))
        self.label_item.setPos(0.0, 0.0)
        self.label_item.setOffset(top_left - origin)
        self.label_item.setPixmap(pixmap)

    def request_labels(self) -> None:
        """Draw the channel numbers after this event-loop pass."""
        self._labels_later.request()

    def _render_labels(
        self, labels: list[tuple[int, QtCore.QPointF]], ratio: float
    ) -> tuple[QtGui.QPixmap, QtCore.QPointF]:
        """Draw the channel numbers once into a transparent pixmap (screen pixels)."""
        metrics = QtGui.QFontMetrics(self._font)
        rects = [
            (
                str(channel),
                QtCore.QRectF(
                    corner.x() + 1,
                    corner.y() + 1,
                    metrics.horizontalAdvance(str(channel)) + 4,
                    metrics.height(),
                ),
            )
            for channel, corner in labels
        ]
        bounds = QtCore.QRectF(rects[0][1])
        for _, rect in rects[1:]:
            bounds = bounds.united(rect)
        bounds = bounds.toAlignedRect()
        pixmap = QtGui.QPixmap(
            max(1, math.ceil(bounds.width() * ratio)), max(1, math.ceil(bounds.height() * ratio))
        )
        pixmap.setDevicePixelRatio(ratio)
        pixmap.fill(QtCore.Qt.GlobalColor.transparent)
        p = QtGui.QPainter(pixmap)
        try:
            p.translate(-bounds.x(), -bounds.y())
            p.setFont(self._font)
            p.setRenderHint(QtGui.QPainter.RenderHint.TextAntialiasing, True)
            back = QtGui.QColor(255, 255, 255, 190)
            p.setPen(QtGui.QColor(style.TEXT))
            for text, rect in rects:
                p.fillRect(rect, back)
                p.drawText(rect, QtCore.Qt.AlignmentFlag.AlignCenter, text)
        finally:
            p.end()
        return pixmap, QtCore.QPointF(bounds.topLeft())


class _GridCellCanvas:
    """What image and bar canvases share as grid cells: hover leave, wheel pass-through, size.

    Mixed in before ``pg.GraphicsLayoutWidget``; the class sets ``_inside``, ``_passive`` and
    has a ``hover_left`` signal.
    """

    _inside: bool
    _passive: bool

    def _leave(self) -> None:
        if self._inside:
            self._inside = False
            self.hover_left.emit()

    def leaveEvent(self, event: QtCore.QEvent) -> None:  # noqa: N802 - Qt name
        self._leave()
        super().leaveEvent(event)

    def wheelEvent(self, event: QtGui.QWheelEvent) -> None:  # noqa: N802 - Qt name
        if self._passive:
            # Let the enclosing scroll area scroll instead of the ViewBox swallowing the wheel.
            event.ignore()
            return
        super().wheelEvent(event)

    def sizeHint(self) -> QtCore.QSize:  # noqa: N802 - Qt name
        return QtCore.QSize(240, 180)


class ImageCanvas(_GridCellCanvas, pg.GraphicsLayoutWidget):
    """A single ImageItem with a colour bar, updated in place.

    Parameters
    ----------
    parent
        Parent widget.
    passive
        True for grid cells: no zoom/pan, and wheel events scroll the surrounding area.
    colorbar
        Show a colour bar (with value ticks) to the right of the image.
    cmap
        Initial colour map name.
    fit_width
        Ask for the height at which an aspect-locked image fills the canvas's width (grid
        cells in a scroll area: the mosaic grows with the window).

    Signals
    -------
    hovered(float, float)
        The mouse is over image pixel (x, y) (x = column, y = row, fractional).
    hover_left()
        The mouse left the image.
    clicked(float, float)
        Left click on image pixel (x, y).
    select_clicked(float, float, bool)
        Ctrl+click (False) or Shift+click (True) on image pixel (x, y).
    context_requested(float, float, QPoint)
        Right click on image pixel (x, y), at that screen position.
    resized()
        The canvas changed size (a mosaic's page size follows its width).
    fitted()
        The user fitted the image again (double click).
    """

    hovered = QtCore.Signal(float, float)
    hover_left = QtCore.Signal()
    clicked = QtCore.Signal(float, float)
    select_clicked = QtCore.Signal(float, float, bool)
    context_requested = QtCore.Signal(float, float, QtCore.QPoint)
    resized = QtCore.Signal()
    fitted = QtCore.Signal()

    def __init__(
        self,
        parent: QtWidgets.QWidget | None = None,
        *,
        passive: bool = True,
        colorbar: bool = True,
        cmap: str = DEFAULT_ACTIVATION_CMAP,
        fit_width: bool = False,
    ) -> None:
        super().__init__(parent)
        self._passive = passive
        # Before _fit_width (resizeEvent asks for it once that is set). A timer of the
        # canvas's: a QTimer.singleShot's function outlives a canvas deleted before it fires.
        self._sync_scene_soon = DeferredCall(self, self._sync_scene)
        self._fit_width = fit_width
        self._lock_aspect = True
        self._shape: tuple[int, ...] | None = None
        self._inside = False
        self.setBackground(style.PLOT_BACKGROUND)
        self.ci.setContentsMargins(
            _CANVAS_MARGIN, _CANVAS_MARGIN_V, _CANVAS_MARGIN, _CANVAS_MARGIN_V
        )
        self.ci.setSpacing(_CANVAS_SPACING)
        self.setSizePolicy(
            QtWidgets.QSizePolicy.Policy.Expanding, QtWidgets.QSizePolicy.Policy.Expanding
        )
        self.setMinimumSize(90, 80)

        # No context menu: building a ViewBox menu costs ~12 ms per canvas.
        self.view = pg.ViewBox(lockAspect=True, invertY=True, enableMenu=False)
        self.addItem(self.view, row=0, col=0)
        self.view.setMouseEnabled(x=not passive, y=not passive)
        self.view.disableAutoRange()
        # A new image repaints its own rectangle, not 2 px around it too (the bar's strip).
        self.setOptimizationFlag(QtWidgets.QGraphicsView.OptimizationFlag.DontAdjustForAntialiasing)
        # 2-D images are uint8 indices into a 256-entry table (an indexed QImage), not
        # downsampled (averaged indices would blend the padding index into colours): the
        # item's paint filters when shrinking, which keeps the 1-px padding as a grid line.
        self.image = ClickableImageItem(axisOrder="row-major")
        self._source: np.ndarray | Callable[[], np.ndarray] | None = None
        self._levels: tuple[float, float] | None = None
        self._indexed = True
        self.view.addItem(self.image)
        self.image.sigClicked.connect(self.clicked)
        self.image.sigSelectClicked.connect(self.select_clicked)
        self.image.sigContextClicked.connect(self.context_requested)
        #: Gaps and channel numbers over a mosaic (empty for other images).
        self.grid = TileGrid(self.view)
        #: Outlines of marked tiles (selected channels), in image coordinates.
        self.marks = QtWidgets.QGraphicsPathItem()
        marks_pen = pg.mkPen(style.TILE_MARK, width=2)
        marks_pen.setCosmetic(True)
        self.marks.setPen(marks_pen)
        self.marks.setZValue(12)
        self.view.addItem(self.marks, ignoreBounds=True)
        self._marked: list[QtCore.QRectF] = []
        self._light = LightPaint(self)

        self.colorbar: ColorBar | None = None
        if colorbar:
            self.colorbar = ColorBar()
            self.addItem(self.colorbar, row=0, col=1)
            # The bar spans the image, not the whole canvas (the image is letterboxed).
            self.view.sigResized.connect(self._fit_colorbar)
            self.view.sigRangeChanged.connect(self._fit_colorbar)
        #: Its margins change the scene's geometry, which resizes the view: a fit asked for
        #: from inside a fit runs after that pass instead (see :meth:`_fit_colorbar`).
        self._colorbar_fit = DeferredCall(self, self._fit_colorbar)
        self._fitting_colorbar = False
        #: Extra margin left and right of the image and its bar (see :meth:`_fit_sides`).
        self._side = 0
        #: Set while the sides and the range are being changed together (their own signals).
        self._fitting_sides = False
        # A zoom or pan changes how wide the image is drawn: the sides follow it.
        self.view.sigRangeChanged.connect(self._on_view_range_changed)
        self._cmap = ""
        self.set_colormap(cmap)

    # -- data ------------------------------------------------------------------------------
    def set_image(
        self,
        image: np.ndarray,
        levels: tuple[float, float],
        bar_range: tuple[float, float] | None = None,
        *,
        lock_aspect: bool = True,
        bar_labels: tuple[str, str] | None = None,
        indices: np.ndarray | None = None,
        source: Callable[[], np.ndarray] | None = None,
    ) -> None:
        """Show ``image`` (row-major 2-D float32 or (H, W, 3|4) uint8) with fixed ``levels``.

        The existing ImageItem is updated in place; the view range is reset only when the
        image shape changes, so repeated updates neither flicker nor lose a user's zoom.

        Parameters
        ----------
        image
            C-contiguous array; NaN pixels are drawn transparent. A 2-D float image is shown
            as uint8 indices (see :func:`~actviz.ui.panels.colormap_views.to_indices`); a 2-D
            uint8 image is taken to be such indices already (255 = transparent).
        levels
            (low, high) display levels for a 2-D image.
        bar_range
            Values written on the colour bar; defaults to ``levels``.
        lock_aspect
            Keep square pixels (mosaics, pictures) or let the image fill the canvas (heatmaps).
        bar_labels
            Words for both ends of the colour bar instead of numbers.
        indices
            ``to_indices(image, levels)`` computed ahead (off the GUI thread), for a 2-D image.
        source
            Makes the float image that ``image`` (uint8 indices) was made from, for
            :meth:`source_image`: read only if asked for (a live frame's mosaic makes its
            float image only then).
        """
        if image.ndim == 2:
            self._source = source if source is not None else image
            self._levels = (float(levels[0]), float(levels[1]))
            if indices is None or indices.shape != image.shape or indices.dtype != np.uint8:
                indices = image if image.dtype == np.uint8 else to_indices(image, levels)
            self._use_indexed_lut(True)
            if not self._replace_indices(indices):
                self.image.setImage(indices, autoLevels=False, levels=None, autoDownsample=False)
        else:
            self._source = None
            self._levels = (float(levels[0]), float(levels[1]))
            self._use_indexed_lut(False)
            if not self._replace_picture(image, levels):
                # Pictures may be far larger than the canvas: downsample before converting.
                self.image.setImage(image, autoLevels=False, levels=levels, autoDownsample=True)
        shape = tuple(image.shape[:2])
        reshaped = shape != self._shape
        if reshaped:
            self._shape = shape
            self._lock_aspect = lock_aspect
            self.view.setAspectLocked(lock_aspect)
            self.reset_view()
            self._fit_sides()  # after the reset: the sides follow the range shown
            self._fit_height()
        if self.colorbar is not None:
            low, high = bar_range if bar_range is not None else levels
            if not (np.isfinite(low) and np.isfinite(high)):
                low, high = 0.0, 1.0
            if high <= low:
                # A constant map still needs a readable bar: widen it symmetrically.
                span = abs(low) * 0.01 or 1.0
                low, high = low - span, high + span
            self.colorbar.setLevels((float(low), float(high)), bar_labels)
            if reshaped:
                # Same shape: the image sits where it sat, so the bar still spans it (a resize,
                # a zoom or a pan fit it again through the view's own signals).
                self._fit_colorbar()

    def _replace_indices(self, indices: np.ndarray) -> bool:
        """New pixels for the index image shown, when only the pixels change (same shape,
        same indexed drawing: every live frame): what ``ImageItem.setImage`` does then,
        without its generic option and level handling. False: take the general path."""
        item = self.image
        shown = item.image
        if not (
            isinstance(shown, np.ndarray)
            and shown.shape == indices.shape
            and shown.dtype == np.uint8
            and item.levels is None
            and not item.autoDownsample
            and item._xp is np  # noqa: SLF001 - pyqtgraph's array module (cupy or numpy)
        ):
            return False
        self._light.swap(indices)
        return True

    def _replace_picture(self, image: np.ndarray, levels: tuple[float, float]) -> bool:
        """:meth:`_replace_indices` for a small (H, W, 3|4) uint8 picture shown at 0-255
        (the input preview of every live frame), which the item draws without downsampling
        (:meth:`ClickableImageItem._render_rgb`)."""
        item = self.image
        shown = item.image
        if not (
            isinstance(shown, np.ndarray)
            and shown.shape == image.shape
            and shown.dtype == np.uint8
            and image.dtype == np.uint8
            and image.shape[0] * image.shape[1] <= _RGB_FAST_MAX_PIXELS
            and (float(levels[0]), float(levels[1])) == (0.0, 255.0)
            and item.levels is not None
            and np.array_equal(np.asarray(item.levels, dtype=float), [0.0, 255.0])
            and item._xp is np  # noqa: SLF001
        ):
            return False
        self._light.swap(image)
        return True

    def set_tiles(
        self,
        rows: int,
        cols: int,
        tile_h: int,
        tile_w: int,
        pad: int,
        channels: int,
        first_channel: int,
        channel_ids: tuple[int, ...] | None = None,
    ) -> None:
        """Draw the gaps (and channel numbers) of a mosaic over the image: see :class:`TileGrid`."""
        self.grid.set_tiles(rows, cols, tile_h, tile_w, pad, channels, first_channel, channel_ids)

    def clear_tiles(self) -> None:
        """Draw no tile grid (the image is not a mosaic)."""
        self.grid.clear()
        self.set_marks([])

    def set_marks(self, rects: list[QtCore.QRectF]) -> None:
        """Outline these rectangles (image coordinates: selected tiles); [] removes them."""
        if (marked := [QtCore.QRectF(r) for r in rects]) == self._marked:
            return  # set again with every frame: an unchanged path is no scene update
        self._marked = marked
        path = QtGui.QPainterPath()
        for rect in self._marked:
            path.addRect(rect)
        self.marks.setPath(path)

    def marked(self) -> list[QtCore.QRectF]:
        """The rectangles outlined now."""
        return list(self._marked)

    def image_area_width(self, width: int | None = None) -> int:
        """Widget pixels the image may fill across in a canvas ``width`` wide (default: the
        canvas's own width): the canvas less its colour bar."""
        width = (self.width() if width is None else int(width)) - 2 * _CANVAS_MARGIN
        if self.colorbar is not None:
            width -= _COLORBAR_WIDTH + _COLORBAR_AXIS_WIDTH + _CANVAS_SPACING
        return max(1, width)

    def image_rect_on_screen(self) -> QtCore.QRectF:
        """The image's rectangle in this widget's pixels (clipped to the view)."""
        if self._shape is None:
            return QtCore.QRectF()
        self.ensure_scene()
        height, width = self._shape
        scene = self.view.mapViewToScene(QtCore.QRectF(0, 0, width, height)).boundingRect()
        scene = scene.intersected(self.view.sceneBoundingRect())
        return QtCore.QRectF(self.mapFromScene(scene).boundingRect())

    def _fits(self) -> bool:
        return self._fit_width and self._shape is not None and self._lock_aspect

    def heightForWidth(self, width: int) -> int:  # noqa: N802 - Qt name
        """The height at which the image fills ``width`` (``fit_width`` canvases showing an
        aspect-locked image); otherwise the height the canvas prefers."""
        if not self._fits():
            return max(self.minimumHeight(), self.sizeHint().height())
        height, image_width = self._shape[:2]
        needed = math.ceil(self.image_area_width(width) * height / max(image_width, 1))
        return max(needed + 2 * _CANVAS_MARGIN_V, 40, self.minimumHeight())

    def hasHeightForWidth(self) -> bool:  # noqa: N802 - Qt name
        return self._fits()

    def _fit_height(self) -> None:
        """``fit_width`` canvases ask for the height at which the image fills their width.

        Through height-for-width, which layouts resolve in one pass from the width they give
        (the Layers grid, the panel's slots and stack): a minimum height set after each resize
        lagged one layout pass behind, and a grid laid out by height-for-width ignores it (the
        mosaic was cut at the bottom, taller than its panel)."""
        if not self._fit_width:
            return
        fits = self._fits()
        policy = self.sizePolicy()
        if policy.hasHeightForWidth() != fits:
            # Box and stacked layouts ask the size policy whether a child has one.
            policy.setHeightForWidth(fits)
            self.setSizePolicy(policy)
        else:
            self.updateGeometry()

    def _sides_follow(self) -> bool:
        """Whether the sides are fitted: an aspect-locked image beside a colour bar."""
        return self.colorbar is not None and self._shape is not None and self._lock_aspect

    def _set_side(self, side: int, *, now: bool) -> None:
        if side != self._side:
            self._side = side
            self.ci.setContentsMargins(
                _CANVAS_MARGIN + side, _CANVAS_MARGIN_V, _CANVAS_MARGIN + side, _CANVAS_MARGIN_V
            )
            if now:
                # The view gets its width at once: a wheel step before the next layout pass
                # would zoom from the range shown in the old width.
                self.ci.layout.activate()

    def _fit_sides(self, size: QtCore.QSize | None = None) -> None:
        """Keep the colour bar next to its image, and let a zoomed image use the room.

        An aspect-locked image narrower than the room beside its bar (a wide canvas, e.g. the
        channel view's maps one above the other) would be centred in the view with a band
        between it and the bar; equal margins left and right take that band instead, so the
        image and its bar are centred together. The view is as wide as the image is drawn at
        the scale the range asked for shows it (that range fitted into the whole room): the
        fitted image or, zoomed in, the zoomed image up to the whole room, so a zoom shows
        more of the map instead of cutting it at the fitted image's edges. The range is set
        to what that view shows at that scale, so the scale stays as the view's width
        changes; an image no wider than its view is centred across it (there is nothing to
        pan to). Computed from the canvas's ``size`` (default: its own): before a resize, so
        margins fitted to a wider canvas never hold the scene wider than this one.
        """
        now = size is None  # a size given: before a resize (the layout follows it)
        if not self._sides_follow():
            self._set_side(0, now=now)
            return
        size = self.size() if size is None else size
        height, width = self._shape[:2]  # type: ignore[index]
        room_w = self.image_area_width(size.width())
        room_h = size.height() - 2 * _CANVAS_MARGIN_V
        target = self.view.targetRect()
        if height <= 0 or width <= 0 or room_h <= 0:
            self._set_side(0, now=now)
            return
        fit = min(room_w / width, room_h / height)
        if target.width() > 0 and target.height() > 0:
            scale = min(room_w / target.width(), room_h / target.height())
        else:
            scale = fit
        drawn = min(float(room_w), max(width * fit, scale * width))
        side = max(0, math.floor((room_w - drawn) / 2))
        self._fitting_sides = True
        try:
            self._set_side(side, now=now)
            view_w = room_w - 2 * side
            if scale <= fit * (1 + 1e-6) and target.width() * scale <= view_w + 1:
                return  # not zoomed in, and all of the range fits: it stays (a resize refits)
            # Otherwise the range becomes what the view shows at that scale: a range wider
            # than the view (zoomed out from a wider view) would be fitted in, shrinking the
            # image further than the zoom asked. Across, it stays on the image: a view that
            # grew wider (a zoom, a wider window) shows more of the image, not blank beside
            # it while the image's other side stays cut.
            half = view_w / scale / 2
            centre_x = width / 2
            if width > 2 * half + 1 / scale:
                centre_x = min(max(target.center().x(), half), width - half)
            wanted = QtCore.QRectF(0.0, 0.0, view_w / scale, room_h / scale)
            wanted.moveCenter(QtCore.QPointF(centre_x, target.center().y()))
            tolerance = 1e-6 * max(wanted.width(), wanted.height())
            if any(
                abs(a - b) > tolerance
                for a, b in (
                    (wanted.left(), target.left()),
                    (wanted.top(), target.top()),
                    (wanted.width(), target.width()),
                    (wanted.height(), target.height()),
                )
            ):
                self.view.setRange(wanted, padding=0.0)
        finally:
            self._fitting_sides = False

    def _on_view_range_changed(self, *_args: object) -> None:
        """A zoom, a pan or a range set in code: fit the sides (and the range) to it."""
        if self._fitting_sides or self.centralWidget is None:
            return  # (no central widget: the canvas is closing, its scene being cleared)
        self._fit_sides()

    def _fit_colorbar(self, *_args: object) -> None:
        bar = self.colorbar
        if bar is None:
            return
        if self._fitting_colorbar:
            self._colorbar_fit.request()
            return
        self._fitting_colorbar = True
        try:
            self._fit_colorbar_now(bar)
        finally:
            self._fitting_colorbar = False

    def _fit_colorbar_now(self, bar: ColorBar) -> None:
        if self._shape is None:
            bar.set_margins(4.0, 4.0)
            return
        height, width = self._shape
        image = self.view.mapViewToScene(QtCore.QRectF(0, 0, width, height)).boundingRect()
        image = image.intersected(self.view.sceneBoundingRect())
        cell = bar.sceneBoundingRect()
        if image.isEmpty() or cell.isEmpty():
            return
        top = max(0.0, image.top() - cell.top())
        bottom = max(0.0, cell.bottom() - image.bottom())
        # The margins count in the scene's minimum height: never more than the canvas holds
        # (fitted to an image letterboxed in a scene taller than the canvas, they would keep
        # the scene that tall).
        room = max(0.0, self.height() - 2 * _CANVAS_MARGIN_V - 8.0)
        if top + bottom > room:
            scale = room / (top + bottom)
            top, bottom = top * scale, bottom * scale
        if abs(bar.margins[0] - top) > 0.5 or abs(bar.margins[1] - bottom) > 0.5:
            bar.set_margins(top, bottom)

    def resizeEvent(self, event: QtGui.QResizeEvent) -> None:  # noqa: N802 - Qt name
        if getattr(self, "_resizing", False):
            # Re-entered from inside its own pass (a layout answering a size set here):
            # only the view follows; the fitting below runs once, in the outer call.
            super().resizeEvent(event)
            return
        if hasattr(self, "_fit_width") and not self.on_screen():
            # Off screen (scrolled away, or not yet shown): a layout change resizes every
            # panel's canvas in one turn, so the scene follows when this one is next painted
            # or read (:meth:`ensure_scene`); whoever follows the width hears of it now.
            self._scene_stale = True
            self.resized.emit()
            return
        self._scene_stale = False
        self._resizing = True
        try:
            self._resize(event)
        finally:
            self._resizing = False

    def on_screen(self) -> bool:
        """Whether part of the canvas is on screen (its viewport covers the canvas itself, so
        the canvas's own visible region is always empty)."""
        return self.isVisible() and not self.viewport().visibleRegion().isEmpty()

    def ensure_scene(self) -> None:
        """Fit the scene to the canvas's size when a resize off screen left that for later
        (what its next paint does)."""
        if not getattr(self, "_scene_stale", False) or getattr(self, "_resizing", False):
            return
        self._scene_stale = False
        if self.closed:
            return
        old = self.ci.geometry().size().toSize()
        self._resizing = True
        try:
            self._resize(QtGui.QResizeEvent(self.size(), old), announce=False)
        finally:
            self._resizing = False

    def _resize(self, event: QtGui.QResizeEvent, *, announce: bool = True) -> None:
        bar = getattr(self, "colorbar", None)
        if bar is not None and event.size().height() < event.oldSize().height():
            # The bar's margins (which make it span the letterboxed image) are part of the
            # scene's minimum height: margins fitted to a taller canvas would keep the scene
            # taller than the canvas, cutting the image and the bar. The view's resize fits
            # them again.
            bar.set_margins(0.0, 0.0)
        if hasattr(self, "_side"):
            # Before the scene is resized: margins fitted to a wider canvas would hold the
            # scene wider than this one.
            self._fit_sides(event.size())
        super().resizeEvent(event)
        if hasattr(self, "_fit_width"):  # pyqtgraph resizes while the base class is built
            if announce:
                self.resized.emit()
            # A size set while this event was being handled (the fitted height, the layout
            # answering it) can leave pyqtgraph's scene at the previous size: the image then
            # sits off-centre and is cut. Check once control is back in the event loop.
            self._sync_scene_soon.request()

    def paintEvent(self, event: QtGui.QPaintEvent) -> None:  # noqa: N802 - Qt name
        self.ensure_scene()
        if (grid := getattr(self, "grid", None)) is not None and grid.labels_stale:
            grid.request_labels()
        light = getattr(self, "_light", None)
        if light is None or not light.paint_event(event):
            super().paintEvent(event)

    def _sync_scene(self) -> None:
        if self.closed or not self.isVisible():
            return
        if self.ci.geometry().size().toSize() != self.size():
            if self.colorbar is not None:
                self.colorbar.set_margins(0.0, 0.0)  # see resizeEvent
            super().resizeEvent(QtGui.QResizeEvent(self.size(), self.size()))

    def showEvent(self, event: QtGui.QShowEvent) -> None:  # noqa: N802 - Qt name
        super().showEvent(event)
        # Shown at a size it got while hidden: the width is news to whoever follows it.
        self.resized.emit()

    def reset_view(self) -> None:
        """Fit the whole image in the view."""
        if self._shape is None:
            return
        height, width = self._shape
        self.view.setRange(QtCore.QRectF(0, 0, width, height), padding=0.0)

    def mouseDoubleClickEvent(self, event: QtGui.QMouseEvent) -> None:  # noqa: N802 - Qt name
        # A zoomable canvas needs a way back: double click fits the image again.
        if not self._passive:
            self.reset_view()
            self.fitted.emit()
        super().mouseDoubleClickEvent(event)

    def set_colormap(self, name: str) -> None:
        """Use colour map ``name`` for the image and its colour bar."""
        if name == self._cmap:
            return
        self._cmap = name
        self.image.setLookupTable(self._table())
        if self.colorbar is not None:
            self.colorbar.setColorMap(name)

    def _table(self) -> np.ndarray | None:
        if not self._cmap:
            return None
        return indexed_lut(self._cmap) if self._indexed else lut(self._cmap)

    def _use_indexed_lut(self, indexed: bool) -> None:
        if indexed != self._indexed:
            self._indexed = indexed
            self.image.setLookupTable(self._table())

    def source_image(self) -> np.ndarray | None:
        """The 2-D image last given to :meth:`set_image` (before conversion to indices)."""
        if callable(self._source):
            self._source = self._source()
        return self._source

    def levels(self) -> tuple[float, float] | None:
        """The (low, high) display levels of the image shown, or None."""
        return self._levels

    def colormap_name(self) -> str:
        """Name of the colour map in use."""
        return self._cmap

    def clear_image(self) -> None:
        """Remove the image (the canvas stays, empty)."""
        self.image.clear()
        self.grid.clear()
        self.set_marks([])
        self._shape = None
        self._source = None
        self._levels = None
        self._fit_sides()
        self._fit_colorbar()

    def image_shape(self) -> tuple[int, ...] | None:
        """(rows, cols) of the image shown, or None."""
        return self._shape

    def image_to_widget(self, x: float, y: float) -> QtCore.QPoint:
        """Map image pixel (x, y) to a point in this widget's viewport (for tests and tools)."""
        self.ensure_scene()
        scene_point = self.image.mapToScene(QtCore.QPointF(x, y))
        return self.mapFromScene(scene_point)

    # -- mouse -----------------------------------------------------------------------------
    def mousePressEvent(self, event: QtGui.QMouseEvent) -> None:  # noqa: N802 - Qt name
        self.ensure_scene()
        super().mousePressEvent(event)

    def mouseMoveEvent(self, event: QtGui.QMouseEvent) -> None:  # noqa: N802 - Qt name
        self.ensure_scene()
        super().mouseMoveEvent(event)
        # The scene's sigMouseMoved is rate-limited and can drop the last move before the
        # mouse stops, leaving a stale read-out; every view event is handled here instead.
        self._on_scene_mouse_moved(self.mapToScene(event.position().toPoint()))

    def _on_scene_mouse_moved(self, scene_pos: QtCore.QPointF) -> None:
        if self._shape is None:
            self._leave()
            return
        point = self.image.mapFromScene(scene_pos)
        x, y = point.x(), point.y()
        height, width = self._shape
        if 0.0 <= x < width and 0.0 <= y < height:
            self._inside = True
            self.hovered.emit(x, y)
        else:
            self._leave()


class BarCanvas(_GridCellCanvas, pg.GraphicsLayoutWidget):
    """A bar chart of a vector, one bar per entry, redrawn in place.

    Positive and negative entries are two BarGraphItems with one brush each, which keeps
    updates cheap for thousands of bars (no per-bar brush list). Built from a ViewBox and two
    AxisItems rather than a PlotItem, whose menus make it ~5x slower to construct.

    Signals
    -------
    hovered(int)
        The mouse is over bar ``i``.
    hover_left()
        The mouse left the bars.
    context_requested(int, QPoint)
        Right click on bar ``i``, at that screen position.
    """

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
        negative_color: str = style.BAR_NEGATIVE,
    ) -> None:
        super().__init__(parent)
        self._passive = passive
        self._count = 0
        self._inside = False
        self.setBackground(style.PLOT_BACKGROUND)
        self.ci.setContentsMargins(2, 4, 6, 2)
        self.ci.setSpacing(0)
        self.setSizePolicy(
            QtWidgets.QSizePolicy.Policy.Expanding, QtWidgets.QSizePolicy.Policy.Expanding
        )
        self.setMinimumSize(90, 80)
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
        empty = np.zeros(0)
        # A cosmetic 1-px outline in the fill colour: with more bars than pixels (1000 logits
        # in a grid cell) unoutlined bars narrower than a pixel would simply not be drawn.
        self.positive = pg.BarGraphItem(
            x=empty,
            height=empty,
            width=0.8,
            brush=positive_color,
            pen=pg.mkPen(positive_color, width=0),
        )
        self.negative = pg.BarGraphItem(
            x=empty,
            height=empty,
            width=0.8,
            brush=negative_color,
            pen=pg.mkPen(negative_color, width=0),
        )
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

        bottom_axis = self.bottom_axis
        if 0 < count <= 16:
            bottom_axis.setTicks([[(float(i), str(i)) for i in range(count)]])
        else:
            bottom_axis.setTicks(None)
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

    def mouseMoveEvent(self, event: QtGui.QMouseEvent) -> None:  # noqa: N802 - Qt name
        super().mouseMoveEvent(event)
        # The scene's sigMouseMoved is rate-limited and can drop the last move before the
        # mouse stops, leaving a stale read-out; every view event is handled here instead.
        self._on_scene_mouse_moved(self.mapToScene(event.position().toPoint()))

    def _on_scene_mouse_moved(self, scene_pos: QtCore.QPointF) -> None:
        index = self.bar_at(scene_pos)
        if index is not None:
            self._inside = True
            self.hovered.emit(index)
        else:
            self._leave()
