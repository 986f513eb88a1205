"""The "Live" dock: source, transport, the perturbation pad and sliders, and read-outs, a thin
view over a :class:`~actviz.ui.live.playback.LiveController`."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
from PySide6 import QtGui, QtWidgets
from PySide6.QtCore import QPointF, QRectF, QSignalBlocker, Qt, Signal
from PySide6.QtGui import QAction, QColor, QIcon, QImage, QKeySequence, QPainter, QPen
from PySide6.QtWidgets import QLabel, QSizePolicy, QSlider, QWidget

from actviz.display.attribution import display_image
from actviz.ui.host import show_line
from actviz.ui.live.frames import ImageFolder, StillFrame, TensorFrames, WebcamSource, webcam_status
from actviz.ui.live.perturbation import Perturbation, image_tensor
from actviz.ui.live.playback import LiveController, LiveStatus, SpacedReadout
from actviz.ui.panels import style

#: The disabled perturbation controls' tooltip when the opened input has no image tensor.
NO_PERTURBATION_TEXT = "Perturbations change an image input; this input has none (token ids?)"
#: Entries of the source selector, in order.
SOURCE_ITEMS = ("Opened input", "Image folder…", "Tensor frames (T, C, H, W)…", "Webcam")
_STILL, _FOLDER, _TENSOR, _WEBCAM = range(4)
#: What the perturbation pad says before there is an input.
NO_INPUT_TEXT = "No input yet: open an image (Ctrl+I)"
#: What it says for an input without a picture: perturbations change image-like tensors only.
NOT_AN_IMAGE_TEXT = "No picture: not an image"
#: Light grey on the pad's dark background.
_PLACEHOLDER_TEXT = "#bdc1c6"

Chooser = Callable[[QtWidgets.QWidget], str]  #: ``chooser(parent) -> path or ""``


def _ask_folder(parent: QtWidgets.QWidget) -> str:
    return QtWidgets.QFileDialog.getExistingDirectory(parent, "Play the images of a folder")


def _ask_tensor_file(parent: QtWidgets.QWidget) -> str:
    filters = "Tensors (*.pt *.pth *.npy *.npz *.safetensors);;All files (*)"
    return QtWidgets.QFileDialog.getOpenFileName(
        parent, "Play the frames of a tensor", "", filters
    )[0]


class OcclusionPad(QWidget):
    """The perturbed frame with the occlusion patch outlined; drag to move the patch."""

    moved = Signal(float, float)  #: New patch centre as fractions of the image width and height.

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

    def paintEvent(self, event: QtGui.QPaintEvent) -> None:  # noqa: N802 - Qt name
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

    def mousePressEvent(self, event: QtGui.QMouseEvent) -> None:  # noqa: N802 - Qt name
        if not self._drag(event, event.button() == Qt.MouseButton.LeftButton):
            super().mousePressEvent(event)

    def mouseMoveEvent(self, event: QtGui.QMouseEvent) -> None:  # noqa: N802 - Qt name
        if not self._drag(event, bool(event.buttons() & Qt.MouseButton.LeftButton)):
            super().mouseMoveEvent(event)

    def _drag(self, event: QtGui.QMouseEvent, left: bool) -> bool:
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
    h = style.bare_box(row)
    h.addWidget(slider, 1)
    # Wide enough for the longest value, so the slider does not jump as the text changes.
    label.setMinimumWidth(label.fontMetrics().horizontalAdvance(fmt.format(-100) + "0"))
    label.setAlignment(Qt.AlignmentFlag.AlignRight | Qt.AlignmentFlag.AlignVCenter)
    h.addWidget(label)
    slider.valueChanged.connect(lambda v: label.setText(fmt.format(v)))
    label.setText(fmt.format(slider.value()))
    return row


class LiveControls(QtWidgets.QDockWidget):
    """The live-mode dock over ``controller``; ``choose_folder`` and ``choose_tensor_file`` are
    ``(parent) -> path or ""`` dialogs (tests replace them)."""

    def __init__(self, controller: LiveController, parent: QtWidgets.QWidget | None = None) -> None:
        super().__init__("Live", parent)
        self.setObjectName("liveDock")
        self.controller = controller
        self.choose_folder: Chooser = _ask_folder
        self.choose_tensor_file: Chooser = _ask_tensor_file
        body = QtWidgets.QWidget()
        layout = QtWidgets.QVBoxLayout(body)
        layout.setContentsMargins(4, 4, 4, 4)
        self._build_actions()
        for title, build, stretch in (
            ("Source", self._build_source, 0),
            ("Playback", self._build_transport, 0),
            ("Perturb the input", self._build_perturbation, 1),
            ("Performance", self._build_readouts, 0),
        ):
            box = QtWidgets.QGroupBox(title)
            build(QtWidgets.QVBoxLayout(box))
            layout.addWidget(box, stretch)
        self.setWidget(body)
        self.setMinimumWidth(280)

        c = controller
        c.status_changed.connect(self._on_controller_status_changed)
        c.frame_changed.connect(SpacedReadout(self._show_frame, c, self).offer)
        # None too (a frame without a picture clears the last); at most one per 0.1 s playing.
        pictures = SpacedReadout(self.pad.set_image, c, self.pad, interval_s=0.1)
        c.input_image_changed.connect(pictures.offer)
        c.playing_changed.connect(self._on_controller_playing_changed)
        c.source_changed.connect(self._on_controller_source_changed)
        c.message.connect(lambda text: show_line(self.message_label, text, error=True))
        for widget in self.perturbation_controls():
            widget.setProperty("enabledTip", widget.toolTip())
        self._sync_transport()
        self._show_still_input()
        c.host.session.input_changed.connect(self._on_session_input_changed)
        c.host.closed.connect(
            lambda: c.host.session.input_changed.disconnect(self._on_session_input_changed)
        )

    def _build_actions(self) -> None:
        """Playback as window-wide Ctrl+arrow actions (bare arrows are the tree's and sliders')."""

        def action(text: str, shortcut: str, slot: Callable[[], None]) -> QAction:
            act = QAction(text, self, toolTip=f"{text} ({shortcut})", iconVisibleInMenu=False)
            act.setShortcut(QKeySequence(shortcut))
            act.triggered.connect(slot)
            return act

        c = self.controller
        self.play_action = action("Play / pause", "Ctrl+Space", c.toggle)
        self.next_action = action("Next frame", "Ctrl+Right", lambda: c.step(1))
        self.back_action = action("Previous frame", "Ctrl+Left", lambda: c.step(-1))
        self.reset_action = action("Reset perturbation", "Ctrl+0", self.reset_perturbation)

    def _build_source(self, form: QtWidgets.QBoxLayout) -> None:
        self.source_combo = QtWidgets.QComboBox()
        self.source_combo.addItems(SOURCE_ITEMS)
        self.source_combo.setToolTip("What live mode plays: the opened input, or a sequence")
        ok, why = webcam_status()
        item = self.source_combo.model().item(_WEBCAM)
        if not ok:
            item.setEnabled(False)
            item.setToolTip(why)
            self.source_combo.setItemText(_WEBCAM, f"Webcam ({why})")
        self.source_combo.activated.connect(self._on_source_activated)
        # Sized to the dock, not to its longest item; the open list shows items in full.
        style.fit_combo(self.source_combo, 16)
        self.webcam_label = QtWidgets.QLabel(
            "" if ok else why, wordWrap=True, visible=not ok, styleSheet="color: #5f6368;"
        )
        self.source_label = QtWidgets.QLabel("the opened input", wordWrap=True)
        # Under the source, where the user looks after choosing one.
        self.message_label = QtWidgets.QLabel("", wordWrap=True, visible=False)
        for widget in (self.source_combo, self.webcam_label, self.source_label, self.message_label):
            form.addWidget(widget)

    def _build_transport(self, v: QtWidgets.QBoxLayout) -> None:
        row = QtWidgets.QHBoxLayout()
        buttons = [QtWidgets.QToolButton() for _ in range(3)]
        self.back_button, self.play_button, self.next_button = buttons
        shown = (self.back_action, self.play_action, self.next_action)
        icons = ("SP_MediaSkipBackward", "SP_MediaPlay", "SP_MediaSkipForward")
        for button, act, icon in zip(buttons, shown, icons, strict=True):
            act.setIcon(_icon(icon))
            button.setDefaultAction(act)  # its icon, tip and enabled state
            row.addWidget(button)
        self.frame_slider = QtWidgets.QSlider(Qt.Orientation.Horizontal, maximum=0, toolTip="Frame")
        self.frame_slider.valueChanged.connect(self._on_frame_slider_changed)
        row.addWidget(self.frame_slider, 1)
        v.addLayout(row)
        # A line of its own (a file's name is long); a steady label repaints without a relayout.
        self.frame_label = style.ElidedLabel("frame 1/1", lines=2)
        v.addWidget(self.frame_label)
        row2 = QtWidgets.QHBoxLayout()
        row2.addWidget(QtWidgets.QLabel("speed"))
        tip = "Playback speed; frames the model cannot keep up with are skipped"
        self.speed_spin = QtWidgets.QDoubleSpinBox(minimum=0.25, maximum=60.0, suffix=" fps")
        self.speed_spin.setValue(self.controller.player.fps)
        self.speed_spin.setToolTip(tip)
        self.speed_spin.valueChanged.connect(self.controller.set_speed)
        self.controller.speed_changed.connect(self._on_speed_changed)
        row2.addWidget(self.speed_spin)
        self.loop_check = QtWidgets.QCheckBox("loop", checked=self.controller.player.loop)
        self.loop_check.toggled.connect(self.controller.set_loop)
        row2.addWidget(self.loop_check)
        row2.addStretch(1)
        v.addLayout(row2)

    def _build_perturbation(self, v: QtWidgets.QBoxLayout) -> None:
        box = v.parentWidget()
        self.pad = OcclusionPad()
        self.pad.moved.connect(self._on_pad_moved)
        v.addWidget(self.pad, 1)
        form = QtWidgets.QFormLayout()
        v.addLayout(form)  # on the box now: the value rows' parent (see with_value)
        p = self.controller.perturbation
        self.occlusion_check = QtWidgets.QCheckBox("occlusion patch")
        self.occlusion_check.setToolTip("Grey out a square; drag it over the picture above")
        self.occlusion_check.toggled.connect(self._on_occlusion_toggled)
        self.size_slider = slider(2, 100, round(p.occlusion_size * 100), "Patch side, % of image")
        self.size_slider.valueChanged.connect(lambda v: self._set_patch(occlusion_size=v / 100.0))
        self.size_value = QtWidgets.QLabel()
        form.addRow(self.occlusion_check, with_value(self.size_slider, self.size_value, "{}%", box))
        #: ``(slider, value label, format, unperturbed value)`` of the noise, brightness, contrast.
        self._amounts: list[tuple[QtWidgets.QSlider, QtWidgets.QLabel, str, int]] = []
        self.noise_slider, self.noise_value = self._amount(
            form, "noise", (0, 200, 0), "{}%", "Gaussian noise, % of the input's std"
        )
        self.brightness_slider, self.brightness_value = self._amount(
            form, "brightness", (-100, 100, 0), "{:+d}%", "Brightness shift, % of the value range"
        )
        self.contrast_slider, self.contrast_value = self._amount(
            form, "contrast", (0, 300, 100), "{}%", "Contrast, % (100 = unchanged)"
        )
        self.reset_button = QtWidgets.QPushButton("Reset perturbation")
        self.reset_button.clicked.connect(self.reset_perturbation)
        v.addWidget(self.reset_button)

    def _amount(
        self, form: QtWidgets.QFormLayout, key: str, span: tuple[int, int, int], fmt: str, tip: str
    ) -> tuple[QtWidgets.QSlider, QtWidgets.QLabel]:
        """A row of ``form``: a slider of ``key`` in % (``span``: least, most, unperturbed)."""
        lo, hi, start = span
        s, label = slider(lo, hi, start, tip), QtWidgets.QLabel()
        s.valueChanged.connect(lambda v: self.controller.update_perturbation(**{key: v / 100.0}))
        form.addRow(key, with_value(s, label, fmt, form.parentWidget()))
        self._amounts.append((s, label, fmt, start))
        return s, label

    def _build_readouts(self, v: QtWidgets.QBoxLayout) -> None:
        # Read-outs that change while playing: lines of their own, no relayout of the dock.
        self.stats_label = style.ElidedLabel("not running", lines=3)
        v.addWidget(self.stats_label)
        self.memory_label = style.ElidedLabel("", lines=2)
        v.addWidget(self.memory_label)
        row = QtWidgets.QHBoxLayout()
        row.addWidget(QtWidgets.QLabel("memory budget"))
        tip = "A capture that would hold more than this is refused instead of running out of memory"
        self.budget_spin = QtWidgets.QSpinBox(minimum=16, maximum=1 << 20, toolTip=tip)
        self.budget_spin.setSingleStep(256)
        self.budget_spin.setSuffix(" MiB")
        self.budget_spin.setValue(max(16, self.controller.memory_budget >> 20))
        budget = self.controller.set_memory_budget
        self.budget_spin.valueChanged.connect(lambda mib: budget(int(mib) << 20))
        row.addWidget(self.budget_spin)
        v.addLayout(row)

    def reset_perturbation(self) -> None:
        """Back to the unperturbed input (sliders and patch reset)."""
        for s, label, fmt, value in self._amounts:
            with QSignalBlocker(s):
                s.setValue(value)
            label.setText(fmt.format(value))  # its signal was blocked
        with QSignalBlocker(self.occlusion_check):
            self.occlusion_check.setChecked(False)
        self.controller.reset_perturbation()
        self._set_patch()
        self._show_still_input()

    def _on_source_activated(self, index: int) -> None:
        c = self.controller
        if index == _STILL:
            c.set_source(None)  # the pad follows (_on_controller_source_changed)
        elif index == _FOLDER and (path := self.choose_folder(self)):
            c.open_folder(path)
        elif index == _TENSOR and (path := self.choose_tensor_file(self)):
            c.open_tensor_file(path)
        elif index == _WEBCAM:
            c.open_webcam()
        self._sync_source()

    def _on_speed_changed(self, fps: float) -> None:
        # Set from a script or a test: show it without echoing it back to the controller.
        if abs(self.speed_spin.value() - fps) > 1e-9:
            with QSignalBlocker(self.speed_spin):
                self.speed_spin.setValue(fps)

    def _on_frame_slider_changed(self, value: int) -> None:
        if value != self.controller.player.index:
            self.controller.seek(value)

    def _on_occlusion_toggled(self, on: bool) -> None:
        centre = (self.controller.perturbation.occlusion or (0.5, 0.5)) if on else None
        self._set_patch(occlusion=centre)

    def _on_pad_moved(self, fx: float, fy: float) -> None:
        if not self.occlusion_check.isChecked():
            with QSignalBlocker(self.occlusion_check):
                self.occlusion_check.setChecked(True)
        self._set_patch(occlusion=(fx, fy))

    def _set_patch(self, **changes: Any) -> None:
        """Change the patch (``occlusion``, ``occlusion_size``; none: no change) and draw it."""
        if changes:
            self.controller.update_perturbation(**changes)
        p: Perturbation = self.controller.perturbation
        self.pad.set_patch(p.occlusion, p.occlusion_size)

    def _sync_transport(self) -> None:
        c = self.controller
        n = c.player.length
        sequence = c.source is not None and n > 1
        for w in (self.play_action, self.next_action, self.back_action, self.frame_slider):
            w.setEnabled(sequence)
        nothing = c.source is None and c.host.session.input is None  # no frame to count
        text = "no input" if nothing else f"frame {c.player.index + 1}/{n}"
        self._set_frame(c.player.index, n, text)
        self._on_controller_playing_changed(c.playing)

    def _on_controller_status_changed(self, status: LiveStatus) -> None:
        self.stats_label.setText(status.text())
        self.memory_label.setText(status.memory_text())

    def _show_frame(self, index: int, length: int, label: str) -> None:
        self._set_frame(index, length, f"frame {index + 1}/{length} · {label}")

    def _set_frame(self, index: int, length: int, text: str) -> None:
        with QSignalBlocker(self.frame_slider):
            self.frame_slider.setRange(0, max(0, length - 1))
            self.frame_slider.setValue(index)
        self.frame_label.setText(text)

    def _on_controller_playing_changed(self, playing: bool) -> None:
        self.play_action.setIcon(_icon("SP_MediaPause" if playing else "SP_MediaPlay"))

    def _on_controller_source_changed(self, text: str) -> None:
        self.source_label.setText(text or "the opened input")
        self._sync_perturbation_enabled()
        self._sync_source()
        if not text:  # back to the opened input, however it was asked for
            self._show_still_input()

    def _sync_source(self) -> None:
        """The selector shows what really plays (a choice refused or cancelled included)."""
        kinds = ((ImageFolder, _FOLDER), (TensorFrames, _TENSOR), (WebcamSource, _WEBCAM))
        index = next((i for cls, i in kinds if isinstance(self.controller.source, cls)), _STILL)
        with QSignalBlocker(self.source_combo):
            self.source_combo.setCurrentIndex(index)
        self._sync_transport()

    def _on_session_input_changed(self) -> None:
        if self.controller.source is None:
            self._show_still_input()
            self._sync_transport()

    def perturbation_controls(self) -> tuple[QtWidgets.QWidget, ...]:
        """The widgets that set a perturbation (the patch, noise, brightness, contrast)."""
        return (self.occlusion_check, self.size_slider, *(a[0] for a in self._amounts))

    def _sync_perturbation_enabled(self) -> None:
        """Without an image-like tensor in the input, the perturbations are off and say why."""
        c, session, tip = self.controller, self.controller.host.session, ""
        if c.source is None and session.input is None:
            tip = NO_INPUT_TEXT  # nothing to perturb yet
        # Sequences are pictures; the opened input may not be.
        elif (c.source is None or isinstance(c.source, StillFrame)) and session.input is not None:
            if (problem := session.input_problem()) or image_tensor(session.input.value) is None:
                tip = problem or NO_PERTURBATION_TEXT
        for widget in self.perturbation_controls():
            widget.setEnabled(not tip)
            widget.setToolTip(tip or widget.property("enabledTip") or "")

    def _show_still_input(self) -> None:
        """The opened input on the pad, perturbed, until a frame computed from it arrives."""
        c, inp = self.controller, self.controller.host.session.input
        if c.source is not None:
            return
        self._sync_perturbation_enabled()
        if inp is None:
            self.pad.set_image(None, NO_INPUT_TEXT)
            return
        value, image = c.perturbation.apply(inp.value, inp.image)
        # The picture a frame of this input gets (as prepare makes it); None without one.
        self.pad.set_image(display_image(value, image))

    def closeEvent(self, event: Any) -> None:  # noqa: N802 - Qt name
        self.controller.pause()  # Closing the dock pauses playback; perturbations stay until reset.
        super().closeEvent(event)


def show_dock(dock: QtWidgets.QDockWidget) -> None:
    """Show ``dock`` in front (when tabbed with another dock)."""
    dock.show()  # nothing happens to a dock shown already
    dock.raise_()


def _icon(name: str) -> QIcon:
    """One of Qt's standard media icons (drawn by the style, so always available)."""
    pixmap = getattr(QtWidgets.QStyle.StandardPixmap, name)
    return QtWidgets.QApplication.style().standardIcon(pixmap)
