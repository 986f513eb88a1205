""":class:`ImageCanvas`, the pyqtgraph image with a colour bar the panels are built from, and
:class:`LightPaint`: a live frame's new pixels painted without the scene (any other change is the
scene's; docs/performance.md)."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import pyqtgraph as pg
from PySide6 import QtCore, QtGui, QtWidgets

from actviz.display.colormaps import DEFAULT_ACTIVATION_CMAP, indexed_table, to_indices
from actviz.ui.panels import style
from actviz.ui.panels.colorbar import AXIS_WIDTH, STRIP_WIDTH, ColorBar, color_table, lut
from actviz.ui.panels.deferred import DeferredCall
from actviz.ui.panels.scene_fit import _CANVAS_MARGIN, _CANVAS_MARGIN_V, _CANVAS_SPACING, SceneFit
from actviz.ui.panels.tile_grid import TileGrid

#: Pictures up to this many pixels skip pyqtgraph's rescaling render (ClickableImageItem).
_RGB_FAST_MAX_PIXELS = 512 * 512


def _full_range(levels: object) -> bool:
    """Whether ``levels`` are the numbers 0 and 255 (False for per-channel levels)."""
    try:
        return len(levels) == 2 and float(levels[0]) == 0.0 and float(levels[1]) == 255.0  # type: ignore[arg-type, index]
    except (TypeError, ValueError):
        return False


class ClickableImageItem(pg.ImageItem):
    """An ImageItem that reports left clicks in image pixel coordinates (x = column, y = row)."""

    sigClicked = QtCore.Signal(float, float)

    def paint(self, painter: QtGui.QPainter, *args) -> None:
        # Nearest-neighbour shrinking drops 1-px tile separators: filter when shrinking only.
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
            self._show(qimage)

    def _show(self, qimage: QtGui.QImage) -> bool:
        # Premultiplied ARGB is Qt's fast draw path; the conversion copies, so the array may go.
        self.qimage = qimage.convertToFormat(QtGui.QImage.Format.Format_ARGB32_Premultiplied)
        self._renderRequired = self._unrenderable = False
        return True

    def _render_indexed(self) -> bool:
        """Render a uint8 index image through its table, skipping pyqtgraph's general path."""
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
        # One indexed image (and colour table) per shape and table, refilled with each frame.
        (h, w), fmt = image.shape, QtGui.QImage.Format.Format_Indexed8
        if getattr(self, "_indexed_key", None) != (key := (h, w, table.tobytes())):
            buffer = np.empty((h, w), np.uint8)
            (indexed := QtGui.QImage(buffer.data, w, h, w, fmt)).setColorTable(color_table(table))
            self._indexed_key, self._indexed = key, (buffer, indexed)
        np.copyto(self._indexed[0], image)
        return self._show(self._indexed[1])

    def _render_rgb(self) -> bool:
        """Render a small (H, W, 3|4) uint8 picture straight into a QImage (large: pyqtgraph's)."""
        image, levels = self.image, self.levels
        if not (
            isinstance(image, np.ndarray)
            and image.ndim == 3
            and image.shape[2] in (3, 4)
            and image.dtype == np.uint8
            and image.size
            and image.shape[0] * image.shape[1] <= _RGB_FAST_MAX_PIXELS
            and self.axisOrder == "row-major"  # (a colour table is for 2-D images only)
            and (levels is None or _full_range(levels))
        ):
            return False
        data = np.ascontiguousarray(image)
        height, width, channels = data.shape
        formats = QtGui.QImage.Format
        fmt = formats.Format_RGB888 if channels == 3 else formats.Format_RGBA8888
        return self._show(QtGui.QImage(data.data, width, height, data.strides[0], fmt))

    #: Left click with Ctrl (``extend`` False: toggle) or Shift (``extend`` True: range).
    sigSelectClicked = QtCore.Signal(float, float, bool)
    #: Right click at image pixel (x, y), screen position (global pixels).
    sigContextClicked = QtCore.Signal(float, float, QtCore.QPoint)

    def mouseClickEvent(self, ev) -> None:  # noqa: N802 - pyqtgraph's name
        if self.image is None:
            ev.ignore()
            return
        pos, mods = ev.pos(), ev.modifiers()
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


