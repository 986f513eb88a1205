"""The Atlas map's pyqtgraph items: :class:`SelectBox` and :class:`RasterDots`."""

from __future__ import annotations

import sys
from dataclasses import dataclass
from typing import Any

import numpy as np
import pyqtgraph as pg
from PySide6.QtCore import QPoint, QPointF, QRectF, Qt, QTimer, Signal
from PySide6.QtGui import QImage, QPainterPath, QTransform
from PySide6.QtWidgets import QGraphicsPathItem


class SelectBox(pg.ViewBox):
    """A view box whose left drag selects in :attr:`mode` ``"rect"`` (``rect_selected``) or
    ``"lasso"`` (``lasso_selected``, ``(K, 2)`` vertices), in view coordinates; ``""`` pans."""

    rect_selected = Signal(object)
    lasso_selected = Signal(object)

    LASSO_STEP_PX = 3.0  #: Screen pixels the pointer moves before the lasso takes another vertex.

    def __init__(self) -> None:
        # No context menu: pyqtgraph's menus are top-level widgets that outlive the window.
        super().__init__(enableMenu=False)
        self.mode = ""
        self._lasso: list[QPointF] = []  # vertices, view coordinates
        self._last_px: QPointF | None = None
        self.lasso_line = QGraphicsPathItem()
        self.lasso_line.setPen(pg.mkPen((255, 140, 0), width=1.5, style=Qt.PenStyle.DashLine))
        self.lasso_line.setZValue(20)
        self.lasso_line.hide()
        self.addItem(self.lasso_line, ignoreBounds=True)

    def mouseDragEvent(self, ev: Any, axis: Any = None) -> None:  # noqa: N802 (Qt's name)
        if not self.mode or ev.button() != Qt.MouseButton.LeftButton:
            super().mouseDragEvent(ev, axis)
            return
        ev.accept()
        if self.mode == "lasso":
            self._lasso_drag(ev)
        elif ev.isFinish():
            self.rbScaleBox.hide()
            a = self.mapToView(ev.buttonDownPos())
            self.rect_selected.emit(QRectF(a, self.mapToView(ev.pos())).normalized())
        else:
            self.updateScaleBox(ev.buttonDownPos(), ev.pos())

    def _lasso_drag(self, ev: Any) -> None:
        if ev.isStart():
            self._lasso = [self.mapToView(ev.buttonDownPos())]
            self._last_px = QPointF(ev.buttonDownPos())
        pos, last = QPointF(ev.pos()), self._last_px
        if last is None or (pos - last).manhattanLength() >= self.LASSO_STEP_PX or ev.isFinish():
            self._lasso.append(self.mapToView(pos))
            self._last_px = pos
        if ev.isFinish():
            self.lasso_line.hide()
            shape = np.array([(p.x(), p.y()) for p in self._lasso], dtype=np.float64)
            self._lasso, self._last_px = [], None
            self.lasso_selected.emit(shape)
            return
        path = QPainterPath(self._lasso[0])
        for p in self._lasso[1:]:
            path.lineTo(p)
        path.closeSubpath()
        self.lasso_line.setPath(path)
        self.lasso_line.show()


