"""The worker side of live mode: which frame goes next, on which lane, and what each job's end
means for the frames in flight. The controller offers frames and calls
:meth:`~FrameRunner.pump`; frames shown go back to ``LiveController.frame_shown``."""

from __future__ import annotations

import time
from typing import Any

from PySide6.QtCore import QTimer

from actviz.core.capture import format_bytes
from actviz.core.model_copy import ModelCopy
from actviz.display.repage import reusable_mosaics
from actviz.ui.live.frame_job import FrameSpec, frame_job, mosaic_budget
from actviz.ui.live.frame_status import FrameTiming
from actviz.ui.live.frames import StillFrame, estimate_bytes
from actviz.ui.worker import Job

#: Frames captured or queued for capture at once while a sequence plays (1 when paused).
CAPTURES_AHEAD = 2


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
            return
        if self.coalescer.has_pending and not self.coalescer.busy:
            self._pump_timer.start(max(1, int(self.coalescer.wait_s() * 1000) + 1))

    def choose_lane(self, model: Any) -> tuple[int, Any, ModelCopy | None]:
        """``(lane, model to capture, copy to build first)`` for the next frame."""
        return self.lanes.choose(
            model,
            self.inflight,
            playing=self.live.player.playing,
            threads=self.worker.threads,
            forced=self.live.capture_threads is not None,
        )

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
        lane, capture_model, build = self.choose_lane(base.model)
        overview = s.saliency_wanted
        panels = self.host.layer_panels
        job = frame_job(
            spec,
            {
                "spec": spec,
                "source": source,
                "base": base,
                "layers": layers,
                "previous_shapes": result.output_shapes if result is not None else None,
                # Only the mosaics, not the result: the previous capture must be free to go.
                "previous_mosaics": reusable_mosaics(result) if visible is not None else None,
                # Panels showing concepts (not channels) keep their last channel mosaics.
                "visible": visible and {n for n in visible if not panels[n].tile_unit()},
                # A hidden Overview waits for its tab: so do the frame's histogram, Grad-CAM
                # map and statistics table.
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