class _GridCellCanvas:
    """Grid-cell behaviour of image and bar canvases: hover leave, wheel pass-through, size."""

    _inside: bool
    _passive: bool

    def _init_cell(self, passive: bool, margins: tuple[int, int, int, int], spacing: int) -> None:
        self._passive, self._inside = passive, False
        self.setBackground(style.PLOT_BACKGROUND)
        # The view fills its whole background: Qt need not paint the panel behind it first.
        attribute = QtCore.Qt.WidgetAttribute
        for flag in (attribute.WA_OpaquePaintEvent, attribute.WA_NoSystemBackground):
            self.viewport().setAttribute(flag)
        self.ci.setContentsMargins(*margins)
        self.ci.setSpacing(spacing)
        policy = QtWidgets.QSizePolicy.Policy.Expanding
        self.setSizePolicy(policy, policy)
        self.setMinimumSize(90, 80)

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

    def mouseMoveEvent(self, event: QtGui.QMouseEvent) -> None:  # noqa: N802 - Qt name
        super().mouseMoveEvent(event)
        # Not the scene's sigMouseMoved: it is rate-limited and can drop the last move.
        self._on_scene_mouse_moved(self.mapToScene(event.position().toPoint()))


class LightPaint:
    """The image rectangle of ``canvas``, repainted by the canvas without its scene."""

    def __init__(self, canvas: ImageCanvas) -> None:
        self._canvas = canvas
        #: The viewport rectangle asked for since the last paint (None: nothing asked).
        self.pending: QtCore.QRect | None = None
        #: :meth:`geometry` when :attr:`pending` was asked for.
        self._geometry: tuple[QtGui.QTransform, QtCore.QRectF] | None = None
        self._option = QtWidgets.QStyleOptionGraphicsItem()
        #: :meth:`request`'s last geometry and viewport rectangle, and what they follow.
        self._key, self._known = None, None
        self.painted = 0  #: Paints done here (for tests and benchmarks).

    def geometry(self) -> tuple[QtGui.QTransform, QtCore.QRectF] | None:
        """The image's transform to viewport pixels and the view box's clip (None: not ready)."""
        canvas = self._canvas
        image = canvas.image.image
        if image is None or getattr(canvas.view, "_matrixNeedsUpdate", False):
            return None
        to_viewport = canvas.viewportTransform()
        transform = canvas.image.deviceTransform(to_viewport)
        clip = to_viewport.mapRect(canvas.view.sceneBoundingRect())
        height, width = image.shape[:2]
        drawn = transform.mapRect(QtCore.QRectF(0.0, 0.0, float(width), float(height)))
        return transform, drawn.intersected(clip)

    def swap(self, image: np.ndarray) -> None:
        """New pixels for the image item (same shape and options), painted here if possible."""
        item = self._canvas.image
        item.image = image.view()
        item._imageHasNans = item._imageNanLocations = None  # noqa: SLF001 - as setImage does
        item._renderRequired = True  # noqa: SLF001 - rendered when painted, here or there
        if not self.request():
            item.update()

    def request(self) -> bool:
        """Repaint the image's rectangle after this pass; False: the scene must (view moving)."""
        canvas = self._canvas
        if not canvas.isVisible():
            return True  # painted in full, through the scene, when it is shown
        item, viewport = canvas.image, canvas.viewport()
        if item.image is None or getattr(canvas.view, "_matrixNeedsUpdate", False):
            return False
        # The geometry again only when the image, the view box or the viewport moved.
        key = (item.deviceTransform(canvas.viewportTransform()), canvas.view.geometry())
        if (key := (*key, viewport.rect(), item.image.shape[:2])) != self._key:
            self._key, geometry = key, self.geometry()
            self._known = geometry and (geometry, geometry[1].toAlignedRect() & key[2])
        geometry, rect = self._known
        if self.pending is not None and geometry != self._geometry:
            # Moved since the last request: the scene repaints both rectangles.
            self.pending = self._geometry = None
            return False
        if rect.isEmpty():
            return True  # panned or zoomed off the image: nothing of it is on screen
        self._geometry = geometry
        self.pending = rect if self.pending is None else self.pending.united(rect)
        viewport.update(rect)
        return True

    def paint_event(self, event: QtGui.QPaintEvent) -> bool:
        """Paint ``event`` here when it asks for the image's rectangle only; False: the scene does."""
        pending, self.pending = self.pending, None
        if pending is None or not pending.contains(event.rect()):  # (the region's bounds)
            return False
        canvas, geometry = self._canvas, self._geometry
        if canvas.image.deviceTransform(canvas.viewportTransform()) != geometry[0]:
            return False  # the view moved since (a zoom, a pan): the scene paints it
        painter = QtGui.QPainter(canvas.viewport())
        try:
            return self.paint(painter, geometry)
        finally:
            painter.end()

    def paint(
        self,
        painter: QtGui.QPainter,
        geometry: tuple[QtGui.QTransform, QtCore.QRectF] | None = None,
    ) -> bool:
        """Paint the image's rectangle as the scene would; False when there is nothing to paint."""
        canvas = self._canvas
        geometry = geometry or self.geometry()
        if geometry is None or getattr(canvas.view, "_matrixNeedsUpdate", False):
            return False
        transform, clip = geometry
        painter.setRenderHints(canvas.renderHints())
        painter.setClipRect(clip)
        painter.fillRect(clip, canvas.backgroundBrush())
        # The scene's order (z values, set in the canvas): image, gaps, channel numbers, marks.
        image, grid, to_viewport = canvas.image, canvas.grid, canvas.viewportTransform()
        painter.setTransform(transform)
        if not self._draw_image(painter, image, transform):
            image.paint(painter, self._option, None)
        items = (grid.path_item, grid.has_lines), (grid.label_item, grid.has_labels)
        for item, drawn in (*items, (canvas.marks, bool(canvas._marked))):  # noqa: SLF001
            if drawn and item.isVisible():  # empty items are skipped
                painter.setTransform(item.deviceTransform(to_viewport))
                item.paint(painter, self._option, None)
        self.painted += 1
        return True

    @staticmethod
    def _draw_image(
        painter: QtGui.QPainter, item: ClickableImageItem, transform: QtGui.QTransform
    ) -> bool:
        """Draw the item's picture as its ``paint`` does; False: left to the item."""
        if item.border is not None or item.paintMode is not None or item.axisOrder != "row-major":
            return False
        if item._renderRequired:  # noqa: SLF001 - pyqtgraph's flag, as its paint reads it
            item.render()
        if item._unrenderable or item.qimage is None:  # noqa: SLF001
            return False
        # As ClickableImageItem.paint: filtered when shrunk, crisp pixels when enlarged.
        smooth = max(abs(transform.m11()), abs(transform.m12())) < 1.0
        painter.setRenderHint(QtGui.QPainter.RenderHint.SmoothPixmapTransform, smooth)
        height, width = item.image.shape[:2]
        painter.drawImage(QtCore.QRectF(0.0, 0.0, float(width), float(height)), item.qimage)
        return True


