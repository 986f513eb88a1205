"""Live mode: throughput against bare ``actviz.capture``, and the GUI timer lag meanwhile.

One window, one model, one set of ticked layers. Each pair runs ``frames`` bare captures on the
GUI thread with the window idle, then lets live mode play ``frames`` frames of a tensor
sequence (as fast as the model allows) while a 5 ms Qt timer records its lag; the order flips
every pair. The throughput ratio is the median over pairs of (live frames per second) / (bare
captures per second); the lag figures pool every live block. The display's CPU per frame is
the GUI thread's CPU time (``time.thread_time``) over each live block per frame shown (median
over blocks) plus the preparing thread's CPU time per frame (median over frames): what a frame
costs beside its capture, which on two cores bounds the throughput ratio.

:func:`run_small` runs the same comparison on small models (:data:`SMALL_CASES`), where a
frame's fixed costs (preparing it, putting it on the panels) weigh most against its capture;
``live_small_ratio`` is the lower of their ratios. Those runs have no lag probe, whose timer
would take GUI time from the frames they measure.
"""

from __future__ import annotations

import gc
import statistics
import time
from dataclasses import dataclass, field
from typing import Any

import torch

from actviz.bench.ui_bench import (
    LagProbe,
    delete_widgets,
    ensure_qt_app,
    lag_summary,
    scratch_settings,
    wait_until,
)


def pick_layers(model: torch.nn.Module, n: int) -> list[str]:
    """``n`` layers a user would tick on a ResNet: stem and blocks first, then more leaves."""
    from actviz.bench.capture_bench import block_names
    from actviz.core.capture import leaf_names

    names = [m for m in block_names(model) if m in dict(model.named_modules())]
    names = names[:n]
    for leaf in leaf_names(model):
        if len(names) >= n:
            break
        if leaf not in names:
            names.append(leaf)
    return names


