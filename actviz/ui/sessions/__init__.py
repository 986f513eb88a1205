"""Session files in the window: save, open, recent, reports, and the session kept on quit."""

from __future__ import annotations

from actviz.ui.sessions.autosave import autosave_path
from actviz.ui.sessions.feature import SessionsFeature

__all__ = ["SessionsFeature", "autosave_path"]
