"""The channel view with everything under it (a scan's top images, "What it wants", an edit
badge, statistics) beside the Dataset dock at 1280x720 and at 1024x640: its column scrolls
rather than squeezing its maps under their least size, where the levels rows were laid over
the pictures (the bottom of an 8x8 map and its colour bar's 0 cut off)."""

from __future__ import annotations

import numpy as np
import pytest
from PySide6.QtCore import QPoint, Qt
from PySide6.QtWidgets import QWidget

from actviz.ui.dataset.dialog import ScanSpec
from tests.ui.dataset.scan_folders import TIMEOUT_MS, write_folder

LAYER = "features.block4"


def _top(widget: QWidget, view: QWidget) -> int:
    return widget.mapTo(view, QPoint(0, 0)).y()


@pytest.mark.parametrize("size", [(1280, 720), (1024, 640)])
def test_the_crowded_channel_view_scrolls_and_nothing_overlaps(actviz_window, tmp_path, size):
    win = actviz_window(size=size)
    win.dataset.in_process()
    assert win.window.files.open_model_source("demo", wait=True)
    folder = tmp_path / "images"
    write_folder(folder)
    scan = win.dataset.scan_and_wait(ScanSpec(str(folder), (LAYER,), 4, 8), TIMEOUT_MS)
    channel = int(np.argmax(scan.stats(LAYER).std))
    win.open_dock("Dataset")
    table = win.dataset.dock.table
    index = table.table_model.index(table.row_of(channel), 0)
    table.scrollTo(index)
    with win.qtbot.waitSignal(win.dataset.scans.views_ready, timeout=TIMEOUT_MS):
        win.qtbot.mouseClick(
            table.viewport(), Qt.MouseButton.LeftButton, pos=table.visualRect(index).center()
        )
    win.wait_idle()
    # "What it wants" (a few steps): its picture under the maps too.
    section = win.visualize.configure(size=32, steps=4)
    win.qtbot.mouseClick(section.button, Qt.MouseButton.LeftButton)
    win.qtbot.waitUntil(lambda: not win.visualize.feature.is_busy(), timeout=TIMEOUT_MS)
    win.settle()
    view = win.window.host.channel_view
    assert view.isVisible() and win.dataset.feature.grid.isVisible()
    for column in (view._act_box, view._grad_box):  # noqa: SLF001 - a map and its levels row
        canvas, levels = column.canvas, column.controls
        assert canvas.height() >= canvas.minimumHeight() > 0
        assert _top(canvas, view) + canvas.height() <= _top(levels, view)
    # No two of the view's parts are drawn over each other.
    parts = [w for w in view.findChildren(QWidget) if w.parent() is view and w.isVisible()]
    boxes = [w.geometry() for w in parts]
    for i, a in enumerate(boxes):
        for j, b in enumerate(boxes[i + 1 :], i + 1):
            assert not a.intersects(b), (parts[i], a, parts[j], b)
    # What did not fit is scrolled to, not cut: the view is as tall as its rows ask.
    assert view.height() >= view.minimumSizeHint().height()
