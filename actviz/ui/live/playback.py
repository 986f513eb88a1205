"""Live mode's controller and its read-outs: play frame sequences and perturb the input, the
panels following each frame as they follow a run. A frame never replaces the opened input;
docs/architecture.md ("Live mode") explains the pipeline, lanes and coalescing."""

from __future__ import annotations

import contextlib
import dataclasses
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from PySide6.QtCore import QObject, QTimer, Signal

from actviz.core.capture import format_bytes
from actviz.ui.host import WindowHost
from actviz.ui.live import frames
from actviz.ui.live.frame_runner import FrameLanes, FrameRunner, FrameSpec, FrameTiming
from actviz.ui.live.frames import WebcamSource, webcam_status
from actviz.ui.live.perturbation import Perturbation
from actviz.ui.panels.style import READOUT_INTERVAL_S
from actviz.workspace.budget import DEFAULT_MEMORY_BUDGET, default_budget, rss_bytes

log = logging.getLogger(__name__)

DEFAULT_MAX_FPS = 60.0
#: Least time between two changes of a spaced read-out while playing (seconds).
SPACED_READOUT_S = 0.25


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
        if (t := self.last) is not None:
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
        interval_s: float = SPACED_READOUT_S,
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


class PlayClock:
    """Calls ``tick()`` every ``interval_ms``, held while frames in flight leave no room (a
    tick would only replace the waiting one); resuming skips the ticks missed (as dropped)."""

    def __init__(self, parent: QObject, tick: Callable[[], None]) -> None:
        self._timer = QTimer(parent)
        self._timer.timeout.connect(tick)
        self._interval_ms = 1
        self._held_at: float | None = None

    @property
    def running(self) -> bool:
        """Whether it ticks, or is held (it ticks again when resumed)."""
        return self._timer.isActive() or self._held_at is not None

    @property
    def held(self) -> bool:
        return self._held_at is not None

    def start(self, interval_ms: int) -> None:
        self._held_at, self._interval_ms = None, max(1, int(interval_ms))
        self._timer.start(self._interval_ms)

    def stop(self) -> None:
        self._held_at = None
        self._timer.stop()

    def set_interval(self, interval_ms: int) -> None:
        self._interval_ms = max(1, int(interval_ms))
        if self._timer.isActive():
            self._timer.setInterval(self._interval_ms)

    def hold(self) -> None:
        """Stop ticking until :meth:`resume` (no-op when stopped or held already)."""
        if self._timer.isActive():
            self._timer.stop()
            self._held_at = time.perf_counter()

    def resume(self) -> int:
        """Tick again; returns how many ticks would have fired while held (0: not held)."""
        if self._held_at is None:
            return 0
        missed = int((time.perf_counter() - self._held_at) * 1000.0 / self._interval_ms)
        self._held_at = None
        self._timer.start(self._interval_ms)
        return missed


