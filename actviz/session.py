"""Session files in scripts: ``actviz.session.save(window, "study.actviz")`` and
``state = actviz.session.load("study.actviz")``.

A session file (``.actviz``) holds a whole investigation: how to open the model again (with
its checkpoint's SHA-256), the input itself, ticked layers, target, display settings, edits,
pins (with their captures), the comparison set-up, the scan's cache key, the window layout and
the current run's capture. It is a zip of JSON and ``.npz`` arrays, never a pickle. See
:mod:`actviz.workspace.session_file` for the format and :class:`SessionState` for its fields;
``actviz study.actviz`` opens one in the window, ``actviz report --session study.actviz``
turns one into an HTML report.
"""

from __future__ import annotations

import os
from typing import Any

from actviz.workspace.session_file import (
    ModelCheck,
    SessionFileError,
    SessionState,
    load_state,
    save_state,
    verify_model_source,
)

__all__ = ["ModelCheck", "SessionFileError", "SessionState", "load", "save", "verify_model_source"]


def _state_of(window_or_state: Any) -> SessionState:
    if isinstance(window_or_state, SessionState):
        return window_or_state
    # The window (or anything holding a session) says what it shows as a SessionState.
    owners = [
        window_or_state,
        getattr(window_or_state, "session", None),
        getattr(window_or_state, "session_store", None),  # the window's session files' part
    ]
    for owner in owners:
        make = getattr(owner, "session_state", None)
        if callable(make):
            state = make()
            if isinstance(state, SessionState):
                return state
    raise TypeError(
        f"cannot save a session from {type(window_or_state).__name__}: pass the window "
        "(actviz.explore(...)) or an actviz.session.SessionState"
    )


def save(
    window_or_state: Any, path: str | os.PathLike[str], *, pin_captures: bool = True
) -> list[str]:
    """Save a session file.

    Parameters
    ----------
    window_or_state
        The explorer window (anything with a ``session_state()`` method, or whose
        ``session`` has one) or a :class:`SessionState`.
    path
        The file to write (``.actviz``); replaced atomically.
    pin_captures
        Keep the pinned results' captures (False: a smaller file; pins keep their labels).

    Returns
    -------
    list of str
        What could not be saved (custom edits, patch edits without a saved source).

    Raises
    ------
    SessionFileError
        When the file cannot be written (an existing file is left as it was).
    """
    return save_state(_state_of(window_or_state), path, pin_captures=pin_captures)


def load(path: str | os.PathLike[str]) -> SessionState:
    """Read a session file into a :class:`SessionState`.

    Check a checkpoint model with :func:`verify_model_source` before opening it again.

    Raises
    ------
    SessionFileError
        One line: a damaged file, a newer format, a pickle or unknown member inside.
    """
    return load_state(path)
