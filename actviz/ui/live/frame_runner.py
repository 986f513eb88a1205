"""The worker side of live mode: one frame as a worker job (:func:`frame_job`), which frame goes
next, on which lane, and what each job's end means for the frames in flight. The controller
offers frames and calls :meth:`~FrameRunner.pump`; frames shown go back to
``LiveController.frame_shown``."""

from __future__ import annotations

import dataclasses
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
from PySide6.QtCore import QTimer

from actviz.core.capture import format_bytes
from actviz.core.input_copies import list_layout
from actviz.core.model_copy import ModelCopy, copy_refusal
from actviz.core.threads import torch_threads
from actviz.display.mosaic import MAX_MOSAIC_PIXELS
from actviz.display.prepare import prepare
from actviz.display.repage import reusable_mosaics
from actviz.ui.live.frames import StillFrame, estimate_bytes
from actviz.ui.live.perturbation import Perturbation
from actviz.ui.worker import Job, Staged

if TYPE_CHECKING:  # pragma: no cover
    from actviz.ui.private_model import PrivateModel
    from actviz.workspace.session_state import RunRequest, RunResult

log = logging.getLogger(__name__)

#: Least pixel budget of a live frame's mosaic (a canvas not laid out yet is tiny).
MIN_LIVE_MOSAIC_PIXELS = 128 * 128
#: Frames captured or queued for capture at once while a sequence plays (1 when paused).
CAPTURES_AHEAD = 2


@dataclass
class FrameSpec:
    """One requested frame and what its job reports back (written on the worker thread)."""

    index: int
    perturbation: Perturbation
    full: bool = False  # every mosaic, not only the panels on screen
    partial: bool = False  # set at submit: some off-screen mosaics were reused
    timing: dict[str, float] = field(default_factory=dict)
    frame: Any = None
    image: np.ndarray | None = None
    payload: dict[str, Any] | None = field(default=None, repr=False)

    def caption(self, length: int) -> str:
        """The caption under the input preview: place among ``length``, label, perturbation."""
        label = "" if self.frame is None else self.frame.caption or self.frame.label
        caption = label if length == 1 else f"frame {self.index + 1}/{length} · {label}"
        if not self.perturbation.is_identity():
            caption += f" · {self.perturbation.describe()}"
        return caption

    def release(self) -> None:
        """Drop what the job would have needed (it ended, or will never run)."""
        if self.payload is not None:
            self.payload.clear()
            self.payload = None


def frame_job(
    spec: FrameSpec, payload: dict[str, Any]
) -> Callable[[Callable[[], bool], Callable[[str], None]], Any]:
    """The job of one live frame: load, perturb and capture it on ``capture_model`` (after
    building ``build``'s copy), then stage a fast preparation of the ``visible`` mosaics; the
    Overview's parts (``eager`` histograms) wait for a read while it is hidden. ``payload``:
    those and the rest the job needs (:meth:`~actviz.ui.live.frame_runner.FrameRunner.submit`),
    emptied when the job starts or is dropped (the closure may outlive it and must pin nothing)."""
    from actviz.core.capture import CaptureCancelled, capture

    spec.payload = payload

    def job(should_stop: Callable[[], bool], progress: Callable[[str], None]) -> Staged:
        p = dict(payload)
        payload.clear()
        if not p:
            raise CaptureCancelled("the live frame was dropped before it started")
        spec_: FrameSpec = p["spec"]
        base_: RunRequest = p["base"]
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
        origin = {
            "input": Path(frame.path).name if frame.path else frame.label,
            "path": frame.path,
            "index": frame.index if p["length"] > 1 else None,
            "frames": p["length"],
            "label": frame.label,
            "perturbation": spec_.perturbation.as_dict(),
        }
        spec_.timing.update(load=t1 - t0, capture=t2 - t1)
        request = dataclasses.replace(
            base_, inputs=value, spec=dataclasses.replace(base_.spec, image=image)
        )
        # The second stage holds only what it needs (not the source, nor this payload).
        shapes, eager, cams, stats = p["previous_shapes"], p["eager"], p["cams"], p["stats"]
        visible_, stand_ins, budget = p["visible"], p["previous_mosaics"], p["max_pixels"]
        p.clear()

        def finish(should_stop: Callable[[], bool], progress: Callable[[str], None]) -> RunResult:
            t3, c3 = time.perf_counter(), time.thread_time()
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


