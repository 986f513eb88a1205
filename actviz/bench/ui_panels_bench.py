"""The GUI thread while a result with many layers is shown: ``many_panels_block_ms``.

A random-init ResNet-18 with every leaf ticked (about 50 layer panels) runs once; the figure is
the longest the GUI thread was blocked (Qt timer lag) from the moment the capture finished
until every panel shows it, on the first result (panels made) and on a second one (panels
reused), and when the Compare tab is shown. Target: at most 100 ms.
"""

from __future__ import annotations

import time
from typing import Any

__all__ = ["measure", "run"]


def measure(size: int = 64, repeats: int = 2, model: Any = None) -> dict[str, Any]:
    """Worst GUI-thread blocks (ms) while ``model``'s all-leaves results are shown
    (default: a random-init ResNet-18)."""
    import torch
    import torchvision

    from actviz.bench.ui_bench import LagProbe, ensure_qt_app, scratch_settings, wait_until
    from actviz.core.capture import leaf_names
    from actviz.ui.window.main_window import MainWindow

    ensure_qt_app()
    torch.manual_seed(0)
    if model is None:
        model = torchvision.models.resnet18().eval()
    window = MainWindow(settings=scratch_settings(), auto_run=False)
    window.resize(1280, 720)
    window.show()
    layers = leaf_names(model)
    window.script.set_model(model, name="resnet18", layers=layers)
    window.script.set_input(torch.randn(1, 3, size, size))
    blocks: dict[str, float] = {}
    shown: list[int] = []
    window.run_finished.connect(lambda: shown.append(1))
    try:
        for attempt in range(repeats):
            probe = LagProbe(5)
            shown.clear()
            # From the submit: the capture runs on the worker (the GUI thread idles), then
            # the result reaches the panels on the GUI thread, which is what is measured.
            probe.start()
            window.runs.run()
            # Every panel made and the on-screen ones filled (off-screen ones fill on scroll).
            wait_until(lambda: bool(shown) and not window.display.panels_pending(), 300)
            wait_until(lambda: False, 0.2)  # a last few timer ticks after the panels
            probe.stop()
            key = "first" if attempt == 0 else "again"
            blocks[key] = probe.summary()["max_ms"]
        probe = LagProbe(5)
        probe.start()
        window.host.show_tab(window.features["compare"].page)
        wait_until(lambda: False, 0.5)
        probe.stop()
        blocks["compare_tab"] = probe.summary()["max_ms"]
    finally:
        window.close()
        window.deleteLater()
        wait_until(lambda: False, 0.05)
    return {"panels": len(layers), "blocks_ms": blocks, "max_ms": max(blocks.values())}


def run(quick: bool, summary: dict) -> None:
    """Print the table and put ``many_panels_block_ms`` into ``summary``."""
    t0 = time.perf_counter()
    figures = measure(size=32, repeats=2)
    print(f"many panels: ResNet-18, all {figures['panels']} leaves ticked, 1280x720")
    for key, value in figures["blocks_ms"].items():
        print(f"  longest GUI block, {key:<12} {value:8.1f} ms")
    print(f"  many_panels_block_ms {figures['max_ms']:.1f} (target <= 100)")
    print(f"  ({time.perf_counter() - t0:.0f} s)")
    summary["many_panels_block_ms"] = figures["max_ms"]
