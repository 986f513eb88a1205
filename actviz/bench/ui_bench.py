"""The GUI thread's responsiveness: Qt timer lag while live frames run, plus the Qt set-up
the other UI benchmarks share (one QApplication, offscreen when headless, scratch settings)."""

from __future__ import annotations

import atexit
import os
import shutil
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from typing import Any


def ensure_qt_app() -> Any:
    """The running QApplication, creating one (offscreen without a display)."""
    if sys.platform.startswith("linux") and not (
        os.environ.get("DISPLAY") or os.environ.get("WAYLAND_DISPLAY")
    ):
        os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")
    from PySide6.QtWidgets import QApplication

    app = QApplication.instance()
    if app is None:
        app = QApplication([sys.argv[0] if sys.argv else "actviz-bench"])
    return app


_scratch_dir: str | None = None


def scratch_dir() -> str:
    """This process's temporary folder for scratch files; removed when the process exits
    (:func:`remove_scratch` removes it earlier, e.g. before ``os._exit``)."""
    global _scratch_dir
    if _scratch_dir is None:
        _scratch_dir = tempfile.mkdtemp(prefix="actviz-bench-")
        atexit.register(remove_scratch)
    return _scratch_dir


def remove_scratch() -> None:
    """Delete :func:`scratch_dir` and everything in it (nothing if it was never made)."""
    global _scratch_dir
    if _scratch_dir is not None:
        shutil.rmtree(_scratch_dir, ignore_errors=True)
        _scratch_dir = None


def scratch_settings() -> Any:
    """A QSettings in :func:`scratch_dir`, so benchmarks neither read nor change the user's
    settings and leave no file behind."""
    from PySide6.QtCore import QSettings

    handle, path = tempfile.mkstemp(prefix="settings-", suffix=".ini", dir=scratch_dir())
    os.close(handle)
    return QSettings(path, QSettings.Format.IniFormat)


def delete_widgets(*widgets: Any) -> None:
    """Close ``widgets`` and delete them now: ``deleteLater`` waits for an event loop, and a
    bench's ``processEvents`` alone left them alive, their filters seeing later sections' events."""
    from actviz.testing.checks import flush_deletes

    for widget in widgets:
        widget.close()
        widget.deleteLater()
    flush_deletes()


def wait_until(condition: Callable[[], bool], timeout_s: float, step_ms: int = 2) -> bool:
    """Run the Qt event loop until ``condition()`` holds or ``timeout_s`` passes."""
    from PySide6.QtCore import QEventLoop, QTimer

    if condition():
        return True
    loop = QEventLoop()
    deadline = time.perf_counter() + timeout_s
    timer = QTimer()
    timer.setInterval(step_ms)

    def check() -> None:
        if condition() or time.perf_counter() > deadline:
            loop.quit()

    timer.timeout.connect(check)
    timer.start()
    loop.exec()
    timer.stop()
    return bool(condition())


class LagProbe:
    """A repeating Qt timer that records how late each timeout fires.

    Each lag is ``(time since the previous timeout) - interval``: the time the event loop was
    busy (painting, applying a result) or starved (GIL, CPU) beyond the interval.
    """

    def __init__(self, interval_ms: int = 5) -> None:
        from PySide6.QtCore import Qt, QTimer

        self.interval_s = interval_ms / 1000.0
        self.lags: list[float] = []
        #: The GUI thread's CPU time over each lag's interval (s): a block with little of it
        #: waited (for the GIL, for a core) rather than worked.
        self.cpu: list[float] = []
        #: The time the GUI thread waited for a core over each lag's interval (s, Linux; 0
        #: elsewhere): what is neither CPU nor this waited for a lock (the GIL).
        self.queued: list[float] = []
        #: The longest lag so far (s), kept when :meth:`stop` drains the samples.
        self.peak = 0.0
        self._last: float | None = None
        self._last_cpu = self._last_queued = 0.0
        self.timer = QTimer()
        self.timer.setTimerType(Qt.TimerType.PreciseTimer)
        self.timer.setInterval(interval_ms)
        self.timer.timeout.connect(self._on_timeout)

    def start(self) -> None:
        self._last = None
        self.timer.start()

    def stop(self, *, drain: bool = False) -> None:
        """Stop timing; ``drain``: let the samples go too (:attr:`peak` stays), so a long run
        that reads each stretch's samples does not grow its own heap with them."""
        self.timer.stop()
        self._last = None
        if drain:
            self.lags.clear()
            self.cpu.clear()
            self.queued.clear()

    def _on_timeout(self) -> None:
        now, cpu, queued = time.perf_counter(), time.thread_time(), _run_queue_wait()
        if self._last is not None:
            lag = max(0.0, now - self._last - self.interval_s)
            self.lags.append(lag)
            self.cpu.append(cpu - self._last_cpu)
            self.queued.append(queued - self._last_queued)
            self.peak = max(self.peak, lag)
        self._last, self._last_cpu, self._last_queued = now, cpu, queued

    def summary(self) -> dict[str, float]:
        """p50 / p99 / max lag in milliseconds and the number of samples."""
        return lag_summary(self.lags)


def _run_queue_wait() -> float:
    """The calling thread's total wait for a core (s; Linux ``schedstat``, else 0)."""
    try:
        with open("/proc/thread-self/schedstat", "rb") as f:
            return int(f.read().split()[1]) / 1e9
    except (OSError, ValueError, IndexError):
        return 0.0


def lag_summary(lags: list[float]) -> dict[str, float]:
    if not lags:
        return {"p50_ms": float("nan"), "p99_ms": float("nan"), "max_ms": float("nan"), "n": 0}
    s = sorted(lags)
    p99 = s[min(len(s) - 1, int(round(0.99 * (len(s) - 1))))]
    return {
        "p50_ms": statistics.median(s) * 1e3,
        "p99_ms": p99 * 1e3,
        "max_ms": s[-1] * 1e3,
        "n": len(s),
    }
