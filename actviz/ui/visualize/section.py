"""The channel view's passive "What it wants" section: settings, a button, progress, picture."""

from __future__ import annotations

from typing import Any

import numpy as np
from PySide6 import QtCore, QtWidgets

from actviz.analysis.visualize.visualization import VisualizeError, VisualizeSettings
from actviz.ui.host import StepsAndLine
from actviz.ui.panels import style

#: The objectives offered (those with one image per channel).
OBJECTIVES = ("channel", "neuron")
#: Smallest side the picture is drawn at (a small image is enlarged by a whole factor).
MIN_SHOWN = 96
#: Largest side it is drawn at, so the maps above keep their room (the export writes it whole).
MAX_SHOWN = 192


def saved_settings(settings: VisualizeSettings) -> dict[str, Any]:
    """The settings the window sets as a session file keeps them."""
    return {"objective": settings.objective, "steps": settings.steps, "size": settings.size[0]}


def read_saved_settings(saved: Any) -> VisualizeSettings | None:
    """:func:`saved_settings` read back (None: not valid)."""
    keys = ("objective", "steps", "size")
    if not isinstance(saved, dict) or saved.get("objective") not in OBJECTIVES:
        return None
    if not all(type(saved.get(k)) is int for k in keys[1:]):  # not bool, not float
        return None
    try:
        return VisualizeSettings(**{k: saved[k] for k in keys})
    except VisualizeError:
        return None


class RunRow(StepsAndLine):
    """A run button, the ⚙ settings popover, progress and Cancel in a row, and a message."""

    #: While busy the run button is hidden (True) or greyed out (False).
    hide_run_when_busy = False

    def _run_row(
        self,
        run: QtWidgets.QPushButton,
        cancel_tip: str,
        menu: QtWidgets.QMenu | None,
        around: tuple[tuple[QtWidgets.QWidget, ...], tuple[QtWidgets.QWidget, ...]] = ((), ()),
    ) -> QtWidgets.QHBoxLayout:
        """A row: ``around``'s first widgets, ``run``, ⚙, progress, Cancel, ``around``'s last."""
        self.run_button = run
        self.settings_button = QtWidgets.QToolButton()
        self.settings_button.setText("⚙")
        self.settings_button.setToolTip("Objective, steps and image size")
        self.settings_button.setPopupMode(QtWidgets.QToolButton.ToolButtonPopupMode.InstantPopup)
        if menu is not None:
            self.settings_button.setMenu(menu)
        self.progress = style.ProgressBar()
        self.progress.setMaximumHeight(12)
        self.progress.setTextVisible(False)
        self.cancel_button = QtWidgets.QPushButton("Cancel")
        self.cancel_button.setToolTip(cancel_tip)
        self.cancel_button.clicked.connect(self.cancel_requested)  # type: ignore[attr-defined]
        # Never narrower than their text: the row gives way in the settings and progress.
        policy = QtWidgets.QSizePolicy.Policy
        for button in (run, self.cancel_button):
            button.setSizePolicy(policy.Minimum, policy.Fixed)
        self.message = style.caption_label(wrap=True)
        row = QtWidgets.QHBoxLayout()
        row.setSpacing(4)
        for widget in (*around[0], run, self.settings_button):
            row.addWidget(widget)
        row.addWidget(self.progress, 1)
        row.addStretch(1)
        for widget in (self.cancel_button, *around[1]):
            row.addWidget(widget)
        return row

    def set_busy(self, busy: bool) -> None:
        """While it runs: Cancel and the progress bar; the run button and settings off."""
        run = self.run_button
        (run.setVisible if self.hide_run_when_busy else run.setEnabled)(not busy)
        self.settings_button.setEnabled(not busy)
        self.cancel_button.setVisible(busy)
        self.progress.setVisible(busy)
        if busy:
            self.progress.setRange(0, 0)


