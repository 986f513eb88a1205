"""The concept view (passive): one concept as the channel view shows a channel, with its name,
Remove / Scale, effect, top images and "What it wants".
"""

from __future__ import annotations

from typing import Any

import numpy as np
from PySide6 import QtCore, QtWidgets

from actviz.ui.panels import style

#: Side of the concept's picture in the view (screen pixels, at most).
PICTURE_PX = 240
THUMB_PX = 76  #: Side of one top image.
THUMB_COLUMNS = 3  #: Top images per row.


def concept_stats(tiles: Any, scan: Any, concept: int) -> str:
    """The view's line on ``concept``: peak, where it fires, rank, and images (with ``scan``)."""
    m = tiles.view.data[concept]
    fired = int((m > 0).sum())
    rank = tiles.order.index(concept) + 1 if concept in tiles.order else None
    where = f"{rank} of {tiles.active} firing" if rank and tiles.active else "not firing"
    stats = (
        f"peak {float(tiles.peaks[concept]):.4g} · fires at {fired} of {m.size} positions "
        f"· {where} on this input"
    )
    if scan is not None:
        stats += f" · fires on {100 * float(scan.image_rate[concept]):.0f}% of images"
    return stats


class ConceptView(QtWidgets.QWidget):
    """One concept, large. Signals: ``remove_requested``, ``scale_requested(float)``,
    ``name_edited(str)``, ``wants_requested``, ``top_requested``.
    """

    remove_requested = QtCore.Signal()
    scale_requested = QtCore.Signal(float)
    name_edited = QtCore.Signal(str)
    wants_requested = QtCore.Signal()
    top_requested = QtCore.Signal()

    def __init__(self, parent: QtWidgets.QWidget | None = None) -> None:
        super().__init__(parent)
        self.shown: tuple[str, int] | None = None  #: ``(layer, concept)`` shown (None: none).
        outer = QtWidgets.QVBoxLayout(self)
        outer.setContentsMargins(6, 6, 6, 6)
        outer.setSpacing(4)
        self.title = style.title_label("Concept")
        outer.addWidget(self.title)
        name_row = QtWidgets.QHBoxLayout()
        name_row.addWidget(QtWidgets.QLabel("Name:"))
        self.name_edit = QtWidgets.QLineEdit()
        self.name_edit.setPlaceholderText("name this concept (kept in the session)")
        self.name_edit.editingFinished.connect(lambda: self.name_edited.emit(self.name_edit.text()))
        name_row.addWidget(self.name_edit, 1)
        outer.addLayout(name_row)
        self.picture = QtWidgets.QLabel(toolTip="Where the concept fires on this input")
        self.picture.setAlignment(QtCore.Qt.AlignmentFlag.AlignCenter)
        self.picture.setWordWrap(True)  # a text model's tokens, said in words
        self.picture.setMinimumSize(160, 160)
        outer.addWidget(self.picture, 1)
        self.stats_label = style.caption_label(wrap=True)
        outer.addWidget(self.stats_label)

        buttons = QtWidgets.QHBoxLayout()
        self.remove_button = QtWidgets.QPushButton(
            "Remove", toolTip="Remove this concept from the layer's output (x - z d) and run again"
        )
        self.remove_button.clicked.connect(self.remove_requested.emit)
        buttons.addWidget(self.remove_button)
        self.scale_spin = QtWidgets.QDoubleSpinBox()
        self.scale_spin.setRange(-100.0, 100.0)
        self.scale_spin.setDecimals(2)
        self.scale_spin.setSingleStep(0.25)
        self.scale_spin.setValue(2.0)
        self.scale_spin.setToolTip("The factor Scale multiplies the concept's contribution by")
        buttons.addWidget(self.scale_spin)
        self.scale_button = QtWidgets.QPushButton("Scale")
        self.scale_button.clicked.connect(
            lambda: self.scale_requested.emit(float(self.scale_spin.value()))
        )
        buttons.addWidget(self.scale_button)
        buttons.addStretch(1)
        outer.addLayout(buttons)
        self.effect_label = QtWidgets.QLabel(wordWrap=True)
        outer.addWidget(self.effect_label)

        outer.addWidget(style.caption_label("Top images (where it fires)"))
        self.top_row = QtWidgets.QGridLayout()
        self.top_row.setSpacing(2)
        top_box = QtWidgets.QWidget()
        top_box.setLayout(self.top_row)
        outer.addWidget(top_box)
        self.top_label = style.caption_label(wrap=True)
        outer.addWidget(self.top_label)
        self.top_button = QtWidgets.QPushButton("Find top images in a folder…")
        self.top_button.clicked.connect(self.top_requested.emit)
        outer.addWidget(self.top_button)

        wants = QtWidgets.QHBoxLayout()
        self.wants_button = QtWidgets.QPushButton(
            "What it wants",
            toolTip="Synthesise the picture that drives the concept's direction most",
        )
        self.wants_button.clicked.connect(self.wants_requested.emit)
        wants.addWidget(self.wants_button)
        self.wants_picture = QtWidgets.QLabel()
        wants.addWidget(self.wants_picture)
        wants.addStretch(1)
        outer.addLayout(wants)
        self.wants_label = style.caption_label(wrap=True)
        outer.addWidget(self.wants_label)
        outer.addStretch(1)
        self.clear()

    # -- setters -----------------------------------------------------------------------------
    def set_concept(
        self,
        layer: str,
        concept: int,
        picture: np.ndarray | str,
        *,
        name: str,
        stats: str,
        concepts: int,
    ) -> None:
        """Show ``concept`` of ``layer``: ``picture`` (a text model's: where it fires, in
        words), ``name``, ``stats`` (of ``concepts``)."""
        new = self.shown != (layer, concept)
        self.shown = (layer, int(concept))
        self.title.set_text(f"Concept {concept} of {concepts} · {layer}")
        self.name_edit.setText(name)
        if isinstance(picture, str):
            self.picture.setText(picture)
        else:
            self.picture.setPixmap(style.rgb_pixmap(picture, PICTURE_PX))
        self.stats_label.setText(stats)
        for button in (self.remove_button, self.scale_button, self.wants_button):
            button.setEnabled(True)
        if new:
            self.set_effect("")
            self.set_top([], "")
            self.set_wants(None, "")

    def pictures_off(self) -> None:
        """A text model's concept: no top images to find, no picture it wants."""
        self.top_button.setVisible(False)
        self.wants_button.setEnabled(False)
        self.set_top([], "Top images and what it wants are pictures: this model reads text.")

    def set_effect(self, text: str) -> None:
        """The concept's effect on the prediction, in words."""
        self.effect_label.setText(text)

    def set_top(self, pictures: list[np.ndarray], text: str) -> None:
        """Its top images (each already drawn with where it fires) and a line about them."""
        while self.top_row.count():
            item = self.top_row.takeAt(0)
            if item.widget() is not None:
                item.widget().deleteLater()
        for i, rgb in enumerate(pictures):
            label = QtWidgets.QLabel()
            label.setPixmap(style.rgb_pixmap(rgb, THUMB_PX))
            self.top_row.addWidget(label, i // THUMB_COLUMNS, i % THUMB_COLUMNS)
        self.top_count = len(pictures)
        self.top_label.setText(text)

    def set_wants(self, picture: np.ndarray | None, text: str) -> None:
        """What it wants (None: not made yet) and a line about it."""
        if picture is None:
            self.wants_picture.clear()
        else:
            self.wants_picture.setPixmap(style.rgb_pixmap(picture, THUMB_PX + 40))
        self.wants_label.setText(text)

    def clear(self) -> None:
        """Show no concept."""
        self.shown = None
        self.title.set_text("Concept")
        self.name_edit.setText("")
        self.picture.clear()
        self.picture.setText("click a concept tile of a layer shown as concepts")
        self.stats_label.setText("")
        for button in (self.remove_button, self.scale_button, self.wants_button):
            button.setEnabled(False)
        self.set_effect("")
        self.set_top([], "")
        self.set_wants(None, "")
