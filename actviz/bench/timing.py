"""Paired, interleaved timing: the only fair way to compare on a noisy 2-core machine."""

from __future__ import annotations

import math
import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass


@dataclass
class Paired:
    """Medians of two interleaved measurements and the median of their per-pair ratios.

    ``diff_ms`` is the median of the per-pair differences (test - base): for a difference
    much smaller than either time, far steadier than the difference of the two medians, whose
    noise is that of each median (NaN where not measured).
    """

    name: str
    base_ms: float
    test_ms: float
    ratio: float
    pairs: int
    diff_ms: float = math.nan

    def row(self) -> str:
        return f"{self.name:<44} {self.base_ms:9.1f} {self.test_ms:9.1f} {self.ratio:7.3f}x"


def paired(
    name: str,
    base: Callable[[], object],
    test: Callable[[], object],
    pairs: int = 15,
    warmup: int = 2,
    clock: Callable[[], float] | None = None,
) -> Paired:
    """Run ``base`` and ``test`` alternately ``pairs`` times (order flipped every pair).

    Returns the median times and the median of the per-pair ratios test/base, which cancels
    slow drifts of the machine (thermal, other processes) that a ratio of medians would not.
    ``clock``: ``time.process_time`` measures the CPU time of the process (every thread)
    instead of wall time: the work done, which other tenants of a shared machine move less.
    None: ``time.perf_counter``, read at each call.
    """
    if clock is None:
        clock = time.perf_counter
    for _ in range(warmup):
        base()
        test()
    tb: list[float] = []
    tt: list[float] = []
    for i in range(pairs):
        order = (base, test) if i % 2 == 0 else (test, base)
        times = {}
        for fn in order:
            t0 = clock()
            fn()
            times[fn] = clock() - t0
        tb.append(times[base])
        tt.append(times[test])
    ratios = [t / b for t, b in zip(tt, tb, strict=True)]
    return Paired(
        name,
        statistics.median(tb) * 1e3,
        statistics.median(tt) * 1e3,
        statistics.median(ratios),
        pairs,
        statistics.median([t - b for t, b in zip(tt, tb, strict=True)]) * 1e3,
    )


class StealMeter:
    """Share of CPU time the hypervisor gave to other guests (Linux ``/proc/stat`` "steal").

    On a shared virtual machine every timing above moves with it: printed beside each section
    so a reader can tell a slow figure from a busy neighbour. None where it cannot be read.
    """

    def __init__(self) -> None:
        self._start = self._read()

    @staticmethod
    def _read() -> tuple[int, int] | None:
        try:
            with open("/proc/stat", encoding="ascii") as fh:
                fields = fh.readline().split()
        except OSError:
            return None
        if len(fields) < 9 or fields[0] != "cpu":
            return None
        ticks = [int(v) for v in fields[1:9]]  # user .. steal (guest time is inside user)
        return ticks[7], sum(ticks)

    def fraction(self) -> float | None:
        """Steal ticks / all ticks since this meter was made."""
        end = self._read()
        if self._start is None or end is None or end[1] <= self._start[1]:
            return None
        return (end[0] - self._start[0]) / (end[1] - self._start[1])
