"""ChannelView: one channel of a layer, large, beside its gradient magnitude; each image an
:class:`ImageColumn` (a caption, an :class:`ImageCanvas` and its levels)."""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import numpy as np
import pyqtgraph as pg
from PySide6 import QtCore, QtGui, QtWidgets

from actviz.display.colormaps import AUTO, heat_levels, resolve
from actviz.ui.panels import style
from actviz.ui.panels.base import PanelBase
from actviz.ui.panels.canvas import ImageCanvas

#: Below this width the view shows the activation above the gradient, not beside it.
NARROW_VIEW_PX = 480
#: Stacked in a wider view too when that draws the images this many times larger (hysteresis).
STACK_GAIN = 1.05
OVERLAY_OPACITY = 0.6  #: Opacity of the activation over the input picture when the overlay is on.
#: Keys that step to the previous (-1) / next (+1) channel while the view has focus.
_KEY = QtCore.Qt.Key
STEP_KEYS = dict.fromkeys((_KEY.Key_BracketLeft, _KEY.Key_PageUp, _KEY.Key_Left), -1)
STEP_KEYS |= dict.fromkeys((_KEY.Key_BracketRight, _KEY.Key_PageDown, _KEY.Key_Right), 1)


def _close(a: QtCore.QRectF, b: QtCore.QRectF, tol: float = 0.02) -> bool:
    span = max(a.width(), a.height(), 1e-9)
    x, y = ((r.center().x(), r.center().y(), min(r.width(), r.height())) for r in (a, b))
    return all(abs(p - q) <= tol * span for p, q in zip(x, y, strict=True))


def channel_stats(data: np.ndarray) -> dict[str, float]:
    """min, max, mean, std (float64, finite values) and the fraction of exact zeros."""
    values, keys = np.asarray(data, dtype=np.float64), ("min", "max", "mean", "std", "zero_frac")
    finite = values[np.isfinite(values)]
    if finite.size == 0:
        return dict.fromkeys(keys, float("nan"))
    zeros = np.count_nonzero(values == 0) / values.size
    figures = (finite.min(), finite.max(), finite.mean(), finite.std(), zeros)
    return {key: float(value) for key, value in zip(keys, figures, strict=True)}


def stats_lines(s: dict[str, float]) -> tuple[str, list[str]]:
    """The statistics' line, and narrower versions of it for a narrow view."""
    f = style.format_value
    low, high, mean, std = f(s["min"]), f(s["max"]), f(s["mean"]), f(s["std"])
    zeros = f"zeros {100 * s['zero_frac']:.1f} %"
    # Narrower versions keep the zeros: an ablated channel reads "zeros 100.0 %".
    return f"min {low}  max {high}  mean {mean}  std {std}  {zeros}", [
        f"min {low} max {high} mean {mean} std {std} {zeros}",
        f"min {low} max {high} … {zeros}",
    ]


