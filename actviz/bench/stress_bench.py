"""Stress: seeded random user actions on the window, with the demo and a random-init ResNet-18.

``python -m actviz.bench stress`` performs 10,000 actions (half on each model; ``--quick``:
300; ``--actions N``: N) with :class:`actviz.testing.stress.StressDriver` and reports what it
found: unhandled exceptions, hooks left on the model, the longest GUI-thread block, and how
live objects (background job runners, thread pools, windows, layer panels) and resident memory
moved over the run. ``python -m actviz.bench.stress_bench --actions N --seed S`` runs another length.

Figures: ``stress_actions``, ``stress_exceptions``, ``stress_leaked_hooks``,
``stress_max_block_ms``, ``stress_objects_growth`` (the largest growth of a kind that must stay
flat), ``stress_rss_growth_mib``, ``stress_heap_growth_mib`` (memory malloc handed out and did
not get back: what a leak grows, where the resident size also holds freed memory glibc keeps),
``stress_errors_shown``.
"""

from __future__ import annotations

import argparse
import tempfile
from collections.abc import Sequence
from typing import Any

import torch

#: Actions of the full and the quick run (shared by the models).
FULL_ACTIONS = 10_000
QUICK_ACTIONS = 300


def _setups(models: Sequence[str]) -> list[Any]:
    from actviz.testing.stress import demo_model, module_model

    out = []
    for name in models:
        if name == "demo":
            out.append(demo_model())
        elif name == "resnet18":
            import torchvision

            torch.manual_seed(0)
            model = torchvision.models.resnet18(weights=None).eval()
            x = torch.randn(1, 3, 64, 64, generator=torch.Generator().manual_seed(0))
            out.append(module_model("resnet18", model, x))
        else:
            raise ValueError(f"unknown stress model {name!r} (demo, resnet18)")
    return out


def run_stress(
    actions: int, *, seed: int = 0, models: Sequence[str] = ("demo", "resnet18")
) -> list[Any]:
    """Run ``actions`` actions split over ``models``; return one report per model."""
    from actviz.bench.ui_bench import ensure_qt_app
    from actviz.testing.stress import StressDriver

    ensure_qt_app()
    setups = _setups(models)
    reports = []
    with tempfile.TemporaryDirectory(prefix="actviz-stress-") as folder:
        for i, setup in enumerate(setups):
            share = actions // len(setups) + (1 if i < actions % len(setups) else 0)
            every = max(10, min(250, share // 20))
            driver = StressDriver(setup, seed=seed + i, folder=f"{folder}/{i}", sample_every=every)
            reports.append(driver.run(share))
    return reports


def print_table(reports: Sequence[Any]) -> None:
    """One row per model, then every finding."""
    print(
        f"{'model':<10} {'actions':>8} {'exceptions':>10} {'hooks':>6} {'stuck':>6} "
        f"{'max block ms':>12} {'obj growth':>10} {'panels max':>10} {'rss growth MiB':>14} "
        f"{'heap growth MiB':>15} {'s':>6}"
    )
    for r in reports:
        print(
            f"{r.model:<10} {r.actions:>8} {len(r.exceptions):>10} {len(r.leaked_hooks):>6} "
            f"{len(r.stuck):>6} {r.max_block_ms:>12.0f} {r.objects_growth:>10} "
            f"{r.peak('LayerPanel'):>10} {r.rss_growth_mib:>14.1f} {_mib(r.heap_growth_mib):>15} "
            f"{r.seconds:>6.0f}"
        )
    for r in reports:
        found = r.exceptions or r.leaked_hooks or r.stuck or r.errors_shown or r.windows_kept
        if found or r.objects_growth or r.widgets_left:
            print(r.describe())
        else:
            print(
                "\n".join(
                    f"  {r.model}: GUI blocked {ms:.0f} ms at {what}" for ms, what in r.worst_blocks
                )
            )
        for s in r.samples:
            counts = ", ".join(f"{k} {v}" for k, v in s.counts.items())
            heap = "" if s.heap_mib is None else f", heap in use {s.heap_mib:.0f} MiB"
            print(
                f"  {r.model} after {s.action:>6} actions: {counts}; rss {s.rss_mib:.0f} MiB{heap}"
            )


def _mib(value: float | None) -> str:
    return "-" if value is None else f"{value:.1f}"


def summarise(reports: Sequence[Any], summary: dict) -> None:
    """Put the figures of ``reports`` (all models together) into ``summary``."""
    summary["stress_actions"] = sum(r.actions for r in reports)
    summary["stress_exceptions"] = sum(len(r.exceptions) for r in reports)
    summary["stress_leaked_hooks"] = sum(len(r.leaked_hooks) for r in reports)
    summary["stress_stuck"] = sum(len(r.stuck) for r in reports)
    summary["stress_max_block_ms"] = max((r.max_block_ms for r in reports), default=0.0)
    summary["stress_objects_growth"] = max((r.objects_growth for r in reports), default=0)
    summary["stress_rss_growth_mib"] = max((r.rss_growth_mib for r in reports), default=0.0)
    heaps = [r.heap_growth_mib for r in reports if r.heap_growth_mib is not None]
    summary["stress_heap_growth_mib"] = max(heaps, default=None)
    summary["stress_errors_shown"] = sum(len(r.errors_shown) for r in reports)
    summary["stress_windows_kept"] = sum(len(r.windows_kept) for r in reports)


def run(quick: bool, summary: dict, actions: int | None = None) -> None:
    """The bench section: ``actions`` (default 300 with ``quick``, else 10,000) over the demo
    and ResNet-18 (``python -m actviz.bench stress --actions N``)."""
    if actions is None:
        actions = QUICK_ACTIONS if quick else FULL_ACTIONS
    reports = run_stress(actions)
    print_table(reports)
    summarise(reports, summary)


def main(argv: list[str] | None = None) -> int:
    """``python -m actviz.bench.stress_bench [--actions N] [--seed S] [--models demo,resnet18]``."""
    import json

    parser = argparse.ArgumentParser(prog="python -m actviz.bench.stress_bench")
    parser.add_argument("--actions", type=int, default=FULL_ACTIONS)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--models", default="demo,resnet18")
    parser.add_argument("--threads", type=int, default=2, help="torch threads (default 2)")
    args = parser.parse_args(argv)
    torch.set_num_threads(args.threads)
    reports = run_stress(args.actions, seed=args.seed, models=args.models.split(","))
    print_table(reports)
    summary: dict = {}
    summarise(reports, summary)
    print(json.dumps(summary))
    return 0


if __name__ == "__main__":  # pragma: no cover
    raise SystemExit(main())
