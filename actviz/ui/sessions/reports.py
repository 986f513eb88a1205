"""File > Export report: the result shown as one HTML file, written on the capture worker."""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from PySide6.QtCore import QObject, Signal
from PySide6.QtWidgets import QFileDialog

from actviz.core.capture import CaptureCancelled, format_bytes
from actviz.ui.background_loads import describe_error, format_eta
from actviz.ui.file_dialogs import start_path
from actviz.ui.host import WindowHost, report_value
from actviz.ui.sessions.state import open_args
from actviz.ui.worker import Job, Worker

log = logging.getLogger(__name__)

#: The banner's source for report messages (the next report clears them, no others).
REPORT_SOURCE = "report"
REPORT_FILTER = "HTML reports (*.html)"


class ReportJob:
    """A report's file, its job and each submission of it (the first to begin claims it)."""

    def __init__(self, out: Path) -> None:
        self.out = out
        #: ``job(should_stop, progress, submission)`` (set once made: it refers to the report).
        self.job: Callable[..., Any] | None = None
        #: The handle of each submission, in order.
        self.handles: list[Job] = []
        #: The submission that writes the file (None: none began yet).
        self.claimed_by: int | None = None
        #: (info, error) once the job ended.
        self.outcome: tuple[Any, BaseException | None] | None = None
        self._lock = threading.Lock()

    def submit(self, worker: Worker) -> Job:
        """Submit the job again, behind the queue; None if another submission began first."""
        job, k = self.job, len(self.handles)
        assert job is not None
        self.handles.append(worker.submit(lambda stop, prog: job(stop, prog, k), supersede=False))
        return self.handles[-1]

    def claim(self, submission: int) -> bool:
        """On the job's thread: True for the first submission that begins."""
        with self._lock:
            if self.claimed_by is not None:
                return False
            self.claimed_by = submission
            return True

    def to_resubmit(self) -> bool:
        """Whether no submission began and the latest was superseded (skipped unrun)."""
        return self.claimed_by is None and self.handles[-1].outcome == "superseded"

    def ended_unheard(self) -> bool:
        """Whether it ended in a submission that was superseded (its end goes unheard)."""
        k = self.claimed_by
        ended = k is not None and self.outcome is not None
        return ended and self.handles[k].outcome == "superseded"  # type: ignore[index]


