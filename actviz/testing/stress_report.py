"""What a stress run found: its report, findings, memory, object counts and where the GUI thread
blocked (shared by the driver and :mod:`actviz.testing.stress_cases`, which reads JSON back)."""

from __future__ import annotations

import contextlib
import dataclasses
import faulthandler
import gc
import re
import statistics
import sys
import tempfile
import threading
import time
import traceback
from collections import Counter
from collections.abc import Iterator, Sequence
from typing import Any

import torch

from actviz.testing.checks import hooks_left

#: Types whose live count must not grow with the number of actions (jobs, pools, windows).
FLAT_TYPES = ("_Runner", "_RunnerSignals", "WorkerSignals", "QThreadPool", "Worker", "MainWindow")
BOUNDED_TYPES = ("LayerPanel",)  #: Types whose count follows what is shown (bounded, not flat).
WARM_UP_ACTIONS = 250  #: Actions of a process's warm-up, left out of the memory slopes.
RATIO_AFTER_ACTIONS = 1_000  #: After how many actions #37's "RSS over the heap in use" is read.
#: Frames of these files say nothing about the block (the driver itself, Qt's test helpers).
_SKIP = ("actviz/testing/", "actviz/bench/")
_FRAME = re.compile(r'\s+File "(.+)", line (\d+) in (.+)$')  #: A frame line of a faulthandler dump.
_THREAD = re.compile(r"(?:Current thread|Thread) 0x([0-9a-fA-F]+)")
#: The columns of :meth:`StressReport.describe`'s memory table.
_MEMORY_KEYS = (
    "rss", "files", "anonymous", "rss_anon", "heap_in_use", "heap_free", "python_heap", "tensors",
    "arrays", "held", "pins",
)  # fmt: skip


@dataclasses.dataclass(frozen=True)
class Sample:
    """Live objects and memory at one checkpoint (the window idle, garbage collected)."""

    action: int
    counts: dict[str, int]
    rss_mib: float
    #: Memory malloc handed out and not had back, not freed memory kept (None: glibc cannot say).
    heap_mib: float | None = None
    #: What the resident size is made of (:func:`actviz.core.allocator.memory_breakdown_mib`).
    breakdown: dict[str, float] | None = None

    @property
    def heap_counted_mib(self) -> float | None:
        """Malloc's bytes handed out plus pymalloc's blocks in use (MiB); None if one is missing."""
        python = (self.breakdown or {}).get("python_heap")
        return None if self.heap_mib is None or python is None else self.heap_mib + python

    @property
    def rss_anon_over_heap(self) -> float | None:
        """``RssAnon`` over :attr:`heap_counted_mib`: 1.0 when all of it is in use; above it, memory
        freed but kept or outside both heaps."""
        anon, heap = (self.breakdown or {}).get("rss_anon"), self.heap_counted_mib
        return None if anon is None or not heap else anon / heap


@dataclasses.dataclass(frozen=True)
class Failure:
    """Something a check found: after which action, what it was, and the actions before it."""

    action: int
    kind: str
    text: str
    recent: tuple[str, ...]


