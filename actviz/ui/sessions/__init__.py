"""Session files in the window: save, open, recent, reports, and the session kept on quit."""

from __future__ import annotations

from actviz.ui.sessions.feature import SessionsFeature
from actviz.ui.sessions.saving import autosave_path

__all__ = ["SessionsFeature", "autosave_path"]
