"""The Concept dock's background jobs (effect, top images, what it wants, folder scans), on one
worker and model copy; a result shows only while its concept does."""

from __future__ import annotations

from typing import Any

import numpy as np
from PySide6.QtCore import QObject

from actviz.display.logit_lens import token_texts
from actviz.ui.background_loads import describe_error
from actviz.ui.concepts.training_job import TOP_K
from actviz.ui.concepts.view import ConceptView
from actviz.ui.host import WindowHost
from actviz.ui.private_model import PrivateModel
from actviz.ui.worker import CAPTURE_NICE, Worker

#: Steps of "What it wants" (a quick picture; the Visualize tab makes finer ones).
WANTS_STEPS = 96


def concepts_of(attached: Any) -> Any:
    """The dictionary of an attached entry."""
    return attached.concepts


class ConceptJobs(QObject):
    """What the Concept dock (``view``) runs in the background, one job at a time."""

    def __init__(
        self, host: WindowHost, copies: PrivateModel, view: ConceptView, parent: QObject
    ) -> None:
        super().__init__(parent)
        self.host = host
        self.session = host.session
        self.copies = copies
        self.view = view
        self.worker = Worker(self, nice=CAPTURE_NICE)
        self._closed = False

    def drop(self) -> None:
        """Forget every job (another model): none reports."""
        self.worker.drop()

    def shutdown(self) -> None:
        """Stop for good."""
        self._closed = True
        self.worker.shutdown()

    def start(self, layer: str, concept: int) -> None:
        """A concept just opened: its effect, and its top images when scanned."""
        self.start_effect(layer, concept)
        att = self.session.concepts.get(layer)
        if att is not None and att.scan is not None:
            self.start_top(layer, concept)
        elif att is not None:
            self.view.set_top([], "No concept scan yet: find its top images in a folder.")

    def _submit(self, kind: str, job: Any, supersede: bool = False) -> None:
        self.worker.submit(job, supersede=supersede).on(
            finished=lambda value: self._on_worker_finished(kind, value),
            failed=lambda error: self._on_worker_errored(kind, error),
        )

    def start_effect(self, layer: str, concept: int) -> None:
        from actviz.analysis.concepts.tiles import concept_effect

        att = self.session.concepts.get(layer)
        result = self.session.result
        if att is None or result is None or result.capture is None:
            return
        inputs = result.capture.inputs
        # An edit already on this concept is left out: the effect is the whole concept's.
        edits = {
            k: tuple(
                e
                for e in v
                if not (
                    k == layer
                    and e.kind == "concept"
                    and concepts_of(att).same_as(e.concepts)  # a session copy too
                    and concept in tuple(e.channels or ())
                )
            )
            for k, v in (result.capture.edits or {}).items()
        }
        target = self.session.run_target
        concepts = att.concepts
        self.view.set_effect("Measuring its effect on the prediction…")

        def run(clone: Any) -> None:
            def job(_stop: Any, _report: Any) -> Any:
                return (layer, concept), concept_effect(
                    clone, inputs, concepts, layer, concept, target=target, edits=edits
                )

            self._submit("effect", job, supersede=True)

        self.copies.get(run, self._copy_failed)

    def start_top(self, layer: str, concept: int) -> None:
        from actviz.analysis.concepts.concept_scan import top_heatmaps
        from actviz.analysis.concepts.concept_sheet import overlay

        att = self.session.concepts.get(layer)
        if att is None or att.scan is None:
            return
        concepts, scan = att.concepts, att.scan
        self.view.set_top([], "Reading its top images…")

        def run(clone: Any) -> None:
            model = self.copies.engine_model(clone)

            def job(_stop: Any, _report: Any) -> Any:
                shown = top_heatmaps(model, concepts, scan, concept)
                return (layer, concept), [overlay(p, h) for _, p, h in shown], scan

            self._submit("top", job)

        self.copies.get(run, self._copy_failed)

    def what_it_wants(self) -> None:
        """Synthesise the picture that maximises the concept's decoder direction."""
        from actviz.analysis.visualize.feature_vis import visualize

        if self.view.shown is None:
            return
        layer, concept = self.view.shown
        att = self.session.concepts.get(layer)
        if att is None:
            return
        direction = att.concepts.W_dec[concept].clone()
        self.view.set_wants(None, "Synthesising what it wants…")

        def run(clone: Any) -> None:
            model = self.copies.engine_model(clone)

            def job(stop: Any, _report: Any) -> Any:
                vis = visualize(
                    model, layer, [0], objective=direction, steps=WANTS_STEPS, size=96,
                    should_stop=stop,
                )  # fmt: skip
                return (layer, concept), np.asarray(vis.images[0])

            self._submit("wants", job)

        self.copies.get(run, self._copy_failed)

    def scan_folder(self, layer: str, folder: str) -> None:
        """Scan ``folder`` for the top images of every concept of ``layer``, in the background."""
        from actviz.analysis.concepts.concept_scan import scan_concepts

        att = self.session.concepts.get(layer)
        if att is None:
            return
        concepts = att.concepts
        self.view.set_top([], f"Scanning {folder} for the concepts' top images…")

        def run(clone: Any) -> None:
            model = self.copies.engine_model(clone)

            def job(stop: Any, _report: Any) -> Any:
                return (
                    layer,
                    folder,
                    scan_concepts(model, folder, concepts, layer, k=TOP_K, should_stop=stop),
                )

            self._submit("scan", job)

        self.copies.get(run, self._copy_failed)

    # ------------------------------------------------------------------ the jobs' ends
    def _on_worker_finished(self, kind: str, value: Any) -> None:
        if self._closed:
            return
        if kind == "scan":
            layer, folder, found = value
            att = self.session.concepts.get(layer)
            if att is not None:
                self.session.set_concepts(layer, att.replaced(scan=found, data=folder))
                shown = self.view.shown
                if shown is not None and shown[0] == layer:
                    self.start_top(*shown)
            return
        if value is None:
            return
        where = value[0]
        if where != self.view.shown:
            return  # another concept is shown now
        if kind == "effect":
            self.view.set_effect(self._effect_text(value[1]))
        elif kind == "top":
            pictures, scan = value[1], value[2]
            self.view.set_top(
                pictures,
                f"Its top {len(pictures)} of {scan.count} images (the red tint: where it fires)",
            )
        elif kind == "wants":
            self.view.set_wants(
                value[1], "What it wants: the picture that drives its direction most"
            )

    def _effect_text(self, effect: Any) -> str:
        if effect is None:
            return (
                "Effect on the prediction: the model outputs neither class scores nor "
                "next-token logits."
            )
        cats, what = self.session.categories or [], "class"
        name = f" ({cats[effect.target]})" if effect.target < len(cats) else ""
        if effect.next_token:  # a language model's next token, named by its text
            tokenizer = getattr(self.session.loaded_model, "tokenizer", None)
            name, what = f" {token_texts(tokenizer, [effect.target])[0]!r}", "next token"
        top = ""
        if effect.top_after != effect.target:
            top = f"; the top {what} becomes {effect.top_after}"
        return (
            f"Removing it: {what} {effect.target}{name} {100 * effect.p_before:.1f} % → "
            f"{100 * effect.p_after:.1f} % ({100 * effect.dp:+.1f} pp; logit "
            f"{effect.logit_before:.3g} → {effect.logit_after:.3g}){top}."
        )

    def _copy_failed(self, error: BaseException) -> None:
        self.view.set_effect(f"Could not copy the model: {describe_error(error)}")

    def _on_worker_errored(self, kind: str, error: BaseException) -> None:
        if self._closed:
            return
        if kind == "effect":
            self.view.set_effect(f"Effect not measured: {describe_error(error)}")
        elif kind in ("top", "scan"):
            self.view.set_top([], f"Top images not found: {describe_error(error)}")
        elif kind == "wants":
            self.view.set_wants(None, f"What it wants is not available: {describe_error(error)}")
