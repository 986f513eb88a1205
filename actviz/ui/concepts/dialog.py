"""Data > Train concepts...: layer, dictionary size, k and data folder, with the training's
progress and Cancel (a view: the feature runs the training)."""

from __future__ import annotations

from dataclasses import dataclass

from PySide6 import QtCore, QtWidgets

from actviz.ui.file_dialogs import open_folder
from actviz.ui.host import StepsAndLine
from actviz.ui.panels.style import ProgressBar


@dataclass(frozen=True)
class TrainSpec:
    """What the dialog asks for."""

    layer: str
    n_concepts: int
    k: int
    data: str
    epochs: int
    out: str


class TrainConceptsDialog(StepsAndLine, QtWidgets.QDialog):
    """The non-modal Train concepts dialog (``train_requested``, ``cancel_requested``)."""

    train_requested = QtCore.Signal(object)
    cancel_requested = QtCore.Signal()

    def __init__(
        self,
        parent: QtWidgets.QWidget | None,
        layers: dict[str, int | None],
        *,
        layer: str | None = None,
        data: str = "",
        out: str = "",
    ) -> None:
        super().__init__(parent)
        self.setWindowTitle("Train concepts")
        form = QtWidgets.QFormLayout()
        self.layer_combo = QtWidgets.QComboBox()
        form.addRow("Layer:", self.layer_combo)
        self.n_spin = QtWidgets.QSpinBox()
        self.n_spin.setRange(2, 1 << 16)
        self.n_spin.setToolTip("Concepts in the dictionary (8 x the layer's channels is usual)")
        self._channels: dict[str, int | None] = {}
        self._n_typed = False  # the user's own count stays; else it follows the layer chosen
        self.n_spin.valueChanged.connect(self._on_n_typed)
        self.layer_combo.currentTextChanged.connect(self._suggest_n)
        self.set_layers(layers, layer)
        form.addRow("Concepts:", self.n_spin)
        self.k_spin = QtWidgets.QSpinBox()
        self.k_spin.setRange(1, 1024)
        self.k_spin.setValue(8)
        self.k_spin.setToolTip("Concepts active per position (TopK)")
        form.addRow("Active per position (k):", self.k_spin)
        self.epochs_spin = QtWidgets.QSpinBox()
        self.epochs_spin.setRange(1, 1000)
        self.epochs_spin.setValue(5)
        form.addRow("Epochs:", self.epochs_spin)
        self.data_edit = QtWidgets.QLineEdit(data, placeholderText="a folder of images")
        browse = QtWidgets.QPushButton("Browse…")
        browse.clicked.connect(self._browse_data)
        row = QtWidgets.QHBoxLayout()
        row.addWidget(self.data_edit, 1)
        row.addWidget(browse)
        form.addRow("Data folder:", row)
        self.out_edit = QtWidgets.QLineEdit(out, placeholderText="empty: a new folder in the cache")
        self.out_edit.setToolTip("Where the dictionary is saved (a SAELens folder)")
        form.addRow("Save to:", self.out_edit)

        outer = QtWidgets.QVBoxLayout(self)
        outer.addLayout(form)
        self.progress = ProgressBar()
        self.progress.setRange(0, 0)
        self.progress.setVisible(False)
        outer.addWidget(self.progress)
        self.message = QtWidgets.QLabel(wordWrap=True, visible=False)
        outer.addWidget(self.message)
        buttons = QtWidgets.QHBoxLayout()
        buttons.addStretch(1)
        self.train_button = QtWidgets.QPushButton("Train", default=True)
        self.train_button.clicked.connect(self._on_train_clicked)
        self.cancel_button = QtWidgets.QPushButton("Cancel", enabled=False)
        self.cancel_button.clicked.connect(self.cancel_requested.emit)
        self.close_button = QtWidgets.QPushButton("Close")
        self.close_button.clicked.connect(self.close)
        for b in (self.train_button, self.cancel_button, self.close_button):
            buttons.addWidget(b)
        outer.addLayout(buttons)
        self.resize(520, self.sizeHint().height())

    def spec(self) -> TrainSpec:
        """What the fields say."""
        return TrainSpec(
            self.layer_combo.currentText(),
            int(self.n_spin.value()),
            int(self.k_spin.value()),
            self.data_edit.text().strip(),
            int(self.epochs_spin.value()),
            self.out_edit.text().strip(),
        )

    def set_layers(self, layers: dict[str, int | None], layer: str | None = None) -> None:
        """Offer ``layers`` (name: channels, None when not known yet), ``layer`` chosen (else
        the one chosen before, if still offered)."""
        keep = layer if layer in layers else self.layer_combo.currentText()
        self._channels = dict(layers)
        with QtCore.QSignalBlocker(self.layer_combo):
            self.layer_combo.clear()
            self.layer_combo.addItems(list(layers))
            self.layer_combo.setCurrentIndex(max(0, self.layer_combo.findText(keep)))
        self._suggest_n(self.layer_combo.currentText())

    def _on_n_typed(self, _n: int) -> None:
        self._n_typed = True

    def _suggest_n(self, layer: str) -> None:
        if not self._n_typed:
            with QtCore.QSignalBlocker(self.n_spin):  # not the user's count
                self.n_spin.setValue(max(16, 8 * (self._channels.get(layer) or 64)))

    def set_busy(self, busy: bool) -> None:
        """While training: the bar shows, Cancel is on, Train and the fields are off."""
        self.progress.setVisible(busy)
        if busy:
            self.progress.setRange(0, 0)
        self.cancel_button.setEnabled(busy)
        self.train_button.setEnabled(not busy)
        for w in (self.layer_combo, self.n_spin, self.k_spin, self.epochs_spin, self.data_edit):
            w.setEnabled(not busy)

    def _browse_data(self) -> None:
        if folder := open_folder(self, "Images to train on", self.data_edit.text()):
            self.data_edit.setText(folder)

    def _on_train_clicked(self) -> None:
        spec = self.spec()
        if not spec.layer:
            self.set_message("Tick a layer first: the dictionary learns its output.", error=True)
            return
        if spec.k > spec.n_concepts:
            self.set_message("k must be at most the number of concepts.", error=True)
            return
        if not spec.data or not QtCore.QDir(spec.data).exists():
            self.set_message("Choose a folder of images to train on.", error=True)
            return
        self.train_requested.emit(spec)
