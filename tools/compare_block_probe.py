"""How long the GUI thread blocks when a comparison with a pin arrives (ResNet-18).

A random-init ResNet-18 with every leaf ticked runs on a 64x64 input in a 1280x720 window
(``--window``),
is pinned, runs on another input, and is compared with the pin from the Layers tab (the
Compare tab comes up, as from Run > Pinned results). A 5 ms Qt timer records how late it
fires from the click until the comparison is shown plus ``--settle`` seconds: the longest
lateness is the longest block. Not a test (no timing assertions); numbers are rough on a
shared machine, so it repeats.

    QT_QPA_PLATFORM=offscreen python tools/compare_block_probe.py --repeats 3
"""

from __future__ import annotations

import argparse
import time


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--size", type=int, default=64)
    parser.add_argument("--settle", type=float, default=1.0)
    parser.add_argument("--window", default="1280x720", help="window size, WxH")
    args = parser.parse_args()

    import torch
    import torchvision

    from actviz.bench.ui_bench import LagProbe, ensure_qt_app, scratch_settings, wait_until
    from actviz.core.capture import leaf_names
    from actviz.ui.window.main_window import MainWindow

    ensure_qt_app()
    torch.set_num_threads(1)
    torch.manual_seed(0)
    model = torchvision.models.resnet18(weights=None).eval()
    window = MainWindow(settings=scratch_settings(), auto_run=False)
    width, height = (int(v) for v in args.window.split("x"))
    window.resize(width, height)
    window.show()
    layers = leaf_names(model)
    window.set_model(model, name="resnet18", layers=layers)
    compare = window.features["compare"]
    done: list[int] = []
    compare.compare_finished.connect(lambda: done.append(1))
    ran: list[int] = []
    window.run_finished.connect(lambda: ran.append(1))

    def run_on(seed: int) -> None:
        ran.clear()
        g = torch.Generator().manual_seed(seed)
        window.set_input(torch.randn(1, 3, args.size, args.size, generator=g))
        window.run()
        wait_until(lambda: bool(ran) and not window.is_busy(), 120)
        window.flush_panel_updates()
        wait_until(lambda: False, 0.3)

    try:
        for attempt in range(args.repeats):
            window.show_tab(None)
            run_on(2 * attempt)
            pin = window.pin_result()
            run_on(2 * attempt + 1)
            window.show_tab(None)  # from the Layers tab, as a user comparing from the menu
            wait_until(lambda: False, 0.3)
            probe = LagProbe(5)
            done.clear()
            probe.start()
            t0 = time.perf_counter()
            window.compare_with_pin(pin)
            wait_until(lambda: bool(done), 120)
            took = time.perf_counter() - t0
            wait_until(lambda: False, args.settle)
            probe.stop()
            s = probe.summary()
            painted = sum(
                p.activation_slot.view is not None for p in compare.view.diff_panels.values()
            )
            print(
                f"attempt {attempt}: longest block {s['max_ms']:.0f} ms, p99 {s['p99_ms']:.0f} ms"
                f" (compare shown after {took:.2f} s; {painted}/{len(compare.view.diff_panels)}"
                " panels painted)",
                flush=True,
            )
            window.session.pins.unpin(pin)
    finally:
        window.close()
        window.deleteLater()
        wait_until(lambda: False, 0.05)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
