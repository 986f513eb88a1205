"""Writing a file in one step: a temporary file beside it, renamed over it when complete (with
the mode a new or the replaced file would have), so a failed write leaves the old file."""

from __future__ import annotations

import contextlib
import os
import stat
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import IO, Any

from actviz.io.errors import WriteError

#: The umask assumed where the process's own cannot be read without changing it.
_DEFAULT_UMASK = 0o022


def user_cache_dir() -> Path:
    """``actviz`` under the platform's user cache directory (``XDG_CACHE_HOME`` first)."""
    if xdg := os.environ.get("XDG_CACHE_HOME"):
        base = Path(xdg)
    elif sys.platform == "darwin":
        base = Path.home() / "Library" / "Caches"
    elif sys.platform == "win32":
        base = Path(os.environ.get("LOCALAPPDATA", Path.home() / "AppData" / "Local"))
    else:
        base = Path.home() / ".cache"
    return base / "actviz"


def new_file_mode(path: str | os.PathLike[str]) -> int:
    """Permission bits for writing ``path``: its own if it exists, else ``0o666`` less the umask."""
    with contextlib.suppress(OSError):
        return stat.S_IMODE(os.stat(path).st_mode)
    umask = _DEFAULT_UMASK
    # Read from /proc: os.umask reads only by setting, racing with threads creating files.
    with contextlib.suppress(OSError, ValueError, IndexError):
        with open("/proc/self/status", encoding="ascii", errors="replace") as fh:
            umask = next((int(ln.split()[1], 8) for ln in fh if ln.startswith("Umask:")), umask)
    return 0o666 & ~umask


@contextlib.contextmanager
def atomic_write(
    path: str | os.PathLike[str], mode: str = "wb", encoding: str | None = None
) -> Iterator[IO[Any]]:
    """Yield a temporary file beside ``path``, renamed over it (with :func:`new_file_mode`) when the
    block succeeds, else removed; ``WriteError`` names ``path`` (a folder, missing, failed)."""
    path = Path(path)
    folder = path.parent if str(path.parent) else Path(".")
    if path.is_dir():
        raise WriteError(f"{path}: is a folder; give a file name")
    if not folder.is_dir():
        raise WriteError(f"{path}: the folder {folder} does not exist")
    try:
        fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=folder)
    except OSError as exc:
        # Said of the file asked for: the temporary file's name means nothing to the user.
        raise WriteError(f"{path}: cannot write in {folder} ({exc.strerror or exc})") from exc
    try:
        with os.fdopen(fd, mode, encoding=encoding) as fh:
            yield fh
        if os.name == "posix":
            os.chmod(tmp, new_file_mode(path))
        os.replace(tmp, path)
    except BaseException as exc:
        Path(tmp).unlink(missing_ok=True)
        if isinstance(exc, OSError) and not isinstance(exc, WriteError):
            raise WriteError(f"{path}: could not be written ({exc.strerror or exc})") from exc
        raise


def check_out_folder(path: str | os.PathLike[str]) -> Path:
    """Refuse (``WriteError``) an export folder that is an existing file."""
    path = Path(path)
    if path.exists() and not path.is_dir():
        raise WriteError(
            f"{path}: is a file; exports are written into a folder (give a new or an "
            "existing folder)"
        )
    # The nearest part of the path that exists must be a folder for the rest to be made.
    existing = next((p for p in path.parents if p.exists()), None)
    if existing is not None and not existing.is_dir():
        raise WriteError(f"{path}: {existing} is a file, not a folder")
    return path


def check_out_file(path: str | os.PathLike[str], example: str = "report.html") -> Path:
    """Refuse (``WriteError``) an output file that is a folder, suggesting ``example`` in it."""
    path = Path(path)
    if path.is_dir():
        raise WriteError(f"{path}: is a folder; give a file name, e.g. {path / example}")
    return path
