"""Persistent view settings (QSettings): colormap, normalisation, gradients, geometry, recents."""

from __future__ import annotations

from functools import partialmethod

from PySide6.QtCore import QByteArray, QCoreApplication, QSettings

ORGANIZATION = "actviz"
APPLICATION = "actviz"
DEFAULT_COLORMAP = "auto"  # one map per layer: actviz.display.colormaps.resolve
NORMALIZATIONS = ("channel", "shared")
MAX_RECENT = 10


def ensure_app_identity() -> None:
    """Name the application so ``QSettings()`` lands in an actviz-specific location."""
    if not QCoreApplication.organizationName():
        QCoreApplication.setOrganizationName(ORGANIZATION)
    if not QCoreApplication.applicationName():
        QCoreApplication.setApplicationName(APPLICATION)


def user_settings() -> QSettings:
    """The user's actviz settings, named explicitly (``QSettings()`` would follow ``argv[0]``)."""
    return QSettings(
        QSettings.defaultFormat(), QSettings.Scope.UserScope, ORGANIZATION, APPLICATION
    )


def _flag(key: str) -> property:
    """A bool setting, on by default (INI stores bools as the strings "true"/"false")."""

    def get(self: AppSettings) -> bool:
        v = self.store.value(key, True)
        return bool(v.strip().lower() in ("1", "true", "yes", "on") if isinstance(v, str) else v)

    return property(get, lambda self, on: self.store.setValue(key, bool(on)))


def _text(key: str, default: str, choices: tuple[str, ...] = (), what: str = "") -> property:
    """A text setting (``choices``: its only values; another stored reads as ``default``)."""

    def get(self: AppSettings) -> str:
        value = str(self.store.value(key, default) or default)
        return value if not choices or value in choices else default

    def put(self: AppSettings, value: str) -> None:
        if choices and value not in choices:
            raise ValueError(f"{what} must be one of {choices}, not {value!r}")
        self.store.setValue(key, value)

    return property(get, put)


def _bytes(key: str) -> property:
    """A ``QByteArray`` setting (None when unset)."""

    def get(self: AppSettings) -> QByteArray | None:
        value = self.store.value(key)
        return value if isinstance(value, QByteArray) and not value.isEmpty() else None

    return property(get, lambda self, data: self.store.setValue(key, data))


class AppSettings:
    """Typed accessors over a ``QSettings`` store (None: :func:`user_settings`)."""

    def __init__(self, store: QSettings | None = None) -> None:
        if store is None:
            ensure_app_identity()
            store = user_settings()
        self.store = store

    #: The colour map ("auto" when unset); the normalisation, one of :data:`NORMALIZATIONS`.
    colormap = _text("view/colormap", DEFAULT_COLORMAP)
    normalize = _text("view/normalize", NORMALIZATIONS[0], NORMALIZATIONS, "normalisation")
    show_gradients = _flag("view/show_gradients")
    geometry = _bytes("window/geometry")
    window_state = _bytes("window/state")
    #: Whether a start offers the session kept on quit (default on).
    restore_on_start = _flag("sessions/restore_on_start")

    def _list(self, key: str) -> list[str]:
        value = self.store.value(key, []) or []
        # QSettings collapses one-element lists to a string (INI).
        return [value] if isinstance(value, str) else [str(v) for v in value if v]

    def _push(self, key: str, item: str) -> None:
        self.store.setValue(key, ([item] + [v for v in self._list(key) if v != item])[:MAX_RECENT])

    #: Most recent first: model sources as typed (zoo names or file paths), input files and
    #: session files opened or saved.
    recent_models = partialmethod(_list, "recent/models")
    recent_inputs = partialmethod(_list, "recent/inputs")
    recent_sessions = partialmethod(_list, "recent/sessions")
    #: Remember an input file, a session file.
    add_recent_input = partialmethod(_push, "recent/inputs")
    add_recent_session = partialmethod(_push, "recent/sessions")

    def add_recent_model(self, source: str, arch: str | None = None) -> None:
        """Remember a model source; ``arch`` is kept as ``source|arch`` so reopening restores it."""
        self._push("recent/models", f"{source}|{arch}" if arch else source)

    def sync(self) -> None:
        """Flush to disk."""
        self.store.sync()


def split_recent_model(entry: str) -> tuple[str, str | None]:
    """Split a recent-model entry ``source|arch`` back into ``(source, arch)``."""
    source, sep, arch = entry.rpartition("|")
    return (source, arch or None) if sep else (entry, None)
