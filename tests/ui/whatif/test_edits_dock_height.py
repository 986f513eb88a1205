"""The Edits dock takes the height its rows need, not half the column: with one edit it sat over
the Live dock at 1280x720 with ~330 px of blank rows while Live was cut to a scroll bar."""

from __future__ import annotations

import torch

from tests.ui.tiny_models import TinyCNN


def test_one_edit_leaves_the_column_to_the_live_dock_at_1280x720(actviz_window):
    x = torch.randn(1, 3, 16, 16, generator=torch.Generator().manual_seed(1))
    win = actviz_window(TinyCNN().eval(), x, ["conv1", "conv2"], size=(1280, 720))
    win.run_and_wait()
    win.context_action("conv2", 1, "Ablate")
    win.wait_idle()
    edits, live = win.whatif.dock, win.open_dock("Live")
    win.settle()
    assert edits.isVisible() and live.isVisible()
    assert abs(edits.x() - live.x()) < 5 and edits.y() < live.y()  # one column, Edits on top
    rows = win.whatif.rows()
    assert len(rows) == 1 and "ablate ch 1" in rows[0].label.text()
    # The dock is as tall as its content asks (row, summary, Clear all), Live has the rest.
    assert edits.height() <= edits.sizeHint().height() + 40
    assert live.height() > 2 * edits.height()
    # Rows beyond the room scroll inside the dock; the dock grows with them up to its share.
    for channel in (2, 3, 4, 5):
        win.context_action("conv2", channel, "Ablate")
        win.wait_idle()
    win.settle()
    assert len(win.whatif.rows()) == 5
    area = win.whatif.dock.rows_area
    assert area.viewport().height() >= sum(r.height() for r in win.whatif.rows()) - 2
