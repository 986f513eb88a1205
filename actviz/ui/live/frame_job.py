"""One live frame as a worker job, and the pixel budget of its mosaics."""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from actviz.core.input_copies import list_layout
from actviz.core.threads import torch_threads
from actviz.display.mosaic import MAX_MOSAIC_PIXELS
from actviz.display.prepare import prepare
from actviz.ui.live.perturbation import Perturbation
from actviz.ui.worker import Staged

if TYPE_CHECKING:  # pragma: no cover
    from actviz.workspace.session_state import RunRequest, RunResult

#: Least pixel budget of a live frame's mosaic (a canvas not laid out yet is tiny).
MIN_LIVE_MOSAIC_PIXELS = 128 * 128


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
        label = self.frame.label if self.frame is not None else ""
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
    emptied when the job starts or is dropped (the closure may outlive it and must pin nothing).
    """
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
