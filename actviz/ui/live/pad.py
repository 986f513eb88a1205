"""The Live dock's perturbation pad (the occlusion patch to drag) and slider rows."""

from __future__ import annotations

import numpy as np
from PySide6.QtCore import QPointF, QRectF, Qt, Signal
from PySide6.QtGui import QColor, QImage, QMouseEvent, QPainter, QPaintEvent, QPen
from PySide6.QtWidgets import QHBoxLayout, QLabel, QSizePolicy, QSlider, QWidget

#: What the perturbation pad says before there is an input.
NO_INPUT_TEXT = "No input yet: open an image (Ctrl+I)"
#: What it says for an input without a picture: perturbations change image-like tensors only.
NOT_AN_IMAGE_TEXT = "No picture: not an image"
#: Light grey on the pad's dark background.
_PLACEHOLDER_TEXT = "#bdc1c6"


class OcclusionPad(QWidget):
    """The perturbed frame with the occlusion patch outlined; drag to move the patch."""

    #: New patch centre as fractions of the image width and height.
    moved = Signal(float, float)

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self._rgb: np.ndarray | None = None
        self._qimage: QImage | None = None
        #: What the pad says while it has no picture (why, and what to do).
        self.placeholder = NO_INPUT_TEXT
        self._centre: tuple[float, float] | None = None
        self._size = 0.25
        self.setMinimumSize(120, 120)  # small enough for the dock at 1280x720
        self.setSizePolicy(QSizePolicy.Policy.Expanding, QSizePolicy.Policy.Expanding)
        self.setCursor(Qt.CursorShape.CrossCursor)
        self.setToolTip("Press and drag to move the occlusion patch over the input")
        # paintEvent fills every pixel: no repaint of the group box behind it per frame.
        self.setAttribute(Qt.WidgetAttribute.WA_OpaquePaintEvent)

    @property
    def rgb(self) -> np.ndarray | None:
        """The picture shown ((H, W, 3) uint8), or None while the placeholder shows."""
        return self._rgb

    def set_image(self, rgb: np.ndarray | None, placeholder: str = NOT_AN_IMAGE_TEXT) -> None:
        """Show ``rgb`` ((H, W, 3) uint8); None shows ``placeholder``."""
        if rgb is None:
            self._rgb = self._qimage = None
            self.placeholder = placeholder
        else:
            self._rgb = np.ascontiguousarray(rgb[..., :3], dtype=np.uint8)
            h, w = self._rgb.shape[:2]
            rgb = QImage(self._rgb.data, w, h, 3 * w, QImage.Format.Format_RGB888)
            self._qimage = rgb.convertToFormat(QImage.Format.Format_RGB32)  # once, not per paint
        self.update()

    def set_patch(self, centre: tuple[float, float] | None, size: float) -> None:
        self._centre, self._size = centre, size
        self.update()

    def image_rect(self) -> QRectF:
        """Where the picture is drawn (aspect kept, centred)."""
        if self._rgb is None:
            return QRectF(self.rect())
        h, w = self._rgb.shape[:2]
        scale = min(self.width() / w, self.height() / h)
        dw, dh = w * scale, h * scale
        return QRectF((self.width() - dw) / 2, (self.height() - dh) / 2, dw, dh)

    def to_fraction(self, pos: QPointF) -> tuple[float, float]:
        r = self.image_rect()
        fx = (pos.x() - r.x()) / max(r.width(), 1e-9)
        fy = (pos.y() - r.y()) / max(r.height(), 1e-9)
        return min(max(fx, 0.0), 1.0), min(max(fy, 0.0), 1.0)

    def from_fraction(self, fx: float, fy: float) -> QPointF:
        r = self.image_rect()
        return QPointF(r.x() + fx * r.width(), r.y() + fy * r.height())

    def paintEvent(self, event: QPaintEvent) -> None:  # noqa: N802 - Qt name
        painter = QPainter(self)
        painter.fillRect(self.rect(), QColor("#202124"))
        r = self.image_rect()
        if self._qimage is not None:
            painter.drawImage(r, self._qimage)
        elif self.placeholder:
            painter.setPen(QColor(_PLACEHOLDER_TEXT))
            flags = Qt.AlignmentFlag.AlignCenter | Qt.TextFlag.TextWordWrap
            painter.drawText(QRectF(self.rect()).adjusted(8, 8, -8, -8), flags, self.placeholder)
        if self._centre is not None and self._rgb is not None:
            h, w = self._rgb.shape[:2]
            side = self._size * min(h, w) * r.width() / w
            c = self.from_fraction(*self._centre)
            painter.setPen(QPen(QColor("#ff5252"), 2))
            painter.drawRect(QRectF(c.x() - side / 2, c.y() - side / 2, side, side))
        painter.end()

    def mousePressEvent(self, event: QMouseEvent) -> None:  # noqa: N802 - Qt name
        if not self._drag(event, event.button() == Qt.MouseButton.LeftButton):
            super().mousePressEvent(event)

    def mouseMoveEvent(self, event: QMouseEvent) -> None:  # noqa: N802 - Qt name
        if not self._drag(event, bool(event.buttons() & Qt.MouseButton.LeftButton)):
            super().mouseMoveEvent(event)

    def _drag(self, event: QMouseEvent, left: bool) -> bool:
        if left:
            self.moved.emit(*self.to_fraction(event.position()))
            event.accept()
        return left


def slider(lo: int, hi: int, value: int, tip: str) -> QSlider:
    s = QSlider(Qt.Orientation.Horizontal, minimum=lo, maximum=hi, toolTip=tip)
    s.setValue(value)  # within the range set first
    return s


def with_value(slider: QSlider, label: QLabel, fmt: str, parent: QWidget) -> QWidget:
    """``slider`` with ``label`` showing its value. ``parent`` owns the row at once: an unowned
    row would die with its Python reference."""
    row = QWidget(parent)
    h = QHBoxLayout(row)
    h.setContentsMargins(0, 0, 0, 0)
    h.addWidget(slider, 1)
    # Wide enough for the longest value, so the slider does not jump as the text changes.
    label.setMinimumWidth(label.fontMetrics().horizontalAdvance(fmt.format(-100) + "0"))
    label.setAlignment(Qt.AlignmentFlag.AlignRight | Qt.AlignmentFlag.AlignVCenter)
    h.addWidget(label)
    slider.valueChanged.connect(lambda v: label.setText(fmt.format(v)))
    label.setText(fmt.format(slider.value()))
    return row