@dataclasses.dataclass(frozen=True)
class StressReport:
    """What a stress run did and found: ``exceptions``, ``leaked_hooks``, ``stuck``,
    ``errors_shown``, ``crashes`` and ``hangs`` are findings; ``max_block_ms``, ``worst_blocks`` and
    ``blocks`` time the GUI thread; ``samples`` hold object counts and memory; ``steps`` replay."""

    model: str
    seed: int
    actions: int
    action_counts: dict[str, int] = dataclasses.field(default_factory=dict)
    exceptions: tuple[Failure, ...] = ()
    leaked_hooks: tuple[Failure, ...] = ()
    stuck: tuple[Failure, ...] = ()
    errors_shown: tuple[str, ...] = ()
    max_block_ms: float = 0.0
    samples: tuple[Sample, ...] = ()
    widgets_left: tuple[str, ...] = ()
    seconds: float = 0.0
    windows_kept: tuple[str, ...] = ()
    worst_blocks: tuple[tuple[float, str], ...] = ()
    blocks: tuple[Failure, ...] = ()
    block_limit_ms: float = 100.0
    crashes: tuple[Failure, ...] = ()
    hangs: tuple[Failure, ...] = ()
    steps: tuple[tuple[str, dict[str, Any]], ...] = ()

    @property
    def objects_growth(self) -> int:
        """The largest growth of the :data:`FLAT_TYPES` between the first and last checkpoint
        (how many more were alive; 0 with fewer than two checkpoints)."""
        if len(self.samples) < 2:
            return 0
        first, last = self.samples[0].counts, self.samples[-1].counts
        return max(last.get(t, 0) - first.get(t, 0) for t in FLAT_TYPES)

    @property
    def rss_growth_mib(self) -> float:
        """Resident memory at the last checkpoint minus at the second (the first after the
        warm-up: caches, the first panels), in MiB."""
        return 0.0 if len(self.samples) < 3 else self.samples[-1].rss_mib - self.samples[1].rss_mib

    @property
    def heap_growth_mib(self) -> float | None:
        """:func:`heap_in_use_mib` at the last checkpoint minus at the second, in MiB."""
        if len(self.samples) < 3 or None in (self.samples[1].heap_mib, self.samples[-1].heap_mib):
            return None
        return self.samples[-1].heap_mib - self.samples[1].heap_mib  # type: ignore[operator]

    def _after_warm_up(self) -> tuple[Sample, ...]:
        """The checkpoints after the warm-up (:data:`WARM_UP_ACTIONS`), or from the second on."""
        late = tuple(s for s in self.samples[1:] if s.action >= WARM_UP_ACTIONS)
        return late if len(late) >= 3 else self.samples[1:]

    @property
    def rss_growth_per_1k_mib(self) -> float:
        """Resident memory growth after warm-up (MiB per 1,000 actions): the Theil-Sen median slope,
        which follows the trend rather than one large capture."""
        points = [(s.action, s.rss_mib) for s in self._after_warm_up()]
        pairs = [(p, q) for i, p in enumerate(points) for q in points[i + 1 :] if q[0] != p[0]]
        slopes = [(y2 - y1) / (x2 - x1) for (x1, y1), (x2, y2) in pairs]
        return 1000.0 * statistics.median(slopes) if slopes else 0.0

    @property
    def rss_growth_per_1k_ls_mib(self) -> float:
        """The least-squares slope of the same checkpoints (MiB per 1,000 actions)."""
        return _per_1k([(s.action, s.rss_mib) for s in self._after_warm_up()])

    @property
    def heap_growth_per_1k_mib(self) -> float | None:
        """:attr:`rss_growth_per_1k_mib` for the heap in use (None where glibc cannot say)."""
        points = [(s.action, s.heap_mib) for s in self._after_warm_up()]
        return None if any(v is None for _, v in points) else _per_1k(points)

    @property
    def rss_over_heap_in_use(self) -> float | None:
        """#37's "RSS over the heap in use": :attr:`Sample.rss_anon_over_heap` at the first
        checkpoint after :data:`RATIO_AFTER_ACTIONS` actions (else the last; None: no figures)."""
        late = [s for s in self.samples if s.action >= RATIO_AFTER_ACTIONS] or self.samples[-1:]
        return late[0].rss_anon_over_heap if late else None

    def findings(self) -> list[Failure]:
        """Every failure, the kind of each in its ``kind``: crash, hang, exception, hook,
        stuck, block, widget (a top-level widget left), window (a closed window kept)."""
        found = [*self.crashes, *self.hangs, *self.exceptions, *self.leaked_hooks, *self.stuck]
        found += list(self.blocks)
        found += [Failure(self.actions, "widget", w, ()) for w in self.widgets_left]
        found += [Failure(self.actions, "window", w, ()) for w in self.windows_kept]
        return found

    def to_json(self) -> dict[str, Any]:
        """The report as JSON-able data (:meth:`from_json` reads it back)."""
        out = dataclasses.asdict(self)
        out["steps"] = [list(s) for s in self.steps]
        return out

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> StressReport:
        """The report :meth:`to_json` wrote."""
        data = dict(data)
        for key in ("exceptions", "leaked_hooks", "stuck", "blocks", "crashes", "hangs"):
            data[key] = tuple(
                Failure(**f | {"recent": tuple(f["recent"])}) for f in data.get(key, ())
            )
        data["samples"] = tuple(Sample(**s) for s in data.get("samples", ()))
        data["worst_blocks"] = tuple(tuple(b) for b in data.get("worst_blocks", ()))
        data["steps"] = tuple((n, dict(p)) for n, p in data.get("steps", ()))
        for key in ("errors_shown", "widgets_left", "windows_kept"):
            data[key] = tuple(data.get(key, ()))
        return cls(**data)

    def describe(self) -> str:
        """A readable account of every finding, for a failure message."""
        lines = [
            f"stress run: model {self.model}, seed {self.seed}, {self.actions} actions in "
            f"{self.seconds:.0f} s, max GUI block {self.max_block_ms:.0f} ms"
        ]
        titles = {"hook": "leaked hook", "block": f"GUI block over {self.block_limit_ms:.0f} ms"}
        for f in self.findings():
            if f.kind not in ("widget", "window"):  # said below, after the errors shown
                lines.append(f"{titles.get(f.kind, f.kind)} after action {f.action}: {f.text}")
                lines.append("  actions before it: " + " | ".join(f.recent))
        lines.extend(f"error shown: {text}" for text in self.errors_shown)
        lines.extend(f"GUI blocked {ms:.0f} ms at {what}" for ms, what in self.worst_blocks)
        lines.extend(f"widget left: {text}" for text in self.widgets_left)
        lines.extend(f"window kept: {text}" for text in self.windows_kept)
        if self.samples:
            for label, sample in (("first", self.samples[0]), ("last ", self.samples[-1])):
                heap = "" if sample.heap_mib is None else f", heap in use {sample.heap_mib:.0f} MiB"
                lines.append(f"counts {label} {sample.counts} rss {sample.rss_mib:.0f} MiB{heap}")
            lines.append("memory (MiB) at each checkpoint: " + ", ".join(_MEMORY_KEYS))
            for sample in self.samples:
                parts = (sample.breakdown or {}) | {"rss": sample.rss_mib}
                row = " ".join(f"{parts.get(k, float('nan')):7.0f}" for k in _MEMORY_KEYS)
                lines.append(f"  after {sample.action:>6} actions: {row}")
        return "\n".join(lines)