class ImageColumn(QtWidgets.QWidget):
    """A caption over an image, and under it the image's low and high display levels with an
    "auto" reset (to the data's own range)."""

    def __init__(self, caption: str, colormap: Callable[[], Any]) -> None:
        super().__init__()
        layout = style.bare_box(self, spacing=1, vertical=True)
        self.caption = style.caption_label(caption)
        self.canvas = ImageCanvas(passive=False)
        self.controls = QtWidgets.QWidget()  # the levels' row
        for widget, stretch in ((self.caption, 0), (self.canvas, 1), (self.controls, 0)):
            layout.addWidget(widget, stretch)
        row = style.bare_box(self.controls, spacing=3)
        row.addWidget(style.caption_label("levels"))
        self.low = self._spin("value drawn in the lowest colour")
        self.high = self._spin("value drawn in the highest colour")
        row.addWidget(self.low, 1)
        row.addWidget(style.caption_label("to"))
        row.addWidget(self.high, 1)
        self._auto = self._levels = self._shown = (0.0, 1.0)
        back = "Back to the channel's own range"
        self.auto_button = style.tool_button("auto", back, self._show_auto, raised=False)
        self.auto_button.clicked.connect(self._on_edited)
        row.addWidget(self.auto_button)
        for spin in (self.low, self.high):
            spin.editingFinished.connect(self._on_edited)
        self.data: np.ndarray | None = None
        self._colormap = colormap

    def _spin(self, tip: str) -> QtWidgets.QDoubleSpinBox:
        spin = QtWidgets.QDoubleSpinBox(minimum=-1e12, maximum=1e12, decimals=6, toolTip=tip)
        spin.setStepType(QtWidgets.QAbstractSpinBox.StepType.AdaptiveDecimalStepType)
        spin.setKeyboardTracking(False)
        spin.valueChanged.connect(self._on_edited)
        return spin

    def _show_auto(self) -> None:
        low, high = self._auto
        # Four digits of the range (at 6 decimals a 1e-7 gradient read, and drew, 0 to 0).
        decimals = min(12, max(3, 3 - math.floor(math.log10(abs(high - low) or 1.0))))
        for spin, value in zip((self.low, self.high), self._auto, strict=True):
            with QtCore.QSignalBlocker(spin):
                spin.setDecimals(decimals)
                spin.setValue(float(value))
        # Drawn on the exact levels; the boxes show them rounded.
        self._levels, self._shown = self._auto, (self.low.value(), self.high.value())

    def levels(self) -> tuple[float, float]:
        return self._levels

    def _on_edited(self, *_args: object) -> None:
        typed = (float(self.low.value()), float(self.high.value()))
        if typed != self._shown:  # typed in: those levels (else the exact ones stay)
            if typed[1] <= typed[0]:
                return
            self._levels = self._shown = typed
        self.redraw()

    def set_data(self, data: np.ndarray | None, *, symmetric: bool = False) -> None:
        """Show ``data`` on its own range (about 0 when ``symmetric``); None clears."""
        self.data = data
        if data is None:
            self.canvas.clear_image()
            return
        self._auto = tuple(float(v) for v in heat_levels(data, symmetric=symmetric))
        self._show_auto()
        self.redraw()

    def redraw(self) -> None:
        if self.data is None:
            return
        levels = self.levels()
        self.canvas.set_image(self.data, levels, levels)
        self.canvas.set_colormap(self._colormap())


