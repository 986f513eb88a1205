"""How an :class:`~actviz.ui.panels.canvas.ImageCanvas` fits its room: height for width, side
margins, the colour bar's margins, and the scene's size (fitted once, when next needed)."""

from __future__ import annotations

import math

from PySide6 import QtCore, QtGui

from actviz.ui.panels.deferred import DeferredCall

#: Canvas margins (top/bottom: the colour bar's end labels) and image-to-bar spacing, pixels.
_CANVAS_MARGIN = 1
_CANVAS_MARGIN_V = 7
_CANVAS_SPACING = 2


class SceneFit:
    """The geometry half of :class:`~actviz.ui.panels.canvas.ImageCanvas` (a mixin)."""

    def _layout_shape(self) -> tuple[int, ...] | None:
        """The image shape the layout makes room for: the expected image's, else the shown one's."""
        return self._expected_shape or self._shape

    def _fits(self) -> bool:
        return self._fit_width and self._layout_shape() is not None and self._lock_aspect

    def expect_shape(self, shape: tuple[int, int] | None) -> bool:
        """Make room now for a later image of ``shape`` (None: the image shown); False: no change."""
        shape = None if shape is None or tuple(shape) == self._shape else tuple(shape)
        if shape == self._expected_shape:
            return False
        self._expected_shape = shape
        self._fit_height()
        return True

    def heightForWidth(self, width: int) -> int:  # noqa: N802 - Qt name
        """The height at which an aspect-locked image fills ``width`` (``fit_width`` only)."""
        if not self._fits():
            return max(self.minimumHeight(), self.sizeHint().height())
        height, image_width = self._layout_shape()[:2]  # type: ignore[index]
        needed = math.ceil(self.image_area_width(width) * height / max(image_width, 1))
        return max(needed + 2 * _CANVAS_MARGIN_V, 40, self.minimumHeight())

    def hasHeightForWidth(self) -> bool:  # noqa: N802 - Qt name
        return self._fits()

    def _fit_height(self) -> None:
        """Ask for the height that fills the width through height-for-width (resolved in the
        width's pass; a minimum height set after a resize would lag a pass)."""
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

    def _set_side(self, side: int, *, now: bool) -> None:
        if side != self._side:
            self._side = side
            self.ci.setContentsMargins(
                _CANVAS_MARGIN + side, _CANVAS_MARGIN_V, _CANVAS_MARGIN + side, _CANVAS_MARGIN_V
            )
            if now:
                # At once: a wheel step before the next layout would zoom from the old width.
                self.ci.layout.activate()

    def _fit_sides(self, size: QtCore.QSize | None = None) -> None:
        """Centre the image and its colour bar with equal side margins; zoomed in, the image may
        use the whole room at a kept scale. From ``size``, before a resize (never held wider)."""
        now = size is None  # a size given: before a resize (the layout follows it)
        if self.colorbar is None or self._shape is None or not self._lock_aspect:
            # The sides follow only an aspect-locked image beside a colour bar.
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
            # The range is what the view shows at that scale (a wider one would shrink the
            # image); across, it stays on the image.
            half = view_w / scale / 2
            centre_x = width / 2
            if width > 2 * half + 1 / scale:
                centre_x = min(max(target.center().x(), half), width - half)
            wanted = QtCore.QRectF(0.0, 0.0, view_w / scale, room_h / scale)
            wanted.moveCenter(QtCore.QPointF(centre_x, target.center().y()))
            tolerance = 1e-6 * max(wanted.width(), wanted.height())
            edges = ("left", "top", "width", "height")
            if any(abs(getattr(wanted, e)() - getattr(target, e)()) > tolerance for e in edges):
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
            if self._shape is None:
                bar.set_margins(4.0, 4.0)
                return
            height, width = self._shape
            image = self.view.mapViewToScene(QtCore.QRectF(0, 0, width, height)).boundingRect()
            image = image.intersected(self.view.sceneBoundingRect())
            # Margins count in the scene's minimum height: never more than the canvas holds.
            bar.fit_to(image, max(0.0, self.height() - 2 * _CANVAS_MARGIN_V - 8.0))
        finally:
            self._fitting_colorbar = False

    def resizeEvent(self, event: QtGui.QResizeEvent) -> None:  # noqa: N802 - Qt name
        if getattr(self, "_resizing", False) or not hasattr(self, "_fit_width"):
            # Re-entered from its own fit, or pyqtgraph still building: only the view follows.
            super().resizeEvent(event)
            return
        # The scene follows once, later (ensure_scene): a layout resizes often, and fits are slow.
        self._scene_stale = True
        if getattr(self, "_announcing", False):
            return  # a listener's resize: the fit to come takes the last size
        self._announcing = True
        try:
            self.resized.emit()  # whoever follows the width hears now
        finally:
            self._announcing = False
        if getattr(self, "_fit_soon", None) is None:
            self._fit_soon = DeferredCall(self, lambda: self.on_screen() and self.ensure_scene())
        self._fit_soon.request()

    def on_screen(self) -> bool:
        """Whether part of the canvas is on screen (its viewport's region: its own is empty)."""
        return self.isVisible() and not self.viewport().visibleRegion().isEmpty()

    def ensure_scene(self) -> None:
        """Fit the scene to the canvas's size if a resize left that for later."""
        if not getattr(self, "_scene_stale", False) or getattr(self, "_resizing", False):
            return
        self._scene_stale = False
        if self.closed:
            return
        old = self.ci.geometry().size().toSize()
        if old == self.size() == getattr(self, "_fitted_size", None):
            return  # resized and back within the turn: the scene is fitted to this size
        self._resizing = True
        try:
            self._resize(QtGui.QResizeEvent(self.size(), old))
        finally:
            self._resizing = False

    def _resize(self, event: QtGui.QResizeEvent) -> None:
        bar = getattr(self, "colorbar", None)
        if bar is not None and event.size().height() < event.oldSize().height():
            # Margins fitted to a taller canvas would cut the image: the view's resize refits them.
            bar.set_margins(0.0, 0.0)
        if hasattr(self, "_side"):
            # Before the scene's resize: a wider canvas's margins would hold it wider.
            self._fit_sides(event.size())
        super().resizeEvent(event)
        self._fitted_size = event.size()
        # A size set during this event can leave pyqtgraph's scene stale: check once later.
        self._sync_scene_soon.request()

    def _sync_scene(self) -> None:
        if self.closed or not self.isVisible():
            return
        if self.ci.geometry().size().toSize() != self.size():
            if self.colorbar is not None:
                self.colorbar.set_margins(0.0, 0.0)  # see resizeEvent
            super().resizeEvent(QtGui.QResizeEvent(self.size(), self.size()))
