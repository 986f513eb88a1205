"""Stand-ins for the window a ``host.FeatureJob`` works for (its host and a feature's view),
recording what they are told; the FeatureJob tests and the visualize page's job tests use them."""

from __future__ import annotations

from PySide6.QtCore import QObject

from actviz.ui.worker import Worker


class RecordingHost(QObject):
    """The part of the window a FeatureJob uses: its worker, refresh_busy, show_status."""

    def __init__(self) -> None:
        super().__init__()
        self.worker = Worker(self)
        self.statuses: list[str] = []
        self.shown: list[str] = []

    def refresh_busy(self, text: str = "") -> None:
        self.statuses.append(text)

    def show_status(self, text: str) -> None:
        self.shown.append(text)


class RecordingView:
    """The part of a feature's view a FeatureJob tells: busy, messages, progress."""

    def __init__(self) -> None:
        self.busy: list[bool] = []
        self.messages: list[tuple[str, bool]] = []
        self.steps: list[tuple[int, int]] = []

    def set_busy(self, busy: bool) -> None:
        self.busy.append(busy)

    def set_message(self, text: str, *, error: bool = False) -> None:
        self.messages.append((text, error))

    def set_progress(self, done: int, total: int) -> None:
        self.steps.append((done, total))
