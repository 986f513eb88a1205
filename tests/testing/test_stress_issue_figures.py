"""The stress bench's memory figures under the issue's names (#37): RSS growth per 1,000 actions
after the warm-up, and RSS over the heap in use after 1,000 actions."""

from __future__ import annotations

import importlib.util

import pytest

from actviz.bench import stress_bench
from actviz.testing.stress_report import RATIO_AFTER_ACTIONS, Sample, StressReport


def _report(points):
    """A process with checkpoints ``(action, rss, malloc heap, rss_anon, python heap)``."""
    samples = tuple(
        Sample(a, {}, rss, heap, {"rss_anon": anon, "python_heap": py, "anonymous": anon})
        for a, rss, heap, anon, py in points
    )
    return StressReport(
        model="resnet18", seed=3601, actions=points[-1][0], action_counts={}, exceptions=(),
        leaked_hooks=(), stuck=(), errors_shown=(), max_block_ms=0.0, samples=samples,
        widgets_left=(), seconds=1.0,
    )  # fmt: skip


def test_rss_over_heap_is_read_after_1000_actions_over_both_heaps():
    # RssAnon 600 over 200 + 100 MiB in use at 1,000 actions (2.0); the end (1,250) is 1.0.
    r = _report(
        [
            (0, 900, 200, 450, 100),
            (500, 950, 200, 500, 100),
            (1000, 1000, 200, 600, 100),
            (1250, 1025, 300, 400, 100),
        ]
    )
    assert RATIO_AFTER_ACTIONS == 1000
    assert r.rss_over_heap_in_use == pytest.approx(2.0)
    # A process shorter than 1,000 actions: read at its end.
    short = _report([(0, 900, 200, 450, 100), (300, 900, 250, 525, 100)])
    assert short.rss_over_heap_in_use == pytest.approx(1.5)
    summary: dict = {}
    stress_bench.summarise([r, short], summary)
    assert summary["stress_rss_over_heap"] == pytest.approx(2.0)  # the worst process
    # The whole resident size (mapped libraries included) over malloc's heap alone, at the end.
    assert summary["stress_rss_total_over_malloc_heap"] == pytest.approx(900 / 250)  # short
    # Growth after the warm-up: 100 MiB per 1,000 actions from 500 on (the first 50 MiB in
    # the 500 actions before are left out: the first checkpoint is the warm-up's).
    assert r.rss_growth_per_1k_mib == pytest.approx(100.0)
    assert summary["stress_rss_growth_per_1k_mib"] == pytest.approx(100.0)
    assert summary["stress_heap_growth_per_1k_mib"] == pytest.approx(r.heap_growth_per_1k_mib)
    assert r.heap_growth_per_1k_mib > 100  # 200 -> 300 MiB over the last 250 actions


def test_missing_breakdown_gives_no_ratio():
    bare = StressReport(
        model="demo", seed=0, actions=10, action_counts={}, exceptions=(), leaked_hooks=(),
        stuck=(), errors_shown=(), max_block_ms=0.0, samples=(Sample(10, {}, 900, 200),),
        widgets_left=(), seconds=1.0,
    )  # fmt: skip
    assert bare.rss_over_heap_in_use is None
    summary: dict = {}
    stress_bench.summarise([bare], summary)
    assert summary["stress_rss_over_heap"] is None


def test_a_long_run_imports_before_its_first_action_what_a_feature_imports_at_first_use():
    """timm (the architecture guess) and every actviz module (the exports among them): imported
    at a first use after the warm-up, they read as growth (+54 MiB of RSS in one step, seed
    3601)."""
    from actviz.testing.stress_cases import first_use_modules

    names = first_use_modules()
    wanted = {"actviz.io.export.report", "actviz.io.models.arch_guess", "actviz.data.scan_file"}
    if importlib.util.find_spec("timm") is not None:  # an extra (actviz[timm]): CI has it
        wanted.add("timm")
    assert wanted <= set(names)
    assert not any(name.startswith("actviz.bench") or name.endswith("__main__") for name in names)
