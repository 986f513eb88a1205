"""OverlayPanel: a heat map (saliency, Grad-CAM) drawn over the input picture."""

from __future__ import annotations

import numpy as np
import pyqtgraph as pg
from PySide6 import QtCore, QtWidgets

from actviz.ui.panels import style
from actviz.ui.panels.base import PanelBase
from actviz.ui.panels.canvas import ImageCanvas
from actviz.ui.panels.colormaps import OVERLAY_CMAP

DEFAULT_OPACITY = 0.5


class OverlayPanel(PanelBase):
    """The input picture with a [0, 1] heat map over it, an opacity slider and a colour bar.

    Parameters
    ----------
    title
        Panel title, e.g. "Saliency" or "Grad-CAM".
    with_layer_selector
        Add a combo box to pick the layer (Grad-CAM); choosing one emits ``layer_changed``.

    Signals
    -------
    layer_changed(str)
        The user picked another layer in the selector.
    """

    layer_changed = QtCore.Signal(str)

    def __init__(
        self,
        title: str,
        with_layer_selector: bool = False,
        parent: QtWidgets.QWidget | None = None,
    ) -> None:
        super().__init__(title, parent)
        self._base_title = title
        self.layer_combo: QtWidgets.QComboBox | None = None
        if with_layer_selector:
            row = QtWidgets.QHBoxLayout()
            row.addWidget(style.caption_label("layer"))
            self.layer_combo = QtWidgets.QComboBox()
            self.layer_combo.setMaxVisibleItems(20)
            self.layer_combo.setSizeAdjustPolicy(
                QtWidgets.QComboBox.SizeAdjustPolicy.AdjustToMinimumContentsLengthWithIcon
            )
            self.layer_combo.setMinimumContentsLength(12)
            self.layer_combo.currentIndexChanged.connect(self._on_combo_index_changed)
            row.addWidget(self.layer_combo, 1)
            self.content.addLayout(row)

        # The heat map is the canvas's own ImageItem (it owns the colour bar); the picture
        # is a second ImageItem underneath it in the same ViewBox.
        self.canvas = ImageCanvas(passive=False, colorbar=True, cmap=OVERLAY_CMAP)
        self.heat_item = self.canvas.image
        self.heat_item.setOpacity(DEFAULT_OPACITY)
        self.heat_item.setZValue(1)
        self.rgb_item = pg.ImageItem(axisOrder="row-major")
        self.rgb_item.setZValue(0)
        self.canvas.view.addItem(self.rgb_item)
        self.canvas.hovered.connect(self._on_canvas_hovered)
        self.canvas.hover_left.connect(lambda: self.status_label.setText(""))
        self.content.addWidget(self.canvas, 1)

        self.message_label = style.caption_label()
        self.message_label.setWordWrap(True)
        self.message_label.setAlignment(QtCore.Qt.AlignmentFlag.AlignCenter)
        self.content.addWidget(self.message_label)

        controls = QtWidgets.QHBoxLayout()
        controls.addWidget(style.caption_label("opacity"))
        self.opacity_slider = QtWidgets.QSlider(QtCore.Qt.Orientation.Horizontal)
        self.opacity_slider.setRange(0, 100)
        self.opacity_slider.setValue(round(DEFAULT_OPACITY * 100))
        self.opacity_slider.valueChanged.connect(lambda v: self.heat_item.setOpacity(v / 100.0))
        controls.addWidget(self.opacity_slider, 1)
        self.content.addLayout(controls)
        self.status_label = style.readout_label()
        self.content.addWidget(self.status_label)

        self.rgb: np.ndarray | None = None
        self.heat: np.ndarray | None = None
        self.setMinimumSize(220, 240)
        self.clear()

    # -- setters ---------------------------------------------------------------------------
    def set_image(self, rgb: np.ndarray) -> None:
        """Show the picture, (H, W, 3) uint8 (the input as the model sees it)."""
        rgb = np.ascontiguousarray(rgb)
        if rgb.ndim != 3 or rgb.shape[2] not in (3, 4) or rgb.dtype != np.uint8:
            raise ValueError(f"expected (H, W, 3) uint8, got {rgb.shape} {rgb.dtype}")
        self.rgb = rgb
        self.rgb_item.setImage(rgb, autoLevels=False, levels=(0, 255))
        self._fit()

    def set_heat(self, heat: np.ndarray | None) -> None:
        """Draw ``heat`` ((H, W) float32 in [0, 1]) over the picture; None removes it.

        A heat map of another size than the picture (a coarse Grad-CAM) is stretched over it.
        """
        if heat is None:
            self.heat = None
            self.heat_item.clear()
            return
        heat = np.ascontiguousarray(heat, dtype=np.float32)
        if heat.ndim != 2:
            raise ValueError(f"heat must be 2-D (H, W), got shape {heat.shape}")
        self.heat = heat
        self.canvas.set_image(heat, (0.0, 1.0), (0.0, 1.0))
        self.set_message("")  # a message says why there is no map: there is one now
        self._fit()

    def set_layers(self, names: list[str], current: str | None) -> None:
        """Fill the layer selector without emitting ``layer_changed``."""
        if self.layer_combo is None:
            return
        blocked = self.layer_combo.blockSignals(True)
        try:
            self.layer_combo.clear()
            self.layer_combo.addItems(list(names))
            if current is not None and current in names:
                self.layer_combo.setCurrentIndex(names.index(current))
        finally:
            self.layer_combo.blockSignals(blocked)

    def current_layer(self) -> str | None:
        """Layer picked in the selector, or None."""
        if self.layer_combo is None or self.layer_combo.currentIndex() < 0:
            return None
        return self.layer_combo.currentText()

    def set_message(self, text: str) -> None:
        """Show a note under the picture (e.g. why there is no heat map); "" hides it."""
        self.message_label.setText(text)
        self.message_label.setVisible(bool(text))

    def set_opacity(self, opacity: float) -> None:
        """Set the heat map's opacity in [0, 1]."""
        self.opacity_slider.setValue(round(min(max(opacity, 0.0), 1.0) * 100))

    def clear(self) -> None:
        """Remove picture, heat map and message (the layer list stays)."""
        self.rgb = None
        self.rgb_item.clear()
        self.set_heat(None)
        self.canvas.clear_image()
        self.set_message("")
        self.status_label.setText("")

    # -- helpers ---------------------------------------------------------------------------
    def _fit(self) -> None:
        """Stretch the heat map over the picture and fit the view to the picture."""
        if self.rgb is not None:
            height, width = self.rgb.shape[:2]
        elif self.heat is not None:
            height, width = self.heat.shape
        else:
            return
        if self.heat is not None:
            self.heat_item.setRect(QtCore.QRectF(0, 0, width, height))
        self.canvas.view.setRange(QtCore.QRectF(0, 0, width, height), padding=0.0)

    def _on_combo_index_changed(self, index: int) -> None:
        if index >= 0 and self.layer_combo is not None:
            self.layer_changed.emit(self.layer_combo.itemText(index))

    def _on_canvas_hovered(self, x: float, y: float) -> None:
        # Canvas coordinates are heat-map pixels; report picture pixels when there is a picture.
        parts = []
        if self.heat is not None:
            hy, hx = int(y), int(x)
            if self.rgb is not None:
                scale_y = self.rgb.shape[0] / self.heat.shape[0]
                scale_x = self.rgb.shape[1] / self.heat.shape[1]
                parts.append(f"(x={int(x * scale_x)}, y={int(y * scale_y)})")
            else:
                parts.append(f"(x={hx}, y={hy})")
            parts.append(f"heat {style.format_value(self.heat[hy, hx])}")
        self.status_label.setText("  ".join(parts))
