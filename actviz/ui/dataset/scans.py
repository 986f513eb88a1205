"""DatasetScans: dataset scans and top-k views on two workers of their own, each on a private
model copy (hooks are per-module state). A cancelled scan saves what it has; scanning resumes."""

from __future__ import annotations

import dataclasses
import logging
import math
from collections import OrderedDict
from typing import Any

from PySide6.QtCore import QObject, Signal
from torch import nn

from actviz.core.model_copy import model_bytes, with_loading
from actviz.core.threads import BACKGROUND_NICE
from actviz.ui.background_loads import describe_error
from actviz.ui.dataset.dialog import ScanSpec
from actviz.ui.host import WindowHost
from actviz.ui.worker import CAPTURE_NICE, Job, Worker
from actviz.workspace.session_state import Session

log = logging.getLogger(__name__)

#: Side of the crops the top-k grid asks the engine for (input pixels are resampled to it).
VIEW_SIZE = 96
#: Models larger than this (bytes) are not copied to show a saved scan when they open.
PEEK_COPY_LIMIT = 1 << 30
#: Channels whose top-k views are kept, so stepping back and forth does not re-run the model.
VIEWS_KEPT = 32


def eta_seconds(done: int, total: int, images_per_s: float) -> float:
    """Seconds left at ``images_per_s`` (NaN while unknown)."""
    if images_per_s <= 0 or not math.isfinite(images_per_s) or total <= 0:
        return math.nan
    return max(0, total - done) / images_per_s


