"""The input picture: as the model sees it (:class:`InputPreview`), and with a heat map over it or
per-token values for a text input (:class:`OverlayPanel`)."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pyqtgraph as pg
from PySide6 import QtCore, QtGui, QtWidgets

from actviz.display.colormaps import OVERLAY_CMAP
from actviz.display.text import MAX_TICKS, axis_ticks
from actviz.ui.panels import style
from actviz.ui.panels.base import PanelBase
from actviz.ui.panels.canvas import ImageCanvas
from actviz.ui.panels.colorbar import lut

DEFAULT_OPACITY = 0.5


class LightPlot(pg.GraphicsWidget):
    """``vb`` in a grid with its ``"left"`` and ``"bottom"`` axes (``getAxis``, as PlotItem),
    styled, top-down (rows read as text does) and passive; items, ranges and links go to ``vb``."""

    def __init__(self, x_label: str | None = None) -> None:
        super().__init__()
        policy = QtWidgets.QSizePolicy.Policy.Expanding
        self.setSizePolicy(policy, policy)  # as PlotItem: it takes the room beside fixed parts
        grid = QtWidgets.QGraphicsGridLayout()
        grid.setContentsMargins(1, 1, 1, 1)
        grid.setSpacing(0)
        self.setLayout(grid)
        self.vb = pg.ViewBox(enableMenu=False, invertY=True)
        self.vb.setParentItem(self)
        self.vb.setMouseEnabled(x=False, y=False)
        self._axes = {
            name: pg.AxisItem(name, linkView=self.vb, parent=self) for name in ("left", "bottom")
        }
        grid.addItem(self._axes["left"], 0, 0)
        grid.addItem(self.vb, 0, 1)
        grid.addItem(self._axes["bottom"], 1, 1)
        for i in range(2):
            grid.setRowPreferredHeight(i, 0)
            grid.setRowMinimumHeight(i, 0)
            grid.setColumnPreferredWidth(i, 0)
            grid.setColumnMinimumWidth(i, 0)
        grid.setRowStretchFactor(0, 100)
        grid.setColumnStretchFactor(1, 100)
        for name, axis in self._axes.items():
            axis.setZValue(0.5)  # as PlotItem: above the view box's background
            style.style_axis(axis, x_label if name == "bottom" else None)

    def getAxis(self, name: str) -> pg.AxisItem:  # noqa: N802 - PlotItem's name
        return self._axes[name]


class TokenStrip(pg.GraphicsLayoutWidget):
    """One coloured bar per token; ``hovered(int)`` says the token under the mouse (-1: none)."""

    hovered = QtCore.Signal(int)

    def __init__(self, x_label: str = "", parent: QtWidgets.QWidget | None = None) -> None:
        super().__init__(parent)
        self.setBackground(style.PLOT_BACKGROUND)
        self.ci.layout.setContentsMargins(2, 2, 2, 2)
        self.plot = LightPlot(x_label or None)
        self.addItem(self.plot, row=0, col=0)
        self.bars: pg.BarGraphItem | None = None
        self.labels: tuple[str, ...] = ()
        self.values: np.ndarray = np.zeros(0, dtype=np.float32)
        self.scene().sigMouseMoved.connect(lambda pos: self.hovered.emit(self.token_at(pos)))
        self.setMinimumHeight(120)

    def set_values(self, labels: Sequence[str], values: np.ndarray) -> None:
        """Show ``values`` (one per token, >= 0) beside ``labels``."""
        values = np.asarray(values, dtype=np.float32).reshape(-1)
        if len(labels) != values.size:
            raise ValueError(f"{len(labels)} labels for {values.size} values")
        self.labels, self.values = tuple(str(t) for t in labels), values
        if self.bars is not None:
            self.plot.vb.removeItem(self.bars)
            self.bars = None
        count = values.size
        finite = np.nan_to_num(values, nan=0.0, posinf=0.0, neginf=0.0)
        peak = float(finite.max()) if count else 0.0
        shares = finite / peak if peak > 0 else np.zeros_like(finite)
        table = lut(OVERLAY_CMAP)
        brushes = [
            QtGui.QColor(*(int(c) for c in table[min(255, int(round(share * 255)))][:3]))
            for share in shares
        ]
        if count:
            self.bars = pg.BarGraphItem(
                x0=np.zeros(count),
                y=np.arange(count) + 0.5,
                height=0.8,
                width=finite,
                brushes=brushes,
                pen=None,
            )
            self.plot.vb.addItem(self.bars)
        self.plot.vb.setYRange(0, max(count, 1), padding=0)
        self.plot.vb.setXRange(0, peak if peak > 0 else 1.0, padding=0.02)
        self._update_ticks()

    def clear_values(self) -> None:
        """Show nothing."""
        self.set_values((), np.zeros(0, dtype=np.float32))

    def _update_ticks(self) -> None:
        """Token labels, as many as fit about 12 px apart."""
        height = max(self.plot.vb.boundingRect().height(), 120.0)
        rows = min(MAX_TICKS, max(2, int(height // 12)))
        self.plot.getAxis("left").setTicks([axis_ticks(self.labels, rows)])

    def resizeEvent(self, event: QtGui.QResizeEvent) -> None:  # noqa: N802 - Qt name
        super().resizeEvent(event)
        if hasattr(self, "labels"):  # pyqtgraph resizes while it is built
            self._update_ticks()

    def token_at(self, scene_pos: QtCore.QPointF) -> int:
        """The token at a scene position, -1 outside the bars' rows."""
        if not self.labels or not self.plot.vb.sceneBoundingRect().contains(scene_pos):
            return -1
        row = int(np.floor(self.plot.vb.mapSceneToView(scene_pos).y()))
        return row if 0 <= row < len(self.labels) else -1

    def leaveEvent(self, event: QtCore.QEvent) -> None:  # noqa: N802 - Qt name
        self.hovered.emit(-1)
        super().leaveEvent(event)


