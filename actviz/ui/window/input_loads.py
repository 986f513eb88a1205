"""The input being opened: one request at a time, read on a loader worker.

An input asked for while a model is being opened waits for that model (its transforms decide
the size and normalisation); one being read when another model arrives is read again for it.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

from actviz.ui.background_loads import (
    InputRequest,
    error_details,
    failed_status,
    failure_reason,
    short_source,
)
from actviz.ui.worker import Job, Worker

log = logging.getLogger(__name__)

INPUT_HINT = "Open an input (Ctrl+I), drop a file on the window, or pick a sample."

Slot = Callable[..., None]


def while_current(request: Any, job: Job, current: Callable[[], Any]) -> Callable[[Slot], Slot]:
    """Wraps ``slot(request, ...)`` to run only while ``request`` is ``current()`` and ``job``
    its load: a superseded or restarted load's signals are ignored."""
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
    """The input loads of ``files`` (a :class:`~actviz.ui.window.file_opening.FileOpening`).

    ``request`` is the input being opened (None when none is); its ``job`` is None while it
    waits for a model being opened.
    """

    def __init__(self, files: Any, worker: Worker) -> None:
        self.files = files
        self.window = files.window
        self.session = files.session
        self.worker = worker
        self.request: InputRequest | None = None

    def ask(self, request: InputRequest) -> None:
        """Open ``request`` (it supersedes one being opened), or let it wait for a model
        being opened."""
        previous = self.request
        if previous is not None and previous is not request:
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
        pending = self.request
        if pending is not None and pending.job is None:
            self.start(pending)

    def model_failed(self) -> None:
        """The model being opened failed: an input that waited for it is read for the
        current model instead (a quiet start-up default is dropped when there is none)."""
        pending = self.request
        if pending is None or pending.job is not None:
            return
        if pending.quiet and self.session.model is None:
            self.request = None
            pending.succeeded = False
        else:
            self.start(pending)

    def drop(self, text: str = "") -> None:
        """Forget the input being opened; with ``text``, report it as cancelled."""
        request = self.request
        if request is None:
            return
        self.worker.drop()
        self.request = None
        request.succeeded = False
        if text:
            self.window.refresh_busy(text)
            self.window.input_load_failed.emit(text)

    def refit(self) -> None:
        """After an input that did not open: the input still held may be the previous
        model's (the failed one waited for a model switch and took the place of the input read
        for it). One the model cannot take is kept aside and replaced, as on a switch."""
        from actviz.io.input_fit import input_misfit

        loaded, inp = self.session.loaded_model, self.session.input
        if loaded is None or inp is None or self.request is not None:
            return
        if input_misfit(loaded, inp.value, inp.source) is None:
            return
        swap = self.files.swap
        request, restore = swap.input_for(loaded)
        if restore is not None:
            swap.restore(restore)
        if request is not None:
            self.ask(request)

    def _on_finished(self, request: InputRequest, loaded: Any) -> None:
        if request.model is not self.session.model:
            # The model changed while the input was read: read it again for the new one.
            self.start(request)
            return
        self.request = None
        request.succeeded = True
        banner = self.files.banner
        banner.clear("action")
        if not (request.quiet or request.swap):
            # An input the user opened: a note that another input stands in for theirs
            # (a model switch's swap) is no longer true.
            banner.clear("input")
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
            return
        swap = self.files.swap
        if request.quiet:
            log.info("no default input: %s", error)
            text = INPUT_HINT
            self.window.host.show_warning(text)
        else:
            source = request.source
            reason = failure_reason(error, source)
            text = f"Could not open input {source!r}: {reason}"
            self.window.host.show_error(text, details=error_details(error))
            swap.failure = (repr(short_source(source.removeprefix("text:"))), reason.rstrip("."))
        self.window.refresh_busy(text if request.quiet else failed_status(request.source))
        self.window.input_load_failed.emit(text)
        self.refit()
        swap.failure = None  # said by the input put in its place, or not needed
        self.window.runs.run_if_due()

    def _on_cancelled(self, request: InputRequest) -> None:
        self.drop(f"Opening {short_source(request.source)} was cancelled.")
        self.refit()
        self.window.runs.run_if_due()


__all__ = ["INPUT_HINT", "InputLoads", "outcome", "while_current"]
