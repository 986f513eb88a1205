"""Seeded random user actions on a real actviz window, with checks after each one.

:class:`StressDriver` opens a window on a model, then performs random but valid actions a
user can take (tick and untick layers, switch tabs, turn pages, change the colour map and the
normalisation, open a channel, make and clear what-if edits, pin, unpin and compare with a
pin, play, pause, perturb and close live mode, start a dataset scan of a tiny folder and cancel
it, export, resize, toggle docks, press Esc, close and reopen the window), many of them while
a run is still in flight. After every action it checks that no exception escaped to
``sys.excepthook`` / ``threading.excepthook`` and that Qt logged no critical message; whenever
the window is idle, that the model holds no hook and no wrapped ``forward``; every
``sample_every`` actions (live paused, the window idle, garbage collected), how many objects of
the kinds that used to leak are alive and the process's resident memory. A :class:`LagProbe`
measures the longest GUI-thread block over the run.

The same seed gives the same sequence of actions (what the machine's speed decides, such as
which run an Esc cancels, may differ), so a failure is reported with its seed and the actions
before it::

    report = StressDriver(demo_model(), seed=3, folder=tmp).run(300)
    assert not report.exceptions, report.describe()
"""

from __future__ import annotations

import contextlib
import ctypes
import dataclasses
import gc
import logging
import os
import sys
import threading
import time
import traceback
import weakref
from collections import Counter
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import torch

from actviz.testing.checks import flush_deletes, hooks_left, leaked_widgets, top_level_widgets

log = logging.getLogger(__name__)

#: Types whose live count must not grow with the number of actions (jobs, pools, windows).
FLAT_TYPES = ("_Runner", "_RunnerSignals", "WorkerSignals", "QThreadPool", "Worker", "MainWindow")
#: Types whose count follows what is shown (bounded, not flat).
BOUNDED_TYPES = ("LayerPanel",)
#: Window sizes the resize action picks from.
SIZES = ((1024, 640), (1280, 720), (1600, 900), (1920, 1080), (900, 600))
#: How many of the longest GUI-thread blocks a report names.
WORST_BLOCKS = 5
#: How long one wait for the window to become idle may take before it counts as stuck (s).
IDLE_TIMEOUT_S = 60.0


@dataclasses.dataclass(frozen=True)
class ModelSetup:
    """How the stress driver shows a model in a fresh window.

    Attributes
    ----------
    name
        Shown in reports.
    open
        ``open(window)``: shows the model and its input in ``window`` (may load in the
        background: the driver waits for the window to be idle afterwards).
    layers
        Layer names the tick actions choose from (None: the model's leaves, as found once the
        window shows it).
    """

    name: str
    open: Callable[[Any], None]
    layers: tuple[str, ...] | None = None


def demo_model() -> ModelSetup:
    """The bundled demo model and its first sample image, opened as File > Demo does."""

    def open_demo(window: Any) -> None:
        assert window.load_demo(), "the demo could not be opened"

    return ModelSetup("demo", open_demo)


def module_model(
    name: str, model: torch.nn.Module, inputs: torch.Tensor, layers: Sequence[str] | None = None
) -> ModelSetup:
    """An in-memory model (e.g. a random-init ``torchvision.models.resnet18()``) and its input.

    The same model object is shown in every window the driver opens, so a hook left by one
    window is found by the next check.
    """

    def open_module(window: Any) -> None:
        window.set_model(model, name=name, layers=list(layers) if layers is not None else None)
        window.set_input(inputs)

    return ModelSetup(name, open_module)


@dataclasses.dataclass(frozen=True)
class Sample:
    """Live objects and memory at one checkpoint (the window idle, garbage collected)."""

    action: int
    counts: dict[str, int]
    rss_mib: float
    #: Memory malloc has handed out and not had back (None where glibc cannot say): unlike the
    #: resident size it leaves out freed memory the allocator keeps for reuse.
    heap_mib: float | None = None


@dataclasses.dataclass(frozen=True)
class Failure:
    """Something a check found: after which action, what it was, and the actions before it."""

    action: int
    kind: str
    text: str
    recent: tuple[str, ...]