class MiddleElidedComboBox(QtWidgets.QComboBox):
    """A combo box that shortens long entries in the middle ("transformer…h.3.mlp")."""

    def __init__(self, parent: QtWidgets.QWidget | None = None) -> None:
        super().__init__(parent)
        self.view().setTextElideMode(QtCore.Qt.TextElideMode.ElideMiddle)

    def _label_options(self) -> tuple[QtWidgets.QStyleOptionComboBox, QtCore.QRect]:
        option = QtWidgets.QStyleOptionComboBox()
        self.initStyleOption(option)
        rect = self.style().subControlRect(
            QtWidgets.QStyle.ComplexControl.CC_ComboBox,
            option,
            QtWidgets.QStyle.SubControl.SC_ComboBoxEditField,
            self,
        )
        return option, rect

    def shown_text(self) -> str:
        """The current text as drawn at the box's width ("…" in the middle where cut)."""
        option, rect = self._label_options()
        return self.fontMetrics().elidedText(
            option.currentText, QtCore.Qt.TextElideMode.ElideMiddle, max(rect.width() - 4, 0)
        )

    def paintEvent(self, event: QtGui.QPaintEvent) -> None:  # noqa: N802 - Qt name
        painter = QtWidgets.QStylePainter(self)
        option, _rect = self._label_options()
        painter.drawComplexControl(QtWidgets.QStyle.ComplexControl.CC_ComboBox, option)
        option.currentText = self.shown_text()
        painter.drawControl(QtWidgets.QStyle.ControlElement.CE_ComboBoxLabel, option)
        # Set here, not on currentTextChanged: the panel fills the box with signals blocked.
        if self.toolTip() != self.currentText():
            self.setToolTip(self.currentText())


def layer_row(min_length: int) -> tuple[QtWidgets.QHBoxLayout, MiddleElidedComboBox]:
    """A "layer" caption and a layer selector beside it."""
    row = QtWidgets.QHBoxLayout()
    row.addWidget(style.caption_label("layer"))
    combo = MiddleElidedComboBox()
    combo.setMaxVisibleItems(20)
    style.fit_combo(combo, min_length)
    row.addWidget(combo, 1)
    return row, combo


