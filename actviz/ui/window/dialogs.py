"""Dialogs: open a model (open while it loads), trust untrusted code, and where Export
everything writes (a new folder is fine). Model lists are built once, off the GUI thread."""

from __future__ import annotations

import importlib.util
import logging
import threading
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from PySide6 import QtWidgets
from PySide6.QtCore import QObject, Qt, Signal
from PySide6.QtWidgets import QCompleter, QLabel, QLineEdit, QListWidgetItem, QMessageBox, QWidget

from actviz.ui.feature_job import show_line
from actviz.ui.file_dialogs import open_file, open_folder
from actviz.ui.window.settings import split_recent_model

log = logging.getLogger(__name__)

#: The row a model list shows while its names are being listed.
LOADING_TEXT = "loading model list…"

#: Model files the file picker shows first.
MODEL_FILE_FILTER = (
    "Model files (*.pt *.pth *.ckpt *.pt2 *.safetensors *.bin *.pkl *.ts *.torchscript);;"
    "All files (*)"
)
# Built on first use, on the GUI thread (its signal's receivers live there).
_MODEL_NAMES: _ModelNames | None = None


@dataclass
class ModelSpec:
    """What the user chose: a source for ``open_model`` plus its options."""

    source: str
    arch: str | None = None
    weights: str | None = "DEFAULT"


def confirm_untrusted_file(
    parent: QWidget | None, path: str, message: str, *, code: bool = False
) -> bool:
    """Ask before unpickling ``path`` (``code``: running a model's own code); True if trusted."""
    box = QMessageBox(parent, icon=QMessageBox.Icon.Warning, detailedText=message)
    box.setWindowTitle("Untrusted model code" if code else "Untrusted file")
    what = "the Python code that comes with it" if code else "code stored in it"
    box.setText(f"Opening {Path(path).name} would run {what}.")
    box.setInformativeText(
        "Only continue if you trust where this model came from. Its own modeling code "
        "(trust_remote_code) runs on this computer with your permissions."
        if code
        else "Only continue if you trust where this file came from. A pickle can execute "
        "arbitrary code on this computer when it is loaded."
    )
    trust = box.addButton("Trust and open", QMessageBox.ButtonRole.AcceptRole)
    box.addButton(QMessageBox.StandardButton.Cancel)
    box.setDefaultButton(QMessageBox.StandardButton.Cancel)
    box.exec()
    return box.clickedButton() is trust


def build_model_names() -> tuple[list[str], list[str]]:
    """The torchvision and timm model names, sorted (slow: see :func:`prefetch_model_names`)."""
    from actviz.io.models.hf_models import timm_names
    from actviz.io.models.zoo import torchvision_names

    return sorted(torchvision_names()), sorted(timm_names())


class _ModelNames(QObject):
    """The dialog's model names, built once per process off the GUI thread (``loaded`` then)."""

    loaded = Signal()

    def __init__(self) -> None:
        super().__init__()
        self.torchvision: list[str] = []
        self.timm: list[str] = []
        self._done = threading.Event()
        threading.Thread(target=self._build, name="actviz-model-names", daemon=True).start()

    def ready(self) -> bool:
        return self._done.is_set()

    def _build(self) -> None:
        try:
            self.torchvision, self.timm = build_model_names()
        except Exception:  # noqa: BLE001 - empty lists still leave the File tab usable
            log.exception("could not list the model names")
        self._done.set()
        self.loaded.emit()


def prefetch_model_names() -> None:
    """Start listing the Open model dialog's names in the background (once per process)."""
    global _MODEL_NAMES
    if _MODEL_NAMES is None:
        _MODEL_NAMES = _ModelNames()


