"""The correlation matrix, painted cell by cell (nearest neighbour: each cell one colour)."""

from __future__ import annotations

from typing import Any

import numpy as np
from PySide6.QtCore import QPoint, QRect, QSize, Qt, Signal
from PySide6.QtGui import QImage, QMouseEvent, QPainter, QPaintEvent
from PySide6.QtWidgets import QSizePolicy, QWidget

from actviz.plugins import paint
from actviz_correlation import Correlation, matrix_pixels

MARGIN = 6
#: Lines of text under the matrix: what it shows, and the colour key.
CAPTION_LINES = 2


class CorrelationWidget(QWidget):
    """A clickable C x C matrix: a click on cell (i, j) opens channel i in the window's
    channel view, a second click on the same cell channel j.

    Signals
    -------
    cell_clicked(int, int)
        The channels of the cell clicked (layer channel numbers).
    """

    cell_clicked = Signal(int, int)

    def __init__(self, context: Any, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.context = context
        self.data: Correlation | None = None
        self._image: QImage | None = None
        self._pixels: np.ndarray | None = None
        self._last_click: tuple[int, int, int] | None = None  # (i, j, clicks on it)
        self.setMinimumSize(120, 120)
        self.setSizePolicy(QSizePolicy.Policy.Expanding, QSizePolicy.Policy.Expanding)
        self.setMouseTracking(True)

    def set_data(self, data: Correlation) -> None:
        """Show ``data`` (what the plugin's ``prepare`` made)."""
        self.data = data
        pixels = np.ascontiguousarray(matrix_pixels(data))
        self._pixels = pixels  # QImage reads this buffer
        h, w = pixels.shape[:2]
        self._image = QImage(pixels.data, w, h, 3 * w, QImage.Format.Format_RGB888).copy()
        self.update()

    def sizeHint(self) -> QSize:  # noqa: N802 - Qt name
        return QSize(320, 320)

    def caption_height(self) -> int:
        """Room under the matrix for the caption (what it shows, the colour key)."""
        return CAPTION_LINES * self.fontMetrics().height() + MARGIN

    def matrix_rect(self) -> QRect:
        """Where the matrix is painted: the largest square of whole cells that fits above
        the caption."""
        n = self._pixels.shape[0] if self._pixels is not None else 1
        room = self.height() - self.caption_height()
        side = max(n, min(self.width(), room) - 2 * MARGIN)
        side -= side % n
        return QRect((self.width() - side) // 2, max(MARGIN, (room - side) // 2), side, side)

    def caption(self) -> str:
        """What the matrix shows, in words."""
        if self.data is None:
            return ""
        n, first = self.data.matrix.shape[0], self.data.first
        return f"Pearson r, channels {first}-{first + n - 1} · click a cell to open it"

    def cell_center(self, i: int, j: int) -> QPoint:
        """The centre of cell (row i, column j), in widget pixels."""
        rect = self.matrix_rect()
        cell = rect.width() // (self._pixels.shape[0] if self._pixels is not None else 1)
        return QPoint(rect.x() + j * cell + cell // 2, rect.y() + i * cell + cell // 2)

    def cell_at(self, x: int, y: int) -> tuple[int, int] | None:
        """The (row, column) of the cell under (x, y), None outside the matrix."""
        if self._pixels is None:
            return None
        rect, n = self.matrix_rect(), self._pixels.shape[0]
        if not rect.contains(x, y):
            return None
        cell = rect.width() // n
        return min((y - rect.y()) // cell, n - 1), min((x - rect.x()) // cell, n - 1)

    def paintEvent(self, event: QPaintEvent) -> None:  # noqa: N802 - Qt name
        painter = QPainter(self)
        painter.fillRect(self.rect(), Qt.GlobalColor.white)
        if self._image is not None and self.data is not None:
            painter.setRenderHint(QPainter.RenderHint.SmoothPixmapTransform, False)
            rect = self.matrix_rect()
            painter.drawImage(rect, self._image)
            self._paint_caption(painter, rect.bottom() + MARGIN)
        painter.end()

    def _paint_caption(self, painter: QPainter, top: int) -> None:
        """The caption's two lines: what is shown, then "-1 [colour ramp] +1"."""
        assert self.data is not None
        line = self.fontMetrics().height()
        painter.setPen(Qt.GlobalColor.black)
        text_rect = QRect(MARGIN, top, self.width() - 2 * MARGIN, line)
        painter.drawText(text_rect, Qt.AlignmentFlag.AlignHCenter, self.caption())
        ramp = np.ascontiguousarray(
            paint(np.linspace(-1, 1, 128)[None], -1.0, 1.0, self.data.colormap)
        )
        key = QImage(ramp.data, 128, 1, 3 * 128, QImage.Format.Format_RGB888).copy()
        left, right = "r = -1", "+1"
        metrics = self.fontMetrics()
        width = min(200, self.width() - 2 * MARGIN - metrics.horizontalAdvance(left + right) - 12)
        x = (self.width() - width) // 2
        y = top + line
        painter.drawText(x - metrics.horizontalAdvance(left) - 4, y + metrics.ascent(), left)
        painter.drawImage(QRect(x, y + 2, max(width, 8), line - 4), key)
        painter.drawText(x + max(width, 8) + 4, y + metrics.ascent(), right)

    def mouseMoveEvent(self, event: QMouseEvent) -> None:  # noqa: N802 - Qt name
        cell = self.cell_at(int(event.position().x()), int(event.position().y()))
        if cell is None or self.data is None:
            self.setToolTip("")
            return
        i, j = cell
        r = self.data.matrix[i, j]
        a, b = self.data.first + i, self.data.first + j
        self.setToolTip(f"channels {a} and {b}: r = {r:.3f} (click: open {a}, again: {b})")

    def mousePressEvent(self, event: QMouseEvent) -> None:  # noqa: N802 - Qt name
        if event.button() != Qt.MouseButton.LeftButton or self.data is None:
            return
        cell = self.cell_at(int(event.position().x()), int(event.position().y()))
        if cell is None:
            return
        i, j = cell
        a, b = self.data.first + i, self.data.first + j
        last = self._last_click
        clicks = last[2] + 1 if last is not None and last[:2] == (i, j) else 0
        self._last_click = (i, j, clicks)
        self.cell_clicked.emit(a, b)
        # The channel view shows one channel: the first, then the second, then the first...
        self.context.open_channel(b if clicks % 2 else a)
