"""ChannelView: one channel of a layer, large, beside its gradient magnitude."""

from __future__ import annotations

import numpy as np
from PySide6 import QtCore, QtWidgets

from actviz.ui.panels import style
from actviz.ui.panels.base import PanelBase
from actviz.ui.panels.canvas import ImageCanvas
from actviz.ui.panels.colormaps import DEFAULT_ACTIVATION_CMAP


def _levels(data: np.ndarray) -> tuple[float, float]:
    levels = style.finite_range(data) or (0.0, 1.0)
    if levels[1] <= levels[0]:
        return levels[0], levels[0] + 1.0
    return levels


class ChannelView(PanelBase):
    """A single channel at full size with colour bars; zoom with the wheel, double click fits.

    Hover shows ``(x=3, y=7)  value 0.532  |grad| 1.2e-04``.
    """

    def __init__(self, parent: QtWidgets.QWidget | None = None) -> None:
        super().__init__("Channel", parent)
        self.name = ""
        self.channel: int | None = None
        self.activation: np.ndarray | None = None
        self.gradient: np.ndarray | None = None

        row = QtWidgets.QHBoxLayout()
        row.setSpacing(6)
        self._act_box, self.activation_canvas, self._act_caption = self._column("activation")
        self._grad_box, self.gradient_canvas, self._grad_caption = self._column("|gradient|")
        row.addWidget(self._act_box, 1)
        row.addWidget(self._grad_box, 1)
        self.content.addLayout(row, 1)
        self.status_label = style.readout_label()
        self.content.addWidget(self.status_label)
        for canvas in (self.activation_canvas, self.gradient_canvas):
            canvas.hovered.connect(self._on_canvas_hovered)
            canvas.hover_left.connect(self._show_summary)
        self.setMinimumSize(320, 240)
        self.clear()

    def _column(self, caption: str) -> tuple[QtWidgets.QWidget, ImageCanvas, QtWidgets.QLabel]:
        box = QtWidgets.QWidget()
        layout = QtWidgets.QVBoxLayout(box)
        layout.setContentsMargins(0, 0, 0, 0)
        layout.setSpacing(1)
        label = style.caption_label(caption)
        canvas = ImageCanvas(passive=False, cmap=DEFAULT_ACTIVATION_CMAP)
        layout.addWidget(label)
        layout.addWidget(canvas, 1)
        return box, canvas, label

    def set_channel(
        self, name: str, channel: int, activation: np.ndarray, gradient: np.ndarray | None
    ) -> None:
        """Show channel ``channel`` of layer ``name``.

        Parameters
        ----------
        name
            Layer name (for the title).
        channel
            Channel index (for the title).
        activation
            (H, W) raw activation of that channel.
        gradient
            (H, W) gradient magnitude of that channel, or None to show the activation only.
        """
        self.name, self.channel = name, int(channel)
        self.activation = np.ascontiguousarray(activation, dtype=np.float32)
        if self.activation.ndim != 2:
            raise ValueError(f"activation must be 2-D (H, W), got shape {self.activation.shape}")
        levels = _levels(self.activation)
        self.activation_canvas.set_image(self.activation, levels, levels)
        if gradient is None:
            self.gradient = None
            self.gradient_canvas.clear_image()
        else:
            self.gradient = np.ascontiguousarray(gradient, dtype=np.float32)
            if self.gradient.ndim != 2:
                raise ValueError(f"gradient must be 2-D (H, W), got shape {self.gradient.shape}")
            grad_levels = _levels(self.gradient)
            self.gradient_canvas.set_image(self.gradient, grad_levels, grad_levels)
        self._grad_box.setHidden(self.gradient is None)
        self._act_caption.setHidden(self.gradient is None)
        height, width = self.activation.shape
        self.set_title(f"{name} · ch {self.channel} · {height}×{width}")
        self._show_summary()

    def set_colormap(self, name: str) -> None:
        """Use colour map ``name`` for both images."""
        self.activation_canvas.set_colormap(name)
        self.gradient_canvas.set_colormap(name)

    def clear(self) -> None:
        """Show no channel."""
        self.name, self.channel = "", None
        self.activation = self.gradient = None
        self.activation_canvas.clear_image()
        self.gradient_canvas.clear_image()
        self._grad_box.setHidden(True)
        self._act_caption.setHidden(True)
        self.set_title("Channel")
        self.status_label.setText("click a channel in the layer grid")

    def hover_text(self, x: int, y: int) -> str:
        """Read-out for pixel (x, y), e.g. ``(x=3, y=7)  value 0.532  |grad| 1.2e-04``."""
        if self.activation is None:
            return ""
        parts = [f"(x={x}, y={y})"]
        height, width = self.activation.shape
        if 0 <= y < height and 0 <= x < width:
            parts.append(f"value {style.format_value(self.activation[y, x])}")
        if (
            self.gradient is not None
            and 0 <= y < self.gradient.shape[0]
            and 0 <= x < self.gradient.shape[1]
        ):
            parts.append(f"|grad| {style.format_value(self.gradient[y, x])}")
        return "  ".join(parts)

    def _on_canvas_hovered(self, x: float, y: float) -> None:
        self.status_label.setText(self.hover_text(int(x), int(y)))

    def _show_summary(self) -> None:
        if self.activation is None:
            return
        finite = self.activation[np.isfinite(self.activation)]
        if finite.size == 0:
            self.status_label.setText("no finite values")
            return
        self.status_label.setText(
            f"min {style.format_value(finite.min())}  max {style.format_value(finite.max())}  "
            f"mean {style.format_value(finite.mean())}"
        )

    def sizeHint(self) -> QtCore.QSize:  # noqa: N802 - Qt name
        return QtCore.QSize(560, 320)
