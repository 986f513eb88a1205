"""Regenerate the README's screenshots of the bundled demo at laptop and desktop sizes.

Run under a real X server or Xvfb for real fonts (``xvfb-run -s "-screen 0 1920x1080x24"
python tools/screenshots.py``); ``QT_QPA_PLATFORM=offscreen`` also works. Writes
``resources/screenshot-{layers,channel,overview,ablation,ablation-overview,compare}-{W}x{H}.png``
(each tab; the Model dock open, the Edits dock with the ablation); user settings are not
touched.
"""

from __future__ import annotations

import sys
import tempfile
from pathlib import Path
from typing import Any

from PySide6.QtCore import QEventLoop, QSettings, QTimer

from actviz.ui.explore import ensure_app
from actviz.ui.window.main_window import MainWindow

OUT = Path(__file__).resolve().parents[1] / "resources"
SIZES = ((1280, 720), (1920, 1080))


def wait_settled(app, done, timeout_ms: int = 120_000, *, strict: bool = False) -> None:
    """Run the event loop until ``done()`` or ``timeout_ms``, then let layouts settle and
    paint; ``strict``: a timeout raises (no screenshot of a window that did not get there).
    The screenshot tools beside this file wait with it."""
    loop, timer, poll = QEventLoop(), QTimer(), QTimer()
    timer.setSingleShot(True)
    timer.timeout.connect(loop.quit)
    poll.timeout.connect(lambda: done() and loop.quit())
    timer.start(timeout_ms)
    poll.start(50)
    loop.exec()
    poll.stop()
    for _ in range(20):  # let layouts settle and paint
        app.processEvents()
    if strict and not done():
        raise TimeoutError("the window did not get there in time")


def _demo_window(width: int, height: int, ini: Path) -> tuple[Any, MainWindow, list[int]]:
    """A shown window of ``width`` x ``height`` (settings in ``ini``) with the demo opened and
    run; returns the app, the window and its list of finished runs (one entry each)."""
    app = ensure_app()
    window = MainWindow(settings=QSettings(str(ini), QSettings.Format.IniFormat))
    window.resize(width, height)
    window.show()
    finished: list[int] = []
    window.run_finished.connect(lambda: finished.append(1))
    window.load_demo()
    wait_settled(app, lambda: bool(finished))
    return app, window, finished


def _grab(app, window: MainWindow, name: str, size: tuple[int, int], *, flush: bool = True) -> Path:
    """Save the window as ``resources/screenshot-{name}-{W}x{H}.png`` (``size``: the size asked
    for; ``flush``: the panels' pending updates painted first)."""
    if flush:
        window.flush_panel_updates()
        for _ in range(20):
            app.processEvents()
    path = OUT / f"screenshot-{name}-{size[0]}x{size[1]}.png"
    window.grab().save(str(path))
    return path


def shoot(width: int, height: int, folder: Path) -> list[Path]:
    app, window, finished = _demo_window(width, height, folder / f"actviz-{width}.ini")
    window.flush_panel_updates()
    wait_settled(app, lambda: not window.display_pending(), 5_000)
    paths = []

    def grab(name: str) -> None:
        paths.append(_grab(app, window, name, (width, height)))

    grab("layers")
    layer = window.result.shown[1] if len(window.result.shown) > 1 else window.result.shown[0]
    window.open_channel(layer, 3)
    grab("channel")
    window.channel_view.close_requested.emit()
    count = len(finished)
    window.centre.tabs.setCurrentWidget(window.centre.overview_tab)  # re-runs for the saliency
    wait_settled(app, lambda: len(finished) > count)
    grab("overview")
    window.close()
    return paths


def shoot_ablation(width: int, height: int, folder: Path) -> list[Path]:
    """The demo with two channels of its second block ablated: the Edits dock, the edited
    panel's badge, the last block's difference view, and before/after in the Overview."""
    from actviz.edits import ablate

    app, window, finished = _demo_window(width, height, folder / f"actviz-edit-{width}.ini")
    maps = [n for n in window.result.shown if window.result.layers[n].mosaic is not None]
    pin = window.pin_result()  # the unedited run, compared with below
    count = len(finished)
    window.features["whatif"].add_edit(maps[1], ablate([0, 3]))
    wait_settled(app, lambda: len(finished) > count)
    window.layer_panels[maps[1]].set_selected_channels([0, 3])
    window.layer_panels[maps[-1]].difference_button.setChecked(True)
    paths = []
    for tab, name in (
        (window.centre.layers_splitter, "ablation"),
        (window.centre.overview_tab, "ablation-overview"),
    ):
        count = len(finished)
        window.centre.tabs.setCurrentWidget(tab)
        if tab is window.centre.overview_tab:
            wait_settled(app, lambda c=count: len(finished) > c)  # re-runs for the saliency
        paths.append(_grab(app, window, name, (width, height)))
    # The Compare tab: the ablated run against the pinned unedited one.
    compare = window.features["compare"]
    compared: list[int] = []
    compare.compare_finished.connect(lambda *_: compared.append(1))
    window.compare_with_pin(pin)
    wait_settled(app, lambda: bool(compared))
    window.centre.tabs.setCurrentWidget(compare.page)
    wait_settled(app, lambda: not compare.diff_panels_pending(), 20_000)
    paths.append(_grab(app, window, "compare", (width, height), flush=False))
    window.close()
    return paths


def main() -> int:
    with tempfile.TemporaryDirectory() as tmp:
        for w, h in SIZES:
            for path in [*shoot(w, h, Path(tmp)), *shoot_ablation(w, h, Path(tmp))]:
                print(path)
    return 0


if __name__ == "__main__":
    sys.exit(main())