class OpenModelDialog(QtWidgets.QDialog):
    """Choose a torchvision model, a model file (with an architecture), or a recent one.

    Parameters
    ----------
    recent
        Recent entries as stored by :class:`~actviz.ui.window.settings.AppSettings` (``source|arch``).
    names
        torchvision names to list (default: all, listed in the background).
    keep_open
        Open emits ``open_requested(ModelSpec)`` and waits for :meth:`opened` or
        :meth:`show_failure` instead of closing.

    Signals: ``open_requested(ModelSpec)`` (``keep_open`` only), ``names_loaded()``."""

    open_requested = Signal(object)
    names_loaded = Signal()

    def __init__(
        self,
        parent: QWidget | None = None,
        *,
        recent: list[str] | None = None,
        names: list[str] | None = None,
        keep_open: bool = False,
    ) -> None:
        super().__init__(parent)
        self.keep_open = keep_open
        self.setWindowTitle("Open model — actviz")
        self.resize(560, 520)
        self._given_names, self._names_ready = names, False
        self._names: list[str] = list(names) if names is not None else []
        layout = QtWidgets.QVBoxLayout(self)
        self.tabs = QtWidgets.QTabWidget()
        layout.addWidget(self.tabs, 1)
        zoo_names = ["demo", *self._names]
        self.zoo = _NameTab(self, "torchvision", "resnet, vit, mobilenet", zoo_names, names is None)

        file_tab = QWidget()
        form = QtWidgets.QFormLayout(file_tab)
        row = QtWidgets.QHBoxLayout()
        self.file_edit = QLineEdit(
            placeholderText="checkpoint, TorchScript, .pt2 or safetensors file; Hugging Face model folder; timm:NAME"
        )
        row.addWidget(self.file_edit, 1)
        browse = QtWidgets.QPushButton("Browse…")
        browse.clicked.connect(self._on_browse_clicked)
        row.addWidget(browse)
        form.addRow("File", row)
        self.arch_combo = QtWidgets.QComboBox(editable=True)
        self.arch_combo.addItem("")
        self.arch_combo.lineEdit().setPlaceholderText(
            "resnet18, timm:NAME or path/model.py:ClassName"
        )
        self._fill_arch_combo()
        form.addRow("Architecture", self.arch_combo)
        # Candidates for weights whose architecture is not certain (filled by show_failure).
        tip = "Architectures whose tensor names and shapes fit the weights"
        self.arch_list = QtWidgets.QListWidget(toolTip=tip, visible=False)
        self.arch_list.currentItemChanged.connect(self._on_candidate_changed)
        self.arch_list.itemDoubleClicked.connect(lambda _item: self.accept())
        form.addRow(self.arch_list)
        self.hint_label = QLabel(
            "A state_dict or safetensors file holds only weights: leave the architecture "
            "empty and actviz recognises it from the tensor names and shapes (asking here "
            "when unsure), or name it: a torchvision name or path/model.py:ClassName. "
            "TorchScript, .pt2 and whole pickled models need none."
        )
        self.hint_label.setWordWrap(True)
        form.addRow(self.hint_label)
        self.tabs.addTab(file_tab, "File")

        self.recent_list = QtWidgets.QListWidget()  # the Recent tab
        for entry in recent or []:
            source, arch = split_recent_model(entry)
            item = QListWidgetItem(f"{source}  (arch {arch})" if arch else source)
            item.setData(Qt.ItemDataRole.UserRole, (source, arch))
            self.recent_list.addItem(item)
        self.recent_list.itemDoubleClicked.connect(lambda _item: self.accept())
        self.tabs.addTab(self.recent_list, "Recent")
        if recent:
            self.tabs.setCurrentIndex(2)

        self.timm: _NameTab | None = None
        if importlib.util.find_spec("timm") is not None:
            self.timm = _NameTab(self, "timm", "convnext, vit_small, efficientnet", prefix="timm:")

        self._error_tab: int | None = None
        self.tabs.currentChanged.connect(self._on_tab_changed)
        self.message_label = QLabel("", wordWrap=True, visible=False)
        self.message_label.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        layout.addWidget(self.message_label)
        std = QtWidgets.QDialogButtonBox.StandardButton
        self.buttons = QtWidgets.QDialogButtonBox(std.Open | std.Cancel)
        self.buttons.accepted.connect(self.accept)
        self.buttons.rejected.connect(self.reject)
        layout.addWidget(self.buttons)
        self.open_button = self.buttons.button(std.Open)

        prefetch_model_names()
        source = _MODEL_NAMES
        assert source is not None
        # Connected before asking: names finished between the two would never be heard.
        source.loaded.connect(self._on_names_loaded)
        if source.ready():
            self._on_names_loaded()

    def accept(self) -> None:
        """Open: closes the dialog, or with ``keep_open`` asks for the load (see the class)."""
        if not self.keep_open:
            super().accept()
            return
        if (spec := self.spec()) is None:
            what = ("a model from the list", "a file", "a recent model", "a timm model")
            self._say(f"Choose {what[self.tabs.currentIndex()]} first.", error=True)
            return
        self.set_busy(True, f"Opening {Path(spec.source).name or spec.source}…")
        self.open_requested.emit(spec)

    def opened(self) -> None:
        """The model asked for opened: close the dialog as accepted."""
        self.set_busy(False)
        super().accept()

    def set_busy(self, busy: bool, text: str = "") -> None:
        """While a load runs: Open disabled and ``text`` shown (Cancel stays: it cancels)."""
        self.open_button.setEnabled(not busy)
        if text or busy:
            self._say(text, error=False)

    def show_failure(self, text: str, *, path: str = "", candidates: Sequence[Any] = ()) -> None:
        """Opening failed: say why, keep the path, list ``candidates`` (ArchGuess, best first)."""
        self.set_busy(False)
        if path:
            self.tabs.setCurrentIndex(1)
            self.file_edit.setText(path)
        self.arch_list.clear()
        for guess in candidates:  # each with its score and reason
            item = QListWidgetItem(f"{guess.name}  —  score {guess.score:.2f}: {guess.reason}")
            item.setData(Qt.ItemDataRole.UserRole, guess.name)
            item.setToolTip(guess.describe())
            self.arch_list.addItem(item)
        self.arch_list.setVisible(bool(candidates))
        if candidates or path:
            self.arch_combo.setEditText("")  # the one tried did not work, or none was named
            self.arch_combo.setFocus()
        self._say(text, error=True)

    def show_cancelled(self, text: str) -> None:
        """The load was cancelled elsewhere (Esc, Cancel): say so; Open works again."""
        self.set_busy(False)
        self._say(text, error=False)

    def candidates(self) -> list[str]:
        """The architectures listed to choose from."""
        listed = self.arch_list
        return [listed.item(i).data(Qt.ItemDataRole.UserRole) for i in range(listed.count())]

    def message(self) -> str:
        """The text under the tabs (the last failure, or what is being opened)."""
        return self.message_label.text() if self.message_label.isVisible() else ""

    def _say(self, text: str, *, error: bool) -> None:
        show_line(self.message_label, text, error=error)
        self._error_tab = self.tabs.currentIndex() if error and text else None

    def _on_tab_changed(self, index: int) -> None:
        # An error shows under the tab it was said on only.
        if self._error_tab is not None and self.message_label.text():
            self.message_label.setVisible(index == self._error_tab)

    def _on_candidate_changed(self, item: QListWidgetItem | None, _previous: object) -> None:
        if item is not None:
            self.arch_combo.setEditText(item.data(Qt.ItemDataRole.UserRole))

    def spec(self) -> ModelSpec | None:
        """The choice on the current tab, or None when nothing is chosen."""
        if isinstance(names := self.tabs.currentWidget(), _NameTab):
            return names.spec()
        if self.tabs.currentIndex() == 1:
            if not (path := self.file_edit.text().strip()):
                return None
            return ModelSpec(path, self.arch_combo.currentText().strip() or None)
        item = self.recent_list.currentItem()
        return ModelSpec(*item.data(Qt.ItemDataRole.UserRole)) if item is not None else None

    def names_ready(self) -> bool:
        """Whether the model lists are filled (see ``names_loaded``)."""
        return self._names_ready

    def _on_names_loaded(self) -> None:
        if self._names_ready or _MODEL_NAMES is None:
            return
        self._names_ready = True
        if self._given_names is None:
            self._names = list(_MODEL_NAMES.torchvision)
            self.zoo.refill(["demo", *self._names])
            self._fill_arch_combo()
        if self.timm is not None:
            self.timm.refill(_MODEL_NAMES.timm)
        self.names_loaded.emit()

    def _fill_arch_combo(self) -> None:
        text = self.arch_combo.currentText()
        while self.arch_combo.count() > 1:
            self.arch_combo.removeItem(1)
        self.arch_combo.addItems(self._names)
        self.arch_combo.setEditText(text)
        completer = QCompleter(self._names, self.arch_combo, filterMode=Qt.MatchFlag.MatchContains)
        completer.setCaseSensitivity(Qt.CaseSensitivity.CaseInsensitive)
        self.arch_combo.setCompleter(completer)

    def _on_browse_clicked(self) -> None:
        if path := open_file(self, "Open model file", MODEL_FILE_FILTER, self.file_edit.text()):
            self.file_edit.setText(path)