class ReportExport(QObject):
    """A window's reports, in order, on the capture worker (superseded ones: :meth:`resume`)."""

    report_written = Signal(str)
    #: A report's job ended (on the worker's thread): see :meth:`resume`.
    _ended = Signal()

    def __init__(self, host: WindowHost, session_path: Callable[[], Path | None]) -> None:
        super().__init__(host.dialog_parent())
        self.host, self.session = host, host.session
        self._session_path = session_path
        self._reports: dict[ReportJob, None] = {}
        self._closed = False
        self._ended.connect(self.resume)

    def is_busy(self) -> bool:
        """Whether a report is being written (heard of since)."""
        self.resume()
        return bool(self._reports)

    def dialog(self) -> bool:
        """File > Export report…: pick an ``.html`` file and write the report there."""
        # Beside the session, else where the last file dialog was (not the working folder).
        saved = self._session_path()
        start = str(saved.with_suffix(".html")) if saved else start_path("report.html")
        path, _ = QFileDialog.getSaveFileName(
            self.host.dialog_parent(), "Export report", start, REPORT_FILTER
        )
        return bool(path) and self.export(path if path.endswith(".html") else path + ".html")

    def export(self, path: str | Path, *, wait: bool = False) -> bool:
        """Write the result shown as an HTML report; True if started (``wait``: written)."""
        result = self.host.result
        if result is None or result.capture is None:
            self.host.show_warning("Nothing to report yet: run the model first.", REPORT_SOURCE)
            return False
        out = Path(path)
        kwargs = self._report_args()
        # The features' parts: the comparison shown, the scan's sheets (made in the job).
        parts = self.host.report_parts()
        self.host.show_status(f"Writing the report {out.name}…")
        report = ReportJob(out)

        def job(stop: Callable[[], bool], progress: Callable[[str], None], submission: int) -> Any:
            from actviz.io.export.report import write_result_report

            if not report.claim(submission):  # an earlier submission of it began after all
                return None
            began = time.perf_counter()

            def pages(done: int, total: int, what: str) -> None:
                if stop():  # Esc: the file is written whole or not at all
                    raise CaptureCancelled("the report was cancelled")
                left = (time.perf_counter() - began) * (total - done) / done if done else -1.0
                progress(f"Report: {what} ({done}/{total}, ETA {format_eta(left)})")

            # On the capture worker: its passes over the model never overlap a capture.
            try:
                extra = {k: report_value(v, stop) for k, v in parts.items()}
                info = write_result_report(result, out, progress=pages, **kwargs, **extra)
            except Exception as exc:
                report.outcome = (None, exc)
                raise
            else:
                report.outcome = (info, None)
                return info
            finally:
                self._ended.emit()

        report.job = job
        self._submit(report)
        self.host.refresh_busy()
        if wait:
            self.host.wait_until(lambda: report not in self._reports)
            return report.outcome is not None and report.outcome[1] is None
        return True

    def _report_args(self) -> dict[str, Any]:
        s = self.session
        kwargs: dict[str, Any] = {
            "model": s.loaded_model if s.loaded_model is not None else s.model,
            "model_name": s.model_name,
            "input_name": "" if s.input is None else (s.input.source or s.input.description),
            "title": f"actviz report: {s.model_name}" if s.model_name else "",
            # The view settings in force now, not the run's: it paints as the window does.
            "cmap": s.colormap,
            "normalize": s.normalize,
        }
        loaded = s.loaded_model
        if loaded is not None and loaded.model is s.model:
            from actviz.io.export.reproduce import run_source

            kwargs["source"] = run_source(
                loaded,
                None,
                **open_args(s.model_open_args),
                list_input=s.input_as_list,
                target=s.run_target,
            )
        return kwargs

    def _submit(self, report: ReportJob) -> None:
        self._reports[report] = None
        report.submit(self.host.worker).on(
            finished=lambda info: info is not None and self._finished(report, info),
            failed=lambda error: self._errored(report, error),
            cancelled=lambda: self._cancelled(report),
            superseded=self.resume,
            progress=self.host.show_status,
        )

    def resume(self) -> None:
        """Resubmit superseded reports that had not begun; say so for those that ended."""
        if self._closed:
            return
        for report in list(self._reports):
            if report.to_resubmit():
                self._submit(report)
            elif report.ended_unheard():
                info, error = report.outcome  # type: ignore[misc]
                if isinstance(error, CaptureCancelled):
                    self._cancelled(report)
                elif error is not None:
                    self._errored(report, error)
                else:
                    self._finished(report, info)

    def _finished(self, report: ReportJob, info: Any) -> None:
        if self._reports.pop(report, False) is False:
            return
        self.host.clear_messages(REPORT_SOURCE)  # an earlier report's failure is over
        self.host.refresh_busy(f"Wrote the report {info.path} ({format_bytes(info.nbytes)})")
        self.report_written.emit(str(info.path))

    def _errored(self, report: ReportJob, error: BaseException) -> None:
        if self._reports.pop(report, False) is False:
            return
        log.error("report failed", exc_info=(type(error), error, error.__traceback__))
        self.host.show_error(f"Could not write the report: {describe_error(error)}", REPORT_SOURCE)
        self.host.refresh_busy("Could not write the report: see the message above")

    def _cancelled(self, report: ReportJob) -> None:
        if self._reports.pop(report, False) is None:
            self.host.refresh_busy("The report was cancelled.")

    def close(self) -> None:
        """The window closes: reports ending later are not told."""
        self._closed = True
