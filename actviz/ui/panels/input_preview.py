"""InputPreview: the input picture as the model sees it, with a caption."""

from __future__ import annotations

import numpy as np
from PySide6 import QtCore, QtWidgets

from actviz.ui.panels import style
from actviz.ui.panels.base import PanelBase
from actviz.ui.panels.canvas import ImageCanvas


class InputPreview(PanelBase):
    """Shows an (H, W, 3) uint8 picture (or a placeholder) and a caption under it."""

    def __init__(self, parent: QtWidgets.QWidget | None = None) -> None:
        super().__init__("Input", parent)
        self.stack = QtWidgets.QStackedWidget()
        self.placeholder = style.caption_label("no input")
        self.placeholder.setAlignment(QtCore.Qt.AlignmentFlag.AlignCenter)
        self.canvas = ImageCanvas(passive=False, colorbar=False)
        self.canvas.hovered.connect(self._on_hovered)
        self.canvas.hover_left.connect(lambda: self.status_label.setText(""))
        self.stack.addWidget(self.placeholder)
        self.stack.addWidget(self.canvas)
        self.content.addWidget(self.stack, 1)
        # Changes with every live frame: repainted alone, without relaying out the dock.
        self.caption_label = style.caption_text()
        self.caption_label.setAttribute(QtCore.Qt.WidgetAttribute.WA_OpaquePaintEvent)
        self.content.addWidget(self.caption_label)
        self.status_label = style.readout_label()
        self.content.addWidget(self.status_label)
        self.rgb: np.ndarray | None = None
        self.setMinimumSize(160, 180)
        self.clear()

    def set_image(self, rgb: np.ndarray | None, caption: str) -> None:
        """Show ``rgb`` ((H, W, 3) uint8) with ``caption``; None shows the placeholder."""
        self.caption_label.setText(caption)
        if rgb is None:
            self.rgb = None
            self.canvas.clear_image()
            # An input without a picture (text, a tensor of another shape) is still an input.
            self.placeholder.setText("no picture of this input" if caption else "no input")
            self.stack.setCurrentWidget(self.placeholder)
            return
        self.rgb = rgb = style.checked_rgb(rgb)
        self.canvas.set_image(rgb, (0.0, 255.0))
        self.stack.setCurrentWidget(self.canvas)

    def clear(self) -> None:
        """Show the placeholder."""
        self.set_image(None, "")
        self.status_label.setText("")

    def _on_hovered(self, x: float, y: float) -> None:
        if self.rgb is None:
            return
        r, g, b = (int(v) for v in self.rgb[int(y), int(x), :3])
        self.status_label.setText(f"(x={int(x)}, y={int(y)})  rgb {r} {g} {b}")