class RasterDots(pg.GraphicsObject):
    """Every dot as one image splatted in numpy (far faster than a ``ScatterPlotItem``),
    covering a :attr:`MARGIN` around the view so a pan only moves it."""

    #: Pixels splatted beyond each side of the view, as a share of its width and height.
    MARGIN = 0.5
    #: Largest image splatted (pixels): the margins shrink on a very large view.
    MAX_PIXELS = 12_000_000
    IDLE_MS = 150  #: Milliseconds the view rests before the image is splatted again around it.

    def __init__(self, dot: int = 5) -> None:
        super().__init__()
        self.dot = int(dot)
        self.xy, self._bgra = np.zeros((0, 2), np.float64), np.zeros((0, 4), np.uint8)
        self._rect = QRectF()
        self._raster: _Raster | None = None
        #: How many times the dots were splatted into a new image (the rest were moves).
        self.renders = 0
        self._last: tuple[QTransform, int, int] | None = None  # the last paint's view
        self._idle = QTimer(self, singleShot=True, interval=self.IDLE_MS)
        self._idle.timeout.connect(self._on_idle)

    def set_data(self, xy: np.ndarray, rgb: np.ndarray) -> None:
        """Dots at ``xy`` (M, 2) in ``rgb`` (M, 3) uint8 colours."""
        self.prepareGeometryChange()
        self.xy = np.asarray(xy, np.float64)[:, :2]
        rgb = np.asarray(rgb, np.uint8)[:, :3]
        # Qt's native ARGB32 is B, G, R, A bytes on little-endian machines.
        order = rgb[:, ::-1] if sys.byteorder == "little" else rgb
        alpha = np.full((len(rgb), 1), 255, np.uint8)
        self._bgra = np.ascontiguousarray(np.concatenate([order, alpha], axis=1))
        self._rect = QRectF()
        if len(self.xy):
            lo, hi = self.xy.min(axis=0), self.xy.max(axis=0)
            span = np.maximum(hi - lo, 1e-9)
            self._rect = QRectF(lo[0], lo[1], span[0], span[1])
        self._raster = None
        self.update()

    def count(self) -> int:
        return len(self.xy)

    def boundingRect(self) -> QRectF:  # noqa: N802 (Qt's name)
        return self._rect

    def paint(self, painter: Any, *_args: Any) -> None:
        if not len(self.xy):
            return
        t = painter.transform()  # data -> device pixels
        w, h = painter.device().width(), painter.device().height()
        if w <= 0 or h <= 0:
            return
        if (raster := self._raster) is None or not raster.covers(t, w, h):
            # While the zoom changes only the view is splatted; the first pan adds the margins.
            wide = raster is None or raster.same_scale(t)
            raster = self._raster = self._render(t, w, h, self.MARGIN if wide else 0.0)
        if raster.image is None:
            return
        # The same zoom: the image moves by whole pixels (no resampling).
        ox = round(t.dx() - raster.dx) + raster.left
        oy = round(t.dy() - raster.dy) + raster.top
        painter.save()
        painter.resetTransform()
        painter.drawImage(QPoint(ox, oy), raster.image)
        painter.restore()
        if not raster.covers(t, w, h, self._slack(w, h)):
            self._last = (QTransform(t), w, h)
            self._idle.start()

    def _slack(self, w: int, h: int) -> tuple[int, int]:
        return int(w * self.MARGIN / 2), int(h * self.MARGIN / 2)

    def _on_idle(self) -> None:
        # The view has not moved since the last paint: the same pixels, with room around.
        last, raster = self._last, self._raster
        self._last = None
        if last is None or raster is None or not len(self.xy):
            return
        t, w, h = last
        if raster.same_scale(t) and not raster.covers(t, w, h, self._slack(w, h)):
            self._raster = self._render(t, w, h, self.MARGIN)

    def _render(self, t: Any, w: int, h: int, margin: float) -> _Raster:
        from actviz.data.atlas_image import splat_dots

        self.renders += 1
        xy = self.xy
        x = xy[:, 0] * t.m11() + xy[:, 1] * t.m21() + t.dx()
        y = xy[:, 0] * t.m12() + xy[:, 1] * t.m22() + t.dy()
        pad = self.dot
        # The dots' own extent in device pixels, and the part of it near the view.
        finite = np.isfinite(x) & np.isfinite(y)
        if not finite.any():
            return _Raster(t, (0, 0, 0, 0), 0, 0, 0, 0)
        bounds = (
            int(np.floor(x[finite].min())) - pad,
            int(np.floor(y[finite].min())) - pad,
            int(np.ceil(x[finite].max())) + pad + 1,
            int(np.ceil(y[finite].max())) + pad + 1,
        )
        # At most MAX_PIXELS in all (a 4K view's margins would take 130 MB).
        share = min(margin, max(0.0, (np.sqrt(self.MAX_PIXELS / (w * h)) - 1) / 2))
        mx, my = int(w * share) + pad, int(h * share) + pad
        left, top = max(bounds[0], -mx), max(bounds[1], -my)
        right, bottom = min(bounds[2], w + mx), min(bounds[3], h + my)
        if right <= left or bottom <= top:
            return _Raster(t, bounds, left, top, right, bottom)
        buf = np.zeros((bottom - top, right - left, 4), dtype=np.uint8)
        splat_dots(x - left, y - top, self._bgra, right - left, bottom - top, self.dot, out=buf)
        # Alpha is 0 or 255, so premultiplied or not is the same: no conversion of the image.
        image = QImage(
            buf.data, buf.shape[1], buf.shape[0], buf.shape[1] * 4,
            QImage.Format.Format_ARGB32_Premultiplied,
        )  # fmt: skip
        return _Raster(t, bounds, left, top, right, bottom, image, buf)


@dataclass(eq=False)
class _Raster:
    """One splatted image, made at transform ``t``, covering ``[left, right) x [top, bottom)``."""

    t: Any
    bounds: tuple[int, int, int, int]
    left: int
    top: int
    right: int
    bottom: int
    image: QImage | None = None
    buffer: np.ndarray | None = None  # the image's pixels (QImage does not own them)

    def __post_init__(self) -> None:
        t = self.t
        self.scale = (t.m11(), t.m12(), t.m21(), t.m22())
        self.dx, self.dy = t.dx(), t.dy()

    def same_scale(self, t: Any) -> bool:
        """Whether transform ``t`` has this image's zoom (it may be moved)."""
        # A pan recomputes the scale from the moved range: equal to a few parts in 1e15.
        pairs = zip((t.m11(), t.m12(), t.m21(), t.m22()), self.scale, strict=True)
        return all(abs(a - b) <= 1e-7 * max(abs(b), 1e-300) for a, b in pairs)

    def covers(self, t: Any, w: int, h: int, slack: tuple[int, int] = (0, 0)) -> bool:
        """Whether this image, moved to ``t``, shows what a ``w`` x ``h`` view (+ ``slack``) would."""
        if not self.same_scale(t):
            return False
        ox, oy = round(t.dx() - self.dx), round(t.dy() - self.dy)
        sx, sy = slack
        # What must be drawn, in this image's pixels: the view and the dots' extent overlap.
        left, top, right, bottom = self.bounds
        x0, y0 = max(-ox - sx, left), max(-oy - sy, top)
        x1, y1 = min(w - ox + sx, right), min(h - oy + sy, bottom)
        if x1 <= x0 or y1 <= y0:
            return True  # no dot in view
        return x0 >= self.left and y0 >= self.top and x1 <= self.right and y1 <= self.bottom