@dataclass
class LiveRig:
    """A shown window with live mode on a torchvision model and a tensor frame sequence."""

    arch: str
    size: int
    n_layers: int
    n_frames: int = 8
    window: Any = None
    live: Any = None
    model: Any = None
    layers: list[str] = field(default_factory=list)
    frames: Any = None
    #: Per live block: the GUI thread's CPU seconds per frame shown.
    gui_cpu_s: list[float] = field(default_factory=list)

    def __post_init__(self) -> None:
        import torchvision

        from actviz.core.threads import parallel_in_workers_only
        from actviz.ui.live.frames import TensorFrames
        from actviz.ui.window.main_window import MainWindow

        self.app = ensure_qt_app()
        # As in the app's own process (actviz.ui.explore.run_app): the GUI thread runs torch on one thread.
        self._undo_threads = parallel_in_workers_only()
        torch.manual_seed(0)
        self.model = torchvision.models.get_model(self.arch, weights=None).eval()
        self.layers = pick_layers(self.model, self.n_layers)
        self.frames = torch.randn(self.n_frames, 3, self.size, self.size)
        self.window = MainWindow(settings=scratch_settings(), auto_run=False)
        self.window.resize(1400, 900)
        self.window.show()
        self.window.script.set_model(self.model, layers=self.layers)
        self.window.script.set_input(self.frames[:1].clone())
        self.live = self.window.features["live"].controller
        self.live.set_source(TensorFrames(self.frames, "bench"))
        self.live.set_speed(60.0)
        self.wait_idle(120.0)  # the first frame: panels built, tree updated

    def wait_idle(self, timeout_s: float) -> bool:
        return wait_until(lambda: not self.window.worker.is_busy() and self.live.idle, timeout_s)

    def bare(self, count: int) -> float:
        """Seconds for ``count`` bare captures (gradients, same layers, same frames), one after
        the other on the window's capture thread, where live mode captures its frames.

        Not on the GUI thread: under libgomp a second thread running torch in parallel keeps
        its own OpenMP team for good, which would slow both loops (:mod:`actviz.core.threads`).
        """
        from actviz.core.capture import capture

        model, frames, layers, n = self.model, self.frames, self.layers, self.n_frames

        from PySide6.QtCore import QEventLoop, QObject, QTimer, Signal

        class Done(QObject):
            ended = Signal(object)  # seconds, or the exception raised

        done = Done()
        outcome: list[object] = []
        # Woken by the capture thread's signal, not polled: the GUI thread stays idle meanwhile.
        loop = QEventLoop()
        timer = QTimer()
        timer.setSingleShot(True)
        timer.timeout.connect(loop.quit)
        done.ended.connect(lambda value: (outcome.append(value), loop.quit()))

        def job() -> None:
            try:
                t0 = time.perf_counter()
                for i in range(count):
                    capture(model, frames[i % n : i % n + 1], layers)
                done.ended.emit(time.perf_counter() - t0)
            except Exception as exc:  # noqa: BLE001 - raised on the GUI thread below
                done.ended.emit(exc)

        self.window.worker.run_unreported(job)
        timer.start(600_000)
        loop.exec()
        timer.stop()
        if not outcome:
            raise TimeoutError("the bare captures did not finish")
        if isinstance(outcome[0], BaseException):
            raise outcome[0]
        return float(outcome[0])  # type: ignore[arg-type]

    def wait_frames(self, target: int, timeout_s: float) -> bool:
        """Run the event loop until ``target`` frames were shown, woken by each frame: a
        polling timer (every 2 ms) would take GUI time from the frames it measures."""
        from PySide6.QtCore import QEventLoop, QTimer

        live = self.live
        if live.frames_shown >= target:
            return True
        loop = QEventLoop()

        def check(*_args: object) -> None:
            if live.frames_shown >= target:
                loop.quit()

        timer = QTimer()
        timer.setSingleShot(True)
        timer.timeout.connect(loop.quit)
        live.frame_changed.connect(check)
        timer.start(int(timeout_s * 1000))
        try:
            loop.exec()
        finally:
            live.frame_changed.disconnect(check)
            timer.stop()
        return live.frames_shown >= target

    def live_block(self, count: int, probe: LagProbe | None, timeout_s: float) -> float:
        """Seconds for ``count`` live frames in steady state (first frame after play excluded).

        The GUI thread's CPU time over the block goes to :attr:`gui_cpu_s` (the bench's
        own waiting is woken by each frame, not polled, so nearly all of it is the frames')."""
        live = self.live
        start_frames = live.frames_shown
        live.play()
        ok = self.wait_frames(start_frames + 1, timeout_s)
        if probe is not None:
            probe.start()
        t0 = time.perf_counter()
        c0 = time.thread_time()
        first = live.frames_shown
        ok = ok and self.wait_frames(first + count, timeout_s)
        dt = time.perf_counter() - t0
        self.gui_cpu_s.append((time.thread_time() - c0) / max(1, live.frames_shown - first))
        if probe is not None:
            probe.stop()
        live.pause()
        self.wait_idle(timeout_s)
        if not ok:
            raise TimeoutError(f"live mode showed {live.frames_shown - first} of {count} frames")
        return dt

    def close(self) -> None:
        self.live.shutdown()
        delete_widgets(self.window)
        self._undo_threads()