@dataclasses.dataclass(frozen=True)
class StressReport:
    """What a stress run did and found.

    Attributes
    ----------
    model, seed
        The model's name and the seed of the actions.
    actions
        How many actions were performed.
    action_counts
        How many of each kind.
    exceptions
        Unhandled exceptions and Qt critical messages (with the actions before them).
    leaked_hooks
        Hooks, wrapped forwards or changed flags found on the model while the window was idle.
    stuck
        Waits for the window to become idle that timed out.
    errors_shown
        Distinct error messages the window showed (runs, exports, loads that failed): not
        crashes, but an action a user may take should not cause them.
    max_block_ms
        The longest the GUI thread did not serve a 5 ms timer (ms), over the run.
    samples
        Live object counts and resident memory at each checkpoint.
    widgets_left
        Top-level widgets alive after the last window was closed and deleted.
    seconds
        Wall time of the run.
    windows_kept
        Closed windows found still alive after ``deleteLater`` and a collection, with what
        held them.
    worst_blocks
        The longest GUI-thread blocks, ``(ms, "index:action")``, longest first: the action
        during (or just after) which the 5 ms timer was late the most.
    """

    model: str
    seed: int
    actions: int
    action_counts: dict[str, int]
    exceptions: tuple[Failure, ...]
    leaked_hooks: tuple[Failure, ...]
    stuck: tuple[Failure, ...]
    errors_shown: tuple[str, ...]
    max_block_ms: float
    samples: tuple[Sample, ...]
    widgets_left: tuple[str, ...]
    seconds: float
    windows_kept: tuple[str, ...] = ()
    worst_blocks: tuple[tuple[float, str], ...] = ()

    def growth(self, type_name: str) -> int:
        """How many more objects of ``type_name`` were alive at the last checkpoint than at
        the first (0 with fewer than two checkpoints)."""
        if len(self.samples) < 2:
            return 0
        return self.samples[-1].counts.get(type_name, 0) - self.samples[0].counts.get(type_name, 0)

    @property
    def objects_growth(self) -> int:
        """The largest growth of the :data:`FLAT_TYPES` between the first and last checkpoint."""
        return max((self.growth(t) for t in FLAT_TYPES), default=0)

    def peak(self, type_name: str) -> int:
        """The most objects of ``type_name`` seen alive at a checkpoint."""
        return max((s.counts.get(type_name, 0) for s in self.samples), default=0)

    @property
    def rss_growth_mib(self) -> float:
        """Resident memory at the last checkpoint minus at the second (the first after the
        warm-up: caches, the first panels), in MiB."""
        if len(self.samples) < 3:
            return 0.0
        return self.samples[-1].rss_mib - self.samples[1].rss_mib

    @property
    def heap_growth_mib(self) -> float | None:
        """:func:`heap_in_use_mib` at the last checkpoint minus at the second, in MiB."""
        if len(self.samples) < 3 or None in (self.samples[1].heap_mib, self.samples[-1].heap_mib):
            return None
        return self.samples[-1].heap_mib - self.samples[1].heap_mib  # type: ignore[operator]

    def describe(self) -> str:
        """A readable account of every finding, for a failure message."""
        lines = [
            f"stress run: model {self.model}, seed {self.seed}, {self.actions} actions in "
            f"{self.seconds:.0f} s, max GUI block {self.max_block_ms:.0f} ms"
        ]
        for title, found in (
            ("exception", self.exceptions),
            ("leaked hook", self.leaked_hooks),
            ("stuck", self.stuck),
        ):
            for f in found:
                lines.append(f"{title} after action {f.action}: {f.text}")
                lines.append("  actions before it: " + " | ".join(f.recent))
        lines.extend(f"error shown: {text}" for text in self.errors_shown)
        lines.extend(f"GUI blocked {ms:.0f} ms at {what}" for ms, what in self.worst_blocks)
        lines.extend(f"widget left: {text}" for text in self.widgets_left)
        lines.extend(f"window kept: {text}" for text in self.windows_kept)
        if self.samples:
            first, last = self.samples[0], self.samples[-1]
            for label, sample in (("first", first), ("last ", last)):
                heap = "" if sample.heap_mib is None else f", heap in use {sample.heap_mib:.0f} MiB"
                lines.append(f"counts {label} {sample.counts} rss {sample.rss_mib:.0f} MiB{heap}")
        return "\n".join(lines)


def rss_mib() -> float:
    """The process's resident memory in MiB (0 where /proc is not there)."""
    try:
        with open("/proc/self/statm") as f:
            pages = int(f.read().split()[1])
    except (OSError, ValueError, IndexError):
        return 0.0
    return pages * os.sysconf("SC_PAGE_SIZE") / 2**20


