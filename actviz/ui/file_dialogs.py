"""Where file dialogs start: the folder last used, else home (not Qt's working folder)."""

from __future__ import annotations

from pathlib import Path

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


def start_path(name: str, preferred: str | Path | None = None) -> str:
    """A save dialog's starting file: ``name`` in :func:`start_folder` (unless absolute)."""
    return name if Path(name).is_absolute() else str(Path(start_folder(preferred)) / name)


def remember(path: str | Path | None) -> None:
    """The user chose ``path`` (a file or a folder) in a dialog: the next starts there."""
    global _last
    if not path:
        return
    chosen = Path(path).expanduser()
    _last = str(chosen if chosen.is_dir() else chosen.parent)


def forget() -> None:
    """Start the next dialog at home again (a test's fresh window)."""
    global _last
    _last = None
