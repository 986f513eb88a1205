"""The process's resident size as the live dock's status reads it: after every result, on the
GUI thread (the stress run sampled the GUI thread in ``rss_bytes`` during a 115 ms block), so
a figure read less than a second ago is reused."""

from __future__ import annotations

import re
import sys

import pytest

from actviz.workspace import budget

linux = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc")


def _vm_rss() -> int:
    with open("/proc/self/status", encoding="ascii") as fh:
        return int(re.search(r"VmRSS:\s+(\d+) kB", fh.read()).group(1)) * 1024


@linux
def test_a_fresh_read_is_the_resident_size_the_kernel_reports():
    before = _vm_rss()
    got = budget.rss_bytes(max_age_s=0.0)
    after = _vm_rss()
    assert got is not None
    assert min(before, after) - (1 << 20) <= got <= max(before, after) + (1 << 20)


def test_reads_within_the_max_age_reuse_the_last_figure(monkeypatch):
    reads = []
    clock = [100.0]
    monkeypatch.setattr(budget, "_read_rss", lambda: reads.append(1) or 1000 * len(reads))
    monkeypatch.setattr(budget, "_rss_read", None)
    monkeypatch.setattr(budget.time, "monotonic", lambda: clock[0])
    assert budget.rss_bytes() == 1000
    for _ in range(50):  # fifty results within the second: one read
        clock[0] += 0.01
        assert budget.rss_bytes() == 1000
    assert len(reads) == 1
    clock[0] += budget.RSS_MAX_AGE_S
    assert budget.rss_bytes() == 2000 and len(reads) == 2
    assert budget.rss_bytes(max_age_s=0.0) == 3000 and len(reads) == 3  # a measurement