def describe_referrer(ref: Any) -> str:
    """A referrer of a kept window, named: a closure's cell by the function that holds it
    (where it is defined) and what holds that function."""
    if type(ref).__name__ != "cell":
        return type(ref).__name__
    for cells in gc.get_referrers(ref):
        if not isinstance(cells, tuple):
            continue
        for fn in gc.get_referrers(cells):
            if (code := getattr(fn, "__code__", None)) is None:
                continue
            where = f"{code.co_filename.rsplit('/actviz/', 1)[-1]}:{code.co_firstlineno}"
            up = sorted({type(r).__name__ for r in gc.get_referrers(fn)} - {"list", "frame"})
            return f"closure {code.co_qualname} ({where}; held by {up[:4]})"
    return "cell"


def _per_1k(points: Sequence[tuple[int, float]]) -> float:
    xs, ys = [x for x, _ in points], [y for _, y in points]
    try:
        return 1000.0 * statistics.linear_regression(xs, ys).slope
    except statistics.StatisticsError:  # under two points, or all after one action
        return 0.0


def count_objects(names: Sequence[str] = FLAT_TYPES + BOUNDED_TYPES) -> dict[str, int]:
    """How many Python objects of a type named one of ``names``, or a subclass of one (a
    ``TokenLayerPanel`` is a ``LayerPanel``), are alive (found by ``gc``)."""
    wanted = set(names)
    counts = dict.fromkeys(names, 0)
    # The classes a type counts as, worked out once per type: a process holds ~10^6 objects.
    kinds: dict[type, tuple[str, ...]] = {}
    for obj in gc.get_objects():
        t = type(obj)
        if (found := kinds.get(t)) is None:
            found = kinds[t] = tuple(c.__name__ for c in t.__mro__ if c.__name__ in wanted)
        for name in found:
            counts[name] += 1
    return counts


