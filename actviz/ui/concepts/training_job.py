"""Data > Train concepts…: training on its own worker and model copy; the dictionary is saved
as a SAELens folder, scanned for top images and handed to ``on_trained``."""

from __future__ import annotations

import logging
import time
import weakref
from collections.abc import Callable
from typing import Any

from PySide6.QtCore import QObject, Signal

from actviz.core.edit_kinds import channel_dim
from actviz.ui.background_loads import describe_error
from actviz.ui.concepts.dialog import TrainConceptsDialog, TrainSpec
from actviz.ui.host import WindowHost
from actviz.ui.worker import CAPTURE_NICE, Job, Worker

log = logging.getLogger(__name__)

#: Top images kept per concept by the scan made after training.
TOP_K = 6


def _left(seconds: float | None) -> str:
    if seconds is None:
        return ""
    if seconds < 90:
        return f", about {max(1, round(seconds))} s left"
    return f", about {round(seconds / 60)} min left"


def progress_text(p: Any) -> str:
    """A ``TrainProgress`` in words ("Training: epoch 2, step 30 of 75, ..., about 9 s left.")."""
    if p.stage == "collect":
        return (
            f"Collecting vectors: {p.done} of {p.total} images, {p.vectors:,} vectors seen"
            f"{_left(p.eta_s)}."
        )
    fvu = f", FVU so far {p.fvu:.3f}" if p.fvu is not None else ""
    return (
        f"Training: epoch {p.epoch}, step {p.done} of {p.total}, {p.vectors:,} vectors seen"
        f"{fvu}{_left(p.eta_s)}."
    )


class _Handover(QObject):
    """The training's progress, from the worker's thread to the GUI thread."""

    progressed = Signal(object)


