"""The "Scan a dataset" dialog (non-modal): a folder, the layers to scan, k."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from PySide6 import QtWidgets
from PySide6.QtCore import Qt, Signal

from actviz.ui.file_dialogs import open_folder
from actviz.ui.panels import style

DEFAULT_K = 9  #: Images kept per channel unless the user asks for another number.
MAX_K = 64


@dataclass(frozen=True)
class ScanSpec:
    """What to scan: a folder, the layers, k per channel (``batch_size`` None: the engine's)."""

    folder: str
    layers: tuple[str, ...]
    k: int = DEFAULT_K
    batch_size: int | None = None


class ScanDialog(QtWidgets.QDialog):
    """Pick a folder, ``layers`` (``ticked`` checked) and k; "Scan" emits ``scan_requested``."""

    scan_requested = Signal(object)

    def __init__(
        self,
        parent: QtWidgets.QWidget | None,
        layers: Sequence[str],
        ticked: Sequence[str],
        *,
        folder: str = "",
        k: int = DEFAULT_K,
    ) -> None:
        super().__init__(parent, windowTitle="Scan a dataset", minimumWidth=460)
        layout = QtWidgets.QVBoxLayout(self)
        intro = QtWidgets.QLabel(
            "Runs the model over every image of a folder (recursively) and keeps, for each "
            "channel of the layers ticked below, the images that excite it most. A folder "
            "scanned before with the same model shows its saved result at once; a cancelled "
            "scan resumes where it stopped.",
            wordWrap=True,
        )
        layout.addWidget(intro)
        form = QtWidgets.QFormLayout()
        row = QtWidgets.QHBoxLayout()
        hint = "a folder of images (an ImageFolder layout names classes)"
        self.folder_edit = QtWidgets.QLineEdit(folder, placeholderText=hint)
        self.browse_button = QtWidgets.QPushButton("Browse…")
        self.browse_button.clicked.connect(self._on_browse_clicked)
        row.addWidget(self.folder_edit, 1)
        row.addWidget(self.browse_button)
        form.addRow("Folder", row)
        tip = "Images kept per channel (the best k)"
        self.k_spin = QtWidgets.QSpinBox(minimum=1, maximum=MAX_K, value=int(k), toolTip=tip)
        form.addRow("Top k", self.k_spin)
        self.batch_spin = QtWidgets.QSpinBox(maximum=4096, specialValueText="auto")
        self.batch_spin.setToolTip("Images per batch; auto: chosen within the memory budget")
        form.addRow("Batch size", self.batch_spin)
        layout.addLayout(form)
        layout.addWidget(QtWidgets.QLabel("Layers"))
        self.layer_list = QtWidgets.QListWidget()
        self.set_layers(layers, ticked)
        layout.addWidget(self.layer_list, 1)
        self.message_label = style.caption_label(wrap=True)
        layout.addWidget(self.message_label)
        box = QtWidgets.QDialogButtonBox
        buttons = box(box.StandardButton.Cancel)
        self.scan_button = buttons.addButton("Scan", box.ButtonRole.AcceptRole)
        buttons.accepted.connect(self._on_scan_clicked)
        buttons.rejected.connect(self.reject)
        layout.addWidget(buttons)
        self.scan_button.setDefault(True)

    def set_layers(self, layers: Sequence[str], ticked: Sequence[str]) -> None:
        """List ``layers`` (the ``ticked`` ones first, checked), again when another model opens."""
        self.layer_list.clear()
        ticked_set = set(ticked)
        for name in sorted(layers, key=lambda n: n not in ticked_set):  # stable: ticked first
            item = QtWidgets.QListWidgetItem(name)
            item.setFlags(item.flags() | Qt.ItemFlag.ItemIsUserCheckable)
            self.layer_list.addItem(item)
        self.set_checked(ticked_set)

    def checked_layers(self) -> list[str]:
        """The checked layers, in list order (the window's ticked ones first)."""
        items = (self.layer_list.item(i) for i in range(self.layer_list.count()))
        return [it.text() for it in items if it.checkState() == Qt.CheckState.Checked]

    def set_checked(self, names: Sequence[str]) -> None:
        """Check exactly ``names``."""
        wanted, checked, unchecked = set(names), Qt.CheckState.Checked, Qt.CheckState.Unchecked
        for i in range(self.layer_list.count()):
            item = self.layer_list.item(i)
            item.setCheckState(checked if item.text() in wanted else unchecked)

    def spec(self) -> ScanSpec | str:
        """The :class:`ScanSpec` chosen, or why there is none (a sentence)."""
        if not (folder := self.folder_edit.text().strip()):
            return "Pick a folder of images to scan."
        if not Path(folder).expanduser().is_dir():
            return f"No folder at {folder}."
        if not (layers := self.checked_layers()):
            return "Tick at least one layer to scan."
        batch = self.batch_spin.value() or None
        return ScanSpec(str(Path(folder).expanduser()), tuple(layers), self.k_spin.value(), batch)

    def _on_browse_clicked(self) -> None:
        if folder := open_folder(self, "Folder of images", self.folder_edit.text()):
            self.folder_edit.setText(folder)

    def _on_scan_clicked(self) -> None:
        if isinstance(spec := self.spec(), str):
            self.message_label.setText(spec)
            return
        self.message_label.setText("")
        self.scan_requested.emit(spec)
        self.accept()
