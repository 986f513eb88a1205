"""Seeded random user actions (real input events) on an actviz window, each checked for
exceptions, Qt criticals, GUI blocks, hooks left on models, objects and memory. Recorded steps
replay (``run(steps=...)``), which is how :mod:`stress_cases` shrinks a failure::

    report = StressDriver(demo_model(), seed=3, folder=tmp).run(300)
    assert not report.exceptions, report.describe()"""

from __future__ import annotations

import contextlib
import copy
import dataclasses
import faulthandler
import functools
import gc
import json
import sys
import time
import traceback
import weakref
from collections import Counter
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import torch
from PySide6.QtCore import QSettings, QTimer
from PySide6.QtWidgets import QApplication

from actviz.core.allocator import heap_in_use_mib, memory_breakdown_mib, rss_mib
from actviz.testing import checks, stress_report
from actviz.testing.checks import flush_deletes, live_array_mib, python_heap_mib
from actviz.testing.stress_actions import ACTIONS, UserActions
from actviz.testing.stress_dialogs import DialogAnswerer, FilePickers, drop_file, write_images
from actviz.testing.stress_report import BlockSampler, Failure, Sample, StressReport

#: How many of the longest GUI-thread blocks a report names.
WORST_BLOCKS = 5
#: How long one wait for the window to become idle may take before it counts as stuck (s).
IDLE_TIMEOUT_S = 60.0
#: How long the driver waits for a job before pressing Esc, as a user would (s).
PATIENCE_S = 15.0
#: How long the random short waits between actions wait for the window to be idle (s).
SHORT_SETTLE_S = 1.5
#: The longest the GUI thread may block before it counts as a finding (ms).
BLOCK_LIMIT_MS = 100.0
#: At a checkpoint, how long to wait for the idle window to hand freed memory back (s).
MEMORY_IDLE_WAIT_S = 6.0
#: Seconds the hang timer allows for opening the window, which runs no event loop (s).
OPEN_ALLOWANCE_S = 60.0


@dataclasses.dataclass(frozen=True)
class ModelSetup:
    """How the stress driver shows a model: ``name`` for reports, ``open(window)`` to show it;
    ``prepare()`` makes what it needs once, outside the timed actions."""

    name: str
    open: Callable[[Any], None]
    prepare: Callable[[], Any] | None = None
    path: Path | None = None  # a dropped model's file or folder


def demo_model() -> ModelSetup:
    """The bundled demo model and its first sample image, opened as File > Demo does."""

    def open_demo(window: Any) -> None:
        assert window.files.load_demo(), "the demo could not be opened"

    return ModelSetup("demo", open_demo)


def module_model(
    name: str,
    model: torch.nn.Module | Callable[[], torch.nn.Module],
    inputs: Any,
    layers: Sequence[str] | None = None,
) -> ModelSetup:
    """An in-memory model (or its maker, called once) and its input, shown as a script does; the
    same object in every window, so a hook one window leaves is found by the next check."""
    made = [model] if isinstance(model, torch.nn.Module) else []

    def prepare() -> None:
        if not made:
            made.append(model())  # type: ignore[operator]

    def open_module(window: Any) -> None:
        prepare()
        ticked = list(layers) if layers is not None else None
        window.script.set_model(made[0], name=name, layers=ticked)
        window.script.set_input(inputs)

    return ModelSetup(name, open_module, prepare)


def dropped_model(name: str, path: str | Path, make: Callable[[], Any] | None = None) -> ModelSetup:
    """A model file or folder (a checkpoint, a Hugging Face folder) dropped on the window;
    ``make()`` writes it before the first drop."""
    return ModelSetup(name, lambda window: drop_file(window, path), make, Path(path))


