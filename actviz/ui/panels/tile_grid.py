"""The gaps between a mosaic's tiles and the channel numbers on them, over an image canvas."""

from __future__ import annotations

import functools
import math

import pyqtgraph as pg
from PySide6 import QtCore, QtGui, QtWidgets

from actviz.ui.panels import style
from actviz.ui.panels.deferred import DeferredCall

#: Channel numbers are drawn on tiles at least this many screen pixels wide ...
LABEL_MIN_TILE_PX = 40
MAX_TILE_LABELS = 256  #: ... on at most this many tiles (those in view).


class TileGrid:
    """Lines between a mosaic's tiles (a cosmetic pen: one pixel at every zoom) and channel
    numbers (one pixmap). Plain Qt items: a scene painting after its canvas went calls no Python."""

    def __init__(self, view: pg.ViewBox) -> None:
        self._view = view
        self._pen = pg.mkPen(style.PLOT_BACKGROUND, width=1)  # cosmetic (pyqtgraph's default)
        self._tiles: tuple[int, int, int, int, int, int, int] | None = None
        # The channel of each tile when they are not consecutive (sorted by effect).
        self._channel_ids: tuple[int, ...] | None = None
        self._font = QtGui.QFont()
        self._font.setPointSize(style.TICK_POINT_SIZE - 1)
        self.path_item = QtWidgets.QGraphicsPathItem()
        self.path_item.setPen(self._pen)
        self.path_item.setZValue(10)
        self.label_item = QtWidgets.QGraphicsPixmapItem()
        self.label_item.setFlag(QtWidgets.QGraphicsItem.GraphicsItemFlag.ItemIgnoresTransformations)
        self.label_item.setZValue(11)
        view.addItem(self.path_item, ignoreBounds=True)
        view.addItem(self.label_item, ignoreBounds=True)
        #: What the label pixmap was drawn for: redrawn only when it changes.
        self._label_key: tuple | None = None
        self._label_corner = QtCore.QPointF()  # the pixmap's corner, from the origin's pixel
        #: Whether the gaps and the numbers have anything to draw (light paints skip them).
        self.has_lines = self.has_labels = False
        #: The labels wait for the canvas to come into view (see :meth:`_update_labels`).
        self.labels_stale = False
        # Drawn once after the pass that moved the view (a resize moves it several times).
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
        """Lay the grid over ``rows x cols`` tiles ``pad`` apart, numbered from ``first_channel``
        (or ``channel_ids``)."""
        tiles = (rows, cols, tile_h, tile_w, pad, channels, first_channel)
        if tiles == self._tiles and channel_ids == self._channel_ids:
            return
        self._tiles, self._channel_ids = tiles, channel_ids
        width, height = cols * (tile_w + pad) - pad, rows * (tile_h + pad) - pad
        path, half = QtGui.QPainterPath(), pad / 2.0
        for x in (c * (tile_w + pad) - half for c in range(1, cols)):
            path.moveTo(x, 0.0)
            path.lineTo(x, height)
        for y in (r * (tile_h + pad) - half for r in range(1, rows)):
            path.moveTo(0.0, y)
            path.lineTo(width, y)
        self._set_path(path)

    def clear(self) -> None:
        """No grid (an image that is not a mosaic)."""
        if self._tiles is not None:
            self._tiles = None
            self._set_path(QtGui.QPainterPath())

    def _set_path(self, path: QtGui.QPainterPath) -> None:
        """The gaps between the tiles (image coordinates), and the channel numbers again."""
        self.path_item.setPath(path)
        self.has_lines = not path.isEmpty()
        self._update_labels()

    def _device_transform(self) -> QtGui.QTransform | None:
        """Image coordinates to the viewport's pixels, as painted now (None: not in a view)."""
        scene = self.path_item.scene()
        views = scene.views() if scene is not None else []
        return self.path_item.sceneTransform() * views[0].viewportTransform() if views else None

    def tile_screen_px(self, transform: QtGui.QTransform | None = None) -> float:
        """Screen width of one tile under ``transform`` (default: as the item is drawn now)."""
        if self._tiles is None:
            return 0.0
        if transform is None:
            transform = self._device_transform()
        if transform is None:
            return 0.0
        return math.hypot(transform.m11(), transform.m12()) * self._tiles[3]

    def labels(self, transform: QtGui.QTransform | None = None) -> list[tuple[int, QtCore.QPointF]]:
        """``(channel, screen point of its tile's corner)`` for the numbers drawn now."""
        if transform is None:
            transform = self._device_transform()
        if self._tiles is None or transform is None:
            return []
        if self.tile_screen_px(transform) < LABEL_MIN_TILE_PX:
            return []
        rows, cols, tile_h, tile_w, pad, channels, first = self._tiles
        visible = self._view.viewRect()
        step_x, step_y = tile_w + pad, tile_h + pad
        # Only rows and columns in view (one more each side): a zoomed-in page shows a few tiles.
        col_range = _span(visible.left(), visible.right(), tile_w, step_x, cols)
        out: list[tuple[int, QtCore.QPointF]] = []
        for row in _span(visible.top(), visible.bottom(), tile_h, step_y, rows):
            for col in col_range:
                if (i := row * cols + col) >= channels:
                    break
                x0, y0 = col * step_x, row * step_y
                if not visible.intersects(QtCore.QRectF(x0, y0, tile_w, tile_h)):
                    continue
                channel = self._channel_ids[i] if self._channel_ids is not None else first + i
                out.append((channel, transform.map(QtCore.QPointF(x0, y0))))
                if len(out) >= MAX_TILE_LABELS:
                    return out
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
            self._set_pixmap(QtGui.QPixmap())
            return
        ratio = views[0].devicePixelRatioF() if views else 1.0
        # Drawn about the image's origin: a view moved but not scaled moves the pixmap only.
        linear = (transform.m11(), transform.m12(), transform.m21(), transform.m22())
        labels = self.labels(transform)
        origin = transform.map(QtCore.QPointF(0.0, 0.0))
        # The whole pixels of the origin move the pixmap; its fraction is drawn in (crisp text).
        base = QtCore.QPointF(math.floor(origin.x()), math.floor(origin.y()))
        key = (
            self._tiles,
            self._channel_ids,
            tuple(round(v, 4) for v in linear),
            (round(origin.x() - base.x(), 4), round(origin.y() - base.y(), 4)),
            tuple(channel for channel, _ in labels),
            ratio,
        )
        if key != self._label_key:
            self._label_key = key
            if not labels:
                self._set_pixmap(QtGui.QPixmap())
                return
            corners = [(channel, corner - base) for channel, corner in labels]
            pixmap, self._label_corner = self._render_labels(corners, ratio)
            self._set_pixmap(pixmap)
        if labels:
            # The item ignores the view's scaling: its offset is in screen pixels from the origin.
            self.label_item.setPos(0.0, 0.0)
            self.label_item.setOffset(self._label_corner + base - origin)

    def _set_pixmap(self, pixmap: QtGui.QPixmap) -> None:
        self.label_item.setPixmap(pixmap)
        self.has_labels = not pixmap.isNull()

    def request_labels(self) -> None:
        """Draw the channel numbers after this event-loop pass."""
        self._labels_later.request()

    def _render_labels(
        self, labels: list[tuple[int, QtCore.QPointF]], ratio: float
    ) -> tuple[QtGui.QPixmap, QtCore.QPointF]:
        """Draw the channel numbers once into a transparent pixmap (screen pixels)."""
        metrics, texts = QtGui.QFontMetrics(self._font), [str(channel) for channel, _ in labels]
        advance, height = metrics.horizontalAdvance, metrics.height()
        rects = [
            QtCore.QRectF(corner.x() + 1, corner.y() + 1, advance(text) + 4, height)
            for text, (_, corner) in zip(texts, labels, strict=True)
        ]
        bounds = functools.reduce(QtCore.QRectF.united, rects).toAlignedRect()
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
            for text, rect in zip(texts, rects, strict=True):
                p.fillRect(rect, back)
                p.drawText(rect, QtCore.Qt.AlignmentFlag.AlignCenter, text)
        finally:
            p.end()
        return pixmap, QtCore.QPointF(bounds.topLeft())


def _span(low: float, high: float, size: float, step: float, count: int) -> range:
    """Indices ``k`` of the cells ``[k * step, k * step + size]`` that may meet ``[low, high]``."""
    if step <= 0 or not (math.isfinite(low) and math.isfinite(high)):
        return range(count)
    first = max(0, math.floor((low - size) / step))
    return range(first, max(first, min(count, math.floor(high / step) + 2)))
