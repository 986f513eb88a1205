"""A live frame's new pixels of an :class:`~actviz.ui.panels.canvas.ImageCanvas`, painted
without its scene (any other change is the scene's; docs/performance.md)."""

from __future__ import annotations

from typing import Any

import numpy as np
from PySide6 import QtCore, QtGui, QtWidgets


class LightPaint:
    """The image rectangle of ``canvas``, repainted by the canvas without its scene."""

    def __init__(self, canvas: Any) -> None:  # an ImageCanvas (it imports this module)
        self._canvas = canvas
        #: The viewport rectangle asked for since the last paint (None: nothing asked).
        self.pending: QtCore.QRect | None = None
        #: :meth:`geometry` when :attr:`pending` was asked for.
        self._geometry: tuple[QtGui.QTransform, QtCore.QRectF] | None = None
        self._option = QtWidgets.QStyleOptionGraphicsItem()
        #: :meth:`request`'s last geometry and viewport rectangle, and what they follow.
        self._key, self._known = None, None
        #: Paints done here (for tests and benchmarks).
        self.painted = 0

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
        item._imageHasNans = None  # noqa: SLF001 - as setImage resets them
        item._imageNanLocations = None  # noqa: SLF001
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
    def _draw_image(painter: QtGui.QPainter, item: Any, transform: QtGui.QTransform) -> bool:
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
