"""Session files in scripts: ``actviz.session.save(window, "study.actviz")`` and
``state = actviz.session.load("study.actviz")``.

A session file holds a whole investigation (model source with its SHA-256, input, settings,
edits, pins, layout, the current capture) as a zip of JSON and ``.npz``, never a pickle; see
:mod:`actviz.workspace.session_file`. ``actviz study.actviz`` opens one in the window,
``actviz report --session study.actviz`` makes a report of it.
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
    # The window (or anything holding a session) says what it shows as a SessionState;
    # actviz.explore()'s façade stands for its window.
    window_or_state = getattr(window_or_state, "_window", window_or_state)
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
