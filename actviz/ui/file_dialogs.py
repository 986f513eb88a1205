"""File dialogs, and where they start: the folder last used, else home (not Qt's working
folder). Each returns the path chosen, "" when cancelled."""

from __future__ import annotations

from pathlib import Path

from PySide6.QtWidgets import QFileDialog, QWidget

_last: str | None = None


def start_folder(preferred: str | Path | None = None) -> str:
    """``preferred`` (or its folder) when it exists, else the folder last used, else home."""
    for candidate in (preferred, _last):
        if candidate:
            path = Path(candidate).expanduser()
            folder = path if path.is_dir() else path.parent
            if path.is_absolute() and folder.is_dir():
                return str(folder)
    return str(Path.home())


def remember(path: str) -> str:
    """The user chose ``path`` (a file or a folder) in a dialog: the next starts there."""
    global _last
    if path:
        chosen = Path(path).expanduser()
        _last = str(chosen if chosen.is_dir() else chosen.parent)
    return path


def open_file(parent: QWidget, title: str, filters: str, start: str | Path | None = None) -> str:
    """A file to open, the dialog at :func:`start_folder` (``start``)."""
    return remember(QFileDialog.getOpenFileName(parent, title, start_folder(start), filters)[0])


def save_file(parent: QWidget, title: str, name: str, filters: str) -> str:
    """A file to write, the dialog at ``name`` in :func:`start_folder` (unless absolute)."""
    start = name if Path(name).is_absolute() else str(Path(start_folder()) / name)
    return remember(QFileDialog.getSaveFileName(parent, title, start, filters)[0])


def open_folder(parent: QWidget, title: str, start: str | Path | None = None) -> str:
    """A folder, the dialog at :func:`start_folder` (``start``)."""
    return remember(QFileDialog.getExistingDirectory(parent, title, start_folder(start)))


def forget() -> None:
    """Start the next dialog at home again (a test's fresh window)."""
    global _last
    _last = None