class OverlayPanel(PanelBase):
    """The input with a [0, 1] heat map over it, an opacity slider and a colour bar;
    ``with_layer_selector`` adds a layer selector emitting ``layer_changed`` (Grad-CAM)."""

    layer_changed = QtCore.Signal(str)

    def __init__(
        self, title: str, with_layer_selector: bool = False, parent: QtWidgets.QWidget | None = None
    ) -> None:
        super().__init__(title, parent)
        self.layer_combo: QtWidgets.QComboBox | None = None
        if with_layer_selector:
            row, self.layer_combo = layer_row(12)
            self.layer_combo.currentTextChanged.connect(self.layer_changed)
            self.content.addLayout(row)
        # The heat map is the canvas's own item (with the colour bar), the picture one below.
        self.canvas = ImageCanvas(passive=False, colorbar=True, cmap=OVERLAY_CMAP)
        self.heat_item = self.canvas.image
        self.heat_item.setOpacity(DEFAULT_OPACITY)
        self.heat_item.setZValue(1)
        self.rgb_item = pg.ImageItem(axisOrder="row-major")  # (z 0: under the heat map's 1)
        self.canvas.view.addItem(self.rgb_item)
        self.canvas.hovered.connect(self._on_canvas_hovered)
        self.canvas.hover_left.connect(lambda: self.status_label.setText(""))
        self.content.addWidget(self.canvas, 1)

        self.message_label = style.caption_label(wrap=True)
        self.message_label.setAlignment(QtCore.Qt.AlignmentFlag.AlignCenter)
        self.content.addWidget(self.message_label)
        #: The per-token strip of a text input, made on first use (image inputs never need it).
        self.token_strip: TokenStrip | None = None
        self._token_describe: list[str] = []

        self.controls = QtWidgets.QWidget()
        controls = style.bare_box(self.controls)
        controls.addWidget(style.caption_label("opacity"))
        self.opacity_slider = QtWidgets.QSlider(QtCore.Qt.Orientation.Horizontal)
        self.opacity_slider.setRange(0, 100)
        self.opacity_slider.setValue(round(DEFAULT_OPACITY * 100))
        self.opacity_slider.valueChanged.connect(lambda v: self.heat_item.setOpacity(v / 100.0))
        controls.addWidget(self.opacity_slider, 1)
        self.content.addWidget(self.controls)
        self.status_label = style.readout_label()
        self.content.addWidget(self.status_label)

        self.rgb: np.ndarray | None = None
        self.heat: np.ndarray | None = None
        self._tokens_shown = False
        self.setMinimumSize(220, 240)
        self.clear()

    def set_token_values(
        self,
        tokens: Sequence[str],
        values: np.ndarray,
        descriptions: Sequence[str] = (),
        *,
        x_label: str = "|grad × embedding|",
    ) -> None:
        """Show one value per token instead of the picture; ``descriptions``: hover texts."""
        if self.token_strip is None:
            self.token_strip = TokenStrip(x_label)
            self.token_strip.hovered.connect(self._on_token_hovered)
            self.content.insertWidget(self.content.indexOf(self.canvas) + 1, self.token_strip, 1)
        self.token_strip.plot.getAxis("bottom").setLabel(x_label)
        self.token_strip.set_values(tokens, values)
        self._token_describe = list(descriptions)
        self._show_tokens(True)
        self.set_message("")

    def _show_tokens(self, shown: bool) -> None:
        """The token strip (text input) or the picture with its opacity slider (image)."""
        if self.token_strip is not None:
            self.token_strip.setVisible(shown)
        self.canvas.setVisible(not shown)
        self._tokens_shown = shown
        self._sync_controls()

    def _sync_controls(self) -> None:
        """Colour bar and opacity slider only beside a heat map; the selector only with layers."""
        has_heat = self.heat is not None
        if self.canvas.colorbar is not None:
            self.canvas.colorbar.setVisible(has_heat)
        self.controls.setVisible(has_heat and not self._tokens_shown)
        if self.layer_combo is not None:
            self.layer_combo.setEnabled(self.layer_combo.count() > 0)

    def set_image(self, rgb: np.ndarray) -> None:
        """Show the picture, (H, W, 3) uint8 (the input as the model sees it)."""
        self._show_tokens(False)
        self.rgb = rgb = style.checked_rgb(rgb)
        self.rgb_item.setImage(rgb, autoLevels=False, levels=(0, 255))
        self._fit()

    def set_heat(self, heat: np.ndarray | None) -> None:
        """Draw ``heat`` ((H, W) in [0, 1], stretched over the picture); None removes it."""
        if heat is None:
            self.heat = None
            self.heat_item.clear()
            self._sync_controls()
            return
        heat = np.ascontiguousarray(heat, dtype=np.float32)
        if heat.ndim != 2:
            raise ValueError(f"heat must be 2-D (H, W), got shape {heat.shape}")
        self._show_tokens(False)
        self.heat = heat
        self.canvas.set_image(heat, (0.0, 1.0), (0.0, 1.0))
        self._sync_controls()
        self.set_message("")  # a message says why there is no map: there is one now
        self._fit()

    def set_layers(self, names: list[str], current: str | None) -> None:
        """Fill the layer selector without emitting ``layer_changed``."""
        if self.layer_combo is None:
            return
        with QtCore.QSignalBlocker(self.layer_combo):
            self.layer_combo.clear()
            self.layer_combo.addItems(list(names))
            if current is not None and current in names:
                self.layer_combo.setCurrentIndex(names.index(current))
        self._sync_controls()

    def current_layer(self) -> str | None:
        """Layer picked in the selector, or None."""
        if self.layer_combo is None or self.layer_combo.currentIndex() < 0:
            return None
        return self.layer_combo.currentText()

    def set_message(self, text: str) -> None:
        """Show a note under the picture (e.g. why there is no heat map); "" hides it."""
        self.message_label.setText(text)
        self.message_label.setVisible(bool(text))

    def clear(self) -> None:
        """Remove picture, heat map and message (the layer list stays)."""
        self.rgb = None
        self.rgb_item.clear()
        self.set_heat(None)
        self.canvas.clear_image()
        if self.token_strip is not None:
            self.token_strip.clear_values()
        self._token_describe = []
        self._show_tokens(False)
        self.set_message("")
        self.status_label.setText("")

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

    def _on_token_hovered(self, token: int) -> None:
        if 0 <= token < len(self._token_describe):
            self.status_label.setText(self._token_describe[token])
        elif self.token_strip is not None and 0 <= token < len(self.token_strip.labels):
            label, value = self.token_strip.labels[token], self.token_strip.values[token]
            self.status_label.setText(f"token {token} {label!r}: {style.format_value(value)}")
        else:
            self.status_label.setText("")

    def _on_canvas_hovered(self, x: float, y: float) -> None:
        # Canvas coordinates are heat-map pixels; report picture pixels when there is a picture.
        text = ""
        if self.heat is not None:
            h, w = self.heat.shape
            sy, sx = (1, 1) if self.rgb is None else (self.rgb.shape[0] / h, self.rgb.shape[1] / w)
            value = style.format_value(self.heat[int(y), int(x)])
            text = f"(x={int(x * sx)}, y={int(y * sy)})  heat {value}"
        self.status_label.setText(text)


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
