"""The input being opened, one request at a time on a loader worker; it waits for a model being
opened, and a model switch re-reads it or keeps it aside when it does not fit."""

from __future__ import annotations

import logging
from collections.abc import Callable
from pathlib import Path
from typing import Any

from actviz.ui import background_loads as loads
from actviz.ui.background_loads import InputRequest, failure_reason, short_source
from actviz.ui.worker import Job, Worker

log = logging.getLogger(__name__)

INPUT_HINT = "Open an input (Ctrl+I), drop a file on the window, or pick a sample."

Slot = Callable[..., None]


def while_current(request: Any, job: Job, current: Callable[[], Any]) -> Callable[[Slot], Slot]:
    """``slot`` run only while ``request`` is ``current()`` and ``job`` its load."""
    return lambda slot: (
        lambda *args: current() is request and request.job is job and slot(request, *args)
    )


def outcome(request: Any, wait: bool, wait_until: Callable[[Callable[[], bool]], None]) -> bool:
    """True (started), or with ``wait`` whether ``request`` succeeded once it ended."""
    if not wait:
        return True
    wait_until(lambda: request is None or request.succeeded is not None)
    return bool(request is not None and request.succeeded)


class InputLoads:
    """The input loads of ``files``; ``request`` is the one being opened (``job`` None: waiting)."""

    def __init__(self, files: Any, worker: Worker) -> None:
        self.files, self.window, self.session = files, files.window, files.session
        self.worker, self.banner = worker, files.banner
        self.request: InputRequest | None = None
        #: Inputs a newly opened model could not take, by kind, until one takes them.
        self.kept: dict[str, Any] = {}
        #: The input asked for last and why it did not open (None: it did).
        self.failure: tuple[str, str] | None = None

    def ask(self, request: InputRequest) -> None:
        """Open ``request`` (superseding any), or let it wait for a model being opened."""
        if (previous := self.request) is not None and previous is not request:
            previous.succeeded = False
        self.request = request
        if self.files.model_request is not None:
            # Wait for the model being opened: its transforms decide how the input is read.
            self.worker.drop()
            request.job = None
            return
        self.start(request)

    def start(self, request: InputRequest) -> None:
        """Read ``request`` now, for the session's model."""
        self.request = request
        loader = self.window.input_loader
        model, loaded_model = self.session.model, self.session.loaded_model
        request.model = model
        source = request.source
        job = request.job = self.worker.submit(
            lambda stop, progress: loader(source, model=model, loaded_model=loaded_model)
        )
        mine = while_current(request, job, lambda: self.request)
        job.on(
            finished=mine(self._on_finished),
            failed=mine(self._on_errored),
            cancelled=mine(self._on_cancelled),
            progress=self.files.status_label.setText,
        )
        self.window.refresh_busy(f"Opening {short_source(source)}…")

    def start_waiting(self) -> None:
        """Read an input that waited for a model being opened, for the session's model now."""
        if (pending := self.request) is not None and pending.job is None:
            self.start(pending)

    def model_failed(self) -> None:
        """The model being opened failed: an input waiting for it is read for the current one."""
        if (pending := self.request) is None or pending.job is not None:
            return
        if pending.quiet and self.session.model is None:
            self.request = None
            pending.succeeded = False
        else:
            self.start(pending)

    def drop(self, text: str = "") -> None:
        """Forget the input being opened; with ``text``, report it as cancelled."""
        if (request := self.request) is None:
            return
        self.worker.drop()
        self.request = None
        request.succeeded = False
        if text:
            self.window.refresh_busy(text)
            self.window.input_load_failed.emit(text)
        else:  # replaced, not cancelled: no run waits for it (the window would never idle)
            self.window.runs.forget_due()

    def refit(self) -> None:
        """After a failed input, keep aside and replace a held one the model cannot take."""
        from actviz.io.input_files import input_misfit

        loaded, inp = self.session.loaded_model, self.session.input
        if loaded is None or inp is None or self.request is not None:
            return
        if input_misfit(loaded, inp.value, inp.source) is None:
            return
        request, restore = self.input_for(loaded)
        if restore is not None:
            self.restore(restore)
        if request is not None:
            self.ask(request)

    def _on_finished(self, request: InputRequest, loaded: Any) -> None:
        if request.model is not self.session.model:
            # The model changed while the input was read: read it again for the new one.
            self.start(request)
            return
        self.request = None
        request.succeeded = True
        self.banner.clear("action")
        if not (request.quiet or request.swap):
            # The user's own input: a note that another stands in for theirs is stale.
            self.banner.clear("input")
        self.session.set_loaded_input(loaded)
        if request.remember:
            self.files.settings.add_recent_input(request.source)
            self.files.menus.refresh_recent()
        self.window.refresh_busy(f"Opened {short_source(request.source)}")
        self.window.input_loaded.emit(request.source)
        self.window.runs.run_if_due()

    def _on_errored(self, request: InputRequest, error: BaseException) -> None:
        from actviz.io.errors import ModelFileAsInputError

        self.request = None
        request.succeeded = False
        if request.dropped and isinstance(error, ModelFileAsInputError):
            # ".pt" names inputs and models alike: what the file holds decides.
            self.files.open_model_source(request.source)
            if self.session.input is None:  # (`actviz ckpt.pt`): the model's own, as --model
                self.files.open_default_input()
            return
        source = request.source
        if request.quiet:
            log.info("no default input: %s", error)
            self.window.host.show_warning(text := INPUT_HINT)
        else:
            text = f"Could not open input {source!r}: {(reason := failure_reason(error, source))}"
            self.window.host.show_error(text, details=loads.error_details(error))
            self.failure = (repr(short_source(source.removeprefix("text:"))), reason.rstrip("."))
        self.window.refresh_busy(text if request.quiet else loads.failed_status(source))
        self.window.input_load_failed.emit(text)
        self.refit()
        self.failure = None  # said by the input put in its place, or not needed
        self.window.runs.run_if_due()

    def _on_cancelled(self, request: InputRequest) -> None:
        self.drop(f"Opening {short_source(request.source)} was cancelled.")
        self.refit()
        self.window.runs.run_if_due()

    def input_for(self, loaded: Any) -> tuple[InputRequest | None, Any]:
        """``(request, state)`` for the new model: the input if it fits, else a kept one, else
        its default; the misfit is kept."""
        from actviz.io.input_files import input_kind, input_misfit, natural_input_source

        if (inp := self.session.input) is None:
            return None, None
        if (why := input_misfit(loaded, inp.value, inp.source)) is None:
            if path := self.session.input_path:
                return InputRequest(str(path), remember=False, swap=True), None
            if inp.source and input_kind(inp.value, inp.source) == "text" and ":" in inp.source:
                # Token ids are the old tokenizer's: read the text again with the new one.
                return InputRequest(inp.source, remember=False, swap=True), None
            return None, None
        self.kept[input_kind(inp.value, inp.source)] = inp
        for kept in list(self.kept.values()):
            if input_misfit(loaded, kept.value, kept.source) is None:
                del self.kept[input_kind(kept.value, kept.source)]
                self._note(loaded, why, kept.source or kept.description)
                if kept.source and (Path(kept.source).is_file() or ":" in kept.source):
                    return InputRequest(kept.source, remember=False, swap=True), None
                return None, kept
        if (source := natural_input_source(loaded, self.files.menus.samples)) is None:
            failed = self._take_failure(loaded)
            self.window.host.show_warning(
                f"{failed}The input does not fit {loaded.name} ({why}): open an input."
            )
            return None, None
        self._note(loaded, why, source)
        return InputRequest(source, remember=False, quiet=True, swap=True), None

    def restore(self, kept: Any) -> None:
        """Hold a kept input again as it was (made in memory: nothing to read again)."""
        self.session.set_loaded_input(kept)

    def _note(self, loaded: Any, why: str, shown: str) -> None:
        shown = shown.removeprefix("text:")
        name = Path(shown).name if Path(shown).is_file() else shown
        failed = self._take_failure(loaded)
        text = (
            f"{failed}The input does not fit {loaded.name} ({why}): showing {name!r} instead; "
            "the previous input comes back when a model that takes it is opened."
        )
        self.banner.set_messages("input", [("warning" if failed else "info", text)])

    def _take_failure(self, loaded: Any) -> str:
        """The sentence naming the input the user asked for that did not open ("" when none)."""
        failure, self.failure = self.failure, None
        if failure is None:
            return ""
        name, reason = failure
        return f"{name} could not be opened for {loaded.name}: {reason}. "
