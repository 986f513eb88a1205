"""Live mode: play frame sequences and perturb the input, with the window's panels following.

:class:`~actviz.ui.live.feature.LiveMode` hosts a :class:`LiveController` and its dock
(:class:`~actviz.ui.live.dock.LiveControls`) in the window, through its
:class:`~actviz.ui.host.WindowHost`:

* frames run on ``window.worker`` (one model, one worker: hooks are per-module state), as jobs
  that load the frame, perturb it, capture and prepare (the fast variant of
  :func:`~actviz.display.prepare.prepare`); the window's own ``finished`` slot puts each result on the panels, exactly as
  for a normal run;
* the layers, target, normalisation and Grad-CAM layer come from ``window.session`` at each
  submit, so ticking a layer while playing takes effect on the next frame;
* the session's input is left alone: a live frame is shown (input preview, panels, export of
  the result) but does not replace the opened input.

Pipelining: a frame's job returns :class:`~actviz.ui.worker.Staged` after its capture, so the
next frame's capture starts while this one is prepared on the worker's second thread (the
model is free then; preparing reads only the capture). On two cores that hides most of the
preparation: one core would otherwise idle while the single-threaded preparation runs.

While a sequence plays, the frame after the one capturing is already queued on the worker, so
a capture ends and the next begins on the worker thread, without waiting for the GUI thread to
hear of it (it may be painting the frame before). Paused (a slider dragged, a step), only one
frame is captured at a time, so what is shown follows the latest request closely.

Two lanes: while a sequence plays on a small CPU model, frames alternate between the model
(the worker's lane 0) and a copy of it (:class:`~actviz.core.model_copy.ModelCopy`, lane 1),
each capture on half the worker's threads. Measured on two cores against back-to-back bare
captures on two threads (full bench runs): ResNet-18 at 64 px plays 0.79x as many frames per
second (0.58x on one lane), at 112 px 0.68x (0.53x), ResNet-50 at 224 px 1.20x (0.77x).
Small ops parallelise poorly, and painting a frame takes a core from one capture only,
instead of stalling both threads of one capture at every parallel region; another busy
process on the machine hurts one lane far more (several times slower) than two. The copy is
made on lane 0 between two captures, shown in the dock's memory read-out, made again when the
model's weights change in place or move, and dropped when the model is replaced, live mode
goes back to the still input or closes; results still show in frame order (the worker
reports in submission order). Paused, or on a GPU, a large or uncopyable model: one lane.

Coalescing: at most one live frame is captured (two per lane while playing: one queued) and
one prepared at a time, and one waits; a newer request replaces the waiting one (dropped). Starts
are spaced by ``1 / max_fps`` so the panels repaint at most ~60 times a second (a display's
refresh); the dock's read-outs (rate, memory) change at most a few times a second while
playing. A run the window starts itself (Run, a tick change) while live mode is engaged
is superseded by the live frame, so Run means "refresh the live frame".
"""

from __future__ import annotations

import dataclasses
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
from PySide6.QtCore import QObject, QTimer, Signal

from actviz.core.input_copies import list_layout
from actviz.core.model_copy import ModelCopy, copy_refusal
from actviz.core.threads import lower_thread_priority, torch_threads
from actviz.display.mosaic import MAX_MOSAIC_PIXELS
from actviz.display.prepare import prepare, reusable_mosaics
from actviz.ui.host import WindowHost
from actviz.ui.live.frame_status import FrameTiming, LiveStatus
from actviz.ui.live.frames import (
    Coalescer,
    FrameSource,
    ImageFolder,
    Perturbation,
    Player,
    RateMeter,
    StillFrame,
    TensorFrames,
    WebcamSource,
    estimate_bytes,
    webcam_status,
)
from actviz.ui.live.play_clock import PlayClock
from actviz.ui.worker import Job, Staged
from actviz.workspace.budget import (
    DEFAULT_MEMORY_BUDGET,
    default_budget,
    fmt_bytes,
    parse_bytes,
    rss_bytes,
)

if TYPE_CHECKING:  # pragma: no cover
    from actviz.workspace.session_state import RunRequest, RunResult

log = logging.getLogger(__name__)

