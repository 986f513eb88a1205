"""The feature-visualisation screenshots of docs/visualize.md, on the bundled demo.

1. The channel view with "What it wants" under the dataset's top-k (a scan of the demo's
   samples covers the layer): ``docs/images/visualize-channel-1400x860.png``.
2. The "What channels want" dock filled with a page of the layer's channels:
   ``docs/images/visualize-mosaic-1400x860.png``.

Run with ``QT_QPA_PLATFORM=offscreen`` (or under Xvfb for real fonts). The caches (scan and
visualisations) go to a temporary folder; user settings are not touched.

Usage: ``python tools/visualize_screenshots.py [--layer L] [--channel C] [--steps N]``
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
from pathlib import Path

from PySide6.QtCore import QSettings, Qt
from screenshots import wait_settled

OUT = Path(__file__).resolve().parents[1] / "docs" / "images"
WIDTH, HEIGHT = 1400, 860


def _wait(app, done) -> None:
    # The screenshots' one wait (tools/screenshots.py, beside this file), strict and long: a
    # synthesis of many steps on a slow machine takes minutes.
    wait_settled(app, done, 600_000, strict=True)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--layer", default="features.block3")
    parser.add_argument("--channel", type=int, default=12)
    parser.add_argument("--steps", type=int, default=256)
    parser.add_argument("--size", type=int, default=64, help="the demo's own input size")
    args = parser.parse_args()
    folder = Path(tempfile.mkdtemp())
    os.environ["XDG_CACHE_HOME"] = str(folder / "cache")

    from actviz.io.models.demo_model import demo_samples
    from actviz.ui.dataset.dialog import ScanSpec
    from actviz.ui.explore import ensure_app
    from actviz.ui.window.main_window import MainWindow

    app = ensure_app()
    settings = QSettings(str(folder / "actviz.ini"), QSettings.Format.IniFormat)
    window = MainWindow(settings=settings, auto_run=False)
    window.resize(WIDTH, HEIGHT)
    window.show()
    window.load_demo()
    _wait(app, lambda: window.session.input is not None)
    window.tick([args.layer])
    dataset = window.features["dataset"]
    scans: list[object] = []
    dataset.scans.scan_finished.connect(scans.append)
    dataset.start(ScanSpec(str(demo_samples()[0].parent), (args.layer,), 9))
    _wait(app, lambda: bool(scans))
    best = dataset.scan.top(args.layer, args.channel)[0].source
    assert window.open_input_source(str(best), wait=True)
    finished: list[int] = []
    window.run_finished.connect(lambda: finished.append(1))
    window.run()
    _wait(app, lambda: bool(finished))
    dataset.open_channel(args.layer, args.channel)
    _wait(app, lambda: window.channel_view.channel == args.channel)

    feature = window.features["visualize"]
    section = feature.section
    section.steps_spin.setValue(args.steps)
    section.size_spin.setValue(args.size)
    section.button.click()
    _wait(app, lambda: feature.shown is not None and not feature.is_busy())
    window.flush_panel_updates()
    channel_png = OUT / f"visualize-channel-{WIDTH}x{HEIGHT}.png"
    window.grab().save(str(channel_png))
    print(channel_png)

    window.channel_view.close_requested.emit()
    # The dock gets the right-hand column to itself (the Dataset dock closed).
    from PySide6.QtWidgets import QDockWidget

    for dock in window.findChildren(QDockWidget):
        if dock.windowTitle() == "Dataset":
            dock.setVisible(False)
    window.resizeDocks([feature.page.dock], [420], Qt.Orientation.Horizontal)
    assert feature.visualise_page(args.layer, 0)
    _wait(app, lambda: not feature.page.is_busy())
    window.flush_panel_updates()
    mosaic_png = OUT / f"visualize-mosaic-{WIDTH}x{HEIGHT}.png"
    window.grab().save(str(mosaic_png))
    print(mosaic_png)
    window.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