class ImageCanvas(_GridCellCanvas, SceneFit, pg.GraphicsLayoutWidget):
    """An ImageItem with a colour bar, updated in place. ``passive``: the wheel scrolls the
    surrounding area; ``fit_width``: ask for the height that fills the width. Signals carry
    pixel ``(x, y)``; ``select_clicked``'s bool is Shift (range) rather than Ctrl."""

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
        # Before _fit_width (resizeEvent asks for it once that is set).
        self._sync_scene_soon = DeferredCall(self, self._sync_scene)
        self._fit_width, self._lock_aspect = fit_width, True
        self._shape: tuple[int, ...] | None = None
        #: The shape of an image still to come that the layout already makes room for.
        self._expected_shape: tuple[int, ...] | None = None
        margins = (_CANVAS_MARGIN, _CANVAS_MARGIN_V, _CANVAS_MARGIN, _CANVAS_MARGIN_V)
        self._init_cell(passive, margins, _CANVAS_SPACING)
        # No context menu: it is costly to build per canvas.
        self.view = pg.ViewBox(lockAspect=True, invertY=True, enableMenu=False)
        self.addItem(self.view, row=0, col=0)
        self.view.setMouseEnabled(x=not passive, y=not passive)
        self.view.disableAutoRange()
        # A new image repaints its own rectangle, not 2 px around it too (the bar's strip).
        self.setOptimizationFlag(QtWidgets.QGraphicsView.OptimizationFlag.DontAdjustForAntialiasing)
        # 2-D images are uint8 indices, never downsampled (averaging indices blends colours).
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
        self.marks.setPen(pg.mkPen(style.TILE_MARK, width=2))  # (cosmetic: 2 px at every zoom)
        self.marks.setZValue(12)
        self.view.addItem(self.marks, ignoreBounds=True)
        self._marked: list[QtCore.QRectF] = []
        self._light = LightPaint(self)

        self.colorbar: ColorBar | None = ColorBar() if colorbar else None
        if self.colorbar is not None:
            self.addItem(self.colorbar, row=0, col=1)
            # The bar spans the image, not the whole canvas (the image is letterboxed).
            self.view.sigResized.connect(self._fit_colorbar)
            self.view.sigRangeChanged.connect(self._fit_colorbar)
        #: A fit asked for from inside a fit runs after that pass (see :meth:`_fit_colorbar`).
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
        """Show ``image`` (2-D float32, 2-D uint8 indices, or (H, W, 3|4) uint8) at ``levels``;
        the view resets only when the shape changes.

        Parameters
        ----------
        bar_range, bar_labels
            Values (default ``levels``) or words written on the colour bar.
        lock_aspect
            Keep square pixels (mosaics, pictures) or fill the canvas (heatmaps).
        indices
            ``to_indices(image, levels)`` computed off the GUI thread.
        source
            Makes the float image behind ``image``, for :meth:`source_image` (only if read)."""
        self._levels = (float(levels[0]), float(levels[1]))
        if image.ndim == 2:
            self._source = source if source is not None else image
            if indices is None or indices.shape != image.shape or indices.dtype != np.uint8:
                indices = image if image.dtype == np.uint8 else to_indices(image, levels)
            self._set_table(self._cmap, True)
            if not self._swap(indices, self.image.levels is None and not self.image.autoDownsample):
                self.image.setImage(indices, autoLevels=False, levels=None, autoDownsample=False)
        else:
            self._source = None
            self._set_table(self._cmap, False)
            shown, (height, width) = self.image.levels, image.shape[:2]
            # A small picture at 0-255, which the item draws without downsampling (_render_rgb).
            small = image.dtype == np.uint8 and height * width <= _RGB_FAST_MAX_PIXELS
            if not self._swap(image, small and self._levels == (0.0, 255.0) and _full_range(shown)):
                # Pictures may be far larger than the canvas: downsample before converting.
                self.image.setImage(image, autoLevels=False, levels=levels, autoDownsample=True)
        shape = tuple(image.shape[:2])
        reshaped = shape != self._shape
        expected, self._expected_shape = self._expected_shape, None
        if reshaped:
            self._shape, self._lock_aspect = shape, lock_aspect
            self.view.setAspectLocked(lock_aspect)
            self.reset_view()
            self._fit_sides()  # after the reset: the sides follow the range shown
            self._fit_height()
        elif expected is not None:
            self._fit_height()  # room was made for another shape: back to this one's
        if self.colorbar is not None:
            low, high = bar_range if bar_range is not None else levels
            if not (np.isfinite(low) and np.isfinite(high)):
                low, high = 0.0, 1.0
            self.colorbar.setLevels((low, high), bar_labels)
            if reshaped:
                self._fit_colorbar()  # same shape: the bar still spans the image

    def _swap(self, pixels: np.ndarray, drawn_alike: bool) -> bool:
        """Swap in new pixels of the same shape and drawing (live frames); False: general path."""
        shown = self.image.image
        if not (
            drawn_alike
            and isinstance(shown, np.ndarray)
            and shown.shape == pixels.shape
            and shown.dtype == np.uint8
            and self.image._xp is np  # noqa: SLF001 - pyqtgraph's array module (cupy or numpy)
        ):
            return False
        self._light.swap(pixels)
        return True

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
        """Widget pixels the image may fill across in a canvas ``width`` wide, less the bar."""
        width = (self.width() if width is None else int(width)) - 2 * _CANVAS_MARGIN
        if self.colorbar is not None:
            width -= STRIP_WIDTH + AXIS_WIDTH + _CANVAS_SPACING
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

    def paintEvent(self, event: QtGui.QPaintEvent) -> None:  # noqa: N802 - Qt name
        self.ensure_scene()
        if (grid := getattr(self, "grid", None)) is not None and grid.labels_stale:
            grid.request_labels()
        if (light := getattr(self, "_light", None)) is None or not light.paint_event(event):
            super().paintEvent(event)

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
        if name != self._cmap and self.colorbar is not None:
            self.colorbar.setColorMap(name)
        self._set_table(name, self._indexed)

    def _set_table(self, name: str, indexed: bool) -> None:
        """The image's table of map ``name``: indexed (uint8 indices) or pyqtgraph's (pictures)."""
        if (name, indexed) != (self._cmap, self._indexed):
            self._cmap, self._indexed = name, indexed
            self.image.setLookupTable(indexed_table(name) if indexed else lut(name))

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
        self.clear_tiles()
        self._shape = self._expected_shape = self._source = self._levels = None
        self._fit_sides()
        self._fit_colorbar()

    def image_shape(self) -> tuple[int, ...] | None:
        """(rows, cols) of the image shown, or None."""
        return self._shape

    def image_to_widget(self, x: float, y: float) -> QtCore.QPoint:
        """Map image pixel (x, y) to a point in this widget's viewport (for tests and tools)."""
        self.ensure_scene()
        return self.mapFromScene(self.image.mapToScene(QtCore.QPointF(x, y)))

    def mousePressEvent(self, event: QtGui.QMouseEvent) -> None:  # noqa: N802 - Qt name
        self.ensure_scene()
        super().mousePressEvent(event)

    def mouseMoveEvent(self, event: QtGui.QMouseEvent) -> None:  # noqa: N802 - Qt name
        self.ensure_scene()
        super().mouseMoveEvent(event)

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