class _Catcher:
    """Collects uncaught exceptions and Qt critical/fatal messages while installed."""

    def __init__(self) -> None:
        self.found: list[str] = []

    @contextlib.contextmanager
    def installed(self) -> Iterator[_Catcher]:
        from PySide6.QtCore import QtMsgType, qInstallMessageHandler

        old_sys, old_thread = sys.excepthook, threading.excepthook

        def on_exception(kind: Any, value: Any, tb: Any) -> None:
            self.found.append("".join(traceback.format_exception(kind, value, tb)).strip())
            # sys.last_* would keep the raising window alive through its traceback's frames.
            for name in ("last_type", "last_value", "last_traceback", "last_exc"):
                if hasattr(sys, name):
                    setattr(sys, name, None)

        def on_message(mode: Any, _context: Any, message: str) -> None:
            if mode in (QtMsgType.QtCriticalMsg, QtMsgType.QtFatalMsg):
                self.found.append(f"Qt critical: {message}")

        sys.excepthook = on_exception
        threading.excepthook = lambda a: on_exception(a.exc_type, a.exc_value, a.exc_traceback)
        old_qt = qInstallMessageHandler(on_message)
        try:
            yield self
        finally:
            sys.excepthook, threading.excepthook = old_sys, old_thread
            qInstallMessageHandler(old_qt)

    def take(self) -> list[str]:
        found, self.found = self.found, []
        return found


class BlockSampler:
    """Where the GUI thread was when it blocked: samples its stack while the lag ``probe`` is
    overdue by ``after_ms`` and names the deepest actviz function most of the samples were in."""

    def __init__(self, probe: Any, *, after_ms: float = 40.0, every_ms: float = 5.0) -> None:
        self.probe = probe
        self.after_s, self.every_s = after_ms / 1e3, every_ms / 1e3
        self._gui = threading.main_thread().ident
        self._samples: list[tuple[list[str], str]] = []  # (stack innermost first, others)
        self._lock, self._stop = threading.Lock(), threading.Event()
        self._thread: threading.Thread | None = None

    def start(self) -> None:
        if self._thread is None:
            self._stop.clear()
            self._thread = threading.Thread(target=self._loop, name="block-sampler", daemon=True)
            self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=1.0)
            self._thread = None

    def take(self) -> str:
        """Where the GUI thread was in the blocks since the last call: ``"file:line in function
        <- callers (k of n samples)"``, or ``""``. A block is often many small steps under one
        handler: the most frequent line alone named one of them by chance, and leans to calls
        that let the sampler's thread run (numpy's, which release the GIL)."""
        with self._lock:
            samples, self._samples = self._samples, []
        if not samples:
            return ""
        depth, kept = _dominant([stack for stack, _ in samples])
        if depth < 0:  # no function most samples share: the most frequent innermost line
            where = Counter(stack[0] for stack, _ in samples).most_common(1)[0][0]
            kept = [i for i, (stack, _) in enumerate(samples) if stack[0] == where]
            depth = len(samples[kept[0]][0]) - 1
        stack, others = samples[kept[0]]
        at = len(stack) - 1 - depth  # innermost-first index of the chosen frame
        callers = [frame.split(" in ", 1)[1] for frame in stack[at + 1 : at + 7]]
        text = " <- ".join([stack[at], *callers]) + f" ({len(kept)} of {len(samples)} samples"
        if at:  # and the line those samples stopped at most
            line, count = Counter(samples[i][0][0] for i in kept).most_common(1)[0]
            text += f"; most often {line}, {count}"
        text += ")"
        # A GUI thread that waited (for the GIL, for malloc's lock) shows who held it here.
        return text + (f"; other threads in {others}" if others else "")

    def add(self, stack: list[str], others: str = "") -> None:
        """Keep one sample: the GUI thread's actviz frames, innermost first."""
        with self._lock:
            self._samples.append((stack, others))

    def _loop(self) -> None:
        # faulthandler, not sys._current_frames() (which from here can crash the GUI thread).
        with tempfile.TemporaryFile("w+") as out:
            while not self._stop.wait(self.every_s):
                last = getattr(self.probe, "_last", None)
                if last is None or time.perf_counter() - last < self.after_s:
                    continue
                out.seek(0)
                out.truncate()
                faulthandler.dump_traceback(out, all_threads=True)
                out.flush()
                out.seek(0)
                dump = out.read()
                if not (stack := _gui_stack(dump, self._gui)):
                    continue
                self.add(stack, ", ".join(_other_threads(dump, self._gui)))


