"""The correlation matrix, painted cell by cell (nearest neighbour: each cell one colour)."""

from __future__ import annotations

from typing import Any

import numpy as np
from PySide6.QtCore import QPoint, QRect, QSize, Qt, Signal
from PySide6.QtGui import QImage, QMouseEvent, QPainter, QPaintEvent
from PySide6.QtWidgets import QSizePolicy, QWidget

from actviz_correlation import Correlation, matrix_pixels

MARGIN = 6


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

    def matrix_rect(self) -> QRect:
        """Where the matrix is painted: the largest square of whole cells that fits."""
        n = self._pixels.shape[0] if self._pixels is not None else 1
        side = max(n, min(self.width(), self.height()) - 2 * MARGIN)
        side -= side % n
        return QRect((self.width() - side) // 2, (self.height() - side) // 2, side, side)

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
        if self._image is not None:
            painter.setRenderHint(QPainter.RenderHint.SmoothPixmapTransform, False)
            painter.drawImage(self.matrix_rect(), self._image)
        painter.end()

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