class _Mallinfo2(ctypes.Structure):
    _fields_ = [
        (name, ctypes.c_size_t)
        for name in (
            "arena",
            "ordblks",
            "smblks",
            "hblks",
            "hblkhd",
            "usmblks",
            "fsmblks",
            "uordblks",
            "fordblks",
            "keepcost",
        )
    ]


def heap_in_use_mib() -> float | None:
    """Memory glibc's malloc has handed out and not had back (``mallinfo2``: the arenas' bytes
    in use plus mmapped blocks), in MiB; None without glibc 2.33 or later."""
    try:
        fn = ctypes.CDLL(None).mallinfo2
    except (OSError, AttributeError):
        return None
    fn.restype = _Mallinfo2
    info = fn()
    return (info.uordblks + info.hblkhd) / 2**20


def count_objects(names: Sequence[str] = FLAT_TYPES + BOUNDED_TYPES) -> dict[str, int]:
    """How many Python objects of a type named one of ``names``, or a subclass of one (a
    ``TokenLayerPanel`` is a ``LayerPanel``), are alive (found by ``gc``)."""
    wanted = set(names)
    counts = dict.fromkeys(names, 0)
    # The classes a type counts as, worked out once per type: a process holds ~10^6 objects.
    kinds: dict[type, tuple[str, ...]] = {}
    for obj in gc.get_objects():
        t = type(obj)
        found = kinds.get(t)
        if found is None:
            found = kinds[t] = tuple(c.__name__ for c in t.__mro__ if c.__name__ in wanted)
        for name in found:
            counts[name] += 1
    return counts


class _Catcher:
    """Collects exceptions that reach ``sys.excepthook`` / ``threading.excepthook`` and Qt's
    critical and fatal messages, while installed."""

    def __init__(self) -> None:
        self.found: list[str] = []

    @contextlib.contextmanager
    def installed(self) -> Iterator[_Catcher]:
        from PySide6.QtCore import QtMsgType, qInstallMessageHandler

        old_sys, old_thread = sys.excepthook, threading.excepthook

        def on_exception(kind: Any, value: Any, tb: Any) -> None:
            self.found.append("".join(traceback.format_exception(kind, value, tb)).strip())
            # Python keeps the last unhandled exception in sys.last_*: its traceback's frames
            # would keep the window that raised it alive until the next one.
            for name in ("last_type", "last_value", "last_traceback", "last_exc"):
                if hasattr(sys, name):
                    setattr(sys, name, None)

        def on_thread(args: Any) -> None:
            on_exception(args.exc_type, args.exc_value, args.exc_traceback)

        def on_message(mode: Any, _context: Any, message: str) -> None:
            if mode in (QtMsgType.QtCriticalMsg, QtMsgType.QtFatalMsg):
                self.found.append(f"Qt critical: {message}")

        sys.excepthook, threading.excepthook = on_exception, on_thread
        old_qt = qInstallMessageHandler(on_message)
        try:
            yield self
        finally:
            sys.excepthook, threading.excepthook = old_sys, old_thread
            qInstallMessageHandler(old_qt)

    def take(self) -> list[str]:
        found, self.found = self.found, []
        return found


def model_state(model: torch.nn.Module) -> dict[str, Any]:
    """What a run must leave as it found: training flags and ``requires_grad`` per name."""
    return {
        "training": {n: m.training for n, m in model.named_modules()},
        "requires_grad": {n: p.requires_grad for n, p in model.named_parameters()},
    }


def model_leftovers(model: torch.nn.Module, before: dict[str, Any]) -> list[str]:
    """Hooks, instance-level ``forward`` wrappers and changed flags on ``model`` (empty: clean)."""
    found = list(hooks_left(model))
    for name, module in model.named_modules():
        if "forward" in vars(module):
            found.append(f"{name or '(model)'} still has a wrapped forward")
    now = model_state(model)
    for key in ("training", "requires_grad"):
        changed = [n for n, v in now[key].items() if before[key].get(n, v) != v]
        if changed:
            found.append(f"{key} changed on {changed[:5]}")
    return found