class ConceptTraining(QObject):
    """One training at a time, shown in :attr:`dialog`; ``on_trained`` when one succeeds."""

    def __init__(
        self,
        host: WindowHost,
        on_trained: Callable[[TrainSpec, Any, Any], None],
        parent: QObject,
    ) -> None:
        super().__init__(parent)
        self.host = host
        self.session = host.session
        #: The training's own copy of the model (let go of once handed to the job).
        self.copy = host.private_model(self, to_eval=True)
        self.on_trained = on_trained
        self.worker = Worker(self, nice=CAPTURE_NICE)
        self.dialog: TrainConceptsDialog | None = None  #: The dialog (made on first use).
        self.job: Job | None = None  #: The training's job (None: none runs).
        self.trained_for: Callable[[], Any] = lambda: None  # the model the training reads
        self.last: Any = None  # the last TrainProgress
        self._copying = False  # waiting for the copy of the model
        self._refusal = ""  # why the dialog's model cannot train, as said there
        self._closed = False
        self.handover = _Handover(self)
        self.handover.progressed.connect(self._on_progressed)

    def open_dialog(self) -> TrainConceptsDialog:
        """Data > Train concepts…: the dialog (made on first use), shown."""
        if self.dialog is None:
            self.dialog = TrainConceptsDialog(self.host.dialog_parent(), {})
            self.dialog.train_requested.connect(self.train)
            self.dialog.cancel_requested.connect(self.cancel)
        self.offer_layers(selected=self.host.selected_layer)
        self.dialog.show()
        self.dialog.raise_()
        return self.dialog

    def offer_layers(self, *_event: object, selected: str | None = None) -> None:
        """The dialog offers the model's ticked layers (none ticked: its leaves) with their
        channels, now: a model switch or new ticks change them (not while training)."""
        if self.dialog is None or self.running():
            return
        tree, ticked = self.session.tree, self.session.ticked
        names = list(ticked) if ticked else (list(tree.leaves()) if tree is not None else [])
        result, model = self.session.result, self.session.model
        shapes = result.output_shapes if result is not None else {}
        modules = dict(model.named_modules()) if model is not None else {}
        # The channels a dictionary reads: a text model's (N, T, D) has D, a conv's (N, C, ...) C.
        channels = {
            n: s[channel_dim(modules.get(n), len(s))] if len(s := shapes.get(n) or ()) > 1 else None
            for n in names
        }
        self.dialog.set_layers(channels, selected)
        self._refused()  # said as it opens, not once the fields are filled

    def _refused(self) -> bool:
        """Say in the dialog and return True when the model cannot take a folder of images."""
        problem = self.session.input_problem(source="images") if self.session.model else ""
        said = self.dialog.message.text() if self.dialog is not None else ""
        if self.dialog is not None and (problem or said == self._refusal):  # (or one no more)
            self.dialog.set_message(problem, error=True)
        self._refusal = problem
        return bool(problem)

    def default_out(self, spec: TrainSpec) -> str:
        """Where a dictionary goes when the dialog names no folder: the user's cache."""
        from actviz.data.cache import cache_root

        stamp = time.strftime("%Y%m%d-%H%M%S")
        safe = spec.layer.replace("/", "_") or "model"
        model = (self.session.model_name or "model").replace("/", "_")
        return str(cache_root() / "concepts" / f"{model}-{safe}-{spec.n_concepts}-{stamp}")

    def running(self) -> bool:
        """Whether a training runs now (or waits for its copy of the model)."""
        return self.job is not None or self._copying

    def train(self, spec: TrainSpec) -> None:
        """Train as ``spec`` says, in the background."""
        from actviz.analysis.concepts.concept_scan import scan_concepts
        from actviz.analysis.concepts.training import train

        dialog = self.dialog
        if self.running() or self._refused():
            return
        if not spec.out:
            spec = TrainSpec(**{**spec.__dict__, "out": self.default_out(spec)})
            if dialog is not None:
                dialog.out_edit.setText(spec.out)
        handover = self.handover
        self.last = None
        self._copying = True
        self.trained_for = weakref.ref(self.session.model)  # a model switched to gets none

        def run(clone: Any) -> None:
            model = self.copy.engine_model(clone)
            self.copy.forget()  # the job holds it: the model is not held twice after

            def job(stop: Any, _report: Any) -> Any:
                concepts = train(
                    spec.data, spec.layer, model=model, n_concepts=spec.n_concepts, k=spec.k,
                    epochs=spec.epochs, progress=handover.progressed.emit, should_stop=stop,
                    seed=0,
                )  # fmt: skip
                concepts.save(spec.out)
                found = scan_concepts(
                    model, spec.data, concepts, spec.layer, k=TOP_K, should_stop=stop
                )
                return spec, concepts, found

            self._copying = False
            self.job = self.worker.submit(job, supersede=False).on(
                finished=self._on_finished, failed=self._on_errored, cancelled=self._on_cancelled
            )
            self.host.refresh_busy(f"Training concepts on {spec.layer}…")

        if dialog is not None:
            dialog.set_busy(True)
            dialog.set_message("Copying the model…")
        self.copy.get(
            run,
            lambda exc: self._end(f"Training did not start: {describe_error(exc)}", True),
        )

    def cancel(self) -> bool:
        """Cancel the training (Esc, or the dialog's Cancel)."""
        if self._copying and self.job is None:
            self.copy.abandon()
            self._end("Training cancelled before it began.", True)
            return True
        if self.job is None:
            return False
        self.job.cancel()
        return True

    def shutdown(self) -> None:
        """Stop for good (the window closes)."""
        self._closed = True
        self.copy.close()
        self.worker.shutdown()
        if self.dialog is not None:
            self.dialog.close()

    def _end(self, text: str, error: bool) -> None:
        self.job = None
        self._copying = False
        if self.dialog is not None:
            self.dialog.set_busy(False)
            self.dialog.set_message(text, error=error)
        self.host.refresh_busy(text)

    def _on_progressed(self, p: Any) -> None:
        self.last = p
        if self.dialog is not None and self.job is not None:
            self.dialog.set_progress(p.done, p.total)
            self.dialog.set_message(progress_text(p))

    def _on_finished(self, value: Any) -> None:
        if self._closed:
            return
        spec, concepts, found = value
        fvu = concepts.heldout_fvu
        fvu_text = f"held-out FVU {fvu:.3f}, " if fvu is not None else ""
        seen = int(concepts.info.get("vectors_seen", 0))
        dead = 100 * (concepts.dead_fraction or 0)
        # Trained on a model the window no longer shows: saved, not put on another model's layer.
        other = self.trained_for() is not self.session.model
        self._end(
            f"Trained {concepts.d_sae} concepts on {seen:,} vectors of {spec.layer}: "
            f"{fvu_text}L0 {concepts.l0 or 0:.1f}, dead {dead:.0f}%; saved in {spec.out}"
            + (" (not shown: the window's model changed since; open the model again and "
               "Data > Open concepts…)." if other else "."),
            other,
        )  # fmt: skip
        if not other:
            self.on_trained(spec, concepts, found)
        self.offer_layers()

    def _on_errored(self, error: BaseException) -> None:
        if not self._closed:
            log.info("training concepts failed: %s", error)
            self._end(f"Training failed: {describe_error(error)}", True)

    def _on_cancelled(self) -> None:
        if not self._closed:
            where = f" ({progress_text(self.last)[:-1]})" if self.last is not None else ""
            self._end(f"Training cancelled{where}.", True)
