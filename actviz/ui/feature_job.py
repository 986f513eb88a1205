"""A feature's one job at a time on a worker, and its view's progress bar and message line."""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Any

from PySide6.QtCore import QObject, QSignalBlocker
from PySide6.QtWidgets import QComboBox, QLabel, QProgressBar, QPushButton

from actviz.ui.background_loads import describe_error
from actviz.ui.panels.style import ERROR_TEXT

if TYPE_CHECKING:  # pragma: no cover
    from actviz.ui.worker import Job, Worker


def refill_combo(combo: QComboBox, items: Iterable[str], current: str | int | None = None) -> None:
    """Fill ``combo`` with ``items`` without emitting its signals, ``current`` (a text or an
    index) chosen when it is there, else the first item."""
    with QSignalBlocker(combo):
        combo.clear()
        combo.addItems(list(items))
        index = combo.findText(current) if isinstance(current, str) else current
        if index is not None and 0 <= index < combo.count():
            combo.setCurrentIndex(index)


def show_line(label: QLabel, text: str, *, error: bool = False) -> None:
    """``text`` on a message line, red for an error, hidden when empty."""
    label.setText(text)
    label.setStyleSheet(f"color: {ERROR_TEXT};" if error else "")
    label.setVisible(bool(text))


class StepsAndLine:
    """:class:`FeatureJob`'s view calls over a ``progress`` bar, a ``message`` line and buttons."""

    progress: QProgressBar
    message: QLabel
    run_button: QPushButton
    cancel_button: QPushButton
    #: While busy the run button is hidden (else greyed out); while idle, Cancel likewise.
    hide_run_when_busy = hide_cancel_when_idle = False

    def set_busy(self, busy: bool) -> None:
        """While it runs: Cancel and a busy progress bar; the run button off."""
        run, cancel = self.run_button, self.cancel_button
        (run.setVisible if self.hide_run_when_busy else run.setEnabled)(not busy)
        (cancel.setVisible if self.hide_cancel_when_idle else cancel.setEnabled)(busy)
        self.progress.setVisible(busy)
        if busy:
            self.progress.setRange(0, 0)

    def set_progress(self, done: int, total: int) -> None:
        """``done`` of ``total`` steps (a busy bar until a total is known)."""
        if total > 0:
            self.progress.setRange(0, total)
            self.progress.setValue(min(done, total))

    def set_message(self, text: str, *, error: bool = False) -> None:
        """The message line: ``text``, red for an error, hidden when empty."""
        show_line(self.message, text, error=error)