class StressDriver:
    """Perform seeded random user actions on actviz windows and check after each.

    Parameters
    ----------
    setup
        The model to show (:func:`demo_model`, :func:`module_model`).
    seed
        Seed of the actions.
    folder
        A scratch folder: the window's settings, exports and the tiny image folder scanned.
    sample_every
        Actions between checkpoints (objects counted, memory read).
    size
        The first window's size.
    """

    def __init__(
        self,
        setup: ModelSetup,
        *,
        seed: int = 0,
        folder: str | Path,
        sample_every: int = 50,
        size: tuple[int, int] = (1280, 720),
    ) -> None:
        self.setup = setup
        self.seed = seed
        self.rng = np.random.default_rng(seed)
        self.folder = Path(folder)
        self.folder.mkdir(parents=True, exist_ok=True)
        self.sample_every = sample_every
        self.size = size
        self.window: Any = None
        self.recent: list[str] = []
        self.counts: Counter[str] = Counter()
        self.errors_shown: set[str] = set()
        self._model_state: dict[str, Any] | None = None
        self._model: torch.nn.Module | None = None
        self._layers: tuple[str, ...] = ()
        self._windows_opened = 0
        #: Closed windows found still alive, with what held them.
        self.kept_windows: list[str] = []
        self._images = self._write_images(self.folder / "images")
        self.actions: dict[str, Callable[[], str]] = {
            "tick": self.act_tick,
            "untick": self.act_untick,
            "tab": self.act_tab,
            "page": self.act_page,
            "colormap": self.act_colormap,
            "normalize": self.act_normalize,
            "channel": self.act_channel,
            "close_channel": self.act_close_channel,
            "edit": self.act_edit,
            "clear_edits": self.act_clear_edits,
            "pin": self.act_pin,
            "unpin": self.act_unpin,
            "compare_pin": self.act_compare_pin,
            "live_play": self.act_live_play,
            "live_pause": self.act_live_pause,
            "live_perturb": self.act_live_perturb,
            "live_close": self.act_live_close,
            "scan_cancel": self.act_scan_cancel,
            "export": self.act_export,
            "resize": self.act_resize,
            "dock": self.act_dock,
            "esc": self.act_esc,
            "run": self.act_run,
            "wait": self.act_wait,
            "reopen": self.act_reopen,
        }
        #: Relative frequency of each action (closing the window is rare: it costs a second).
        self.weights: dict[str, float] = dict.fromkeys(self.actions, 1.0)
        self.weights.update(
            {"tick": 3.0, "untick": 2.0, "tab": 2.0, "page": 2.0, "channel": 2.0, "wait": 2.0}
        )
        self.weights.update({"reopen": 0.1, "scan_cancel": 0.3, "export": 0.3})

    # ------------------------------------------------------------------ the run
    def run(self, actions: int) -> StressReport:
        """Open a window, perform ``actions`` random actions, close it; return the report."""
        from actviz.bench.ui_bench import LagProbe, ensure_qt_app

        ensure_qt_app()
        widgets_before = top_level_widgets()
        exceptions: list[Failure] = []
        leaks: list[Failure] = []
        stuck: list[Failure] = []
        samples: list[Sample] = []
        names = list(self.actions)
        weights = np.array([self.weights[n] for n in names])
        weights /= weights.sum()
        probe = LagProbe(5)
        started = time.perf_counter()
        catcher = _Catcher()
        with catcher.installed():
            self.open_window()
            samples.append(self._sample(0, probe))
            probe.start()
            worst: list[tuple[float, str]] = []
            for i in range(1, actions + 1):
                mark = len(probe.lags)
                name = str(self.rng.choice(names, p=weights))
                try:
                    text = self.actions[name]()
                except Exception:  # noqa: BLE001 - a valid action raising is a finding
                    text = name
                    catcher.found.append(traceback.format_exc().strip())
                self.counts[name] += 1
                self.recent = [*self.recent[-11:], f"{i}:{text}"]
                # Between actions the event loop runs a little, often too little for the run
                # an action started: the next action lands while it is in flight.
                self._spin(float(self.rng.choice([0.0, 0.005, 0.02, 0.08])))
                if self.rng.random() < 0.25 and not self._settle():
                    stuck.append(self._failure(i, "stuck", "the window did not become idle"))
                exceptions.extend(self._failure(i, "exception", t) for t in catcher.take())
                if len(probe.lags) > mark:
                    worst = sorted([*worst, (max(probe.lags[mark:]) * 1e3, f"{i}:{text}")])
                    worst = worst[-WORST_BLOCKS:]
                if self._idle():
                    leaks.extend(self._failure(i, "hook", t) for t in self._leftovers())
                if i % self.sample_every == 0 or i == actions:
                    probe.stop()
                    samples.append(self._sample(i, probe))
                    probe.start()
                if leaks and len(leaks) > 20:
                    break
            probe.stop()
            self.close_window()
            exceptions.extend(self._failure(actions, "exception", t) for t in catcher.take())
        widgets = tuple(repr(w) for w in leaked_widgets(widgets_before))
        return StressReport(
            model=self.setup.name,
            seed=self.seed,
            actions=sum(self.counts.values()),
            action_counts=dict(self.counts),
            exceptions=tuple(exceptions),
            leaked_hooks=tuple(leaks),
            stuck=tuple(stuck),
            errors_shown=tuple(sorted(self.errors_shown)),
            max_block_ms=probe.summary()["max_ms"],
            samples=tuple(samples),
            widgets_left=widgets,
            seconds=time.perf_counter() - started,
            windows_kept=tuple(self.kept_windows),
            worst_blocks=tuple(reversed(worst)),
        )

    def _failure(self, action: int, kind: str, text: str) -> Failure:
        return Failure(action, kind, text, tuple(self.recent))

    # ------------------------------------------------------------------ window life
    def open_window(self) -> None:
        """Open a fresh window on the model and wait until it shows a result."""
        from PySide6.QtCore import QSettings

        from actviz.ui.window.main_window import MainWindow

        settings = QSettings(str(self.folder / "actviz.ini"), QSettings.Format.IniFormat)
        window = MainWindow(settings=settings, debounce_ms=int(self.rng.integers(0, 40)))
        window.resize(*self.size)
        window.show()
        window.run_failed.connect(lambda text: self.errors_shown.add(f"run: {text}"))
        window.export_failed.connect(lambda text: self.errors_shown.add(f"export: {text}"))
        window.model_load_failed.connect(lambda text: self.errors_shown.add(f"model: {text}"))
        window.input_load_failed.connect(lambda text: self.errors_shown.add(f"input: {text}"))
        self.window = window
        self._windows_opened += 1
        self.setup.open(window)
        self._wait(lambda: window.session.model is not None and not window.is_loading())
        model = window.session.model
        if model is not self._model:
            self._model = model
            self._model_state = model_state(model)
            self._layers = self.setup.layers or tuple(
                n for n, m in model.named_modules() if n and not list(m.children())
            )
        window.features["dataset"].scans.num_workers = 0  # no loader processes for 8 images
        if window.result is None and window.session.can_run():
            window.run()
        self._settle()

    def close_window(self) -> None:
        """Close the window and delete it (its workers stop; nothing of it stays alive)."""
        window, self.window = self.window, None
        if window is None:
            return
        window.close()
        window.deleteLater()
        alive = weakref.ref(window)
        del window
        flush_deletes()
        gc.collect()
        flush_deletes()
        if alive() is not None:
            # What holds a closed window: the referrers' types, two levels up.
            holders = []
            for ref in gc.get_referrers(alive()):
                if ref is not self.__dict__ and not isinstance(ref, type(sys._getframe())):
                    up = {type(r).__name__ for r in gc.get_referrers(ref)} - {"list", "frame"}
                    holders.append(f"{type(ref).__name__} (held by {sorted(up)[:6]})")
            self.kept_windows.append(
                f"a closed window is still alive after deleteLater and gc; held by: {holders[:8]}"
            )

    # ------------------------------------------------------------------ waiting and checks
    def _spin(self, seconds: float) -> None:
        from actviz.bench.ui_bench import wait_until

        deadline = time.perf_counter() + seconds
        wait_until(lambda: time.perf_counter() >= deadline, seconds + 1.0)

    def _wait(self, condition: Callable[[], bool], timeout_s: float = IDLE_TIMEOUT_S) -> bool:
        from actviz.bench.ui_bench import wait_until

        # A nested event loop can be ended early (a modal loop quitting): wait again then.
        deadline = time.perf_counter() + timeout_s
        while not condition() and time.perf_counter() < deadline:
            wait_until(condition, max(0.0, deadline - time.perf_counter()))
        return bool(condition())

    def _idle(self) -> bool:
        w = self.window
        return not (
            w.is_busy()
            or w.runs.is_due()
            or w.display_pending()
            or any(f.is_busy() for f in w.features.values())
        )

    def _settle(self) -> bool:
        """Wait for the window to be idle (live playback paused first: it never is)."""
        live = self.window.features["live"].controller
        if live.playing:
            live.pause()
        ok = self._wait(self._idle)
        self.window.flush_panel_updates()
        return ok

    def _leftovers(self) -> list[str]:
        model = self.window.session.model
        if model is None or model is not self._model or self._model_state is None:
            return []
        return model_leftovers(model, self._model_state)

    def _sample(self, action: int, probe: Any) -> Sample:
        self._settle()
        counts: dict[str, int] = {}
        # A cancelled job is no longer the window's (it is idle) but may still be finishing on
        # its pool thread: its runner goes when it returns, so give it a moment.
        for _ in range(10):
            flush_deletes()
            gc.collect()
            flush_deletes()
            counts = count_objects()
            if counts["_Runner"] == 0:
                break
            self._spin(0.1)
        return Sample(action, counts, rss_mib(), heap_in_use_mib())

    # ------------------------------------------------------------------ helpers
    def _pick(self, items: Sequence[Any]) -> Any:
        return items[int(self.rng.integers(len(items)))] if items else None

    def _shown_maps(self) -> list[tuple[str, int]]:
        """(layer, channels) of the result's layers shown as maps."""
        result = self.window.result
        if result is None:
            return []
        out = []
        for name, layer in result.layers.items():
            if layer.view is not None and layer.view.kind == "maps" and layer.shape:
                if len(layer.shape) == 4 and name in self.window.layer_panels:
                    out.append((name, int(layer.shape[1])))
        return out

    @staticmethod
    def _write_images(folder: Path, count: int = 8) -> Path:
        from PIL import Image

        folder.mkdir(parents=True, exist_ok=True)
        rng = np.random.default_rng(0)
        for i in range(count):
            pixels = rng.integers(0, 256, (24, 24, 3), dtype=np.uint8)
            Image.fromarray(pixels).save(folder / f"img{i:02d}.png")
        return folder

    # ------------------------------------------------------------------ the actions
    def act_tick(self) -> str:
        name = self._pick(self._layers)
        self.window.tick(name)
        return f"tick {name}"

    def act_untick(self) -> str:
        ticked = sorted(self.window.session.ticked)
        if len(ticked) <= 1:
            return "untick (nothing)"
        name = self._pick(ticked)
        self.window.untick(name)
        return f"untick {name}"

    def act_tab(self) -> str:
        tabs = self.window.centre.tabs
        visible = [i for i in range(tabs.count()) if tabs.isTabVisible(i)]
        index = self._pick(visible)
        tabs.setCurrentIndex(index)
        return f"tab {tabs.tabText(index)}"

    def act_page(self) -> str:
        shown = self._shown_maps()
        if not shown:
            return "page (no maps)"
        name, _ = self._pick(shown)
        step = int(self._pick([-1, 1, 1]))
        self.window.turn_page(name, step)
        return f"page {name} {step:+d}"

    def act_colormap(self) -> str:
        combo = self.window.commands.colormap_combo
        index = int(self.rng.integers(combo.count()))
        combo.setCurrentIndex(index)
        return f"colormap {combo.itemText(index)}"

    def act_normalize(self) -> str:
        combo = self.window.commands.normalize_combo
        index = int(self.rng.integers(combo.count()))
        combo.setCurrentIndex(index)
        return f"normalize {combo.itemData(index)}"

    def act_channel(self) -> str:
        shown = self._shown_maps()
        if not shown:
            return "channel (no maps)"
        name, channels = self._pick(shown)
        channel = int(self.rng.integers(channels))
        self.window.open_channel(name, channel)
        return f"channel {name}:{channel}"

    def act_close_channel(self) -> str:
        view = self.window.centre.channel_view
        if not self.window.centre.channel_box.isVisible():
            return "close channel (none open)"
        view.close_button.click()
        return "close channel"

    def act_edit(self) -> str:
        from actviz.core.edits import ablate, scale

        shown = self._shown_maps()
        if not shown:
            return "edit (no maps)"
        name, channels = self._pick(shown)
        channel = int(self.rng.integers(channels))
        if self.rng.random() < 0.5:
            edit, what = ablate([channel]), "ablate"
        else:
            edit, what = scale([channel], float(self._pick([0.5, 2.0]))), "scale"
        self.window.features["whatif"].add_edit(name, edit)
        return f"edit {what} {name}:{channel}"

    def act_clear_edits(self) -> str:
        self.window.features["whatif"].clear_edits()
        return "clear edits"

    def act_pin(self) -> str:
        pin = self.window.pin_result()
        return "pin" if pin is not None else "pin (nothing)"

    def act_unpin(self) -> str:
        if self.rng.random() < 0.3:
            self.window.unpin_all()
            return "unpin all"
        return "unpin shown" if self.window.unpin_shown() else "unpin shown (not pinned)"

    def act_compare_pin(self) -> str:
        pins = list(self.window.session.pins)
        if not pins:
            return "compare pin (no pins)"
        pin = self._pick(pins)
        ok = self.window.compare_with_pin(pin)
        return f"compare with {pin.label!r}" + ("" if ok else " (refused)")

    def act_live_play(self) -> str:
        from actviz.ui.live.frames import TensorFrames

        live = self.window.features["live"]
        live.dock.show()
        value = self.window.session.input.value if self.window.session.input else None
        if not isinstance(value, torch.Tensor) or value.dim() != 4:
            return "live play (no image input)"
        c = live.controller
        if c.source is None:
            gen = torch.Generator().manual_seed(int(self.rng.integers(1 << 30)))
            frames = value[0] + 0.1 * torch.randn(5, *value.shape[1:], generator=gen)
            c.set_source(TensorFrames(frames, "stress"))
        c.play()
        return "live play"

    def act_live_pause(self) -> str:
        self.window.features["live"].controller.pause()
        return "live pause"

    def act_live_perturb(self) -> str:
        dock = self.window.features["live"].dock
        dock.show()
        what = self._pick(["occlusion", "noise", "brightness", "contrast"])
        if what == "occlusion":
            dock.occlusion_check.setChecked(not dock.occlusion_check.isChecked())
        else:
            slider = getattr(dock, f"{what}_slider")
            slider.setValue(int(self.rng.integers(slider.minimum(), slider.maximum() + 1)))
        return f"live perturb {what}"

    def act_live_close(self) -> str:
        self.window.features["live"].dock.close()
        return "live close dock"

    def act_scan_cancel(self) -> str:
        from actviz.ui.dataset.dialog import ScanSpec

        shown = self._shown_maps()
        if not shown:
            return "scan (no maps)"
        name, _ = self._pick(shown)
        self.window.features["dataset"].start(ScanSpec(str(self._images), (name,), 2, 4))
        self._spin(float(self._pick([0.0, 0.05, 0.2])))
        self.window.cancel()
        return f"scan {name} and cancel"

    def act_export(self) -> str:
        out = self.folder / "exports" / f"export{int(self.rng.integers(3))}"
        ok = self.window.export_all(out)
        return "export" if ok else "export (nothing to export)"

    def act_resize(self) -> str:
        w, h = self._pick(SIZES)
        self.window.resize(w, h)
        return f"resize {w}x{h}"

    def act_dock(self) -> str:
        from PySide6.QtWidgets import QDockWidget

        docks = sorted(self.window.findChildren(QDockWidget), key=lambda d: d.objectName())
        dock = self._pick(docks)
        dock.toggleViewAction().trigger()
        return f"toggle dock {dock.windowTitle() or dock.objectName()}"

    def act_esc(self) -> str:
        from PySide6.QtCore import Qt
        from PySide6.QtTest import QTest

        QTest.keyClick(self.window, Qt.Key.Key_Escape)
        return "Esc"

    def act_run(self) -> str:
        return "run" if self.window.run() is not None else "run (cannot)"

    def act_wait(self) -> str:
        self._settle()
        return "wait idle"

    def act_reopen(self) -> str:
        self.close_window()
        self.open_window()
        return "close and reopen the window"


__all__ = [
    "BOUNDED_TYPES",
    "FLAT_TYPES",
    "Failure",
    "ModelSetup",
    "Sample",
    "StressDriver",
    "StressReport",
    "count_objects",
    "heap_in_use_mib",
    "demo_model",
    "model_leftovers",
    "model_state",
    "module_model",
    "rss_mib",
]