@dataclasses.dataclass(eq=False)
class StressDriver(UserActions):
    """Perform seeded random user actions on actviz windows and check after each; ``hang_s``
    dumps stacks and ends the process (case processes only), ``log_path`` gets each step first,
    ``memory`` measures memory at each checkpoint (a replay looking for a finding needs none)."""

    setup: ModelSetup
    _: dataclasses.KW_ONLY
    folder: Path
    seed: int = 0
    sample_every: int = 50
    size: tuple[int, int] = (1280, 720)
    switches: dict[str, ModelSetup] = dataclasses.field(default_factory=dict)
    checkpoint: str | Path | ModelSetup | None = None
    block_limit_ms: float = BLOCK_LIMIT_MS
    hang_s: float | None = None
    log_path: Path | None = None
    memory: bool = True

    def __post_init__(self) -> None:
        self.folder = Path(self.folder)
        self.log_path = Path(self.log_path) if self.log_path is not None else None
        self.rng = np.random.default_rng(self.seed)
        self.window: Any = None
        self.probe: Any = None  # the GUI lag probe while a run goes on
        self.params: dict[str, Any] = {}
        self.recent: list[str] = []
        self._acting = "(opening the window)"  # the action under way, or the last one
        self.counts: Counter[str] = Counter()
        #: Each error the window showed, with the action it first followed ("i:label").
        self.errors_shown: dict[str, str] = {}
        self.steps: list[tuple[str, dict[str, Any]]] = []
        # Every model a window showed (weakly) and its flags when first seen idle.
        self._models: list[tuple[weakref.ref, dict[str, Any]]] = []
        self._stuck: list[Failure] = []
        self._i = 0  # the action under way
        self.kept_windows: list[str] = []  # closed windows still alive, and what held them
        self.images = write_images(self.folder / "images")
        self.actions: dict[str, Callable[[dict[str, Any]], str]] = {
            name: functools.partial(getattr(self, f"act_{how or name}"), **given)
            for name, (_, how, given) in ACTIONS.items()
            if name != "switch_model" or self.switches
        }
        self.weights: dict[str, float] = {n: ACTIONS[n][0] for n in self.actions}

    def scratch(self, name: str) -> Path:
        """A folder of the scratch folder (made if missing)."""
        path = self.folder / name
        path.mkdir(parents=True, exist_ok=True)
        return path

    def checkpoint_path(self) -> str:
        """What the Open model dialog is given: the checkpoint (a file, or a dropped model's
        setup: its file made first), else the demo."""
        if isinstance(self.checkpoint, ModelSetup):
            return str(self.ready(self.checkpoint).path)
        return str(self.checkpoint) if self.checkpoint is not None else "demo"

    def ready(self, setup: ModelSetup) -> ModelSetup:
        """``setup`` with what it needs made (untimed: the driver's work, not the window's)."""
        if setup.prepare is not None:
            with self.untimed():
                setup.prepare()
        return setup

    @contextlib.contextmanager
    def untimed(self) -> Iterator[None]:
        """The GUI lag probe paused (the driver's own work, a restart: not the window's)."""
        if timing := self.probe is not None and self.probe.timer.isActive():
            self.probe.stop()
        try:
            yield
        finally:
            if timing:
                self.probe.start()

    def note_stuck(self, text: str) -> None:
        """Record that something waited without end (a dialog, a wait for idle)."""
        self._stuck.append(self._failure(self._i, "stuck", text))

    def draw(self) -> tuple[str, dict[str, Any]]:
        """The next random step: an action's name and its params."""
        names = [n for n in self.actions if self.weights.get(n, 0.0) > 0]
        weights = np.array([self.weights[n] for n in names])
        name = str(self.rng.choice(names, p=weights / weights.sum()))
        params = {
            "r": [round(float(v), 4) for v in self.rng.random(5)],
            "answer": "accept" if self.rng.random() < 0.7 else "reject",
            # The event loop runs a little between actions: the next lands while a run is out.
            "spin": float(self.rng.choice([0.0, 0.005, 0.02, 0.08])),
            "settle": bool(self.rng.random() < 0.25),
        }
        return name, params

    def run(
        self,
        actions: int | None = None,
        *,
        steps: Sequence[tuple[str, dict[str, Any]]] | None = None,
        inject: dict[int, dict[str, Any]] | None = None,
    ) -> StressReport:
        """Open a window, perform ``actions`` random actions (or replay ``steps``), close it;
        ``inject``: step -> params of a synthetic failure instead of the action there."""
        from actviz.bench.ui_bench import LagProbe, ensure_qt_app

        ensure_qt_app()
        plan = list(steps) if steps is not None else None
        total = len(plan) if plan is not None else int(actions or 0)
        widgets_before = checks.top_level_widgets()
        exceptions, leaks, blocks, samples = [], [], [], []  # Failures; Samples
        worst: list[tuple[float, str]] = []
        probe = self.probe = LagProbe(5)
        sampler, catcher = BlockSampler(probe), stress_report._Catcher()
        pickers, answerer = FilePickers(self), DialogAnswerer(self)
        started = time.perf_counter()
        pickers.install()
        answerer.timer.start()
        sampler.start()
        try:
            with self._watchdog(), catcher.installed():
                self.open_window()
                samples.append(self._sample(0))
                probe.start()
                for i in range(1, total + 1):
                    self._i = i
                    name, params = copy.deepcopy(plan[i - 1]) if plan is not None else self.draw()
                    if inject and i in inject:
                        name, params = "inject_failure", {**params, **inject[i]}
                    self.params = params
                    self._log(i=i, name=name, params=params)
                    sampler.take()  # what was sampled before this action is not its own
                    mark = len(probe.lags)
                    self._acting = f"{i}:{name}"
                    try:
                        text = self.actions[name](params)
                    except Exception:  # noqa: BLE001 - a valid action raising is a finding
                        text = name
                        catcher.found.append(traceback.format_exc().strip())
                    kept = {k: v for k, v in params.items() if not k.startswith("_")}
                    self.steps.append((name, kept))
                    t = round(time.perf_counter() - started, 3)
                    self._log(i=i, name=name, params=kept, text=text, t=t)
                    self.counts[name] += 1
                    self.recent = [*self.recent[-11:], f"{i}:{text}"]
                    self._acting = self.recent[-1]
                    self.spin(float(params.get("spin", 0.0)))
                    if params.get("settle"):  # a short look: long jobs go on under the next
                        self.settle(SHORT_SETTLE_S)
                    exceptions.extend(self._failure(i, "exception", t) for t in catcher.take())
                    where = sampler.take()
                    if len(probe.lags) > mark:
                        ms, k = max((v * 1e3, j) for j, v in enumerate(probe.lags[mark:]))
                        cpu = probe.cpu[mark + k] * 1e3  # working, or waiting (GIL, a core)?
                        queued = probe.queued[mark + k] * 1e3
                        seen = f" [GUI thread {cpu:.0f} ms on CPU, {queued:.0f} ms waiting for one"
                        seen += f"{' in ' + where if where else ''}]"
                        worst = sorted([*worst, (ms, f"{i}:{text}{seen}")])[-WORST_BLOCKS:]
                        if ms > self.block_limit_ms:
                            blocks.append(self._failure(i, "block", f"{ms:.0f} ms at {text}{seen}"))
                    probe.stop(drain=True)  # read; the checks are the driver's time
                    if self._idle():
                        leaks.extend(self._failure(i, "hook", t) for t in self._leftovers())
                    if i % self.sample_every == 0 or i == total:
                        samples.append(self._sample(i))
                    probe.start()
                    if len(leaks) > 20:
                        break
                probe.stop()
                self.close_window()
                exceptions.extend(self._failure(total, "exception", t) for t in catcher.take())
        finally:
            sampler.stop()
            answerer.timer.stop()
            pickers.uninstall()
        widgets = tuple(repr(w) for w in checks.leaked_widgets(widgets_before))
        return StressReport(
            model=self.setup.name,
            seed=self.seed,
            actions=sum(self.counts.values()),
            action_counts=dict(self.counts),
            exceptions=tuple(exceptions),
            leaked_hooks=tuple(leaks),
            stuck=tuple(self._stuck),
            errors_shown=tuple(
                f"{text} (first after action {after})" for text, after in self.errors_shown.items()
            ),
            max_block_ms=probe.peak * 1e3,
            samples=tuple(samples),
            widgets_left=widgets,
            seconds=time.perf_counter() - started,
            windows_kept=tuple(self.kept_windows),
            worst_blocks=tuple(reversed(worst)),
            blocks=tuple(blocks),
            block_limit_ms=self.block_limit_ms,
            steps=tuple(self.steps),
        )

    def _failure(self, action: int, kind: str, text: str) -> Failure:
        return Failure(action, kind, text, tuple(self.recent))

    def _log(self, **entry: Any) -> None:
        if self.log_path is not None:
            with self.log_path.open("a") as f:
                f.write(json.dumps(entry) + "\n")

    @contextlib.contextmanager
    def _watchdog(self) -> Iterator[None]:
        """Faulthandler's hang timer re-armed from the GUI thread meanwhile."""
        if self.hang_s is None:
            yield
            return
        arm = functools.partial(faulthandler.dump_traceback_later, float(self.hang_s), exit=True)
        timer = QTimer()
        timer.timeout.connect(arm)
        # Opening the window runs no event loop and may pass a short hang_s: a minute at first.
        faulthandler.dump_traceback_later(max(float(self.hang_s), OPEN_ALLOWANCE_S), exit=True)
        timer.start(100)
        try:
            yield
        finally:
            timer.stop()
            faulthandler.cancel_dump_traceback_later()

    def open_window(self) -> None:
        """Open a fresh window on the model and wait until it shows a result."""
        from actviz.ui.window.main_window import MainWindow

        settings = QSettings(str(self.folder / "actviz.ini"), QSettings.Format.IniFormat)
        w = self.window = MainWindow(settings=settings, debounce_ms=int(self.rng.integers(0, 40)))
        w.resize(*self.size)
        w.show()
        w.activateWindow()
        shown = self.errors_shown
        failed = (w.run_failed, w.export_failed, w.model_load_failed, w.input_load_failed)
        for kind, signal in zip(("run", "export", "model", "input"), failed, strict=True):
            signal.connect(lambda t, k=kind: shown.setdefault(f"{k}: {t}", self._acting))
        self.ready(self.setup).open(w)
        self._wait(lambda: w.session.model is not None and not w.files.is_loading())
        w.features["dataset"].scans.num_workers = 0  # no loader processes for 8 images
        if w.session.result is None and w.session.can_run():
            w.runs.run()
        self.settle()

    def close_window(self) -> None:
        """Close the window and delete it (its workers stop; nothing of it stays alive)."""
        window, self.window = self.window, None
        if window is None:
            return
        window.close()
        window.deleteLater()
        alive = weakref.ref(window)
        del window
        flush_deletes(collect=2)
        if alive() is not None:  # what holds it: the referrers' types, two levels up
            holders = []
            for ref in gc.get_referrers(alive()):
                if ref is not self.__dict__ and not isinstance(ref, type(sys._getframe())):
                    up = {type(r).__name__ for r in gc.get_referrers(ref)} - {"list", "frame"}
                    held = f"{stress_report.describe_referrer(ref)} (held by {sorted(up)[:6]})"
                    holders.append(held)
            text = "a closed window is still alive after deleteLater and gc; held by"
            self.kept_windows.append(f"{text}: {holders[:8]}")

    def spin(self, seconds: float) -> None:
        self._wait(lambda: False, seconds)

    def _wait(self, condition: Callable[[], bool], timeout_s: float = IDLE_TIMEOUT_S) -> bool:
        from actviz.bench.ui_bench import wait_until

        deadline = time.perf_counter() + timeout_s
        while not condition() and time.perf_counter() < deadline:  # a modal loop may end early
            wait_until(condition, max(0.0, deadline - time.perf_counter()))
        return bool(condition())

    def _idle(self) -> bool:
        w = self.window
        return w is not None and QApplication.activeModalWidget() is None and not _busy(w)

    def settle(self, timeout_s: float | None = None) -> bool:
        """Wait for the window to be idle (live playback paused first: it never is); without
        ``timeout_s``, a wait over :data:`IDLE_TIMEOUT_S` is recorded as stuck."""
        if (live := self.window.features["live"].controller).playing:
            live.pause()
        ok = self._wait(self._idle, PATIENCE_S if timeout_s is None else timeout_s)
        if not ok and timeout_s is None:
            # A long job a user does not sit through: Esc; stuck if still busy after that.
            self.window.cancel()
            ok = self._wait(self._idle, IDLE_TIMEOUT_S)
        with self.untimed():
            self.window.display.flush_panel_updates()
        if not ok and timeout_s is None:
            self.note_stuck(f"the window did not become idle: {busy_parts(self.window)}")
        return ok

    def _leftovers(self) -> list[str]:
        """Hooks and changed flags on every model a window showed (the window idle)."""
        model = self.window.session.model if self.window is not None else None
        if model is not None and not any(ref() is model for ref, _ in self._models):
            self._models.append((weakref.ref(model), stress_report.model_state(model)))
        found = []
        for ref, state in self._models:
            if (seen := ref()) is not None:
                found.extend(stress_report.model_leftovers(seen, state))
        self._models = [(r, s) for r, s in self._models if r() is not None]
        return found

    def _sample(self, action: int) -> Sample:
        self.settle()
        # A cancelled job may still be finishing on its pool thread: give its runner a moment.
        for _ in range(10):
            flush_deletes(collect=2)
            # What the window's idle collection froze is counted too: it may run in the flushes.
            gc.unfreeze()
            if (counts := stress_report.count_objects())["_Runner"] == 0:
                break
            self.spin(0.1)
        if spinning := idle_spinners(self.window, self.spin):
            self.note_stuck(f"a 0 ms timer runs on in the idle window (never sleeps): {spinning}")
        if not self.memory:  # the live objects only: findings need no memory figures
            return Sample(action, counts, rss_mib(), heap_in_use_mib(), {})
        # Memory as the idle window leaves it, after its idle trim (a user pauses; actions not).
        if (memory := getattr(self.window, "memory", None)) is not None:
            passes = memory.passes  # a pass need not trim (little kept): not trims
            memory.idle_now()
            self._wait(lambda: memory.passes > passes, timeout_s=MEMORY_IDLE_WAIT_S)
        gc.unfreeze()  # the arrays the window's idle collection froze are counted too
        breakdown = {**memory_breakdown_mib(), **python_heap_mib(), **live_array_mib()}
        if (session := getattr(self.window, "session", None)) is not None:  # of the tensors
            breakdown |= {"held": session.held_bytes() / 2**20, "pins": session.pins.nbytes / 2**20}
        if memory is not None:  # frozen again, as the window's full collection leaves them
            memory.collect_cycles(full=True)
        return Sample(action, counts, rss_mib(), heap_in_use_mib(), breakdown)