class FeatureJob(QObject):
    """The one job at a time a feature runs on a worker, its view kept in step.

    The view has ``set_busy(bool)``, ``set_message(text, *, error=False)`` and (with ``steps``)
    ``set_progress(done, total)``. Each end frees the view and says so there and in the status
    bar ("``status`` failed", "``status`` cancelled"; ``on_finished(value, context)``,
    ``interrupted``; red messages to ``on_failed``). ``copy``: the
    :class:`~actviz.ui.private_model.PrivateModel` its jobs wait for."""

    def __init__(
        self,
        parent: QObject,
        host: Any,  # the window's Host
        view: Any,
        *,
        failed: str,
        status: str,
        cancelled: str | Callable[[], str],
        log_as: str,
        on_finished: Callable[[Any, Any], None],
        interrupted: str = "",
        on_failed: Callable[[str], Any] | None = None,
        steps: bool = True,
        worker: Worker | None = None,
        copy: Any = None,
    ) -> None:
        super().__init__(parent)
        self.host, self.view = host, view
        self.worker = worker if worker is not None else host.worker
        self.job: Job | None = None  #: The job running (None: none).
        #: What :meth:`start` was given to hand to ``on_finished`` (None when none runs).
        self.context: Any = None
        #: ``(done, total)`` steps of the job running (written by its thread).
        self.progress: tuple[int, int] = (0, 0)
        # The failure prefix given at construction, and the running job's.
        self._failed_default = self._failed = failed
        self._status, self._log_as, self._steps = status, log_as, steps
        self._cancelled, self._interrupted, self._done = cancelled, interrupted, ""
        self._log = logging.getLogger(type(parent).__module__)
        self._on_finished, self._on_failed, self._copy = on_finished, on_failed, copy
        # What the view says of the running job, and when it began (steps and an ETA follow).
        self._message, self._began = "", 0.0

    @property
    def running(self) -> bool:
        """True from :meth:`start` until the job's end is shown."""
        return self.job is not None

    def start(
        self,
        job: Callable[[Any, Any], Any],
        *,
        message: str,
        status: str,
        done: str,
        failed: str | None = None,
        context: Any = None,
    ) -> Job:
        """Submit ``job(should_stop, report)``, the view saying ``message``, the status bar
        ``status`` then ``done`` (``failed``: failure prefix); the handle."""
        self.context, self._done = context, done
        self._failed = failed if failed is not None else self._failed_default
        self.view.set_busy(True)
        self.view.set_message(message)
        self._message, self._began = message, time.monotonic()
        self.progress = (0, 0)
        handle = self.job = self.worker.submit(job, supersede=False)

        def mine(slot: Callable[..., None]) -> Callable[..., None]:
            # Only while the job is still this one: a later start (or drop) forgets it.
            return lambda *args: handle is self.job and slot(*args)

        handle.on(
            finished=mine(lambda value: self._on_finished(value, self._free(self._done))),
            failed=mine(self._errored),
            cancelled=mine(self._was_cancelled),
            superseded=mine(self._superseded),
        )
        if self.worker is self.host.worker:  # the window's status bar says what it does
            handle.progress.connect(self.host.show_status)
        if self._steps:
            handle.on(started=mine(self._started), progress=mine(self._stepped))
        self.host.refresh_busy(status)
        return handle

    def stepper(
        self, report: Callable[[str], None], text: str, first: int = 0, total: int = 0
    ) -> Callable[[int, int], None]:
        """An engine's ``progress(done, of)``: step ``first + done`` of ``total or of``, said."""

        def step(done: int, of: int) -> None:
            self.progress = (first + done, total or of)
            report(text.format(*self.progress))

        return step

    def cancel(self) -> bool:
        """Ask the running job to stop (its end is shown when the worker says so); one still
        waiting for its ``copy`` never starts."""
        if self.job is not None:
            self.job.cancel()
            return True
        if self._copy is None or not self._copy.pending:
            return False
        self._copy.abandon()
        self._was_cancelled()
        return True

    def copy_failed(self, error: BaseException) -> None:
        """The ``copy`` a job waited for could not be made: a failure before the job."""
        self.fail(f"{self._status} failed", f"Could not copy the model: {describe_error(error)}")

    def drop(self) -> None:
        """Forget the running job without showing an end (the view is left as it is)."""
        self.job = self.context = None
        self.worker.drop()

    def _free(self, status: str) -> Any:
        context = self.context
        self.job = self.context = None
        self.view.set_busy(False)
        self.host.refresh_busy(status)
        return context

    def fail(self, status: str, text: str) -> None:
        """End as failed before or without a job: ``text`` in red, ``status`` in the bar."""
        self._free(status)
        self.view.set_message(text, error=True)
        if self._on_failed is not None:
            self._on_failed(text)

    def _started(self) -> None:
        self._began = time.monotonic()  # it may have waited for a run: the clock starts now

    def _stepped(self, _message: str) -> None:
        done, total = self.progress
        self.view.set_progress(done, total)
        if total > 0 and done > 0:
            elapsed = time.monotonic() - self._began
            self.view.set_message(step_message(self._message, done, total, elapsed))

    def _superseded(self) -> None:
        if self._interrupted:
            # A status of its own: live frames set none, so the job's "…ing" would stay.
            self.fail(
                f"{self._log_as[:1].upper()}{self._log_as[1:]} interrupted", self._interrupted
            )

    def _errored(self, error: BaseException) -> None:
        self._log.info("%s failed: %s", self._log_as, error)
        self.fail(f"{self._status} failed", f"{self._failed}: {describe_error(error)}")

    def _was_cancelled(self) -> None:
        text = self._cancelled() if callable(self._cancelled) else self._cancelled
        self.fail(f"{self._status} cancelled", text)


def step_message(message: str, done: int, total: int, elapsed_s: float) -> str:
    """``message`` + "Step 40 of 800, about 2 min left." (the estimate from the first step)."""
    text = f"{message} Step {done} of {total}"
    if 0 < done < total and elapsed_s > 0:
        text += f", about {_duration(elapsed_s / done * (total - done))} left"
    return text + "."


def _duration(seconds: float) -> str:
    if seconds < 1.5:
        return "1 s"
    if seconds < 90:
        return f"{round(seconds)} s"
    return f"{round(seconds / 60)} min" if seconds < 5400 else f"{seconds / 3600:.1f} h"
