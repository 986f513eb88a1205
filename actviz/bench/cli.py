"""Command line of the benchmark suite: tables on stdout, one JSON object as the last line.

``python -m actviz.bench`` runs every figure of the performance targets:

* capture overhead against bare PyTorch (ResNet-18/50), and again with the explorer window open;
  Grad-CAM at ``layer4`` against a bare hook + ``autograd.grad`` to that layer (``gradcam_ratio``);
  a capture with three what-if edits against the same capture without (``edits_ratio``);
* rendering one layer's mosaic (``render_p95_ms``);
* live mode on ResNet-50 with 20 ticked layers: GUI timer lag (``ui_lag_*``) and throughput
  against bare ``actviz.capture`` (``live_throughput_ratio``), interleaved; the same on
  ResNet-18 at 64 px with 5 layers and 112 px with 20 (``live_small_ratio``, the lower), with
  the display's CPU per frame beside it (``live_display_cpu_64px_ms``,
  ``live_display_cpu_112px_ms``: the GUI thread's CPU time over the live blocks per frame plus
  the preparing thread's per frame);
* start-up against ``import torch, torchvision`` (``startup_ratio``), interleaved processes;
* resident memory after 100 live frames against after 10 (``memory_growth_ratio``);
* dataset scan images/s against a bare forward loop (``scan_throughput_ratio``; against one at
  the scan's own thread count: ``scan_overhead_ratio``) and its peak memory growth against the
  model's footprint (``scan_rss_growth_frac``); GUI timer lag while the window scans, idle and
  beside live mode (``scan_ui_lag_p99_ms``, ``scan_ui_lag_max_ms``);
* concept dictionaries: training time and quality against Overcomplete's TopK SAE method
  (``concepts_train_s``, ``concepts_time_ratio``, ``concepts_fvu_ratio``) and a live frame's
  concept maps against its channel maps (``concepts_live_ratio``).

``--quick`` runs fewer repetitions and smaller models where the figure allows it (under two
minutes on a 2-core machine). These are benchmarks: nothing here asserts a time.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import time

import torch

from actviz.bench.timing import StealMeter
from actviz.core.openmp import use_app_openmp

#: Sections whose bench lives in its own module: ``run(quick: bool, summary: dict) -> None``
#: prints its table and adds its figures to the JSON summary.
_FEATURE_SECTIONS = {
    "ui": "actviz.bench.ui_panels_bench",
    "visualize": "actviz.bench.visualize_bench",
    "effects": "actviz.bench.effects_bench",
    "atlas": "actviz.bench.atlas_bench",
    "concepts": "actviz.bench.concepts_bench",
    "stress": "actviz.bench.stress_bench",
    # Distributed scans, a million images, offloaded models (actviz.bench.scale_bench).
    "scale": "actviz.bench.scale_bench",
    # Start-up with the example plugins installed, a plugin view's render p95.
    "plugins": "actviz.bench.plugins_bench",
    # Checks and figures on a CUDA GPU; prints that it skipped where there is none.
    "cuda": "actviz.bench.cuda_bench",
}
# "scan" last: its memory passes pin glibc's allocator for the rest of the process.
SECTIONS = ("capture", "render", "live", "startup", "memory", *_FEATURE_SECTIONS, "scan")


def machine() -> str:
    return (
        f"{platform.processor() or platform.machine()}, {torch.get_num_threads()} torch threads, "
        f"torch {torch.__version__}, Python {platform.python_version()}"
    )


def _round(value: object) -> object:
    return round(value, 4) if isinstance(value, float) else value


def _capture(pairs: int, quick: bool, summary: dict) -> None:
    from actviz.bench import capture_bench

    models = ("resnet18",) if quick else ("resnet18", "resnet50")
    # First, in a process of its own: a script's capture against plain hooks keeping the same
    # records (ResNet-18 and -50 also with --quick: the figure is the worse of the two).
    hooks = capture_bench.hooks_in_fresh_process(("resnet18", "resnet50"), pairs)
    print(f"{'capture / plain hooks, same records (own process)':<44} {'hooks ms':>9} "
          f"{'actviz ms':>9} {'ratio':>8}")  # fmt: skip
    for line in hooks["row_text"]:
        print(line)
    results = capture_bench.run(models, pairs=pairs, size=224)
    capture_bench.print_table(results)
    summary.update(
        {k: v for k, v in results.items() if k.startswith("capture_") and isinstance(v, float)}
    )
    for key in (
        "capture_hooks_ratio",
        "capture_hooks_fwd_ratio",
        "capture_hooks_grad_ratio",
        "capture_hooks_cpu_ratio",
    ):
        summary[key] = hooks[key]
    print(
        f"capture_hooks_ratio {hooks['capture_hooks_ratio']:.3f} (CPU time "
        f"{hooks['capture_hooks_cpu_ratio']:.3f}); beside it capture_fwd_ratio "
        f"{results['capture_fwd_ratio']:.3f}, capture_grad_ratio {results['capture_grad_ratio']:.3f}"
    )
    summary["gradcam_ratio"] = results["gradcam_ratio"]
    costs = capture_bench.overheads(pairs=pairs)
    capture_bench.print_overheads(costs)
    for key in ("capture_fixed_ms", "capture_per_call_us", "capture_small_all_ratio"):
        summary[key] = costs[key]
    from actviz.bench import edits_bench

    edits = edits_bench.run(models, pairs=pairs, size=224)
    edits_bench.print_table(edits)
    summary["edits_ratio"] = edits["edits_ratio"]
    # The same figures with the explorer window open (idle, a model loaded).
    from actviz.bench.ui_bench import delete_widgets, ensure_qt_app, scratch_settings
    from actviz.ui.window.main_window import MainWindow

    app = ensure_qt_app()
    window = MainWindow(settings=scratch_settings(), auto_run=False)
    window.show()
    window.script.set_model(torch.nn.Sequential(torch.nn.Conv2d(3, 4, 3)))
    app.processEvents()
    try:
        with_window = capture_bench.run(("resnet18",), pairs=pairs, size=224)
    finally:
        delete_widgets(window)
    print("capture overhead with the explorer window open:")
    for row in with_window["rows"]:
        print(row.row())
    for key in ("capture_fwd_ratio", "capture_all_ratio", "capture_grad_ratio"):
        summary[key.replace("capture_", "capture_window_")] = with_window[key]


def _render(quick: bool, summary: dict) -> None:
    from actviz.bench import render_bench

    # A p95 of 40 samples is their second worst: one steal burst on a shared machine decides it.
    results = render_bench.run(repeats=30 if quick else 120)
    render_bench.print_table(results)
    summary["render_p95_ms"] = results["render_p95_ms"]
    summary["render_max_any_ms"] = results["render_max_any_ms"]


def _live(quick: bool, summary: dict) -> None:
    from actviz.bench import live_bench

    # Short, many alternations: a neighbour's burst then spoils one pair, not the median. An
    # even count: two lanes show frames in pairs, and 3 timed 1 or 2 periods by phase (0.6-1.7x).
    r = live_bench.run("resnet50", 224, 20, pairs=3 if quick else 9, frames=4)
    live_bench.print_table(r)
    for key in ("live_throughput_ratio", "ui_lag_p50_ms", "ui_lag_p99_ms", "ui_lag_max_ms"):
        summary[key] = r[key]
    summary["live_fps"] = r["live_fps"]
    summary["bare_capture_fps"] = r["bare_fps"]
    small = live_bench.run_small(pairs=3 if quick else 9, frames=8)
    live_bench.print_small(small)
    summary["live_small_ratio"] = small["live_small_ratio"]
    for row in small["rows"]:
        summary[f"live_small_{row['size']}px_{row['layers']}l_ratio"] = row["live_throughput_ratio"]
        # The display's CPU per frame (GUI thread + preparing, thread CPU time), which bounds
        # live_small_ratio on two cores.
        summary[f"live_display_cpu_{row['size']}px_ms"] = row["display_cpu_ms"]


def _startup(quick: bool, summary: dict) -> None:
    from actviz.bench import startup_bench

    r = startup_bench.run(pairs=2 if quick else 5, warmup=not quick)
    startup_bench.print_table(r)
    summary["startup_ratio"] = r.ratio
    summary["startup_s"] = r.app_s


def _memory(quick: bool, summary: dict) -> None:
    from actviz.bench import memory_bench

    arch, size = ("resnet18", 112) if quick else ("resnet50", 224)
    r = memory_bench.run(arch, size, 20)
    memory_bench.print_table(r)
    summary["memory_growth_ratio"] = r.ratio


def _scan(quick: bool, summary: dict) -> None:
    from actviz.bench import scan_bench

    r = scan_bench.run(
        ("demo", "resnet18"), images=2000, size=112, pairs=1 if quick else 5, window=True
    )
    scan_bench.print_table(r)
    for key in (
        "scan_throughput_ratio",
        "scan_overhead_ratio",
        "scan_rss_growth_frac",
        "scan_rss_growth_mib",
    ):
        summary[key] = r[key]
    # The worse of the two cases (idle, beside live mode).
    lags = list(r.get("window_lag", {}).values())
    if lags:
        summary["scan_ui_lag_p99_ms"] = max(lag["p99_ms"] for lag in lags)
        summary["scan_ui_lag_max_ms"] = max(lag["max_ms"] for lag in lags)


#: Sections run in a process of their own within a full run, and alone unless the app's OpenMP
#: settings are made (its process makes them before torch loads: actviz/core/openmp.py). Under
#: libgomp a thread that ran torch in parallel keeps its OpenMP team for good, and the earlier
#: sections capture on the main thread: live mode's capture thread would then share the process
#: with a second team, which slows both (actviz/core/threads.py); the window's process has one.
_OWN_PROCESS = ("live",)


def _app_env() -> dict[str, str]:
    """This process's environment with the app's OpenMP settings (actviz/core/openmp.py)."""
    env = dict(os.environ)
    use_app_openmp(env)
    return env


def _run_in_child(section: str, args: argparse.Namespace, summary: dict) -> None:
    """Run ``section`` as ``python -m actviz.bench SECTION`` in a new process: its tables go to
    stdout, its figures into ``summary``."""
    command = [sys.executable, "-m", "actviz.bench", section, "--threads", str(args.threads)]
    if args.quick:
        command.append("--quick")
    if args.pairs:
        command += ["--pairs", str(args.pairs)]
    proc = subprocess.run(command, capture_output=True, text=True, check=False, env=_app_env())
    lines = proc.stdout.splitlines()
    figures: dict = {}
    if lines and lines[-1].startswith("{"):
        figures = json.loads(lines.pop())
    for line in lines:
        # The child's own header, footer and section time: the parent prints its own.
        if not line.startswith(("machine: ", "total ", f"({section}: ")):
            print(line)
    if proc.returncode != 0 or not figures:
        raise RuntimeError(
            f"the {section} section failed in its own process (exit {proc.returncode}): "
            + (proc.stderr.strip().splitlines() or ["no output"])[-1]
        )
    figures.pop("steal_frac", None)
    summary.update(figures)


def _steal_text(meter: StealMeter) -> str:
    frac = meter.fraction()
    return "" if frac is None else f"; CPU taken by other guests {frac:.0%}"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m actviz.bench", description=__doc__)
    parser.add_argument("what", nargs="?", default="all", choices=["all", *SECTIONS])
    parser.add_argument("--quick", action="store_true", help="fewer pairs, smaller models")
    parser.add_argument("--pairs", type=int, default=None, help="paired runs per capture figure")
    parser.add_argument("--threads", type=int, default=2, help="torch threads (default 2)")
    parser.add_argument(
        "--actions", type=int, default=None, help="stress: random actions (default 20,000)"
    )
    args = parser.parse_args(argv)
    torch.set_num_threads(args.threads)

    pairs = args.pairs or (5 if args.quick else 15)
    print(f"machine: {machine()}")
    summary: dict = {}
    started = time.perf_counter()
    wanted = SECTIONS if args.what == "all" else (args.what,)
    run_steal = StealMeter()
    for section in wanted:
        t0 = time.perf_counter()
        steal = StealMeter()
        # In a process of its own within a run, or where the app's OpenMP settings are not made yet.
        unset = _app_env() != dict(os.environ)
        if section in _OWN_PROCESS and (len(wanted) > 1 or unset):
            _run_in_child(section, args, summary)
        elif section == "capture":
            _capture(pairs, args.quick, summary)
        elif section == "render":
            _render(args.quick, summary)
        elif section == "live":
            _live(args.quick, summary)
        elif section == "startup":
            _startup(args.quick, summary)
        elif section == "memory":
            _memory(args.quick, summary)
        elif section == "scan":
            _scan(args.quick, summary)
        else:
            import importlib

            try:
                module = importlib.import_module(_FEATURE_SECTIONS[section])
            except ModuleNotFoundError as exc:
                if exc.name != _FEATURE_SECTIONS[section]:
                    raise
                print(f"({section}: not in this install)")
                continue
            extra = {"actions": args.actions} if section == "stress" and args.actions else {}
            module.run(args.quick, summary, **extra)
        print(f"({section}: {time.perf_counter() - t0:.0f} s{_steal_text(steal)})")
        print()
    summary["steal_frac"] = run_steal.fraction()
    print(f"total {time.perf_counter() - started:.0f} s{_steal_text(run_steal)}")
    print(json.dumps({k: _round(v) for k, v in summary.items()}))
    return 0
