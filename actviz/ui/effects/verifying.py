"""The "Channels that matter" dock's exact measurements ("Verify top N", "Measure the effect
of ch N"), run on the capture worker as the feature's one job."""

from __future__ import annotations

from typing import Any

from actviz.analysis.concepts import layer_effects as units
from actviz.ui.effects.view import measured_text
from actviz.ui.host import FeatureJob, channels_text

#: What the dock says when a run replaced the verification (until Verify is pressed again).
INTERRUPTED = "A new run replaced the verification: press Verify again (live mode: pause it first)."


class Verification:
    """The exact measurements of one effects dock (``feature``) in ``host``'s window."""

    def __init__(self, feature: Any, host: Any) -> None:
        self._feature, self.session = feature, host.session
        #: Its context: (the effects verified, None or {layer: channels} measured).
        self.job = FeatureJob(
            feature,
            host,
            feature.view,
            failed="Could not verify",
            failed_status="Verification failed",
            cancelled="The verification was cancelled (the estimates stay).",
            cancelled_status="Verification cancelled",
            interrupted=INTERRUPTED,
            log_as="verifying channel effects",
            on_finished=self._on_verified,
            on_failed=self._on_job_failed,
        )
        #: Channels the user asked to measure, per layer: shown after the top ones.
        self.asked: dict[str, tuple[int, ...]] = {}
        # A measurement asked for before the estimates of the result shown were made.
        self.pending: tuple[str, tuple[int, ...]] | None = None
        # Said under the next result's bars too.
        self.note = ""

    def forget(self) -> None:
        """Another model: its channels are others."""
        self.note, self.asked, self.pending = "", {}, None

    def verify(self, channels: dict[str, tuple[int, ...]] | None = None) -> bool:
        """Measure each layer's top channels (or ``channels``) exactly, in the background."""
        f = self._feature
        if f._closed or self.job.running:
            return False
        eff = f.effects
        if eff is None:
            f.view.set_message("No estimates to verify yet: run the model.", error=True)
            return False
        model = self.session.model
        assert eff is not None and eff.context is not None
        inputs = eff.context.inputs
        if inputs is None and self.session.input is not None:
            # Not the run's own inputs: the session's, through the one input gate.
            problem = self.session.input_problem()
            if problem:
                f.view.set_message(problem, error=True)
                return False
            inputs = self.session.input.value
        count: Any = f.verify_count if channels is None else channels
        self.note = ""
        tracked = self.job
        tracked.progress = (0, 0)

        def job(should_stop: Any, report: Any) -> Any:
            def step(done: int, total: int) -> None:
                tracked.progress = (done, total)
                report(f"Verified {done}/{total} channels")

            return units.verify_layers(
                model, eff, channels=count, inputs=inputs, progress=step, should_stop=should_stop
            )

        if channels is None:
            message = f"Verifying the top {count} channels of each layer…"
        else:
            asked = "; ".join(f"{layer} {channels_text(c)}" for layer, c in channels.items())
            message = f"Measuring the effect of {asked}…"
        self.job.start(
            job,
            message=message,
            status="Verifying channel effects…",
            done="Channel effects verified",
            context=(eff, None if channels is None else dict(channels)),
        )
        return True

    def measure(self, layer: str, channels: Any) -> bool:
        """Measure ``channels`` of ``layer`` exactly, after the estimates, and show them."""
        f = self._feature
        chosen = tuple(dict.fromkeys(int(c) for c in channels))
        if f._closed or not chosen:
            return False
        if self.job.running:
            f.view.set_message(
                "A verification is running: measure again when it ends (or Cancel it).", error=True
            )
            return False
        self.asked[layer] = tuple(dict.fromkeys([*self.asked.get(layer, ()), *chosen]))
        f.dock.show()
        f.dock.raise_()
        if f.effects is None or not f.shows_result() or f.estimating():
            if not f.estimating():
                f.refresh()
            if f.estimating():
                self.pending = (layer, chosen)  # measured once they are made
                return True
            if f.effects is None or not f.shows_result():
                return False  # refresh said why
        if layer not in f.effects.results:
            f.view.set_message(f"{layer} has no channels ranked here.", error=True)
            return False
        f.show_effects()
        return self.verify({layer: chosen})

    def _on_job_failed(self, text: str) -> None:
        # Failures and cancels are answers to the user; a replaced verification is not.
        self.note = text if text == INTERRUPTED else ""

    def _on_verified(self, value: Any, context: Any) -> None:
        f = self._feature
        verifying, measured = context or (None, None)
        if verifying is not None and verifying is f.effects:
            f.effects = value
            f.show_effects()
            if measured:
                f.view.set_message(measured_text(value, measured))
        else:
            f.view.set_message(
                "The verification was of an earlier run: press Verify again.", error=True
            )