def _is_name(item: QListWidgetItem) -> bool:
    """Whether a list row is a model name (not the loading row)."""
    return bool(item.flags() & Qt.ItemFlag.ItemIsEnabled)


class _NameTab(QWidget):
    """A tab of model names: a search, the names it keeps (best first), a random-weights box;
    ``prefix`` turns a name into a source ("timm:")."""

    def __init__(
        self, dialog: OpenModelDialog, title: str, e_g: str, names=(), loading=True, prefix=""
    ) -> None:
        super().__init__()
        self.names, self.loading, self.prefix = list(names), loading, prefix
        self.search = QLineEdit(placeholderText=f"Search {title} models, e.g. {e_g}")
        self.search.setClearButtonEnabled(True)
        self.search.textChanged.connect(lambda _text: self.refill(select=True))
        self.list = QtWidgets.QListWidget()
        self.list.itemDoubleClicked.connect(lambda _item: dialog.accept())
        self.random_check = QtWidgets.QCheckBox("Random initialisation (no pretrained weights)")
        self.random_check.setToolTip(
            "Unchecked: pretrained weights when they are cached or downloadable; otherwise "
            "actviz falls back to random weights and says so in the banner."
        )
        layout = QtWidgets.QVBoxLayout(self)
        layout.addWidget(self.search)
        layout.addWidget(self.list, 1)
        layout.addWidget(self.random_check)
        dialog.tabs.addTab(self, title)
        self.refill()

    def refill(self, names: Sequence[str] | None = None, *, select: bool = False) -> None:
        """List the names containing the search's text, best first (then a row while loading);
        ``names``: listed at last; ``select`` (else with a search's text): the first."""
        from actviz.io.models.hf_models import rank_matches

        if names is not None:
            self.names, self.loading = list(names), False
        current = self.list.currentItem()
        kept = current.text() if current is not None and _is_name(current) else None
        shown = rank_matches(self.search.text(), self.names)
        self.list.clear()
        self.list.addItems(shown)
        if self.loading:
            row = QListWidgetItem(LOADING_TEXT)
            row.setFlags(Qt.ItemFlag.NoItemFlags)  # neither selectable nor a name
            self.list.addItem(row)
        if (select or self.search.text()) and shown:
            self.list.setCurrentRow(0)
        elif kept in shown:
            self.list.setCurrentRow(shown.index(kept))

    def listed(self) -> list[str]:
        """The names shown, best match first."""
        items = map(self.list.item, range(self.list.count()))
        return [item.text() for item in items if _is_name(item)]

    def spec(self) -> ModelSpec | None:
        """The selected name, or the only one the search kept (None: neither)."""
        item, listed = self.list.currentItem(), self.listed()
        if item is not None and _is_name(item):
            name = item.text()
        elif len(listed) == 1:
            name = listed[0]
        else:
            return None
        weights = None if self.random_check.isChecked() else "DEFAULT"
        return ModelSpec(self.prefix + name, None, weights)