def _dominant(stacks: list[list[str]], share: float = 0.6) -> tuple[int, list[int]]:
    """The depth (0: outermost) of the deepest function that at least ``share`` of ``stacks``
    (innermost first) pass through by the same path, and those stacks; ``-1`` for none."""
    kept, depth = list(range(len(stacks))), -1
    while True:
        d = depth + 1
        below = [i for i in kept if len(stacks[i]) > d]
        counts = Counter(_function(stacks[i][-1 - d]) for i in below)
        if not counts or (best := counts.most_common(1)[0])[1] < share * len(stacks):
            return depth, kept
        depth, kept = d, [i for i in below if _function(stacks[i][-1 - d]) == best[0]]


def _function(frame: str) -> str:
    """``"file:line in name"`` less the line: the samples of one call stop on several lines."""
    where, _, name = frame.partition(" in ")
    return f"{where.rsplit(':', 1)[0]} in {name}"


def _frames(dump: str) -> Iterator[tuple[str, int, str, str, str]]:
    """Each frame line of a faulthandler dump: its thread's header and id, file, line, function."""
    header, thread = "", -1
    for line in dump.splitlines():
        if (match := _THREAD.match(line)) is not None:
            header, thread = line, int(match[1], 16)
        elif header and (match := _FRAME.match(line)) is not None:
            yield header, thread, *match.groups()


def _gui_stack(dump: str, ident: int | None) -> list[str]:
    """The GUI thread's actviz frames in a faulthandler dump, innermost first."""
    found: list[str] = []
    for _, thread, filename, lineno, name in _frames(dump):
        if thread == ident and "actviz/" in filename and not any(s in filename for s in _SKIP):
            where = filename[filename.rfind("actviz/") :]
            found.append(f"{where}:{lineno} in {name}")
    return found


def _other_threads(dump: str, ident: int | None, most: int = 3) -> list[str]:
    """The innermost frame of up to ``most`` other busy threads in a faulthandler dump."""
    found: list[str] = []
    seen: set[str] = set()
    for header, thread, filename, lineno, name in _frames(dump):
        # The sampler dumps from its own thread: "Current thread" is never a worker.
        if header in seen or thread == ident or header.startswith("Current"):
            continue
        seen.add(header)  # the innermost frame only
        if "actviz/testing/" not in filename and not filename.endswith("threading.py"):
            found.append(f"{filename.rsplit('/', 1)[-1]}:{lineno} in {name}")
    return found[:most]


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
        if changed := [n for n, v in now[key].items() if before[key].get(n, v) != v]:
            found.append(f"{key} changed on {changed[:5]}")
    return found
