"""Dialogs: open a model (searchable torchvision list, file + architecture, recents) and the
explicit confirmation before an untrusted pickle is unpickled."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from PySide6.QtCore import Qt
from PySide6.QtWidgets import (
    QCheckBox,
    QComboBox,
    QCompleter,
    QDialog,
    QDialogButtonBox,
    QFileDialog,
    QFormLayout,
    QHBoxLayout,
    QLabel,
    QLineEdit,
    QListWidget,
    QListWidgetItem,
    QMessageBox,
    QPushButton,
    QTabWidget,
    QVBoxLayout,
    QWidget,
)

from actviz.ui.window.settings import split_recent_model

#: Model files the file picker shows first.
MODEL_FILE_FILTER = (
    "Model files (*.pt *.pth *.ckpt *.pt2 *.safetensors *.bin *.pkl *.ts *.torchscript);;"
    "All files (*)"
)


@dataclass
class ModelSpec:
    """What the user chose: a source for ``open_model`` plus its options."""

    source: str
    arch: str | None = None
    weights: str | None = "DEFAULT"


def confirm_untrusted_file(parent: QWidget | None, path: str, message: str) -> bool:
    """Ask before unpickling ``path``; the safe answer (No) is the default.

    Returns
    -------
    bool
        True only when the user explicitly chose to trust the file.
    """
    box = QMessageBox(parent)
    box.setIcon(QMessageBox.Icon.Warning)
    box.setWindowTitle("Untrusted file")
    box.setText(f"Opening {Path(path).name} would run code stored in it.")
    box.setInformativeText(
        "Only continue if you trust where this file came from. A pickle can execute "
        "arbitrary code on this computer when it is loaded."
    )
    box.setDetailedText(message)
    trust = box.addButton("Trust and open", QMessageBox.ButtonRole.AcceptRole)
    box.addButton(QMessageBox.StandardButton.Cancel)
    box.setDefaultButton(QMessageBox.StandardButton.Cancel)
    box.exec()
    return box.clickedButton() is trust


def torchvision_model_names() -> list[str]:
    """Every torchvision model name (no weights are touched)."""
    try:
        from actviz.io.zoo import torchvision_names

        return sorted(torchvision_names())
    except Exception:  # noqa: BLE001 - an empty list still leaves the file tab usable
        return []


class OpenModelDialog(QDialog):
    """Choose a torchvision model, a model file (with an architecture), or a recent one.

    Parameters
    ----------
    parent
        Parent window.
    recent
        Recent entries as stored by :class:`~actviz.ui.window.settings.AppSettings` (``source|arch``).
    names
        torchvision names to list (default: all of them).
    """

    def __init__(
        self,
        parent: QWidget | None = None,
        *,
        recent: list[str] | None = None,
        names: list[str] | None = None,
    ) -> None:
        super().__init__(parent)
        self.setWindowTitle("Open model — actviz")
        self.resize(560, 520)
        self._names = names if names is not None else torchvision_model_names()
        layout = QVBoxLayout(self)
        self.tabs = QTabWidget()
        layout.addWidget(self.tabs, 1)

        # torchvision list
        zoo = QWidget()
        zoo_layout = QVBoxLayout(zoo)
        self.search_edit = QLineEdit()
        self.search_edit.setPlaceholderText(
            "Search torchvision models, e.g. resnet, vit, mobilenet"
        )
        self.search_edit.setClearButtonEnabled(True)
        self.search_edit.textChanged.connect(self._on_search_changed)
        zoo_layout.addWidget(self.search_edit)
        self.zoo_list = QListWidget()
        self.zoo_list.addItem("demo")
        self.zoo_list.addItems(self._names)
        self.zoo_list.itemDoubleClicked.connect(lambda _item: self.accept())
        zoo_layout.addWidget(self.zoo_list, 1)
        self.random_check = QCheckBox("Random initialisation (no pretrained weights)")
        self.random_check.setToolTip(
            "Unchecked: pretrained weights when they are cached or downloadable; otherwise "
            "actviz falls back to random weights and says so in the banner."
        )
        zoo_layout.addWidget(self.random_check)
        self.tabs.addTab(zoo, "torchvision")

        # file + architecture
        file_tab = QWidget()
        form = QFormLayout(file_tab)
        row = QHBoxLayout()
        self.file_edit = QLineEdit()
        self.file_edit.setPlaceholderText("checkpoint, TorchScript, .pt2 or safetensors file")
        row.addWidget(self.file_edit, 1)
        browse = QPushButton("Browse…")
        browse.clicked.connect(self._on_browse_clicked)
        row.addWidget(browse)
        form.addRow("File", row)
        self.arch_combo = QComboBox()
        self.arch_combo.setEditable(True)
        self.arch_combo.addItem("")
        self.arch_combo.addItems(self._names)
        self.arch_combo.setCurrentIndex(0)
        self.arch_combo.lineEdit().setPlaceholderText("resnet18 or path/model.py:ClassName")
        completer = QCompleter(self._names, self.arch_combo)
        completer.setFilterMode(Qt.MatchFlag.MatchContains)
        completer.setCaseSensitivity(Qt.CaseSensitivity.CaseInsensitive)
        self.arch_combo.setCompleter(completer)
        form.addRow("Architecture", self.arch_combo)
        hint = QLabel(
            "A state_dict or safetensors file holds only weights: name the architecture they "
            "belong to. TorchScript, .pt2 and whole pickled models need none."
        )
        hint.setWordWrap(True)
        form.addRow(hint)
        self.tabs.addTab(file_tab, "File")

        # recent
        recent_tab = QWidget()
        recent_layout = QVBoxLayout(recent_tab)
        self.recent_list = QListWidget()
        for entry in recent or []:
            source, arch = split_recent_model(entry)
            item = QListWidgetItem(f"{source}  (arch {arch})" if arch else source)
            item.setData(Qt.ItemDataRole.UserRole, (source, arch))
            self.recent_list.addItem(item)
        self.recent_list.itemDoubleClicked.connect(lambda _item: self.accept())
        recent_layout.addWidget(self.recent_list)
        self.tabs.addTab(recent_tab, "Recent")
        if recent:
            self.tabs.setCurrentIndex(2)

        buttons = QDialogButtonBox(
            QDialogButtonBox.StandardButton.Open | QDialogButtonBox.StandardButton.Cancel
        )
        buttons.accepted.connect(self.accept)
        buttons.rejected.connect(self.reject)
        layout.addWidget(buttons)

    def visible_names(self) -> list[str]:
        """Names in the torchvision list that the search keeps."""
        return [
            self.zoo_list.item(i).text()
            for i in range(self.zoo_list.count())
            if not self.zoo_list.item(i).isHidden()
        ]

    def spec(self) -> ModelSpec | None:
        """The choice on the current tab, or None when nothing is chosen."""
        tab = self.tabs.currentIndex()
        if tab == 0:
            item = self.zoo_list.currentItem()
            if item is None or item.isHidden():
                visible = self.visible_names()
                if len(visible) != 1:
                    return None
                name = visible[0]
            else:
                name = item.text()
            return ModelSpec(name, None, None if self.random_check.isChecked() else "DEFAULT")
        if tab == 1:
            path = self.file_edit.text().strip()
            if not path:
                return None
            arch = self.arch_combo.currentText().strip() or None
            return ModelSpec(path, arch)
        item = self.recent_list.currentItem()
        if item is None:
            return None
        source, arch = item.data(Qt.ItemDataRole.UserRole)
        return ModelSpec(source, arch)

    def _on_search_changed(self, text: str) -> None:
        key = text.strip().lower()
        first = None
        for i in range(self.zoo_list.count()):
            item = self.zoo_list.item(i)
            hidden = bool(key) and key not in item.text().lower()
            item.setHidden(hidden)
            if not hidden and first is None:
                first = item
        if first is not None:
            self.zoo_list.setCurrentItem(first)

    def _on_browse_clicked(self) -> None:
        path, _ = QFileDialog.getOpenFileName(self, "Open model file", "", MODEL_FILE_FILTER)
        if path:
            self.file_edit.setText(path)
