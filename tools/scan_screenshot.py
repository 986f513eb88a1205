"""The README's dataset-scan screenshot: a channel's top-k grid on the bundled demo's samples.

Scans ``resources/demo/samples`` with the demo model (Data > Scan a dataset), opens one
channel from the Dataset dock's table, opens its best image as the input and grabs the window
(and the channel view alone). Run under Xvfb for real fonts or with
``QT_QPA_PLATFORM=offscreen``; the scan's cache goes to a temporary folder, user settings are
not touched.

Usage: ``python tools/scan_screenshot.py [OUT.png] [--size 1600x1000] [--layer L] [--channel C]``
(default ``/tmp/scan-topk.png``, ``features.block3`` channel 12); the channel view alone goes
to ``OUT-channel.png``.
"""

from __future__ import annotations

import argparse
import os
import tempfile
from pathlib import Path

from PySide6.QtCore import QSettings
from screenshots import wait_settled


def _wait(app, done) -> None:
    # The README screenshots' one wait (tools/screenshots.py, beside this file), strict here:
    # a scan that never finishes must not give a screenshot of a half-built grid.
    wait_settled(app, done, strict=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out", nargs="?", default="/tmp/scan-topk.png")
    parser.add_argument("--size", default="1600x1000")
    parser.add_argument("--layer", default="features.block3")
    parser.add_argument("--channel", type=int, default=12)
    args = parser.parse_args()
    folder = Path(tempfile.mkdtemp())
    os.environ["XDG_CACHE_HOME"] = str(folder / "cache")  # the scan's cache, thrown away

    from actviz.io.models.demo_model import demo_samples
    from actviz.ui.dataset.dialog import ScanSpec
    from actviz.ui.explore import ensure_app
    from actviz.ui.window.main_window import MainWindow

    app = ensure_app()
    settings = QSettings(str(folder / "actviz.ini"), QSettings.Format.IniFormat)
    window = MainWindow(settings=settings, auto_run=False)
    width, height = (int(v) for v in args.size.split("x"))
    window.resize(width, height)
    window.show()
    window.load_demo()
    _wait(app, lambda: window.session.input is not None)
    window.tick([args.layer])
    scans: list[object] = []
    dataset = window.features["dataset"]
    dataset.scans.scan_finished.connect(scans.append)
    dataset.start(ScanSpec(str(demo_samples()[0].parent), (args.layer,), 9))
    _wait(app, lambda: bool(scans))
    grid = dataset.grid
    best = dataset.scan.top(args.layer, args.channel)[0].source
    assert window.open_input_source(str(best), wait=True)
    finished: list[int] = []
    window.run_finished.connect(lambda: finished.append(1))
    window.run()
    _wait(app, lambda: bool(finished))
    dataset.open_channel(args.layer, args.channel)
    _wait(app, lambda: window.channel_view.channel == args.channel and grid.tiles.count() > 0)
    window.flush_panel_updates()
    out = Path(args.out)
    window.grab().save(str(out))
    window.channel_view.grab().save(str(out.with_name(f"{out.stem}-channel{out.suffix}")))
    print(out)
    window.close()


if __name__ == "__main__":
    main()
