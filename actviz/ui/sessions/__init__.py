"""Session files in the window: File > Save session / Open session / Recent sessions, File >
Export report, and the session kept on quit (:class:`SessionsFeature`)."""

from __future__ import annotations

from actviz.ui.sessions.feature import SessionsFeature, autosave_path

__all__ = ["SessionsFeature", "autosave_path"]
