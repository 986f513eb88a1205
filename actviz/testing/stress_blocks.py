"""Where the GUI thread was when it blocked: while the lag probe is overdue, :class:`BlockSampler`
samples the GUI thread's stack and keeps each block's most frequent actviz frame."""

from __future__ import annotations

import faulthandler
import re
import tempfile
import threading
import time
from collections import Counter
from collections.abc import Iterator
from typing import Any

#: Frames of these files say nothing about the block (the driver itself, Qt's test helpers).
_SKIP = ("actviz/testing/", "actviz/bench/")
#: A frame line of a faulthandler dump.
_FRAME = re.compile(r'\s+File "(.+)", line (\d+) in (.+)$')
_THREAD = re.compile(r"(?:Current thread|Thread) 0x([0-9a-fA-F]+)")


class BlockSampler:
    """Samples the GUI thread's stack while ``probe`` is overdue by ``after_ms``."""

    def __init__(self, probe: Any, *, after_ms: float = 40.0, every_ms: float = 5.0) -> None:
        self.probe = probe
        self.after_s = after_ms / 1e3
        self.every_s = every_ms / 1e3
        self._gui = threading.main_thread().ident
        self._samples: Counter[str] = Counter()
        self._stacks: dict[str, str] = {}
        self._others: dict[str, str] = {}
        self._lock = threading.Lock()
        self._stop = threading.Event()
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
        """Where the GUI thread was most often in the blocks since the last call: ``"file:line
        in function"`` with the actviz frames that led there (outermost first), or ``""``."""
        with self._lock:
            samples, stacks, others = self._samples, self._stacks, self._others
            self._samples, self._stacks, self._others = Counter(), {}, {}
        if not samples:
            return ""
        where, _ = samples.most_common(1)[0]
        # A GUI thread that waited (for the GIL, for malloc's lock) shows who held it here.
        beside = f"; other threads in {others[where]}" if others.get(where) else ""
        return stacks[where] + beside

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
                where = stack[0]
                path = " <- ".join(name for name in stack[1:7])
                with self._lock:
                    self._samples[where] += 1
                    self._stacks.setdefault(where, where + (f" <- {path}" if path else ""))
                    self._others.setdefault(where, ", ".join(_other_threads(dump, self._gui)))


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
            found.append(f"{where}:{lineno} in {name}" if not found else name)
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
