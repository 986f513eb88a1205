"""What a live frame cost (:class:`FrameTiming`) and what the Live dock's read-outs say
(:class:`LiveStatus`), for :class:`~actviz.ui.live.playback.LiveController`."""

from __future__ import annotations

from dataclasses import dataclass

from actviz.workspace.budget import DEFAULT_MEMORY_BUDGET, fmt_bytes

__all__ = ["FrameTiming", "LiveStatus"]


@dataclass
class FrameTiming:
    """Where one live frame's time went (milliseconds)."""

    index: int = 0
    load_ms: float = 0.0  # reading the frame and perturbing it (worker)
    capture_ms: float = 0.0  # actviz.capture (worker)
    prepare_ms: float = 0.0  # display.prepare (worker)
    prepare_cpu_ms: float = 0.0  # display.prepare, the preparing thread's CPU time
    shown_ms: float = 0.0  # job end -> the window has put it on the panels (GUI)
    total_ms: float = 0.0  # submit -> shown


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
        """``"2.1 fps"`` while playing, ``"paused"`` for a paused sequence, else ``"still input"``:
        a rate measured while playing means nothing once it stopped."""
        if self.playing:
            return f"{self.fps:.1f} fps"
        return "paused" if self.sequence else "still input"

    def text(self) -> str:
        """e.g. ``"2.1 fps · capture 410 ms · prepare 55 ms · shown +20 ms · dropped 3"``,
        ``"paused · capture 410 ms · ..."`` when paused."""
        parts = [self.state_text()]
        if self.last is not None:
            t = self.last
            parts.append(f"capture {t.capture_ms:.0f} ms")
            parts.append(f"prepare {t.prepare_ms:.0f} ms")
            if t.load_ms >= 1:
                parts.append(f"load {t.load_ms:.0f} ms")
            parts.append(f"shown +{t.shown_ms:.0f} ms")
        parts.append(f"{self.frames} frames")
        if self.dropped:
            parts.append(f"dropped {self.dropped}")
        return " · ".join(parts)

    def memory_text(self) -> str:
        copy = f" · model copy {fmt_bytes(self.copy_bytes)}" if self.copy_bytes else ""
        return (
            f"held {fmt_bytes(self.held_bytes)} of {fmt_bytes(self.budget_bytes)} budget"
            f"{copy} · process {fmt_bytes(self.rss_bytes)}"
        )
