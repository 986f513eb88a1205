"""Paired, interleaved timing: the only fair way to compare on a noisy 2-core machine."""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass


@dataclass
class Paired:
    """Medians of two interleaved measurements and the median of their per-pair ratios."""

    name: str
    base_ms: float
    test_ms: float
    ratio: float
    pairs: int

    def row(self) -> str:
        return f"{self.name:<44} {self.base_ms:9.1f} {self.test_ms:9.1f} {self.ratio:7.3f}x"


def paired(
    name: str,
    base: Callable[[], object],
    test: Callable[[], object],
    pairs: int = 15,
    warmup: int = 2,
) -> Paired:
    """Run ``base`` and ``test`` alternately ``pairs`` times (order flipped every pair).

    Returns the median times and the median of the per-pair ratios test/base, which cancels
    slow drifts of the machine (thermal, other processes) that a ratio of medians would not.
    """
    for _ in range(warmup):
        base()
        test()
    tb: list[float] = []
    tt: list[float] = []
    for i in range(pairs):
        order = (base, test) if i % 2 == 0 else (test, base)
        times = {}
        for fn in order:
            t0 = time.perf_counter()
            fn()
            times[fn] = time.perf_counter() - t0
        tb.append(times[base])
        tt.append(times[test])
    ratios = [t / b for t, b in zip(tt, tb, strict=True)]
    return Paired(
        name,
        statistics.median(tb) * 1e3,
        statistics.median(tt) * 1e3,
        statistics.median(ratios),
        pairs,
    )