DEFAULT_MAX_FPS = 60.0
#: Frames captured or queued for capture at once while a sequence plays (1 when paused).
CAPTURES_AHEAD = 2
#: Least time between two status read-outs while playing (seconds): each one reads the
#: process's memory and relays out the dock's labels.
STATUS_INTERVAL_S = 0.25
#: How much lower than the GUI thread the capture threads run (nice steps, Linux). With both
#: cores capturing (two lanes), a GUI thread at the same priority waits for a time slice: the
#: bench's 5 ms timer lagged p99 22 ms / max 29 ms on ResNet-18 at 112 px, 5 / 8 ms lowered,
#: at the same frame rate (the GUI's work per frame is the same; it only runs sooner).
CAPTURE_NICE = 5
#: Least pixel budget of a live frame's mosaic (a canvas not laid out yet is tiny).
MIN_LIVE_MOSAIC_PIXELS = 128 * 128


__all__ = [
    "DEFAULT_MEMORY_BUDGET",
    "FrameTiming",
    "LiveController",
    "LiveStatus",
    "parse_bytes",
    "rss_bytes",
]


@dataclass
class _Spec:
    """One requested frame and what its job reports back (written on the worker thread)."""

    index: int
    perturbation: Perturbation
    full: bool = False  # every mosaic, not only the panels on screen
    partial: bool = False  # set at submit: some off-screen mosaics were reused
    submitted: float = 0.0
    timing: dict[str, float] = field(default_factory=dict)
    frame: Any = None
    image: np.ndarray | None = None
    base_image: np.ndarray | None = None
    payload: dict[str, Any] | None = field(default=None, repr=False)

    def release(self) -> None:
        """Drop what the job would have needed (it ended, or will never run)."""
        if self.payload is not None:
            self.payload.clear()
            self.payload = None


