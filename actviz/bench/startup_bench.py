"""Start-up: from process start to the window having painted the demo's first results.

Two fresh Python processes per pair, order flipped every pair:

* the baseline, ``python -c "import torch, torchvision"``, prints the wall-clock time right
  after the imports;
* the app, ``python -m actviz.bench.startup_bench --child``, does what ``actviz`` (no
  arguments) does -- ``run_app``: a window, the demo model and its first sample loading in the
  background, the automatic first run -- and prints the wall-clock time once the first result
  is on the panels and the window has painted it, then exits without the Qt teardown
  (``--child --plugins``: with the installed plugins, also printing how many are active; the
  plugins bench times that child).

Each time is measured from just before the parent starts the process; the figure is the
median over pairs of app / baseline.
"""

from __future__ import annotations

import os
import statistics
import subprocess
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass

MARK = "ACTVIZ_FIRST_PAINT"
BASELINE = f"import time, torch, torchvision; print('{MARK}', repr(time.time()), flush=True)"


@dataclass
class StartupResult:
    baseline_s: float
    app_s: float
    ratio: float
    pairs: int
    ratios: list[float]
    note: str = ""


#: Plugin names the ``--plugins`` child starts with disabled (comma-separated).
DISABLE_ENV = "ACTVIZ_BENCH_DISABLE_PLUGINS"


def child_env(extra_path: Sequence[str] = ()) -> dict[str, str]:
    """A timed child's environment: offline, offscreen without a display, ``extra_path``
    first on ``PYTHONPATH``."""
    env = dict(os.environ)
    env.setdefault("ACTVIZ_OFFLINE", "1")
    if sys.platform.startswith("linux") and not (env.get("DISPLAY") or env.get("WAYLAND_DISPLAY")):
        env.setdefault("QT_QPA_PLATFORM", "offscreen")
    if extra_path:
        env["PYTHONPATH"] = os.pathsep.join([*extra_path, *filter(None, [env.get("PYTHONPATH")])])
    return env


def time_child(
    args: list[str], timeout_s: float, env: dict[str, str] | None = None
) -> tuple[float, list[str]]:
    """Seconds from just before ``args`` starts to the time on its :data:`MARK` line, and the
    line's further fields."""
    t0 = time.time()
    proc = subprocess.run(
        args, capture_output=True, text=True, timeout=timeout_s, env=env or child_env(), check=False
    )
    for line in proc.stdout.splitlines():
        if line.startswith(MARK):
            _, when, *rest = line.split()
            return float(when) - t0, rest
    raise RuntimeError(
        f"{' '.join(args[:3])}... printed no {MARK} line (exit {proc.returncode}):\n"
        f"{proc.stdout[-800:]}\n{proc.stderr[-2000:]}"
    )


def _time_process(args: list[str], timeout_s: float) -> float:
    return time_child(args, timeout_s)[0]


def run(pairs: int = 3, timeout_s: float = 180.0, warmup: bool = True) -> StartupResult:
    """Median of ``pairs`` interleaved (baseline, app) start-ups.

    ``warmup`` first runs each once unmeasured, so both start with the file cache warm.
    """
    python = sys.executable
    base_cmd = [python, "-c", BASELINE]
    app_cmd = [python, "-m", "actviz.bench.startup_bench", "--child"]
    if warmup:
        _time_process(base_cmd, timeout_s)
        _time_process(app_cmd, timeout_s)
    base: list[float] = []
    app: list[float] = []
    for i in range(pairs):
        order = [(base_cmd, base), (app_cmd, app)]
        if i % 2:
            order.reverse()
        for cmd, out in order:
            out.append(_time_process(cmd, timeout_s))
    ratios = [a / b for a, b in zip(app, base, strict=True)]
    return StartupResult(
        statistics.median(base), statistics.median(app), statistics.median(ratios), pairs, ratios
    )


def print_table(r: StartupResult) -> None:
    print(
        f"{'start-up (median of interleaved processes)':<44} {'torch s':>9} {'actviz s':>9} {'ratio':>8}"
    )
    print(
        f"{'  import torch, torchvision / demo painted':<44} {r.baseline_s:9.2f} {r.app_s:9.2f} "
        f"{r.ratio:7.3f}x"
    )


# --------------------------------------------------------------------------------------------
# child: the app, reporting its first painted result
# --------------------------------------------------------------------------------------------


def child_main(plugins: str | None = None) -> int:  # pragma: no cover - runs in a subprocess
    """``run_app()`` with no arguments, printing :data:`MARK` and the time at the first paint
    (with ``plugins``, e.g. ``"installed"``: those plugins, and how many are active)."""
    from PySide6.QtCore import QTimer

    from actviz.bench.ui_bench import remove_scratch, scratch_settings
    from actviz.ui.explore import ensure_app
    from actviz.ui.window.main_window import MainWindow

    app = ensure_app()
    # A scratch settings file: no restored geometry or recent files change what is measured.
    settings = scratch_settings()
    off = [n for n in os.environ.get(DISABLE_ENV, "").split(",") if n]
    if off:  # as Help > Plugins leaves them: listed, not imported
        from actviz.ui.plugins.feature import DISABLED_KEY

        settings.setValue(DISABLED_KEY, off)
    window = MainWindow(settings=settings, **({"plugins": plugins} if plugins else {}))
    loaded = [sum(r.active for r in window.plugins.registry.records)] if plugins else []
    state = {"done": False}

    def painted() -> None:
        if state["done"]:
            return
        state["done"] = True
        window.repaint()  # the panels just filled: draw them now, synchronously
        print(MARK, repr(time.time()), *loaded, flush=True)
        remove_scratch()  # os._exit skips atexit
        os._exit(0)  # the figure is "up and drawing"; interpreter teardown is not part of it

    def failed(text: str) -> None:
        print("run failed:", text, file=sys.stderr, flush=True)
        remove_scratch()
        os._exit(2)

    window.run_finished.connect(lambda: QTimer.singleShot(0, painted))
    window.run_failed.connect(failed)
    window.files.load_demo()
    window.show()
    QTimer.singleShot(120_000, lambda: failed("no result within 120 s"))
    return int(app.exec())


if __name__ == "__main__":  # pragma: no cover
    if "--child" in sys.argv:
        raise SystemExit(child_main("installed" if "--plugins" in sys.argv else None))
    result = run()
    print_table(result)