class ExportFolderDialog(QtWidgets.QDialog):
    """Where "Export everything" writes: a folder typed or browsed to (``start`` at first)."""

    def __init__(self, parent: QWidget | None = None, start: str = "") -> None:
        super().__init__(parent)
        self.setWindowTitle("Export everything — actviz")
        self.resize(520, 140)
        layout = QtWidgets.QVBoxLayout(self)
        layout.addWidget(QLabel("Folder to write the pictures, arrays and summary.json into:"))
        row = QtWidgets.QHBoxLayout()
        self.folder_edit = QLineEdit(start)
        self.folder_edit.setPlaceholderText("e.g. ~/actviz-export (created if missing)")
        self.folder_edit.textChanged.connect(self._on_text_changed)
        row.addWidget(self.folder_edit, 1)
        browse = QtWidgets.QPushButton("Browse…")
        browse.clicked.connect(self._on_browse_clicked)
        row.addWidget(browse)
        layout.addLayout(row)
        self.note_label = QLabel("", wordWrap=True)
        layout.addWidget(self.note_label)
        std = QtWidgets.QDialogButtonBox.StandardButton
        self.buttons = QtWidgets.QDialogButtonBox(std.Save | std.Cancel)
        self.buttons.button(std.Save).setText("Export")
        self.buttons.accepted.connect(self.accept)
        self.buttons.rejected.connect(self.reject)
        layout.addWidget(self.buttons)
        self._on_text_changed(start)

    def folder(self) -> str:
        """The folder chosen, with ``~`` expanded ("" when none)."""
        text = self.folder_edit.text().strip()
        return str(Path(text).expanduser()) if text else ""

    def _on_text_changed(self, _text: str) -> None:
        path = Path(folder) if (folder := self.folder()) else None
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
        self.buttons.button(QtWidgets.QDialogButtonBox.StandardButton.Save).setEnabled(ok)

    def _on_browse_clicked(self) -> None:
        if folder := open_folder(self, "Export to folder", self.folder()):
            self.folder_edit.setText(folder)


def ask_export_folder(parent: QWidget | None, start: str = "") -> str:
    """Ask where to export (a new folder is fine); "" when cancelled."""
    dialog = ExportFolderDialog(parent, start)
    return dialog.folder() if dialog.exec() == QtWidgets.QDialog.DialogCode.Accepted else ""
