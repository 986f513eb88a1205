"""Issue 39, defect 2: a dock opens at the width of its content (no more than the width its
feature asked for); an empty Edits dock takes no more than its hint, and Clear all closes it."""

from __future__ import annotations

import pytest
from PySide6.QtCore import Qt

from actviz.ui.docking import DOCK_MAX_SHARE
from actviz.ui.whatif.dock import PREFERRED_WIDTH
from tests.ui.tiny_models import tiny_window


@pytest.mark.parametrize("size", [(1280, 720), (1920, 1080)])
def test_an_empty_edits_dock_takes_no_more_than_its_hint(actviz_window, size):
    win = tiny_window(actviz_window, size=size, auto_run=True)
    centre = win.window.centralWidget()
    before = centre.width()
    dock = win.open_dock("Edits")  # View > Edits
    win.settle()
    assert not win.window.session.edits.entries
    hint = dock.sizeHint().width()
    assert dock.width() <= hint <= PREFERRED_WIDTH, (dock.width(), hint)
    # The panels keep all but the dock's hint (and the splitter handle).
    assert centre.width() >= before - hint - 10
    # An edit, then Clear all: the dock goes away with the edits.
    with win.expect_run():
        win.context_action("conv2", 1, "Ablate")
    assert dock.isVisible() and len(win.window.session.edits.entries) == 1
    assert dock.width() <= PREFERRED_WIDTH
    clear = win.whatif.dock.clear_button
    with win.expect_run():
        win.qtbot.mouseClick(clear, Qt.MouseButton.LeftButton)
    assert not win.window.session.edits.entries
    win.qtbot.waitUntil(lambda: not dock.isVisible(), timeout=10_000)
    win.settle()
    assert centre.width() >= before - 2


@pytest.mark.parametrize("size", [(1280, 720), (1024, 640)])
def test_every_dock_opens_at_its_content_width(actviz_window, size):
    win = tiny_window(actviz_window, size=size, auto_run=True)
    for title in ("Dataset", "Channels that matter"):
        dock = win.open_dock(title)
        win.settle()
        asked = int(dock.property("actviz_width") or 0)
        want = dock.sizeHint().width() if not asked else min(asked, dock.sizeHint().width())
        want = min(want, int(win.window.width() * DOCK_MAX_SHARE))
        assert abs(dock.width() - max(want, dock.minimumSizeHint().width())) <= 2, title
        dock.toggleViewAction().trigger()
        win.settle()


def test_the_edits_dock_shown_beside_a_wide_dock_does_not_squeeze_it(actviz_window):
    """An edit made with "Channels that matter" open shows the Edits dock above it: the area
    they share keeps the wide dock's width (it fell to the Edits dock's ~90 px hint, cutting
    every line of Channels that matter)."""
    win = tiny_window(actviz_window, size=(1280, 720), auto_run=True)
    effects = win.open_dock("Channels that matter")
    win.settle()
    wide = effects.width()
    assert wide >= 250
    with win.expect_run():
        win.context_action("conv2", 1, "Ablate")
    edits = win.whatif.dock
    win.settle()
    assert edits.isVisible() and effects.isVisible()
    assert win.window.dockWidgetArea(edits) == win.window.dockWidgetArea(effects)
    assert effects.width() >= wide - 2, (effects.width(), wide)
