"""Stress: seeded random user actions on the window, each case in a process of its own.

``python -m actviz.bench stress`` performs 20,000 actions (``--quick``: 300; ``--actions N``:
N), split over the demo, a random-init ResNet-18 (1x3x64x64), a tiny GPT-2 folder and a
ResNet-18 ``state_dict`` checkpoint (:mod:`actviz.testing.stress_cases`), in processes of at
most :data:`PROCESS_ACTIONS` actions each; every action goes through real input events
(:class:`actviz.testing.stress.StressDriver`). It reports what it found: crashes (the process
died), hangs (the GUI did not return), unhandled exceptions, hooks left on a model, the longest
GUI-thread block, and how live objects and memory moved. ``python -m actviz.bench.stress_bench
--actions N --seed S --models demo,gpt2`` runs another length.

The issue's two memory figures (#37): ``stress_rss_growth_per_1k_mib``, the RSS growth per
1,000 actions after the warm-up (the largest over the processes, each the median of its
checkpoints' pairwise slopes, robust to one checkpoint's state; ``stress_rss_growth_per_1k_ls_mib``
the least-squares one), and ``stress_rss_over_heap``, the RSS over the heap in use after 1,000
actions (the largest over the processes: ``RssAnon``, the process's own resident memory, over
malloc's and Python's heaps in use, 1.0 when no freed memory is kept resident;
:attr:`~actviz.testing.stress_report.StressReport.rss_over_heap_in_use`).

Other figures: ``stress_actions``, ``stress_crashes``, ``stress_hangs``, ``stress_exceptions``,
``stress_leaked_hooks``, ``stress_stuck``, ``stress_max_block_ms``, ``stress_blocks_over_limit``
(actions after which the GUI blocked over 100 ms), ``stress_objects_growth`` (the largest
growth of a kind that must stay flat), ``stress_rss_growth_mib``, ``stress_heap_growth_mib``
(memory malloc handed out and did not get back: what a leak grows, where the resident size
also holds freed memory glibc keeps), ``stress_heap_growth_per_1k_mib`` (its slope),
``stress_rss_total_over_malloc_heap`` / ``stress_anon_over_heap`` (a process's whole resident
size, mapped libraries included / its anonymous memory at its end over malloc's heap alone),
``stress_rss_over_heaps`` / ``stress_anon_over_heaps`` (the same over malloc's and Python's
object heap together), ``stress_rss_anon_over_heap`` (``stress_rss_over_heap`` at each
process's end), ``stress_errors_shown``, ``stress_windows_kept``.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable, Sequence
from typing import Any

#: Actions of the full and the quick run (shared by the models).
FULL_ACTIONS = 20_000
QUICK_ACTIONS = 300
#: The most actions one process performs: 20,000 is a process per case. A memory slope over
#: 1,250 actions followed the model loaded at its checkpoints (the demo's 116 MiB per 1,000
#: where 4,000 of the same actions levelled off at 10 MiB per 1,000).
PROCESS_ACTIONS = 5_000
#: The models of the run (:data:`actviz.testing.stress_cases.CASES`).
MODELS = ("demo", "resnet18", "gpt2", "checkpoint")


def run_stress(
    actions: int,
    *,
    seed: int = 0,
    models: Sequence[str] = MODELS,
    threads: int = 2,
    per_process: int = PROCESS_ACTIONS,
    on_report: Callable[[Any, int, int], None] | None = None,
) -> list[Any]:
    """Run ``actions`` actions split over ``models``, each share in processes of at most
    ``per_process`` actions, the models in turn (a run stopped early has covered each);
    return one report per process. ``on_report(report, done, total)`` hears of each as it
    ends (what a long run found is kept even if it is stopped)."""
    from actviz.testing.stress_cases import run_case

    plan = []
    for i, model in enumerate(models):
        share = actions // len(models) + (1 if i < actions % len(models) else 0)
        chunks = [per_process] * (share // per_process)
        if share % per_process:
            chunks.append(share % per_process)
        plan += [(j, i, model, seed + 100 * i + j, n) for j, n in enumerate(chunks)]
    reports = []
    for _, _, model, case_seed, n in sorted(plan):
        reports.append(run_case(model, case_seed, n, threads=threads))
        if on_report is not None:
            on_report(reports[-1], len(reports), len(plan))
    return reports


def print_table(reports: Sequence[Any]) -> None:
    """One row per process, then every finding."""
    print(
        f"{'model':<10} {'seed':>5} {'actions':>7} {'crash':>5} {'hang':>4} {'exc':>4} "
        f"{'hooks':>5} {'stuck':>5} {'max block ms':>12} {'>limit':>6} {'obj growth':>10} "
        f"{'rss MiB/1k':>10} {'(l.sq.)':>8} {'heap MiB/1k':>11} {'rss/heap':>8} {'s':>6}"
    )
    for r in reports:
        heap = r.heap_growth_per_1k_mib
        print(
            f"{r.model:<10} {r.seed:>5} {r.actions:>7} {len(r.crashes):>5} {len(r.hangs):>4} "
            f"{len(r.exceptions):>4} {len(r.leaked_hooks):>5} {len(r.stuck):>5} "
            f"{r.max_block_ms:>12.0f} {len(r.blocks):>6} {r.objects_growth:>10} "
            f"{r.rss_growth_per_1k_mib:>10.1f} {r.rss_growth_per_1k_ls_mib:>8.1f} "
            f"{_mib(heap):>11} {_ratio(r.rss_over_heap_in_use):>8} {r.seconds:>6.0f}"
        )
    for r in reports:
        print(r.describe())
        for s in r.samples:
            heap = "" if s.heap_mib is None else f", heap in use {s.heap_mib:.0f} MiB"
            b = s.breakdown or {}
            if "files" in b:
                heap += f" (mapped files {b['files']:.0f}, anonymous {b['anonymous']:.0f}"
                heap += f", malloc keeps {b['heap_free']:.0f} free)" if "heap_free" in b else ")"
            if s.rss_anon_over_heap is not None:
                heap += (
                    f"; RssAnon {b['rss_anon']:.0f} over heaps in use {s.heap_counted_mib:.0f}"
                    f" = {s.rss_anon_over_heap:.2f}"
                )
            print(f"  {r.model} after {s.action:>6} actions: rss {s.rss_mib:.0f} MiB{heap}")


def _mib(value: float | None) -> str:
    return "-" if value is None else f"{value:.1f}"


def _ratio(value: float | None) -> str:
    return "-" if value is None else f"{value:.2f}"


def summarise(reports: Sequence[Any], summary: dict) -> None:
    """Put the figures of ``reports`` (all processes together) into ``summary``."""
    summary["stress_actions"] = sum(r.actions for r in reports)
    summary["stress_crashes"] = sum(len(r.crashes) for r in reports)
    summary["stress_hangs"] = sum(len(r.hangs) for r in reports)
    summary["stress_exceptions"] = sum(len(r.exceptions) for r in reports)
    summary["stress_leaked_hooks"] = sum(len(r.leaked_hooks) for r in reports)
    summary["stress_stuck"] = sum(len(r.stuck) for r in reports)
    summary["stress_max_block_ms"] = max((r.max_block_ms for r in reports), default=0.0)
    summary["stress_blocks_over_limit"] = sum(len(r.blocks) for r in reports)
    summary["stress_objects_growth"] = max((r.objects_growth for r in reports), default=0)
    summary["stress_rss_growth_mib"] = max((r.rss_growth_mib for r in reports), default=0.0)
    heaps = [r.heap_growth_mib for r in reports if r.heap_growth_mib is not None]
    summary["stress_heap_growth_mib"] = max(heaps, default=None)
    summary["stress_rss_growth_per_1k_mib"] = max(
        (r.rss_growth_per_1k_mib for r in reports), default=0.0
    )
    summary["stress_rss_growth_per_1k_ls_mib"] = max(
        (r.rss_growth_per_1k_ls_mib for r in reports), default=0.0
    )
    heap_slopes = [r.heap_growth_per_1k_mib for r in reports]
    summary["stress_heap_growth_per_1k_mib"] = max(
        (v for v in heap_slopes if v is not None), default=None
    )
    # The "RSS over the heap in use" after 1,000 actions (#37).
    ratios = [r.rss_over_heap_in_use for r in reports]
    summary["stress_rss_over_heap"] = max((v for v in ratios if v), default=None)
    # What the resident size is made of at each process's end: the whole RSS (mapped libraries
    # included) / malloc's heap, and the anonymous memory / malloc's heap.
    ends = [r.samples[-1] for r in reports if r.samples and r.samples[-1].heap_mib]
    summary["stress_rss_total_over_malloc_heap"] = max(
        (s.rss_mib / s.heap_mib for s in ends), default=None
    )
    anon = [
        s.breakdown["anonymous"] / s.heap_mib for s in ends if "anonymous" in (s.breakdown or {})
    ]
    summary["stress_anon_over_heap"] = max(anon, default=None)
    # The same with Python's object heap counted as heap in use (pymalloc's arenas are mapped
    # outside malloc, whose figures alone leave a fresh window's ~250 MiB of objects out).
    both = [
        (s.rss_mib, s.breakdown["anonymous"], s.heap_mib + s.breakdown["python_heap"])
        for s in ends
        if {"anonymous", "python_heap"} <= set(s.breakdown or {})
    ]
    summary["stress_rss_over_heaps"] = max((r / h for r, _, h in both), default=None)
    summary["stress_anon_over_heaps"] = max((a / h for _, a, h in both), default=None)
    # The honest one: RssAnon over everything the process has in use (malloc's and Python's
    # heaps): what a kept free heap or a leak outside both heaps raises above 1.
    honest = [s.rss_anon_over_heap for r in reports for s in r.samples[-1:]]
    summary["stress_rss_anon_over_heap"] = max((v for v in honest if v), default=None)
    summary["stress_errors_shown"] = sum(len(r.errors_shown) for r in reports)
    summary["stress_windows_kept"] = sum(len(r.windows_kept) for r in reports)
    summary["stress_widgets_left"] = sum(len(r.widgets_left) for r in reports)


def run(quick: bool, summary: dict, actions: int | None = None) -> None:
    """The bench section: ``actions`` (default 300 with ``quick``, else 20,000) over the four
    models (``python -m actviz.bench stress --actions N``)."""
    if actions is None:
        actions = QUICK_ACTIONS if quick else FULL_ACTIONS
    reports = run_stress(actions)
    print_table(reports)
    summarise(reports, summary)


def main(argv: list[str] | None = None) -> int:
    """``python -m actviz.bench.stress_bench [--actions N] [--seed S] [--models demo,gpt2]``."""
    import json

    parser = argparse.ArgumentParser(prog="python -m actviz.bench.stress_bench")
    parser.add_argument("--actions", type=int, default=FULL_ACTIONS)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--models", default=",".join(MODELS))
    parser.add_argument("--threads", type=int, default=2, help="torch threads per process")
    parser.add_argument("--per-process", type=int, default=PROCESS_ACTIONS)
    args = parser.parse_args(argv)

    finished: list[Any] = []

    def heard(report: Any, done: int, total: int) -> None:
        # Each process's row and the figures so far, as they come (a stopped run keeps them).
        finished.append(report)
        text = report.describe()
        serious = report.crashes or report.hangs or report.exceptions or report.windows_kept
        # A crash's stack is told now: it is the reason a long run is watched.
        if not serious:  # the head line, the longest blocks and the memory table
            keep = ("GUI blocked", "memory (MiB)", "  after ")
            text = "\n".join(
                t for i, t in enumerate(text.splitlines()) if not i or t.startswith(keep)
            )
        print(f"process {done}/{total}:", text, flush=True)
        so_far: dict = {}
        summarise(finished, so_far)
        print("so far:", json.dumps(so_far), flush=True)

    reports = run_stress(
        args.actions,
        seed=args.seed,
        models=args.models.split(","),
        threads=args.threads,
        per_process=args.per_process,
        on_report=heard,
    )
    print_table(reports)
    summary: dict = {}
    summarise(reports, summary)
    print(json.dumps(summary))
    return 0


if __name__ == "__main__":  # pragma: no cover
    raise SystemExit(main())
