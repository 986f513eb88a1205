"""One File > Export report on the window's capture worker, which a run may supersede."""

from __future__ import annotations

import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

from actviz.ui.worker import Job, Worker

__all__ = ["ReportJob"]


class ReportJob:
    """A report's file, its job and each submission of it (the first to begin claims it)."""

    def __init__(self, out: Path) -> None:
        self.out = out
        #: ``job(should_stop, progress, submission)``.
        self.job: Callable[..., Any] = _unset
        #: The handle of each submission, in order.
        self.handles: list[Job] = []
        #: The submission that writes the file (None: none began yet).
        self.claimed_by: int | None = None
        #: (info, error) once the job ended.
        self.outcome: tuple[Any, BaseException | None] | None = None
        self._lock = threading.Lock()

    def submit(self, worker: Worker) -> Job:
        """One more submission of the job (behind what is queued: a run still reports). It
        finishes with None when another submission began first (that one writes the file)."""
        job, k = self.job, len(self.handles)
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


def _unset(*_args: Any) -> Any:
    raise RuntimeError("the report's job was not set")