class DatasetScans(QObject):
    """The window's dataset scans: the current :class:`Scan` and its workers (a new model
    forgets it).

    Signals: ``scan_started(ScanSpec)``, ``scan_progressed(done, total, images/s, seconds
    left or NaN)``, ``scan_finished(Scan)``, ``scan_failed(message)``, ``scan_cancelled()``
    (a partial :attr:`scan` kept), ``views_ready(layer, channel, TopView tuple)``,
    ``views_failed(layer, channel, why)``."""

    scan_started = Signal(object)
    scan_progressed = Signal(int, int, float, float)
    scan_finished = Signal(object)
    scan_failed = Signal(str)
    scan_cancelled = Signal()
    views_ready = Signal(str, int, object)
    views_failed = Signal(str, int, str)
    views_cancelled = Signal(str, int)
    # Emitted on the scan's thread, received (queued) on the GUI thread: job, done, total, ips.
    _progressed = Signal(object, int, int, float)

    def __init__(self, host: WindowHost, parent: QObject | None = None) -> None:
        super().__init__(parent)
        self.session: Session = host.session
        #: The top-k views' model copy, shared with the window's features (gone when it idles).
        self.views_copy = host.private_model(self, to_eval=True)
        #: The scan's own copy, built on the scan's thread and let go of when the scan ends.
        self.scan_copy = host.private_model(self, to_eval=True, keep=True)
        self.scan: Any = None  #: The last finished scan of the session's model (None before one).
        #: What the scan running now (else :attr:`scan`) was asked for.
        self.spec: ScanSpec | None = None
        self._scan_spec: ScanSpec | None = None  # what :attr:`scan` was asked for
        #: DataLoader worker processes (None: the engine's choice); tests use 0.
        self.num_workers: int | None = None
        # The GUI thread and live mode come first on shared cores (actviz.core.threads).
        self.scan_worker = Worker(self, nice=BACKGROUND_NICE)
        self.views_worker = Worker(self, nice=CAPTURE_NICE)
        self._progressed.connect(self._on_progressed)
        self._scan_job: Job | None = None
        #: Partial results of cancelled scans, by job (set on the scan's thread).
        self._partial: dict[Job, Any] = {}
        self._views_key: tuple[str, int] | None = None
        self._views_cache: OrderedDict[tuple[int, str, int], tuple[Any, ...]] = OrderedDict()
        #: The last progress: done, total, images/s.
        self.progress: tuple[int, int, float] = (0, 0, 0.0)

    def is_scanning(self) -> bool:
        """True while a scan is queued or running (a cancelled one until it stopped)."""
        return self.scan_worker.has_current_job()

    def covers(self, layer: str) -> bool:
        """Whether the current scan holds ``layer``."""
        return self.scan is not None and layer in tuple(self.scan.layers)

    def start(self, spec: ScanSpec) -> Job | None:
        """Scan ``spec`` in the background (stopping a running one); the job (None: no model)."""
        if (model := self.session.model) is None:
            self.scan_failed.emit("Open a model first, then scan a dataset.")
            return None
        job = self._submit(model, spec, peek=False)
        self.scan_started.emit(spec)
        return job

    def peek(self, spec: ScanSpec) -> Job | None:
        """Report what is saved for ``spec`` as ``scan_finished``, running nothing (silent when
        nothing is; models over :data:`PEEK_COPY_LIMIT` skipped). The job, None without a model."""
        if (model := self.session.model) is None or model_bytes(model) > PEEK_COPY_LIMIT:
            return None  # a big model is not copied unasked (a scan, asked for, still copies it)
        return self._submit(model, spec, peek=True)

    def _submit(self, model: Any, spec: ScanSpec, *, peek: bool) -> Job:
        self.spec = spec
        self.progress = (0, 0, 0.0)
        self._partial.clear()  # a superseded scan's partial result is never shown
        loaded = self.session.loaded_model
        transform = self.session.transforms
        num_workers = 0 if peek else self.num_workers
        holder: list[Job | None] = [None]
        # Built on the scan's thread (a running capture's hooks stay out); the box lets it go.
        box = [self.scan_copy.unbuilt(model)]

        def progress(done: int, total: int, ips: float) -> None:
            self._progressed.emit(holder[0], int(done), int(total), float(ips))

        def job(should_stop: Any, _progress: Any) -> Any:
            from actviz.data import ScanCancelled, scan
            from actviz.data.atlas_map import NO_ATLAS_NOTE
            from actviz.data.scan_result import ScanTooLarge

            entry = box[0]
            entry.build()
            if entry.twin is None:
                self.scan_copy.let_go(box.pop())
                raise entry.error or RuntimeError("the model could not be copied")
            target = with_loading(entry.twin, model, loaded)
            del entry

            def run(embeddings: bool) -> Any:
                return scan(
                    target,
                    spec.folder,
                    list(spec.layers),
                    k=spec.k,
                    # A peek loads one image and stops before running it.
                    batch_size=1 if peek else spec.batch_size,
                    # An in-memory module: the session's transforms, if it was given any.
                    transform=transform if isinstance(target, nn.Module) else None,
                    progress=None if peek else progress,
                    should_stop=(lambda: True) if peek else should_stop,
                    num_workers=num_workers,
                    background=True,
                    # Pooled vectors for the dataset atlas, within the memory budget.
                    embeddings=embeddings,
                    memory_budget=self.session.memory_budget if embeddings else None,
                )

            try:
                try:
                    return run(True)
                except ScanTooLarge as exc:
                    # Only the atlas's vectors grow with the data: scan without them, say so.
                    result = run(False)
                    note = f"{NO_ATLAS_NOTE} (the top images are complete): {exc}."
                    return dataclasses.replace(result, warnings=(*result.warnings, note))
            except ScanCancelled as exc:
                if peek:
                    partial = exc.partial
                    return partial if partial is not None and partial.count > 0 else None
                # The cancelled signal carries no value: the partial result waits here.
                self._partial[holder[0]] = exc.partial
                raise
            finally:
                # A copy is as large as the model; scans are long, so the next makes its own.
                self.scan_copy.let_go(box.pop())

        # Each scan supersedes the one before: what reports is the latest.
        handle = self._scan_job = holder[0] = self.scan_worker.submit(job)
        handle.on(
            finished=self._on_scan_finished,
            failed=lambda error: self._on_scan_errored(error, peek),
            cancelled=lambda: self._on_scan_cancelled(handle),
        )
        return handle

    def cancel(self) -> bool:
        """Ask the running scan to stop after its batch; True when one was running."""
        return self.scan_worker.cancel()

    def forget(self) -> None:
        """The model changed: stop the scan and views (unseen) and drop the scan and copies."""
        self.scan_worker.drop()
        self.views_worker.drop()
        self._adopt(None)
        self.spec = self._scan_spec = None
        self._partial.clear()
        self.scan_copy.forget()
        self.views_copy.forget()

    def shutdown(self) -> None:
        """Stop both workers and wait for them (no hook of a copy outlives the window)."""
        self.scan_worker.shutdown()
        self.views_worker.shutdown()
        self.scan_copy.close()
        self.views_copy.close()

    def _on_progressed(self, job: Job | None, done: int, total: int, ips: float) -> None:
        # A cancelled scan still reports the batch it finished (that work is saved).
        if job is not self._scan_job or job.outcome == "superseded":
            return
        self.progress = (done, total, ips)
        self.scan_progressed.emit(done, total, ips, eta_seconds(done, total, ips))

    def _on_scan_finished(self, scan: Any) -> None:
        if scan is None:  # a peek found nothing saved
            self.spec = self._scan_spec
            return
        self._adopt(scan)
        self.scan_finished.emit(scan)

    def show_saved(self, scan: Any) -> None:
        """Show ``scan``, opened from a saved scan folder, as finished (``scan_finished``)."""
        self.spec = None
        self._on_scan_finished(scan)

    def _adopt(self, scan: Any) -> None:
        self.scan = scan
        self.session.set_scan(scan)  # what other views of the dataset read
        self._scan_spec, self._views_key = self.spec, None
        self._views_cache.clear()

    def _on_scan_errored(self, error: BaseException, peek: bool) -> None:
        self.spec = self._scan_spec  # the scan shown stays, with what it was asked for
        if peek:  # the last folder is gone or unreadable: nothing to show
            log.info("no saved scan to show: %s", error)
            return
        log.info("scan failed", exc_info=(type(error), error, error.__traceback__))
        self.scan_failed.emit(f"Scan failed: {describe_error(error)}")

    def _on_scan_cancelled(self, job: Job) -> None:
        if (partial := self._partial.pop(job, None)) is not None and partial.count > 0:
            # What was scanned before the cancel is worth showing (it is saved too).
            self._adopt(partial)
        else:
            self.spec = self._scan_spec
        self.scan_cancelled.emit()

    def request_views(self, layer: str, channel: int) -> bool:
        """Make ``channel`` of ``layer``'s top-k views in the background (already made: emitted
        before this returns); False when the scan lacks ``layer``."""
        if (scan := self.scan) is None or layer not in tuple(scan.layers):
            return False
        key = (id(scan), layer, int(channel))
        self._views_key = (layer, int(channel))
        if (held := self._views_cache.get(key)) is not None:
            self._views_cache.move_to_end(key)
            self.views_worker.drop()
            self.views_ready.emit(layer, int(channel), held)
            return True
        if (model := self.session.model) is None:
            return False
        loaded = self.session.loaded_model

        def submit(twin: Any) -> None:
            if self._views_key != (layer, int(channel)) or self.scan is not scan:
                return  # another channel (or scan) was asked for while the copy was made

            def job(should_stop: Any, _progress: Any) -> Any:
                from actviz.data import top_views

                # The scan's preprocessing again, so the crops are what the scan saw.
                target = with_loading(twin, model, loaded)
                return key, top_views(
                    target, scan, layer, int(channel), size=VIEW_SIZE, should_stop=should_stop
                )

            # Each request supersedes (and silences) the one before.
            self.views_worker.submit(job).on(
                finished=self._on_views_finished,
                failed=self._on_views_errored,
                cancelled=lambda: self.views_cancelled.emit(layer, int(channel)),
            )

        self.views_copy.get(submit, self._on_views_errored)
        return True

    def _on_views_finished(self, result: Any) -> None:
        key, views = result
        self._views_cache[key] = tuple(views)
        while len(self._views_cache) > VIEWS_KEPT:
            self._views_cache.popitem(last=False)
        if self.scan is not None and key[0] == id(self.scan):
            self.views_ready.emit(key[1], key[2], tuple(views))

    def _on_views_errored(self, error: BaseException) -> None:
        if self._views_key is None:
            return
        log.info("top-k views failed", exc_info=(type(error), error, error.__traceback__))
        self.views_failed.emit(*self._views_key, describe_error(error))