def mosaic_budget(panels: dict[str, Any], visible: set[str] | None) -> int:
    """Pixels a mosaic may have: about what its canvas shows (more would be drawn shrunk); a full
    frame (``visible`` None) keeps the usual budget."""
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


@dataclass
class FrameTiming:
    """Where one live frame's time went (milliseconds)."""

    index: int = 0
    load_ms: float = 0.0  # reading the frame and perturbing it (worker)
    capture_ms: float = 0.0  # actviz.capture (worker)
    prepare_ms: float = 0.0  # display.prepare (worker)
    prepare_cpu_ms: float = 0.0  # display.prepare, the preparing thread's CPU time
    shown_ms: float = 0.0  # job end -> the window has put it on the panels (GUI)


class FrameRunner:
    """Submits a live controller's frames to the window's worker and follows their jobs."""

    def __init__(self, live: Any) -> None:
        self.live, self.host, self.worker = live, live.host, live.worker
        self.coalescer, self.lanes = live.coalescer, live.lanes
        # Frames submitted, not yet reported (job -> spec); those capturing are in ``lanes``.
        self.inflight: dict[Job, FrameSpec] = {}
        self._pump_timer = QTimer(live, singleShot=True)
        self._pump_timer.timeout.connect(self.pump)

    def stop(self) -> None:
        """No more pumping (the controller shuts down)."""
        self._pump_timer.stop()

    def visible_layers(self) -> set[str] | None:
        """Layers whose panel is on screen now (None: unknown, build every mosaic)."""
        panels = self.host.layer_panels
        if not panels:
            return None
        return {name for name, panel in panels.items() if not panel.visibleRegion().isEmpty()}

    def pump(self) -> None:
        """Submit the waiting frame when there is room (or come back when its start is due)."""
        if self.live.closed:
            return
        if not self.coalescer.busy:
            self.live.play_held_ticks()
        # Playing: the next frame is queued behind the one capturing (docs/architecture.md).
        ahead = CAPTURES_AHEAD * self.lanes.count(True) if self.live.player.playing else 1
        self.coalescer.limit = ahead
        if len(self.inflight) > ahead:
            return  # captures under way and one being prepared: the next waits for it to show
        ok, spec = self.coalescer.take()
        if ok:
            self.submit(spec)
        elif self.coalescer.has_pending and not self.coalescer.busy:
            self._pump_timer.start(max(1, int(self.coalescer.wait_s() * 1000) + 1))

    def submit(self, spec: FrameSpec) -> None:
        """Submit frame ``spec`` as a job, or say in the dock why it cannot run."""
        s, source = self.host.session, self.live.source
        if source is None:
            source = self.live.source = StillFrame.of_input(s.input)
        if source is None or s.model is None:
            self.coalescer.finish()
            first = "an input or a frame sequence" if source is None else "a model"
            self.live.message.emit(f"Open {first} first.")
            return
        # Each frame brings its own input: the still input may be missing.
        base = s.make_request(allow_no_input=True)
        if isinstance(source, StillFrame):
            problem = s.input_problem() if s.input is not None else ""
        else:
            problem = s.input_problem(source="frames")
        if problem:  # what the window refuses to run, live frames refuse too
            self._refuse(problem)
            return
        layers = list(dict.fromkeys([*base.layers, *base.extra_layers]))
        if (result := self.host.result) is not None:
            need = estimate_bytes(result.output_shapes, layers)
            if need is not None and need > self.live.memory_budget:
                self._refuse(
                    f"Refused: the {len(layers)} selected layers need about {format_bytes(need)}, "
                    f"over the {format_bytes(self.live.memory_budget)} memory budget. Untick some layers "
                    "or raise the budget."
                )
                return
        visible = None if spec.full else self.visible_layers()
        spec.partial = visible is not None and bool(set(layers) - visible)
        lane, capture_model, build = self.lanes.choose(
            base.model,
            self.inflight,
            playing=self.live.player.playing,
            threads=self.worker.threads,
            forced=self.live.capture_threads is not None,
        )
        overview = s.saliency_wanted
        panels = self.host.layer_panels
        # The mosaics made now; panels showing concepts (not channels) keep their last ones.
        made = visible and {n for n in visible if not panels[n].tile_unit()}
        job = frame_job(
            spec,
            {
                "spec": spec,
                "source": source,
                "base": base,
                "layers": layers,
                "previous_shapes": result.output_shapes if result is not None else None,
                # Only the mosaics kept (not made now), not the result: the previous capture must
                # be free to go (a mosaic reads its layer's values until it is kept: prepare).
                "previous_mosaics": None
                if made is None
                else {n: m for n, m in reusable_mosaics(result).items() if n not in made},
                "visible": made,
                # With the Overview hidden, its histogram, Grad-CAM and statistics wait for its tab.
                "eager": [selected] if (selected := self.host.selected_layer) and overview else [],
                "cams": None if overview else [],
                "stats": None if overview else [],
                "budget": self.live.memory_budget,
                "capture_threads": self.live.capture_threads,
                "length": len(source),
                # The model this frame's capture runs on (the session's, or its copy on lane 1).
                "capture_model": capture_model,
                "build": build,
                "max_pixels": mosaic_budget(panels, visible),
            },
        )
        # Two lanes share the worker's threads; one lane has them all.
        two = self.lanes.count(self.live.player.playing) == 2
        threads = max(1, self.worker.threads // 2) if two else None
        # Behind our own frames, pipelined; otherwise it replaces whatever the window runs.
        gen = self.worker.submit(job, supersede=not self.inflight, lane=lane, threads=threads)
        # The window shows the frame as a run's result first; a stream's, quietly.
        self.host.show_run(gen, streamed=self.live.player.playing)
        gen.on(
            staged=lambda: self.on_staged(gen),
            finished=lambda result: self.on_finished(gen, result),
            failed=lambda error: self.on_errored(gen, error),
            cancelled=lambda: self.on_cancelled(gen),
            superseded=lambda: self.forget(gen),  # a window run replaced it
        )
        self.inflight[gen] = spec
        self.lanes.started(gen, lane, build)

    def _refuse(self, text: str) -> None:
        """The frame taken cannot run: stop playing and say why in the dock."""
        self.coalescer.finish()
        self.coalescer.clear()
        self.live.pause()
        self.live.message.emit(text)

    def forget(self, gen: Job) -> FrameSpec | None:
        """Let go of our frame ``gen``; its spec (None once forgotten)."""
        if (spec := self.inflight.pop(gen, None)) is not None:
            spec.release()
        if self.lanes.captured(gen):
            self.coalescer.finish()
        return spec

    def on_staged(self, gen: Job) -> None:
        if self.lanes.captured(gen):  # the model is free: the next frame may start
            self.coalescer.finish()
            self.pump()

    def on_errored(self, gen: Job, error: BaseException) -> None:
        if (spec := self.forget(gen)) is None:
            return
        from actviz.core.capture import CaptureTooLarge

        self.live.pause()
        self.coalescer.clear()
        budget = format_bytes(self.live.memory_budget)
        self.live.message.emit(
            f"Refused: {error}. The memory budget is {budget}; untick some layers or raise the "
            "budget."
            if isinstance(error, CaptureTooLarge)
            else f"Live frame {spec.index + 1} failed: {type(error).__name__}: {error}"
        )
        self.live.emit_status()

    def on_finished(self, gen: Job, result: Any) -> None:
        if (spec := self.forget(gen)) is None:
            return
        now = time.perf_counter()
        t = spec.timing
        ms = [t.get(k, 0.0) * 1e3 for k in ("load", "capture", "prepare", "prepare_cpu")]
        timing = FrameTiming(spec.index, *ms, shown_ms=(now - t.get("end", now)) * 1e3)
        self.live.frame_shown(spec, timing, now)

    def on_cancelled(self, gen: Job) -> None:
        if self.forget(gen) is not None:
            self.pump()


class FrameLanes:
    """Which model each frame captures on: the session's (lane 0) or its copy (lane 1, held by
    ``copies``), so a small CPU model playing runs two captures at once, one per core."""

    def __init__(self, copies: PrivateModel) -> None:
        self.copies = copies
        #: The frame whose job makes the copy (on lane 0, between two captures).
        self.build_job: Any = None
        #: ``(model, why it gets no copy)``; "" when it may have one; None: not asked yet.
        self.refusal: tuple[Any, str] | None = None
        self.capturing: dict[Any, int] = {}  #: Frames submitted and not captured yet: job -> lane.
        self._last = 1

    @property
    def replica(self) -> ModelCopy | None:
        """The model's copy for lane 1 (None: not made, not wanted, or let go of)."""
        return self.copies.held

    def wanted(self, model: Any, *, playing: bool, threads: int, forced: bool) -> bool:
        """Whether frames alternate between ``model`` and a copy (a small CPU model playing)."""
        if not playing or forced or threads < 2:
            return False
        if self.refusal is None or self.refusal[0] is not model:
            self.refusal = (model, copy_refusal(model) or "")
        return not self.refusal[1]

    def count(self, playing: bool) -> int:
        """Lanes frames capture on now (2 once the copy exists and a sequence plays)."""
        return 2 if playing and self.replica is not None and self.replica.twin is not None else 1

    def drop(self, *, forget_refusal: bool = False) -> None:
        """Let go of the copy (a model switch, the still input, live mode off)."""
        self.copies.forget()
        self.build_job = None
        if forget_refusal:
            self.refusal = None

    def choose(
        self, model: Any, inflight: Any, *, playing: bool, threads: int, forced: bool
    ) -> tuple[int, Any, ModelCopy | None]:
        """``(lane, model to capture, copy to build first)`` for the next frame."""
        options = {"playing": playing, "threads": threads, "forced": forced}
        if not self.wanted(model, **options):
            return 0, model, None
        rep = self.replica
        if rep is not None and (rep.original is not model or rep.failure):
            if rep.failure and rep.original is model:
                log.info("live frames stay on one lane: %s", rep.failure)
                self.refusal = (model, rep.failure)
            self.drop()
            rep = None
        rep = self.copies.unbuilt(model) if rep is None else rep
        if rep.twin is None:  # lane 0 copies the model between two of its captures, unless
            # asked for by a frame still on its way (a dropped one never made it: ask again)
            return 0, model, None if self.build_job in inflight else rep
        on = [0, 0]
        for lane in self.capturing.values():
            on[lane] += 1
        lane = 0 if on[0] < on[1] else 1 if on[1] < on[0] else 1 - self._last
        # Weights changed or moved? Asked only for the copy's frames: it reads every tensor.
        if lane == 1 and not rep.usable():
            self.drop(forget_refusal=True)
            build = self.copies.unbuilt(model) if self.wanted(model, **options) else None
            return 0, model, build
        self._last = lane
        return lane, (model if lane == 0 else rep.twin), None

    def started(self, job: Any, lane: int, build: ModelCopy | None) -> None:
        """``job`` was submitted to capture on ``lane`` (building ``build`` first)."""
        self.capturing[job] = lane
        if build is not None:
            self.build_job = job

    def captured(self, job: Any) -> bool:
        """``job``'s capture ended (or it was dropped): False when it was not capturing."""
        return self.capturing.pop(job, None) is not None
