"""The Export everything dialog, where a folder may be typed that does not exist yet (the
export creates it), which a plain folder picker refuses."""

from __future__ import annotations

from pathlib import Path

from PySide6.QtWidgets import (
    QDialog,
    QDialogButtonBox,
    QFileDialog,
    QHBoxLayout,
    QLabel,
    QLineEdit,
    QPushButton,
    QVBoxLayout,
    QWidget,
)

__all__ = ["ExportFolderDialog", "ask_export_folder"]


class ExportFolderDialog(QDialog):
    """Where "Export everything" writes: a folder typed or browsed to (``start`` at first)."""

    def __init__(self, parent: QWidget | None = None, start: str = "") -> None:
        super().__init__(parent)
        self.setWindowTitle("Export everything — actviz")
        self.resize(520, 140)
        layout = QVBoxLayout(self)
        layout.addWidget(QLabel("Folder to write the pictures, arrays and summary.json into:"))
        row = QHBoxLayout()
        self.folder_edit = QLineEdit(start)
        self.folder_edit.setPlaceholderText("e.g. ~/actviz-export (created if missing)")
        self.folder_edit.textChanged.connect(self._on_text_changed)
        row.addWidget(self.folder_edit, 1)
        browse = QPushButton("Browse…")
        browse.clicked.connect(self._on_browse_clicked)
        row.addWidget(browse)
        layout.addLayout(row)
        self.note_label = QLabel("")
        self.note_label.setWordWrap(True)
        layout.addWidget(self.note_label)
        self.buttons = QDialogButtonBox(
            QDialogButtonBox.StandardButton.Save | QDialogButtonBox.StandardButton.Cancel
        )
        self.buttons.button(QDialogButtonBox.StandardButton.Save).setText("Export")
        self.buttons.accepted.connect(self.accept)
        self.buttons.rejected.connect(self.reject)
        layout.addWidget(self.buttons)
        self._on_text_changed(start)

    def folder(self) -> str:
        """The folder chosen, with ``~`` expanded ("" when none)."""
        text = self.folder_edit.text().strip()
        return str(Path(text).expanduser()) if text else ""

    def _on_text_changed(self, _text: str) -> None:
        folder = self.folder()
        path = Path(folder) if folder else None
        if path is None:
            note = ""
        elif path.is_dir():
            note = "Files already there with the same names are replaced."
        elif path.exists():
            note = "This is a file, not a folder."
        else:
            note = "This folder does not exist yet: it will be created."
        self.note_label.setText(note)
        ok = path is not None and not (path.exists() and not path.is_dir())
        self.buttons.button(QDialogButtonBox.StandardButton.Save).setEnabled(ok)

    def _on_browse_clicked(self) -> None:
        folder = QFileDialog.getExistingDirectory(self, "Export to folder", self.folder())
        if folder:
            self.folder_edit.setText(folder)


def ask_export_folder(parent: QWidget | None, start: str = "") -> str:
    """Ask where to export (a new folder is fine); "" when cancelled."""
    dialog = ExportFolderDialog(parent, start)
    if dialog.exec() != QDialog.DialogCode.Accepted:
        return ""
    return dialog.folder()
