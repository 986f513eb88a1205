"""One image of the channel view: a caption, an :class:`ImageCanvas` and its level controls."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
from PySide6 import QtCore, QtWidgets

from actviz.ui.panels import style
from actviz.ui.panels.canvas import ImageCanvas


def auto_levels(data: np.ndarray, symmetric: bool = False) -> tuple[float, float]:
    """The display levels of ``data``: its finite range (about 0 when ``symmetric``)."""
    finite = np.asarray(data, dtype=np.float64)
    finite = finite[np.isfinite(finite)]
    levels = (float(finite.min()), float(finite.max())) if finite.size else (0.0, 1.0)
    if symmetric:
        bound = max(abs(levels[0]), abs(levels[1])) or 1.0
        return -bound, bound
    if levels[1] <= levels[0]:
        return levels[0], levels[0] + 1.0
    return levels


class LevelControls(QtWidgets.QWidget):
    """Low and high display levels of an image and an "auto" reset; ``changed(low, high)``."""

    changed = QtCore.Signal(float, float)

    def __init__(self, parent: QtWidgets.QWidget | None = None) -> None:
        super().__init__(parent)
        row = style.bare_box(self, spacing=3)
        row.addWidget(style.caption_label("levels"))
        self.low = self._spin("value drawn in the lowest colour")
        self.high = self._spin("value drawn in the highest colour")
        row.addWidget(self.low, 1)
        row.addWidget(style.caption_label("to"))
        row.addWidget(self.high, 1)
        self._auto = (0.0, 1.0)
        back = "Back to the channel's own range"
        self.auto_button = style.tool_button(
            "auto", back, lambda: self.set_levels(*self._auto, emit=True), raised=False
        )
        row.addWidget(self.auto_button)
        for spin in (self.low, self.high):
            spin.editingFinished.connect(self._on_edited)

    def _spin(self, tip: str) -> QtWidgets.QDoubleSpinBox:
        spin = QtWidgets.QDoubleSpinBox()
        spin.setRange(-1e12, 1e12)
        spin.setDecimals(6)
        spin.setStepType(QtWidgets.QAbstractSpinBox.StepType.AdaptiveDecimalStepType)
        spin.setKeyboardTracking(False)
        spin.setToolTip(tip)
        spin.valueChanged.connect(self._on_edited)
        return spin

    def set_auto(self, low: float, high: float) -> None:
        """The range "auto" goes back to; also shown now."""
        self._auto = (float(low), float(high))
        self.set_levels(low, high)

    def set_levels(self, low: float, high: float, *, emit: bool = False) -> None:
        for spin, value in ((self.low, low), (self.high, high)):
            with QtCore.QSignalBlocker(spin):
                spin.setValue(float(value))
        if emit:
            self._on_edited()

    def levels(self) -> tuple[float, float]:
        return float(self.low.value()), float(self.high.value())

    def _on_edited(self, *_args: object) -> None:
        low, high = self.levels()
        if high > low:
            self.changed.emit(low, high)


class ImageColumn(QtWidgets.QWidget):
    """A caption over an image with its :class:`LevelControls` under it."""

    def __init__(self, caption: str, colormap: Callable[[], Any]) -> None:
        super().__init__()
        layout = style.bare_box(self, spacing=1, vertical=True)
        self.caption = style.caption_label(caption)
        self.canvas = ImageCanvas(passive=False)
        self.levels = LevelControls()
        layout.addWidget(self.caption)
        layout.addWidget(self.canvas, 1)
        layout.addWidget(self.levels)
        self.data: np.ndarray | None = None
        self._colormap = colormap
        self.levels.changed.connect(lambda _low, _high: self.redraw())

    def set_data(self, data: np.ndarray | None, *, symmetric: bool = False) -> None:
        """Show ``data`` on its own range (about 0 when ``symmetric``); None clears."""
        self.data = data
        if data is None:
            self.canvas.clear_image()
            return
        self.levels.set_auto(*auto_levels(data, symmetric))
        self.redraw()

    def redraw(self) -> None:
        if self.data is None:
            return
        levels = self.levels.levels()
        self.canvas.set_image(self.data, levels, levels)
        self.canvas.set_colormap(self._colormap())
