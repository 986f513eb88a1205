"""Docks opened one under another never make the window taller than the user made it: one
that would is tabbed with a dock beside it (at 1280x720 five docks on the right grew the
window to 791 px, its bottom off a laptop's screen)."""

from __future__ import annotations

import torch
from PySide6.QtWidgets import QDockWidget

from tests.ui.tiny_models import TinyCNN


def test_every_dock_open_at_1280x720_keeps_the_window_height(actviz_window):
    torch.manual_seed(0)
    x = torch.randn(1, 3, 16, 16, generator=torch.Generator().manual_seed(1))
    win = actviz_window(TinyCNN().eval(), x, ["conv1", "fc"], size=(1280, 720))
    win.run_and_wait()
    w = win.window
    docks = [d for d in w.findChildren(QDockWidget) if not d.isVisible()]
    assert len(docks) >= 4
    for dock in docks:
        win.open_dock(dock.windowTitle())
        win.qtbot.waitUntil(lambda: w.height() == 720, timeout=30_000)
        assert dock.isVisible() and not dock.visibleRegion().isEmpty()  # in front
    assert all(d.toggleViewAction().isChecked() for d in docks)
    assert w.minimumSizeHint().height() <= 720
    # Closing and opening one again keeps the height too.
    win.whatif.dock.close()
    win.open_dock("Edits")
    win.qtbot.waitUntil(lambda: w.height() == 720, timeout=30_000)