def run(
    arch: str = "resnet50",
    size: int = 224,
    n_layers: int = 20,
    pairs: int = 3,
    frames: int = 4,
    timeout_s: float = 300.0,
    lag: bool = True,
) -> dict:
    """Interleaved bare-capture / live blocks; returns throughput ratio and lag figures.

    ``lag=False`` runs no lag probe: its 5 ms timer takes GUI time from the frames (two or
    three timeouts a frame on a small model), which the display's CPU per frame would count.
    """
    rig = LiveRig(arch, size, n_layers)
    probe = LagProbe(5) if lag else None
    ratios: list[float] = []
    bare_fps: list[float] = []
    live_fps: list[float] = []
    try:
        rig.bare(1)  # warm-up
        for i in range(pairs):
            order = ("bare", "live") if i % 2 == 0 else ("live", "bare")
            got: dict[str, float] = {}
            for what in order:
                gc.collect()
                if what == "bare":
                    got[what] = frames / rig.bare(frames)
                else:
                    got[what] = frames / rig.live_block(frames, probe, timeout_s)
            bare_fps.append(got["bare"])
            live_fps.append(got["live"])
            ratios.append(got["live"] / got["bare"])
        timings = list(rig.live.timings)
    finally:
        rig.close()
    lags = lag_summary(probe.lags if probe is not None else [])
    shown = [t.shown_ms for t in timings]
    gui_cpu_ms = statistics.median(rig.gui_cpu_s) * 1e3 if rig.gui_cpu_s else 0.0
    prepare_cpu_ms = statistics.median(t.prepare_cpu_ms for t in timings) if timings else 0.0
    return {
        "arch": arch,
        "size": size,
        "layers": n_layers,
        "bare_fps": statistics.median(bare_fps),
        "live_fps": statistics.median(live_fps),
        "live_throughput_ratio": statistics.median(ratios),
        "ratios": ratios,
        "ui_lag_p50_ms": lags["p50_ms"],
        "ui_lag_p99_ms": lags["p99_ms"],
        "ui_lag_max_ms": lags["max_ms"],
        "lag_samples": lags["n"],
        "capture_ms": statistics.median(t.capture_ms for t in timings) if timings else 0.0,
        "prepare_ms": statistics.median(t.prepare_ms for t in timings) if timings else 0.0,
        "shown_ms": statistics.median(shown) if shown else 0.0,
        "shown_max_ms": max(shown) if shown else 0.0,
        # The display's CPU per frame: the GUI thread's (per block, median) and preparing's.
        "gui_cpu_ms": gui_cpu_ms,
        "prepare_cpu_ms": prepare_cpu_ms,
        "display_cpu_ms": gui_cpu_ms + prepare_cpu_ms,
    }


#: Small-model cases of :func:`run_small`: (architecture, input side, ticked layers).
SMALL_CASES: tuple[tuple[str, int, int], ...] = (("resnet18", 64, 5), ("resnet18", 112, 20))


def run_small(
    cases: tuple[tuple[str, int, int], ...] = SMALL_CASES,
    pairs: int = 5,
    frames: int = 8,
    timeout_s: float = 300.0,
) -> dict:
    """:func:`run` for each of ``cases``, without the lag probe (the GUI lag beside live mode is
    the large model's figure); ``live_small_ratio`` is the lowest throughput ratio.

    Returns
    -------
    dict
        ``rows`` (one :func:`run` result per case, in order) and ``live_small_ratio``.
    """
    rows = [
        run(arch, size, n, pairs=pairs, frames=frames, timeout_s=timeout_s, lag=False)
        for arch, size, n in cases
    ]
    return {"rows": rows, "live_small_ratio": min(r["live_throughput_ratio"] for r in rows)}


def print_table(r: dict) -> None:
    print(
        f"live mode: {r['arch']} {r['size']}px, {r['layers']} ticked layers, "
        f"ratios per pair {', '.join(f'{x:.3f}' for x in r['ratios'])}"
    )
    print(
        f"{'  bare capture fps / live fps / ratio':<44} {r['bare_fps']:9.2f} {r['live_fps']:9.2f} "
        f"{r['live_throughput_ratio']:7.3f}x"
    )
    print(
        f"{'  per frame: capture / prepare / shown ms':<44} {r['capture_ms']:9.0f} "
        f"{r['prepare_ms']:9.0f} {r['shown_ms']:7.0f} (max shown {r['shown_max_ms']:.0f})"
    )
    print(
        f"{'  display CPU per frame: GUI / prepare / sum ms':<44} {r['gui_cpu_ms']:9.2f} "
        f"{r['prepare_cpu_ms']:9.2f} {r['display_cpu_ms']:7.2f}"
    )
    if r["lag_samples"]:
        print(
            f"{'  GUI timer lag p50 / p99 / max ms':<44} {r['ui_lag_p50_ms']:9.1f} "
            f"{r['ui_lag_p99_ms']:9.1f} {r['ui_lag_max_ms']:7.1f} ({r['lag_samples']} samples)"
        )


def print_small(r: dict) -> None:
    """The rows of :func:`run_small`, then ``live_small_ratio``."""
    for row in r["rows"]:
        print_table(row)
    print(f"{'live mode on small models: lowest ratio':<44} {r['live_small_ratio']:27.3f}x")
