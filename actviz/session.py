"""Session files in scripts: ``actviz.session.save(window, "study.actviz")`` and
``actviz.session.load("study.actviz")``; a zip of JSON and ``.npz``, never a pickle."""

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
    # actviz.explore()'s façade stands for its window; session_store is its session files' part.
    window = getattr(window_or_state, "_window", window_or_state)
    for owner in (window, getattr(window, "session", None), getattr(window, "session_store", None)):
        if callable(make := getattr(owner, "session_state", None)):
            if isinstance(state := make(), SessionState):
                return state
    raise TypeError(
        f"cannot save a session from {type(window).__name__}: pass the window "
        "(actviz.explore(...)) or an actviz.session.SessionState"
    )


def save(
    window_or_state: Any, path: str | os.PathLike[str], *, pin_captures: bool = True
) -> list[str]:
    """Save a window's session (or a :class:`SessionState`) to ``path``, atomically;
    ``pin_captures`` False keeps pins without their captures. Returns what could not be saved;
    raises ``SessionFileError`` when the file cannot be written."""
    return save_state(_state_of(window_or_state), path, pin_captures=pin_captures)


def load(path: str | os.PathLike[str]) -> SessionState:
    """Read a session file into a :class:`SessionState` (check a checkpoint model with
    :func:`verify_model_source` before reopening it); ``SessionFileError`` for a bad file."""
    return load_state(path)