class WantsSection(QtWidgets.QWidget, RunRow):
    """ "What it wants" under the channel's maps; ``requested``, ``cancel_requested``,
    ``settings_changed``."""

    requested = QtCore.Signal()
    cancel_requested = QtCore.Signal()
    settings_changed = QtCore.Signal()

    def __init__(self, parent: QtWidgets.QWidget | None = None) -> None:
        super().__init__(parent)
        defaults = VisualizeSettings()
        layout = QtWidgets.QVBoxLayout(self)
        layout.setContentsMargins(0, 4, 0, 0)
        layout.setSpacing(2)
        self.steps_spin = QtWidgets.QSpinBox()
        self.steps_spin.setRange(1, 4096)
        self.steps_spin.setValue(defaults.steps)
        self.steps_spin.setToolTip("Optimisation steps")
        self.size_spin = QtWidgets.QSpinBox()
        self.size_spin.setRange(8, 1024)
        self.size_spin.setSingleStep(16)
        self.size_spin.setValue(defaults.size[0])
        self.size_spin.setToolTip("Image side in pixels")
        self.size_spin.setSuffix(" px")
        self.objective_box = QtWidgets.QComboBox()
        self.objective_box.addItems(OBJECTIVES)
        self.objective_box.setCurrentText(defaults.objective)
        self.objective_box.setToolTip(
            "channel: the channel's mean activation; neuron: its centre position"
        )
        # The settings in a popover, so that the row stays one button wide in a narrow view.
        form_box = QtWidgets.QWidget()
        form = QtWidgets.QFormLayout(form_box)
        form.setContentsMargins(8, 6, 8, 6)
        form.addRow("objective", self.objective_box)
        form.addRow("steps", self.steps_spin)
        form.addRow("size", self.size_spin)
        self.settings_menu = QtWidgets.QMenu(self)
        holder = QtWidgets.QWidgetAction(self.settings_menu)
        holder.setDefaultWidget(form_box)
        self.settings_menu.addAction(holder)
        self.button = QtWidgets.QPushButton("What it wants")
        self.button.setToolTip(
            "Synthesise the image this channel responds to most (activation maximisation)"
        )
        self.button.clicked.connect(self.requested)
        layout.addLayout(self._run_row(self.button, "Stop the synthesis (Esc)", self.settings_menu))
        self.picture = QtWidgets.QLabel()
        self.picture.setAlignment(
            QtCore.Qt.AlignmentFlag.AlignLeft | QtCore.Qt.AlignmentFlag.AlignTop
        )
        layout.addWidget(self.picture)
        layout.addWidget(self.message)
        #: The picture shown, ``(H, W, 3)`` uint8, or None.
        self.image: np.ndarray | None = None
        for spin in (self.steps_spin, self.size_spin):
            spin.valueChanged.connect(lambda _v: self.settings_changed.emit())
        self.objective_box.currentTextChanged.connect(lambda _t: self.settings_changed.emit())
        self.set_busy(False)
        self.show_image(None)

    def settings(self) -> VisualizeSettings:
        """The settings set: ``objective``, ``steps`` and ``size``, the others their defaults."""
        return VisualizeSettings(
            objective=self.objective_box.currentText(),
            steps=self.steps_spin.value(),
            size=self.size_spin.value(),
        )

    def set_settings(self, settings: VisualizeSettings) -> None:
        """Put :meth:`settings` back (a session's)."""
        self.objective_box.setCurrentText(settings.objective)
        self.steps_spin.setValue(settings.steps)
        self.size_spin.setValue(settings.size[0])

    def show_image(self, image: np.ndarray | None) -> None:
        """Show ``(H, W, 3)`` uint8 (None: no picture)."""
        if image is None:
            self.image = None
            self.picture.clear()
            self.picture.setToolTip("")
            self.picture.setVisible(False)
            return
        self.image = np.ascontiguousarray(image, dtype=np.uint8)
        h, w = self.image.shape[:2]
        big = max(h, w) > MAX_SHOWN
        pixmap = style.rgb_pixmap(self.image, MAX_SHOWN if big else None)
        factor = max(1, -(-MIN_SHOWN // max(1, min(h, w))))
        if factor > 1 and not big:
            pixmap = pixmap.scaled(
                w * factor, h * factor, mode=QtCore.Qt.TransformationMode.FastTransformation
            )
        self.picture.setPixmap(pixmap)
        drawn = f"{w}x{h} px, drawn at {pixmap.width()}x{pixmap.height()} (Export writes it whole)"
        self.picture.setToolTip(drawn if big else "")
        self.picture.setVisible(True)