def idle_spinners(w: Any, spin: Callable[[float], object]) -> str:
    """The owners of 0 ms timers still armed in idle window ``w`` after two short spins: a
    call that asks for itself again each turn keeps the GUI thread from sleeping ("" if none)."""
    seen = []
    for _ in range(2):
        spin(0.05)
        seen.append({t for t in w.findChildren(QTimer) if t.isActive() and t.interval() == 0})
    return ", ".join(sorted({type(t.parent()).__name__ for t in seen[0] & seen[1]}))


def busy_parts(w: Any) -> str:
    """What keeps window ``w`` (or None) from being idle, for a stuck finding's text."""
    modal = QApplication.activeModalWidget()
    parts = [f"modal {type(modal).__name__} {modal.windowTitle()!r}"] if modal else []
    parts += _busy(w) if w is not None else []
    return ", ".join(parts) or "idle by now"


def _busy(w: Any) -> list[str]:
    """What of window ``w`` is busy: "busy", "loading", "run due", "display", "<feature> busy"."""
    on = (w.is_busy(), w.files.is_loading(), w.runs.is_due(), w.display.display_pending())
    parts = [n for n, b in zip(("busy", "loading", "run due", "display"), on, strict=True) if b]
    return parts + [f"{n} busy" for n, f in w.features.items() if f.is_busy()]
