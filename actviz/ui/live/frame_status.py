"""What a live frame cost, what the Live dock's read-outs say, and how often they change."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from PySide6.QtCore import QObject, QTimer

from actviz.core.capture import format_bytes
from actviz.workspace.budget import DEFAULT_MEMORY_BUDGET

#: Least time between two changes of a spaced read-out while playing (seconds).
READOUT_INTERVAL_S = 0.25


@dataclass
class FrameTiming:
    """Where one live frame's time went (milliseconds)."""

    index: int = 0
    load_ms: float = 0.0  # reading the frame and perturbing it (worker)
    capture_ms: float = 0.0  # actviz.capture (worker)
    prepare_ms: float = 0.0  # display.prepare (worker)
    prepare_cpu_ms: float = 0.0  # display.prepare, the preparing thread's CPU time
    shown_ms: float = 0.0  # job end -> the window has put it on the panels (GUI)


@dataclass
class LiveStatus:
    """What the controls display."""

    fps: float = 0.0
    frames: int = 0
    dropped: int = 0
    last: FrameTiming | None = None
    held_bytes: int = 0
    copy_bytes: int = 0  # the model's copy for a second capture lane (0: none)
    rss_bytes: int | None = None
    budget_bytes: int = DEFAULT_MEMORY_BUDGET
    playing: bool = False
    sequence: bool = False  # the source has several frames (it can play or be paused)

    def state_text(self) -> str:
        """``"2.1 fps"`` while playing, else ``"paused"`` or ``"still input"`` (no stale rate)."""
        if self.playing:
            return f"{self.fps:.1f} fps"
        return "paused" if self.sequence else "still input"

    def text(self) -> str:
        """e.g. ``"2.1 fps · capture 410 ms · prepare 55 ms · shown +20 ms · dropped 3"``,
        ``"paused · capture 410 ms · ..."`` when paused."""
        parts = [self.state_text()]
        if self.last is not None:
            t = self.last
            parts += [f"capture {t.capture_ms:.0f} ms", f"prepare {t.prepare_ms:.0f} ms"]
            if t.load_ms >= 1:
                parts.append(f"load {t.load_ms:.0f} ms")
            parts.append(f"shown +{t.shown_ms:.0f} ms")
        parts.append(f"{self.frames} frames")
        if self.dropped:
            parts.append(f"dropped {self.dropped}")
        return " · ".join(parts)

    def memory_text(self) -> str:
        copy = f" · model copy {format_bytes(self.copy_bytes)}" if self.copy_bytes else ""
        return (
            f"held {format_bytes(self.held_bytes)} of {format_bytes(self.budget_bytes)} budget"
            f"{copy} · process {format_bytes(self.rss_bytes)}"
        )


class SpacedReadout(QObject):
    """Calls ``show(*args)`` with the last arguments offered: at once unless ``player`` plays,
    else at most every ``interval_s`` (per-frame numbers cannot be read), the last one always."""

    def __init__(
        self,
        show: Callable[..., None],
        player: Any,
        parent: QObject | None = None,
        *,
        interval_s: float = READOUT_INTERVAL_S,
    ) -> None:
        super().__init__(parent)
        self._show, self._player, self.interval_s = show, player, interval_s
        self._pending: tuple[Any, ...] | None = None
        self._at = -1e9  # when it last showed something
        self._timer = QTimer(self, singleShot=True)
        self._timer.timeout.connect(self.flush)
        player.playing_changed.connect(self._on_playing_changed)

    def offer(self, *args: Any) -> None:
        """Show ``args`` now, or when the interval is over (replacing any waiting)."""
        now, self._pending = time.perf_counter(), args
        if not self._player.playing or now - self._at >= self.interval_s:
            self.flush()
        elif not self._timer.isActive():
            self._timer.start(max(1, int((self._at + self.interval_s - now) * 1000) + 1))

    def flush(self) -> None:
        """Show what waits now (nothing when nothing does)."""
        self._timer.stop()
        if self._pending is not None:
            args, self._pending = self._pending, None
            self._at = time.perf_counter()
            self._show(*args)

    def _on_playing_changed(self, playing: bool) -> None:
        if not playing:
            self.flush()

    @property
    def waiting(self) -> bool:
        """Whether something offered is not shown yet."""
        return self._pending is not None