class ChannelView(PanelBase):
    """A channel's activation and |gradient| side by side, zoom linked. ``step_requested(int)``:
    -1 / +1; ``channel_changed(str, int)``: shown, ``("", -1)`` when cleared."""

    step_requested = QtCore.Signal(int)
    close_requested = QtCore.Signal()
    channel_changed = QtCore.Signal(str, int)

    def __init__(self, parent: QtWidgets.QWidget | None = None) -> None:
        super().__init__("Channel", parent)
        self.name = ""
        self.channel: int | None = None
        self.channels = 0
        self.activation: np.ndarray | None = None
        self.gradient: np.ndarray | None = None
        self._gradients_visible = True  # the toolbar's Gradients toggle
        self.image: np.ndarray | None = None
        self.stats: dict[str, float] = {}
        self._signed, self._choice = False, AUTO
        self.setFocusPolicy(QtCore.Qt.FocusPolicy.StrongFocus)

        self.content.addLayout(self._build_controls())
        row = self._columns = style.bare_box(spacing=6)
        self._narrow = self._stacked = False
        self._act_box = ImageColumn(
            "activation", lambda: resolve(self._choice, signed=self._signed)
        )
        self._grad_box = ImageColumn("|gradient|", lambda: resolve(self._choice, gradient=True))
        self.activation_canvas, self.activation_levels = self._act_box.canvas, self._act_box
        self.gradient_canvas = self._grad_box.canvas
        row.addWidget(self._act_box, 1)
        row.addWidget(self._grad_box, 1)
        self.content.addLayout(row, 1)
        # Zoom and pan copied by hand: setXLink/setYLink drift under a locked aspect.
        pair = (self.activation_canvas, self.gradient_canvas)
        for one, other in (pair, pair[::-1]):
            one.view.sigRangeChangedManually.connect(
                lambda _mask, a=one, b=other: self._copy_range(a, b)
            )
            one.fitted.connect(other.reset_view)
        # The input picture under the activation, stretched onto the map (overlay).
        self.backdrop = pg.ImageItem(axisOrder="row-major")
        self.backdrop.setZValue(-1)
        self.backdrop.setVisible(False)
        self.activation_canvas.view.addItem(self.backdrop)
        # The layer's what-if edits (the layer panel's badge is out of sight here).
        self.edit_label = style.ElidedLabel()
        self.edit_label.setStyleSheet(style.EDITED_BADGE)
        self.edit_label.setVisible(False)
        self.content.addWidget(self.edit_label)
        self.stats_label = style.readout_label()
        self.stats_label.setToolTip("Statistics of this channel's activation")
        self.content.addWidget(self.stats_label)
        self.status_label = style.readout_label()
        self.content.addWidget(self.status_label)
        for canvas in (self.activation_canvas, self.gradient_canvas):
            canvas.hovered.connect(lambda x, y: self.status_label.setText(self.hover_text(x, y)))
            canvas.hover_left.connect(self._show_summary)
            canvas.installEventFilter(self)
        self.installEventFilter(self)
        # The least width less a scroll bar's (the window scrolls it; 320 px with the bar); no
        # least height below its rows'.
        self.setMinimumWidth(306)
        # The layout check holds the view to using its room for its images.
        self.setProperty("layoutFill", True)
        self.clear()

    def _build_controls(self) -> QtWidgets.QHBoxLayout:
        row, arrow = style.bare_box(spacing=4), QtCore.Qt.ArrowType
        step, tip = self.step_requested.emit, "Previous channel ([, PageUp, Left)"
        self.prev_button = style.tool_button(arrow.LeftArrow, tip, lambda: step(-1))
        tip = "Next channel (], PageDown, Right)"
        self.next_button = style.tool_button(arrow.RightArrow, tip, lambda: step(1))
        self.position_label = style.caption_label()
        self.overlay_box = QtWidgets.QCheckBox("input overlay")
        self.overlay_box.setToolTip("Show the input picture under the activation")
        self.overlay_box.toggled.connect(lambda _on: self._update_overlay())
        self.close_button = style.tool_button(
            "✕", "Close the channel view", self.close_requested.emit, raised=False
        )
        for widget in (self.prev_button, self.position_label, self.next_button):
            row.addWidget(widget)
        row.addStretch(1)
        row.addWidget(self.overlay_box)
        row.addWidget(self.close_button)
        return row

    def set_channel(
        self,
        name: str,
        channel: int,
        activation: np.ndarray,
        gradient: np.ndarray | None,
        *,
        channels: int = 0,
        signed: bool | None = None,
        image: np.ndarray | None = None,
    ) -> None:
        """Show ``channel`` of ``name``: ``(H, W)`` activation and |gradient|. ``channels``: the
        layer's count (0: unknown); ``signed`` (None: this channel's); ``image``: for the overlay.
        """
        activation = np.ascontiguousarray(activation, dtype=np.float32)
        if gradient is not None:
            gradient = np.ascontiguousarray(gradient, dtype=np.float32)
        for what, data in (("activation", activation), ("gradient", gradient)):
            if data is not None and data.ndim != 2:
                raise ValueError(f"{what} must be 2-D (H, W), got shape {data.shape}")
        self.name, self.channel, self.channels = name, int(channel), int(channels)
        self.activation, self.gradient = activation, gradient
        self._signed = bool((activation < 0).any()) if signed is None else bool(signed)
        self.stats = channel_stats(activation)
        self._act_box.set_data(activation, symmetric=self._symmetric())
        self._grad_box.set_data(gradient)
        self._update_gradient_visibility()
        self.set_image(image)
        height, width = activation.shape
        self.set_title(f"{name} · ch {self.channel} · {height}×{width}")
        of = f" of {self.channels}" if self.channels else ""
        self.position_label.setText(f"ch {self.channel}{of}")
        self.prev_button.setEnabled(self.channel > 0)
        self.next_button.setEnabled(not self.channels or self.channel + 1 < self.channels)
        self.stats_label.set_text(*stats_lines(self.stats))
        self._show_summary()
        self.channel_changed.emit(name, self.channel)

    def resizeEvent(self, event: QtGui.QResizeEvent) -> None:  # noqa: N802 - Qt name
        super().resizeEvent(event)
        self._narrow = event.size().width() < NARROW_VIEW_PX
        self._arrange()

    def event(self, event: QtCore.QEvent) -> bool:
        handled = super().event(event)
        if event.type() == QtCore.QEvent.Type.LayoutRequest:
            # A section shown under the images takes height without resizing the view.
            self._arrange()
        return handled

    def _arrange(self) -> None:
        """Activation above the gradient in a narrow view or where that draws them larger."""
        stacked = self._narrow or self._stacking_gain() >= (1.0 if self._stacked else STACK_GAIN)
        if stacked == self._stacked:
            return
        self._stacked = stacked
        direction = QtWidgets.QBoxLayout.Direction
        self._columns.setDirection(direction.TopToBottom if stacked else direction.LeftToRight)
        self.updateGeometry()  # the layout item around the view caches its old hints

    def set_gradients_visible(self, visible: bool) -> None:
        """Show or hide the |gradient| column (the toolbar's Gradients toggle)."""
        self._gradients_visible = bool(visible)
        self._update_gradient_visibility()

    def gradient_shown(self) -> bool:
        """Whether the |gradient| column is part of the view."""
        return not self._grad_box.isHidden()

    def _update_gradient_visibility(self) -> None:
        hidden = self.gradient is None or not self._gradients_visible
        self._grad_box.setHidden(hidden)
        self._act_box.caption.setHidden(hidden)
        self._arrange()  # the map's shape decides which arrangement draws it larger

    def _stacking_gain(self) -> float:
        """How much larger the images are stacked than side by side (0: nothing to arrange)."""
        rect = self._columns.geometry()
        if self.activation is None or self._grad_box.isHidden() or not rect.isValid():
            return 0.0
        height, width = self.activation.shape
        canvas = self.activation_canvas
        # What a column holds besides its canvas: the caption and the level controls.
        chrome = (
            self._act_box.caption.sizeHint().height() + self._act_box.controls.sizeHint().height()
        )
        chrome += 2 * self._act_box.layout().spacing() + 14  # the canvas's own top and bottom
        gap = self._columns.spacing()

        def scale(column_w: float, column_h: float) -> float:
            room_w = canvas.image_area_width(int(column_w))
            return max(0.0, min(room_w / width, (column_h - chrome) / height))

        side = scale((rect.width() - gap) / 2, rect.height())
        above = scale(rect.width(), (rect.height() - gap) / 2)
        return above / side if side > 0 else 0.0

    def is_narrow(self) -> bool:
        """Whether the view is under :data:`NARROW_VIEW_PX` wide."""
        return self._narrow

    def is_stacked(self) -> bool:
        """Whether the activation is shown above the gradient rather than beside it."""
        return self._stacked

    def add_section(self, widget: QtWidgets.QWidget) -> None:
        """Add ``widget`` under the images, above the statistics (e.g. the dataset's top-k)."""
        self.content.insertWidget(self.content.indexOf(self.stats_label), widget)

    def set_image(self, image: np.ndarray | None) -> None:
        """The input picture the overlay shows under the activation (None: no overlay)."""
        self.image = None if image is None else np.ascontiguousarray(image)
        self.overlay_box.setEnabled(self.image is not None)
        self._update_overlay()

    def set_colormap(self, choice: str) -> None:
        """Paint with ``choice`` ("auto": per image, :func:`actviz.display.colormaps.resolve`)."""
        symmetric_before = self._symmetric()
        self._choice = choice
        self.activation_canvas.set_colormap(resolve(choice, signed=self._signed))
        self.gradient_canvas.set_colormap(resolve(choice, gradient=True))
        if self.activation is not None and self._symmetric() != symmetric_before:
            self._act_box.set_data(self.activation, symmetric=self._symmetric())

    def levels(self) -> tuple[float, float] | None:
        """The activation's display levels."""
        return self.activation_canvas.levels()

    def set_edit_note(self, text: str) -> None:
        """Say how the layer shown is edited (``text``: "ablate ch 3"); "" hides the note."""
        self.edit_label.setText(f"edited: {text}" if text else "")
        self.edit_label.setVisible(bool(text))

    def clear(self) -> None:
        """Show no channel."""
        self.set_edit_note("")
        self.name, self.channel, self.channels = "", None, 0
        self.activation = self.gradient = self.image = None
        self.stats = {}
        self._act_box.set_data(None)
        self._grad_box.set_data(None)
        self.backdrop.clear()
        self.backdrop.setVisible(False)
        self._grad_box.setHidden(True)
        self._act_box.caption.setHidden(True)
        self.set_title("Channel")
        self.position_label.setText("")
        self.stats_label.setText("")
        self.status_label.setText("click a channel in the layer grid")
        self.channel_changed.emit("", -1)

    def _symmetric(self) -> bool:
        return self._choice == AUTO and self._signed

    def linked(self) -> bool:
        """Whether both images show the same region (the zoom and pan are linked)."""
        a = self.activation_canvas.view.viewRect()
        b = self.gradient_canvas.view.viewRect()
        return self.gradient is None or a.center() == b.center() or _close(a, b)

    @staticmethod
    def _copy_range(source: ImageCanvas, target: ImageCanvas) -> None:
        if target.image_shape() is not None:
            target.view.setRange(rect=source.view.viewRect(), padding=0.0)

    def _update_overlay(self) -> None:
        on = self.overlay_box.isChecked() and self.image is not None and self.activation is not None
        if on:
            height, width = self.activation.shape  # type: ignore[union-attr]
            self.backdrop.setImage(self.image, autoLevels=False, levels=(0, 255))
            # The picture stretched onto the map's pixels: hover, zoom and links unchanged.
            self.backdrop.setRect(QtCore.QRectF(0, 0, width, height))
        self.backdrop.setVisible(on)
        self.activation_canvas.image.setOpacity(OVERLAY_OPACITY if on else 1.0)

    def hover_text(self, x: float, y: float) -> str:
        """Read-out for pixel (x, y), e.g. ``(x=3, y=7)  value 0.532  |grad| 1.2e-04``."""
        if self.activation is None:
            return ""
        x, y = int(x), int(y)
        parts = [f"(x={x}, y={y})"]
        for word, data in (("value", self.activation), ("|grad|", self.gradient)):
            if data is not None and 0 <= y < data.shape[0] and 0 <= x < data.shape[1]:
                parts.append(f"{word} {style.format_value(data[y, x])}")
        return "  ".join(parts)

    def _show_summary(self) -> None:
        if self.activation is not None:
            self.status_label.setText(
                "wheel: zoom both · drag: pan · double click: fit · [ ] PageUp/PageDown: channel"
            )

    def eventFilter(self, watched: QtCore.QObject, event: QtCore.QEvent) -> bool:  # noqa: N802
        # A step key asks for the next or previous channel while one is shown (filtered on the
        # view and on its canvases: they take focus when clicked).
        if event.type() == QtCore.QEvent.Type.KeyPress and self.activation is not None:
            if step := STEP_KEYS.get(QtCore.Qt.Key(event.key()), 0):  # type: ignore[attr-defined]
                self.step_requested.emit(step)
                return True
        return super().eventFilter(watched, event)

    def sizeHint(self) -> QtCore.QSize:  # noqa: N802 - Qt name
        return QtCore.QSize(640, 420)