class LiveController(QObject):
    """Drives live frames through a window's worker; see the module docstring.

    Parameters
    ----------
    host
        The window's :class:`~actviz.ui.host.WindowHost`: the worker and panels it drives.
    max_fps
        Upper bound of frames started per second (and so of repaints).
    capture_threads
        torch threads while capturing. None: two lanes at half the worker's count each while a
        sequence plays (module docstring), else the worker's count. A number: one lane of it.
    memory_budget
        Bytes one capture may hold; larger selections are refused with a message.

    Signals
    -------
    status_changed(LiveStatus)
        After every shown frame, and when the state changes.
    frame_changed(int, int, str)
        Index, frame count and label of the frame now shown.
    base_image_changed(object)
        The shown frame's picture *before* perturbation ((H, W, 3) uint8 or None).
    input_image_changed(object)
        The shown frame's picture *as the model received it* (perturbed; (H, W, 3) uint8
        or None): what the perturbation pad shows.
    playing_changed(bool)
    speed_changed(float)
        The playback speed (frames per second) was set.
    source_changed(str)
        A description of the new source ("" when back to the still input).
    message(str)
        A refusal or error for the controls ("" clears).
    """

    status_changed = Signal(object)
    frame_changed = Signal(int, int, str)
    base_image_changed = Signal(object)
    input_image_changed = Signal(object)
    playing_changed = Signal(bool)
    speed_changed = Signal(float)
    source_changed = Signal(str)
    message = Signal(str)

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
        self.host = host
        self.worker = host.worker
        self.capture_threads = capture_threads
        # The thread count being tried (or chosen) for the frames playing, and what it is for.
        self.memory_budget = memory_budget if memory_budget is not None else default_budget()
        self.host.session.memory_budget = self.memory_budget
        self.source: FrameSource | None = None
        self.perturbation = Perturbation()
        self.player = Player()
        self.coalescer = Coalescer(1.0 / max_fps)
        self.rate = RateMeter()
        self.frames_shown = 0
        self.last_timing: FrameTiming | None = None
        self.timings: list[FrameTiming] = []  # the last few hundred, for benchmarks
        # Frames submitted and not yet reported, oldest first (job -> spec); those not
        # captured yet are in ``_capturing`` with their lane (one, or CAPTURES_AHEAD per lane
        # while playing), the others are being prepared.
        self._inflight: dict[Job, _Spec] = {}
        self._capturing: dict[Job, int] = {}  # job -> lane
        # The model's copy for lane 1 (None: not made, or not wanted), and why the model gets
        # none (None: not asked yet for this model).
        self._replica: ModelCopy | None = None
        self._build_job: Job | None = None  # the frame whose job copies the model
        self._refusal: tuple[Any, str] | None = None
        self._last_lane = 1
        self._status_at = -1.0
        self._shown_index = 0
        self._closed = False
        self._webcam: WebcamSource | None = None

        self._clock = PlayClock(self, self._on_play_timer)
        self._pump_timer = QTimer(self)
        self._pump_timer.setSingleShot(True)
        self._pump_timer.timeout.connect(self._pump)

        host.run_started.connect(self._on_window_run_started)
        host.pinned_shown.connect(self.pause)  # the next frame would replace it at once
        host.closed.connect(self.shutdown)
        host.session.input_changed.connect(self._on_session_input_changed)
        host.session.model_changed.connect(self._on_session_model_changed)
        # The dock's memory line says what the session holds: a run or a pin changes it.
        host.session.result_changed.connect(self._on_session_result_changed)
        host.session.pins_changed.connect(self._on_session_result_changed)

    # ------------------------------------------------------------------ state
    @property
    def engaged(self) -> bool:
        """Whether live frames replace the window's own runs (a sequence, or a perturbation)."""
        return not self._closed and (
            (self.source is not None and not isinstance(self.source, StillFrame))
            or not self.perturbation.is_identity()
        )

    @property
    def playing(self) -> bool:
        return self.player.playing

    @property
    def idle(self) -> bool:
        """Nothing in flight, nothing waiting, and the last frame fully on screen (its display
        steps done)."""
        busy = self.coalescer.busy or self.coalescer.has_pending or self._inflight
        return not busy and not self.host.display_pending()

    @property
    def max_fps(self) -> float:
        return 1.0 / self.coalescer.min_interval_s

    def set_max_fps(self, fps: float) -> None:
        self.coalescer.min_interval_s = 1.0 / max(fps, 0.1)

    def set_memory_budget(self, nbytes: int) -> None:
        if nbytes <= 0:
            raise ValueError("the memory budget must be positive")
        self.memory_budget = int(nbytes)
        # Ordinary runs (Run, Ctrl+R, re-runs after a tick) obey the same budget.
        self.host.session.memory_budget = self.memory_budget
        self._emit_status()

    def status(self) -> LiveStatus:
        return LiveStatus(
            fps=self.rate.rate(),
            frames=self.frames_shown,
            dropped=self.coalescer.dropped,
            last=self.last_timing,
            held_bytes=self.host.session.held_bytes(),  # pinned results included
            copy_bytes=self._replica.nbytes if self._replica is not None else 0,
            rss_bytes=rss_bytes(),
            budget_bytes=self.memory_budget,
            playing=self.player.playing,
            sequence=(self.source is not None and len(self.source) > 1) or self._webcam is not None,
        )

    # ------------------------------------------------------------------ sources
    def set_source(self, source: FrameSource | None) -> None:
        """Play ``source`` (None: back to the window's own input)."""
        self.pause()
        self._stop_webcam()
        if source is None:
            self._drop_replica()  # back to the still input: no sequence to play on two lanes
        self.source = source
        self.player.set_length(len(source) if source is not None else 1)
        self.player.seek(0)
        self.rate.reset()
        self.coalescer.clear()
        self.source_changed.emit(source.describe() if source is not None else "")
        self.message.emit("")
        if source is not None:
            self.request(0)
        elif self.host.session.can_run():
            # Back to the opened input: its own frame now (perturbed, or a plain run), never
            # the last frame of the sequence left in the maps.
            if self.perturbation.is_identity():
                self.host.run()
            else:
                self.request(0)
        self._emit_status()

    def open_folder(self, folder: str | Path) -> bool:
        """Play the images of ``folder``; False (and a message) when it holds none."""
        s = self.host.session
        try:
            source = ImageFolder(folder, s.model, s.loaded_model)
        except ValueError as exc:
            self.message.emit(str(exc))
            return False
        self.set_source(source)
        return True

    def open_tensor_file(self, path: str | Path) -> bool:
        """Play the frames of a ``(T, C, H, W)`` tensor file; False (and a message) if not one."""
        try:
            source = TensorFrames.from_file(path, self.host.session.model)
        except Exception as exc:  # noqa: BLE001 - InputError, ValueError: shown, not raised
            self.message.emit(f"Could not open {Path(path).name} as frames: {exc}")
            return False
        self.set_source(source)
        return True

    def open_webcam(self) -> bool:
        """Use the camera; False (and the reason) where QtMultimedia or a camera is missing."""
        ok, why = webcam_status()
        if not ok:
            self.message.emit(why)
            return False
        s = self.host.session
        try:
            cam = WebcamSource(s.model, s.loaded_model)
        except Exception as exc:  # noqa: BLE001 - a camera that fails to open is reported
            self.message.emit(f"webcam: {exc}")
            return False
        self.set_source(cam)
        self._webcam = cam
        cam.listeners.append(lambda: self.request(0) if self.player.playing else None)
        cam.start()
        self.player.playing = True  # a camera is always "playing" while it is the source
        self.playing_changed.emit(True)
        return True

    def _stop_webcam(self) -> None:
        if self._webcam is not None:
            self._webcam.stop()
            self._webcam = None

    def _still_source(self) -> StillFrame | None:
        inp = self.host.session.input
        if inp is None:
            return None
        name = Path(inp.source).name if inp.source else "input"
        path = inp.source if inp.source and Path(inp.source).is_file() else ""
        return StillFrame(inp.value, inp.image, name, path)

    def _on_session_input_changed(self) -> None:
        if self.source is None or isinstance(self.source, StillFrame):
            self.source = None  # rebuilt from the new input on the next request

    def _on_session_result_changed(self, *_args: object) -> None:
        if not self.player.playing:  # while playing, every shown frame reports (spaced)
            self._emit_status()

    def drop_model_copy(self) -> None:
        """Let go of the model's copy for the second lane (live mode switched off); playing
        again makes a new one."""
        self._drop_replica()
        self._emit_status()

    def _on_session_model_changed(self) -> None:
        # Frames were prepared for the old model (size, transforms): back to the still input.
        self.pause()
        self._drop_replica()
        self._refusal = None
        self._stop_webcam()
        self.coalescer.clear()
        if self.source is not None:
            self.source = None
            self.player.set_length(1)
            self.source_changed.emit("")
        # The read-outs measured the old model: they start over with the new one.
        self.frames_shown, self.last_timing, self.coalescer.dropped = 0, None, 0
        self.rate.reset()
        self._emit_status()

    # ------------------------------------------------------------------ transport
    def play(self) -> None:
        if self.source is None or len(self.source) < 2:
            return
        self.player.play()
        self.rate.reset()
        self._clock.start(self.player.interval_ms)
        self.playing_changed.emit(True)
        self._emit_status()

    def pause(self) -> None:
        was = self.player.playing
        self.player.pause()
        self._clock.stop()
        if was:
            self.playing_changed.emit(False)
            self._emit_status()

    def toggle(self) -> None:
        if self.player.playing:
            self.pause()
        else:
            self.play()

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
        for _ in range(steps):  # more than one: the ticks held over (play_clock)
            if (step := self.player.advance()) is None:
                ended = True  # the end of a sequence played once (the last frame offered)
                break
            index, moved = step, moved + 1
        if self._webcam is None and index is not None and not self._closed:
            self.coalescer.offer(_Spec(index, self.perturbation))
            self.coalescer.dropped += moved - 1  # each would have replaced the waiting frame
            if pump:
                self._pump()
            if self.coalescer.busy and not ended:  # no room: ticks would only replace it
                self._clock.hold()
        if ended:
            self.pause()

    # ------------------------------------------------------------------ perturbation
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

    # ------------------------------------------------------------------ requests
    def request(self, index: int | None = None, *, full: bool = False) -> None:
        """Ask for frame ``index`` (default: the current one) with the current perturbation.

        While a frame is computing, the request waits; a later request replaces it. Frames
        build the mosaics of the panels on screen only (off-screen ones keep the previous
        frame's) unless ``full``; once nothing more is coming, a full frame follows.
        """
        if self._closed:
            return
        if index is None:
            index = self.player.index
        self.coalescer.offer(_Spec(int(index), self.perturbation, full=full))
        self._pump()

    def _visible_layers(self) -> set[str] | None:
        """Layers whose panel is on screen now (None: unknown, build every mosaic)."""
        panels = self.host.layer_panels
        if not panels:
            return None
        return {name for name, panel in panels.items() if not panel.visibleRegion().isEmpty()}

    def _pump(self) -> None:
        if self._closed:
            return
        if self._clock.held and not self.coalescer.busy and (missed := self._clock.resume()):
            self._on_play_timer(missed, pump=False)  # the ticks held over (play_clock)
        # Playing: the next frame is queued behind the one capturing (see the module docstring).
        ahead = CAPTURES_AHEAD * self._lane_count() if self.player.playing else 1
        self.coalescer.limit = ahead
        if len(self._inflight) > ahead:
            return  # captures under way and one being prepared: the next waits for it to show
        ok, spec = self.coalescer.take()
        if ok:
            self._submit(spec)
            return
        if self.coalescer.has_pending and not self.coalescer.busy:
            self._pump_timer.start(max(1, int(self.coalescer.wait_s() * 1000) + 1))

    # ------------------------------------------------------------------ lanes
    def _lanes_wanted(self, model: Any) -> bool:
        """Whether frames should alternate between ``model`` and a copy (see the module
        docstring): a sequence playing, more than one thread, no count forced, a small CPU
        model that can be copied."""
        if not self.player.playing or self.capture_threads is not None:
            return False
        if self.worker.threads < 2:
            return False
        if self._refusal is None or self._refusal[0] is not model:
            self._refusal = (model, copy_refusal(model) or "")
        return not self._refusal[1]

    def _lane_count(self) -> int:
        rep = self._replica
        return 2 if self.player.playing and rep is not None and rep.twin is not None else 1

    def _drop_replica(self) -> None:
        self._replica = None
        self._build_job = None

    def _choose_lane(self, model: Any) -> tuple[int, Any, ModelCopy | None]:
        """``(lane, model to capture, replica to build first)`` for the next frame."""
        if not self._lanes_wanted(model):
            return 0, model, None
        rep = self._replica
        if rep is not None and (rep.original is not model or rep.failure):
            if rep.failure and rep.original is model:
                log.info("live frames stay on one lane: %s", rep.failure)
                self._refusal = (model, rep.failure)
            self._drop_replica()
            rep = None
        if rep is None:
            rep = self._replica = ModelCopy(model)
        if rep.twin is None:
            # Asked for already, by a frame still on its way (a frame dropped before its job
            # ran never made the copy: ask again).
            if self._build_job in self._inflight:
                return 0, model, None
            return 0, model, rep  # lane 0 copies the model between two of its captures
        on = [0, 0]
        for lane in self._capturing.values():
            on[lane] += 1
        lane = 0 if on[0] < on[1] else 1 if on[1] < on[0] else 1 - self._last_lane
        # The weights changed in place, or moved (to another device: ask again)? Asked only
        # for a frame the copy would capture (lane 0 runs the model): it reads every tensor.
        if lane == 1 and not rep.usable():
            self._drop_replica()
            self._refusal = None
            self._replica = ModelCopy(model) if self._lanes_wanted(model) else None
            return 0, model, self._replica
        self._last_lane = lane
        return lane, (model if lane == 0 else rep.twin), None

    def _base_request(self) -> RunRequest | None:
        s = self.host.session
        if s.model is None:
            self.message.emit("Open a model first.")
            return None
        # Each frame brings its own input: the still input may be missing.
        return s.make_request(allow_no_input=True)

    def _frame_problem(self, source: FrameSource) -> str:
        """Why frames of ``source`` cannot run on the model ("" when they can)."""
        s = self.host.session
        if isinstance(source, StillFrame):
            return s.input_problem() if s.input is not None else ""
        return s.input_problem(source="frames")

    def _submit(self, spec: _Spec) -> None:
        source = self.source
        if source is None:
            source = self._still_source()
            if source is None:
                self.coalescer.finish()
                self.message.emit("Open an input or a frame sequence first.")
                return
            self.source = source
        base = self._base_request()
        if base is None:
            self.coalescer.finish()
            return
        problem = self._frame_problem(source)
        if problem:  # what the window refuses to run, live frames refuse too
            self.coalescer.finish()
            self.coalescer.clear()
            self.pause()
            self.message.emit(problem)
            return
        layers = list(dict.fromkeys([*base.layers, *base.extra_layers]))
        result = self.host.result
        if result is not None:
            need = estimate_bytes(result.output_shapes, layers)
            if need is not None and need > self.memory_budget:
                self.coalescer.finish()
                self.coalescer.clear()
                self.pause()
                self.message.emit(
                    f"Refused: the {len(layers)} selected layers need about {fmt_bytes(need)}, "
                    f"over the {fmt_bytes(self.memory_budget)} memory budget. Untick some layers "
                    "or raise the budget."
                )
                return
        visible = None if spec.full else self._visible_layers()
        spec.partial = visible is not None and bool(set(layers) - visible)
        lane, capture_model, build = self._choose_lane(base.model)
        job = self._make_job(
            spec,
            source,
            base,
            layers,
            result,
            # Panels showing concepts (not channels) keep their last channel mosaics.
            visible and {n for n in visible if not self.host.layer_panels[n].tile_unit()},
            capture_model,
            build,
            max_pixels=_mosaic_budget(self.host.layer_panels, visible),
        )
        spec.submitted = time.perf_counter()
        # Two lanes share the worker's threads; one lane has them all.
        threads = max(1, self.worker.threads // 2) if self._lane_count() == 2 else None
        # Behind our own frames, pipelined; otherwise it replaces whatever the window runs.
        gen = self.worker.submit(job, supersede=not self._inflight, lane=lane, threads=threads)
        # The window shows the frame as a run's result first; a stream's, quietly.
        self.host.show_run(gen, streamed=self.player.playing)
        gen.on(
            staged=lambda: self._on_worker_staged(gen),
            finished=lambda result: self._on_worker_finished(gen, result),
            failed=lambda error: self._on_worker_errored(gen, error),
            cancelled=lambda: self._on_worker_cancelled(gen),
            superseded=lambda: self._forget(gen),  # a window run replaced it
        )
        self._inflight[gen] = spec
        self._capturing[gen] = lane
        if build is not None:
            self._build_job = gen

    def _make_job(
        self,
        spec: _Spec,
        source: FrameSource,
        base: RunRequest,
        layers: list[str],
        previous: RunResult | None,
        visible: set[str] | None,
        capture_model: Any = None,
        build: ModelCopy | None = None,
        *,
        max_pixels: int = MAX_MOSAIC_PIXELS,
    ) -> Callable[[Callable[[], bool], Callable[[str], None]], Any]:
        from actviz.core.capture import CaptureCancelled, capture

        selected = self.host.selected_layer
        # With the Overview hidden, its panels wait for the tab (the window fills them when it
        # shows), so the frame's histogram and Grad-CAM map wait too: computed on first read.
        overview = self.host.session.saliency_wanted
        # Everything the job needs travels in a one-shot dict that is emptied when the job
        # starts (and by the controller when the frame is dropped before it ran): the
        # worker's thread pool keeps finished runnables, and so this closure, alive, and the
        # closure must not pin frames, requests or mosaics.
        payload: dict[str, Any] = {
            "spec": spec,
            "source": source,
            "base": base,
            "layers": layers,
            "previous_shapes": previous.output_shapes if previous is not None else None,
            # Only the mosaics, not the result: the previous capture must be free to go.
            "previous_mosaics": reusable_mosaics(previous) if visible is not None else None,
            "visible": visible,
            "eager": [selected] if selected and overview else [],
            "cams": None if overview else [],
            # The statistics table is on the Overview too: hidden, they wait for a read.
            "stats": None if overview else [],
            "budget": self.memory_budget,
            "capture_threads": self.capture_threads,
            "length": len(source),
            # The model this frame's capture runs on (the session's, or its copy on lane 1).
            "capture_model": capture_model if capture_model is not None else base.model,
            "build": build,
            "max_pixels": max_pixels,
        }
        spec.payload = payload

        def job(should_stop: Callable[[], bool], progress: Callable[[str], None]) -> Staged:
            p = dict(payload)
            payload.clear()
            if not p:
                raise CaptureCancelled("the live frame was dropped before it started")
            spec_: _Spec = p["spec"]
            base_: RunRequest = p["base"]
            # For good on this thread (and the torch threads it starts): the window's own runs
            # on lane 0 then leave the GUI thread first call on a core too.
            lower_thread_priority(CAPTURE_NICE)
            if p["build"] is not None:
                p["build"].build()  # on lane 0, between two captures of the model
            t0 = time.perf_counter()
            frame = p["source"].frame(spec_.index)
            value, image = spec_.perturbation.apply(frame.value, frame.image)
            if base_.input_as_list:  # a detector takes its frame as a list of one image
                value = list_layout(value, True)
            t1 = time.perf_counter()
            with torch_threads(p["capture_threads"]):
                cap = capture(
                    p["capture_model"],
                    value,
                    p["layers"],
                    target=base_.target,
                    should_stop=should_stop,
                    max_bytes=p["budget"],
                    # On a GPU, prepare reduces there and copies once per frame.
                    keep_on_device=True,
                    input_grads=base_.input_grads,
                    # The Edits dock's edits apply to every frame (actviz.ui.whatif).
                    edits=base_.edits or None,
                )
            t2 = time.perf_counter()
            spec_.frame = frame
            spec_.base_image = frame.image
            origin = {
                "input": Path(frame.path).name if frame.path else frame.label,
                "path": frame.path,
                "index": frame.index if p["length"] > 1 else None,
                "frames": p["length"],
                "label": frame.label,
                "perturbation": spec_.perturbation.as_dict(),
            }
            spec_.timing.update(load=t1 - t0, capture=t2 - t1)
            request = dataclasses.replace(base_, inputs=value, image=image)
            # The second stage holds only what it needs (not the source, nor this payload).
            shapes, eager, cams, stats = p["previous_shapes"], p["eager"], p["cams"], p["stats"]
            visible_, stand_ins, budget = p["visible"], p["previous_mosaics"], p["max_pixels"]
            p.clear()

            def finish(
                should_stop: Callable[[], bool], progress: Callable[[str], None]
            ) -> RunResult:
                t3 = time.perf_counter()
                c3 = time.thread_time()
                result = prepare(
                    cap,
                    request.display_spec(),
                    fast=True,
                    model=request.model,
                    previous_shapes=shapes,
                    eager_hist=eager,
                    eager_cams=cams,
                    eager_stats=stats,
                    should_stop=should_stop,
                    mosaic_layers=visible_,
                    reuse=stand_ins,
                    max_pixels=budget,
                )
                t4 = time.perf_counter()
                # Export and the read-outs name this frame, not the opened input.
                result = dataclasses.replace(result, origin=origin)
                spec_.image = result.image
                spec_.timing.update(
                    prepare=t4 - t3, prepare_cpu=time.thread_time() - c3, wait=t3 - t2, end=t4
                )
                return result

            return Staged(finish)

        return job

    # ------------------------------------------------------------------ worker events
    def _forget(self, gen: Job) -> _Spec | None:
        spec = self._inflight.pop(gen, None)
        if spec is not None:
            spec.release()
        if self._capturing.pop(gen, None) is not None:
            self.coalescer.finish()
        return spec

    def _take_inflight(self, gen: Job) -> _Spec | None:
        """The spec of our frame ``gen`` (None once forgotten)."""
        return self._forget(gen)

    def _on_worker_staged(self, gen: Job) -> None:
        if self._capturing.pop(gen, None) is not None:
            # Captured: the model is free, so the next frame may start while this one is
            # prepared.
            self.coalescer.finish()
            self._pump()

    def _on_worker_finished(self, gen: Job, result: Any) -> None:
        spec = self._take_inflight(gen)
        if spec is None:
            return
        now = time.perf_counter()
        t = spec.timing
        timing = FrameTiming(
            index=spec.index,
            load_ms=t.get("load", 0.0) * 1e3,
            capture_ms=t.get("capture", 0.0) * 1e3,
            prepare_ms=t.get("prepare", 0.0) * 1e3,
            prepare_cpu_ms=t.get("prepare_cpu", 0.0) * 1e3,
            shown_ms=(now - t.get("end", now)) * 1e3,
            total_ms=(now - spec.submitted) * 1e3,
        )
        self.last_timing = timing
        self.timings.append(timing)
        del self.timings[:-500]
        self.frames_shown += 1
        self.rate.tick(now)
        self._shown_index = spec.index
        label = spec.frame.label if spec.frame is not None else ""
        length = len(self.source) if self.source is not None else 1
        caption = label if length == 1 else f"frame {spec.index + 1}/{length} · {label}"
        if not spec.perturbation.is_identity():
            caption += f" · {spec.perturbation.describe()}"
        if spec.image is not None:
            # At once, not as a display step: a step is skipped when the next frame arrives
            # first, so while playing the preview would lag the frame counter.
            self.host.show_input_image(spec.image, caption)
        self.frame_changed.emit(spec.index, length, label)
        self.base_image_changed.emit(spec.base_image)
        self.input_image_changed.emit(spec.image)
        if not self.player.playing or now - self._status_at >= STATUS_INTERVAL_S:
            self._emit_status()
        if (
            spec.partial
            and not self.player.playing
            and not self.coalescer.has_pending
            and not self._inflight
        ):
            # Settled: bring the off-screen panels up to date too (one more frame).
            self.coalescer.offer(_Spec(spec.index, spec.perturbation, full=True))
        self._pump()

    def _on_worker_errored(self, gen: Job, error: BaseException) -> None:
        spec = self._take_inflight(gen)
        if spec is None:
            return
        from actviz.core.capture import CaptureTooLarge

        self.pause()
        self.coalescer.clear()
        if isinstance(error, CaptureTooLarge):
            self.message.emit(
                f"Refused: {error}. The memory budget is {fmt_bytes(self.memory_budget)}; "
                "untick some layers or raise the budget."
            )
        else:
            self.message.emit(
                f"Live frame {spec.index + 1} failed: {type(error).__name__}: {error}"
            )
        self._emit_status()

    def _on_worker_cancelled(self, gen: Job) -> None:
        if self._take_inflight(gen) is not None:
            self._pump()

    def _on_window_run_started(self) -> None:
        # Our frame in flight (if any) was superseded by the window's run; while engaged, the
        # live frame supersedes the window's run in turn ("Run" refreshes the live frame).
        if self.engaged:
            self.request()

    def _emit_status(self) -> None:
        status = self.status()
        # Read-outs are spaced while playing from the first one that has a frame to report.
        self._status_at = time.perf_counter() if status.frames and status.playing else -1.0
        self.status_changed.emit(status)

    # ------------------------------------------------------------------ shutdown
    def shutdown(self) -> None:
        """Stop timers and the camera, and let go of the window's signals."""
        if self._closed:
            return
        self._closed = True
        self._drop_replica()
        self._refusal = None
        self._clock.stop()
        self._pump_timer.stop()
        self._stop_webcam()
        for sig, slot in (
            (self.host.run_started, self._on_window_run_started),
            (self.host.pinned_shown, self.pause),
        ):
            try:
                sig.disconnect(slot)
            except (RuntimeError, TypeError):  # already gone with the window
                pass
        self.host.session.input_changed.disconnect(self._on_session_input_changed)
        self.host.session.model_changed.disconnect(self._on_session_model_changed)
        self.host.session.result_changed.disconnect(self._on_session_result_changed)
        self.host.session.pins_changed.disconnect(self._on_session_result_changed)


def _mosaic_budget(panels: dict[str, Any], visible: set[str] | None) -> int:
    """Pixels a mosaic of this frame may have: about what its canvas shows on screen.

    A page with more pixels than its canvas is drawn shrunk (filtered) anyway; built
    that large it cost the preparation and the GUI thread (converting and drawing it)
    several times the pixels seen. Tiles are then area averages (as for any layer over
    the budget, :func:`~actviz.display.mosaic.max_tile_for`); the read-outs still read
    the layer's own values. A full frame (every panel, for export or a pin) keeps the
    usual budget.
    """
    if visible is None:
        return MAX_MOSAIC_PIXELS
    most = 0.0
    for name in visible:
        slot = getattr(panels.get(name), "activation_slot", None)
        canvas = getattr(slot, "image_canvas", None)
        if canvas is None:  # not drawn yet: its size is not known
            return MAX_MOSAIC_PIXELS
        ratio = canvas.devicePixelRatioF()
        most = max(most, canvas.image_area_width() * canvas.height() * ratio * ratio)
    return int(min(MAX_MOSAIC_PIXELS, max(most, MIN_LIVE_MOSAIC_PIXELS)))
