"""File > Export report: the result shown as one HTML file, written on the capture worker."""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from PySide6.QtCore import QObject, Signal
from PySide6.QtWidgets import QFileDialog

from actviz.core.capture import CaptureCancelled, format_bytes
from actviz.ui.background_loads import describe_error, format_eta
from actviz.ui.file_dialogs import start_path
from actviz.ui.host import WindowHost
from actviz.ui.sessions.state import open_args
from actviz.ui.worker import Job

log = logging.getLogger(__name__)

#: The banner's source for report messages (the next report clears them, no others).
REPORT_SOURCE = "report"
REPORT_FILTER = "HTML reports (*.html)"


class ReportExport(QObject):
    """A window's reports, in order, on the capture worker (a later run does not supersede
    one: it is written after the captures before it; only a cancel stops it)."""

    report_written = Signal(str)

    def __init__(self, host: WindowHost, session_path: Callable[[], Path | None]) -> None:
        super().__init__(host.dialog_parent())
        self.host, self.session = host, host.session
        self._session_path = session_path
        self._reports: list[Job] = []

    def is_busy(self) -> bool:
        """Whether a report is being written."""
        self._reports = [report for report in self._reports if not report.done]
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

        def job(stop: Callable[[], bool], progress: Callable[[str], None]) -> Any:
            from actviz.io.export.report import write_result_report

            began = time.perf_counter()

            def pages(done: int, total: int, what: str) -> None:
                if stop():  # Esc: the file is written whole or not at all
                    raise CaptureCancelled("the report was cancelled")
                left = (time.perf_counter() - began) * (total - done) / done if done else -1.0
                progress(f"Report: {what} ({done}/{total}, ETA {format_eta(left)})")

            # On the capture worker: its passes over the model never overlap a capture.
            extra = {k: v() if callable(v) else v for k, v in parts.items()}
            return write_result_report(result, out, progress=pages, **kwargs, **extra)

        report = self.host.worker.submit(job, supersede=False).keep()
        self._reports.append(report)
        report.on(
            finished=self._finished,
            failed=self._errored,
            cancelled=lambda: self.host.refresh_busy("The report was cancelled."),
            progress=self.host.show_status,
        )
        self.host.refresh_busy()
        if wait:
            self.host.wait_until(lambda: report.done)
            return report.outcome == "finished"
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

    def _finished(self, info: Any) -> None:
        self.host.clear_messages(REPORT_SOURCE)  # an earlier report's failure is over
        self.host.refresh_busy(f"Wrote the report {info.path} ({format_bytes(info.nbytes)})")
        self.report_written.emit(str(info.path))

    def _errored(self, error: BaseException) -> None:
        log.error("report failed", exc_info=(type(error), error, error.__traceback__))
        self.host.show_error(f"Could not write the report: {describe_error(error)}", REPORT_SOURCE)
        self.host.refresh_busy("Could not write the report: see the message above")
