"""Plain Qt helpers several window and panel test files share."""

from __future__ import annotations

from typing import Any

import numpy as np
from PySide6.QtCore import QCoreApplication
from PySide6.QtGui import QImage


def process_events(rounds: int = 6) -> None:
    """Let Qt handle what is queued, ``rounds`` passes (deferred layouts, posted events)."""
    for _ in range(rounds):
        QCoreApplication.processEvents()


def show_widget(qtbot: Any, widget: Any, width: int = 560, height: int = 260) -> Any:
    """Give ``widget`` to ``qtbot``, resize it, show it and wait until it is exposed; returns
    it."""
    qtbot.addWidget(widget)
    widget.resize(width, height)
    widget.show()
    qtbot.waitExposed(widget)
    QCoreApplication.processEvents()
    return widget


def wait_not_busy(qtbot: Any, thing: Any, timeout_ms: int = 60_000) -> None:
    """Wait until ``thing.is_busy()`` (a page, a feature) says it is done."""
    qtbot.waitUntil(lambda: not thing.is_busy(), timeout=timeout_ms)


def rgba_array(qimage: QImage) -> np.ndarray:
    """``qimage``'s pixels as an ``(H, W, 4)`` uint8 RGBA array (a copy: the QImage's memory
    goes with it)."""
    image = qimage.convertToFormat(QImage.Format.Format_RGBA8888)
    height, width = image.height(), image.width()
    data = np.frombuffer(image.constBits(), np.uint8, count=image.sizeInBytes())
    rows = data.reshape(height, image.bytesPerLine())[:, : width * 4]
    return rows.reshape(height, width, 4).copy()


def scene_fits(canvas: Any) -> bool:
    """Whether a canvas's pyqtgraph scene has been fitted to the canvas's present size."""
    return canvas.ci.geometry().size().toSize() == canvas.size()


def cell_texts(view: Any) -> list[list[str]]:
    """What a PredictionChangeView's table says, one list per class: its name line, then its
    numbers."""
    table = view.table
    return [
        [table.item(r, 0).text()]
        + [table.item(r + 1, c).text() for c in range(table.columnCount())]
        for r in range(0, table.rowCount(), 2)
    ]