class LiveController(QObject):
    """Drives live frames through the worker and panels of the window's ``host``.

    ``max_fps``: the most frames started per second (and so repaints). ``capture_threads``:
    torch threads while capturing; None: two lanes at half the worker's count each while a
    sequence plays, else the worker's count; a number: one lane of it. ``memory_budget``: bytes
    one capture may hold; larger selections are refused with a message."""

    #: A :class:`LiveStatus` after every shown frame, and when the state changes.
    status_changed = Signal(object)
    frame_changed = Signal(int, int, str)  #: Index, frame count and label of the frame now shown.
    #: The shown frame's picture as the model received it (what the perturbation pad shows).
    input_image_changed = Signal(object)
    playing_changed = Signal(bool)
    speed_changed = Signal(float)  #: The playback speed (frames per second) was set.
    #: A description of the new source ("" when back to the still input).
    source_changed = Signal(str)
    message = Signal(str)  #: A refusal or error for the controls ("" clears).

    def __init__(
        self,
        host: WindowHost,
        *,
        max_fps: float = DEFAULT_MAX_FPS,
        capture_threads: int | None = None,
        memory_budget: int | None = None,
        parent: QObject | None = None,
    ) -> None:
        super().__init__(parent if parent is not None else host)  # type: ignore[arg-type]
        self.host, self.worker, self.capture_threads = host, host.worker, capture_threads
        self.memory_budget = memory_budget if memory_budget is not None else default_budget()
        self.host.session.set_memory_budget(self.memory_budget)
        self.source: frames.FrameSource | None = None
        self.perturbation = Perturbation()
        self.player = frames.Player()
        self.coalescer = frames.Coalescer(1.0 / max_fps)
        self.rate = frames.RateMeter()
        self.frames_shown = 0
        self.last_timing: FrameTiming | None = None
        self.timings: list[FrameTiming] = []  # the last few hundred, for benchmarks
        self.lanes = FrameLanes(host.private_model(self, keep=True))
        self._status_at = -1.0
        #: Frames shown so far: only the last one's display pass announces it (_announce).
        self._announced = 0
        self.closed = False
        self._webcam: WebcamSource | None = None

        self._clock = PlayClock(self, self._on_play_timer)
        #: Submits the frames and follows their jobs (:mod:`actviz.ui.live.frame_runner`).
        self.runner = FrameRunner(self)

        host.run_started.connect(self._on_window_run_started)
        host.pinned_shown.connect(self.pause)  # the next frame would replace it at once
        host.closed.connect(self.shutdown)
        host.session.input_changed.connect(self._on_session_input_changed)
        host.session.model_changed.connect(self._on_session_model_changed)
        # The dock's memory line says what the session holds: a run or a pin changes it.
        host.session.result_changed.connect(self._on_session_result_changed)
        host.session.pins_changed.connect(self._on_session_result_changed)

    @property
    def engaged(self) -> bool:
        """Whether live frames replace the window's own runs (a sequence, or a perturbation)."""
        return not self.closed and (
            (self.source is not None and not isinstance(self.source, frames.StillFrame))
            or not self.perturbation.is_identity()
        )

    @property
    def playing(self) -> bool:
        return self.player.playing

    @property
    def idle(self) -> bool:
        """Nothing in flight or waiting, and the last frame fully on screen."""
        busy = self.coalescer.busy or self.coalescer.has_pending or self.runner.inflight
        return not busy and not self.host.display_pending()

    def set_max_fps(self, fps: float) -> None:
        self.coalescer.min_interval_s = 1.0 / max(fps, 0.1)

    def set_memory_budget(self, nbytes: int) -> None:
        if nbytes <= 0:
            raise ValueError("the memory budget must be positive")
        self.memory_budget = int(nbytes)
        # Ordinary runs (Run, Ctrl+R, re-runs after a tick) obey the same budget.
        self.host.session.set_memory_budget(self.memory_budget)
        self.emit_status()

    def status(self) -> LiveStatus:
        return LiveStatus(
            fps=self.rate.rate(),
            frames=self.frames_shown,
            dropped=self.coalescer.dropped,
            last=self.last_timing,
            held_bytes=self.host.session.held_bytes(),  # pinned results included
            copy_bytes=self.lanes.replica.nbytes if self.lanes.replica is not None else 0,
            rss_bytes=rss_bytes(),
            budget_bytes=self.memory_budget,
            playing=self.player.playing,
            sequence=(self.source is not None and len(self.source) > 1) or self._webcam is not None,
        )

    def set_source(self, source: frames.FrameSource | None) -> None:
        """Play ``source`` (None: back to the window's own input)."""
        self.pause()
        self._stop_webcam()
        if source is None:
            self.lanes.drop()  # back to the still input: no sequence to play on two lanes
        self.source = source
        self.player.set_length(len(source) if source is not None else 1)
        self.player.seek(0)
        self.rate.reset()
        self.coalescer.clear()
        self.source_changed.emit(source.describe() if source is not None else "")
        self.message.emit("")
        if source is not None:
            self.request(0)
        elif (inp := self.host.session.input) is not None and self.host.session.can_run():
            # Back to the opened input's own frame, not the sequence's last (a run of the
            # window's own shows no picture: the Input panel is given the opened input's).
            if self.perturbation.is_identity():
                self.host.show_input_image(inp.image, inp.caption)
                self.host.run()
            else:
                self.request(0)
        self.emit_status()

    def _play_new(self, make: Callable[[], Any], failed: str) -> Any:
        """Play ``make()`` and return it; None, and ``failed`` + the error said, if it raises."""
        try:
            source = make()
        except Exception as exc:  # noqa: BLE001 - InputError, ValueError, a camera: shown
            self.message.emit(f"{failed}{exc}")
            return None
        self.set_source(source)
        return source

    def open_folder(self, folder: str | Path) -> bool:
        """Play the images of ``folder``; False (and a message) when it holds none."""
        s = self.host.session
        make = lambda: frames.ImageFolder(folder, s.model, s.loaded_model)  # noqa: E731
        return self._play_new(make, "") is not None

    def open_tensor_file(self, path: str | Path) -> bool:
        """Play the frames of a ``(T, C, H, W)`` tensor file; False (and a message) if not one."""
        make = lambda: frames.TensorFrames.from_file(path, self.host.session.model)  # noqa: E731
        return self._play_new(make, f"Could not open {Path(path).name} as frames: ") is not None

    def open_webcam(self) -> bool:
        """Use the camera; False (and the reason) where QtMultimedia or a camera is missing."""
        ok, why = webcam_status()
        if not ok:
            self.message.emit(why)
            return False
        s = self.host.session
        self._webcam = cam = self._play_new(
            lambda: WebcamSource(s.model, s.loaded_model), "webcam: "
        )
        if cam is None:
            return False
        cam.listeners.append(lambda: self.request(0) if self.player.playing else None)
        cam.start()
        self.player.playing = True  # a camera is always "playing" while it is the source
        self.playing_changed.emit(True)
        return True

    def _stop_webcam(self) -> None:
        if self._webcam is not None:
            self._webcam.stop()
            self._webcam = None

    def _on_session_input_changed(self) -> None:
        if self.source is None or isinstance(self.source, frames.StillFrame):
            self.source = None  # rebuilt from the new input on the next request

    def _on_session_result_changed(self, *_args: object) -> None:
        if not self.player.playing:  # while playing, every shown frame reports (spaced)
            self.emit_status()

    def _on_session_model_changed(self) -> None:
        # Frames were prepared for the old model (size, transforms): back to the still input.
        self.pause()
        self.lanes.drop(forget_refusal=True)
        self._stop_webcam()
        self.coalescer.clear()
        if self.source is not None:
            self.source = None
            self.player.set_length(1)
            self.source_changed.emit("")
        # The read-outs measured the old model: they start over with the new one.
        self.frames_shown, self.last_timing, self.coalescer.dropped = 0, None, 0
        self.rate.reset()
        self.emit_status()

    def play(self) -> None:
        if self.source is None or len(self.source) < 2:
            return
        self.player.play()
        self.rate.reset()
        self._clock.start(self.player.interval_ms)
        self.playing_changed.emit(True)
        self.emit_status()

    def pause(self) -> None:
        was = self.player.playing
        self.player.pause()
        self._clock.stop()
        if was:
            self.playing_changed.emit(False)
            self.emit_status()

    def toggle(self) -> None:
        (self.pause if self.player.playing else self.play)()

    def step(self, delta: int = 1) -> None:
        """Show the frame ``delta`` away (pauses playback)."""
        self.pause()
        self.request(self.player.step(delta))

    def seek(self, index: int) -> None:
        self._clock.resume()  # held: play on from this frame, not by the ticks held over
        self.request(self.player.seek(index))

    def set_speed(self, fps: float) -> None:
        """Playback speed in frames per second (frames the model cannot keep up with drop)."""
        self.player.set_fps(fps)
        self._clock.set_interval(self.player.interval_ms)
        self.speed_changed.emit(float(self.player.fps))

    def set_loop(self, loop: bool) -> None:
        self.player.loop = bool(loop)

    def _on_play_timer(self, steps: int = 1, *, pump: bool = True) -> None:
        index, moved, ended = None, 0, False
        for _ in range(steps):  # more than one: the ticks held over (PlayClock)
            if (step := self.player.advance()) is None:
                ended = True  # the end of a sequence played once (the last frame offered)
                break
            index, moved = step, moved + 1
        if self._webcam is None and index is not None and not self.closed:
            self.coalescer.offer(FrameSpec(index, self.perturbation))
            self.coalescer.dropped += moved - 1  # each would have replaced the waiting frame
            if pump:
                self.runner.pump()
            if self.coalescer.busy and not ended:  # no room: ticks would only replace it
                self._clock.hold()
        if ended:
            self.pause()

    def set_perturbation(self, perturbation: Perturbation) -> None:
        """Apply ``perturbation`` to the current frame (re-run at once, coalesced)."""
        if perturbation == self.perturbation:
            return
        was_engaged = self.engaged
        self.perturbation = perturbation
        if self.engaged or was_engaged:
            self.request()

    def update_perturbation(self, **changes: Any) -> None:
        """Change some fields of the perturbation, e.g. ``occlusion=(0.5, 0.5)``."""
        self.set_perturbation(dataclasses.replace(self.perturbation, **changes))

    def reset_perturbation(self) -> None:
        self.set_perturbation(Perturbation(seed=self.perturbation.seed))

    def request(self, index: int | None = None, *, full: bool = False) -> None:
        """Ask for frame ``index`` (default: current), perturbed; a later request replaces a
        waiting one. Only on-screen mosaics are built unless ``full``; a full frame ends a run."""
        if self.closed:
            return
        index = self.player.index if index is None else index
        self.coalescer.offer(FrameSpec(int(index), self.perturbation, full=full))
        self.runner.pump()

    def frame_shown(self, spec: FrameSpec, timing: FrameTiming, now: float) -> None:
        """Frame ``spec`` reached the panels: the read-outs, preview and dock follow."""
        self.last_timing = timing
        self.timings.append(timing)
        del self.timings[:-500]
        self.frames_shown += 1
        self.rate.tick(now)
        length = len(self.source) if self.source is not None else 1
        # In the pass that fills the frame's panels: one window repaint a frame, not two.
        self._announced += 1
        seq = self._announced
        self.host.defer_display(lambda: self._announce(spec, length, now, seq), stale_ok=True)
        if (
            spec.partial
            and not self.player.playing
            and not self.coalescer.has_pending
            and not self.runner.inflight
        ):
            # Settled: bring the off-screen panels up to date too (one more frame).
            self.coalescer.offer(FrameSpec(spec.index, spec.perturbation, full=True))
        self.runner.pump()

    def _announce(self, spec: FrameSpec, length: int, now: float, seq: int) -> None:
        """Frame ``spec`` to the preview, the read-outs and :attr:`frame_changed`'s listeners."""
        if self.closed:
            return
        if seq != self._announced:
            # A newer frame came first: this one counts as dropped (shown + dropped = played).
            self.coalescer.dropped += 1
            return
        if spec.image is not None:
            self.host.show_input_image(spec.image, spec.caption(length))
        label = spec.frame.label if spec.frame is not None else ""
        self.frame_changed.emit(spec.index, length, label)
        self.input_image_changed.emit(spec.image)
        if not self.player.playing or now - self._status_at >= READOUT_INTERVAL_S:
            self.emit_status()

    def play_held_ticks(self) -> None:
        """Offer the frames of the play ticks held while the coalescer had no room."""
        if self._clock.held and (missed := self._clock.resume()):
            self._on_play_timer(missed, pump=False)  # the ticks held over (PlayClock)

    def _on_window_run_started(self) -> None:
        # The window's run superseded our frame; while engaged, a live frame supersedes it back.
        if self.engaged:
            self.request()

    def emit_status(self) -> None:
        status = self.status()
        # Read-outs are spaced while playing from the first one that has a frame to report.
        self._status_at = time.perf_counter() if status.frames and status.playing else -1.0
        self.status_changed.emit(status)

    def shutdown(self) -> None:
        """Stop timers and the camera, and let go of the window's signals."""
        if self.closed:
            return
        self.closed = True
        self.lanes.drop(forget_refusal=True)
        self._clock.stop()
        self.runner.stop()
        self._stop_webcam()
        with contextlib.suppress(RuntimeError, TypeError):  # gone with the window already
            self.host.run_started.disconnect(self._on_window_run_started)
        with contextlib.suppress(RuntimeError, TypeError):
            self.host.pinned_shown.disconnect(self.pause)
        self.host.session.input_changed.disconnect(self._on_session_input_changed)
        self.host.session.model_changed.disconnect(self._on_session_model_changed)
        self.host.session.result_changed.disconnect(self._on_session_result_changed)
        self.host.session.pins_changed.disconnect(self._on_session_result_changed)
