"""The channel view beside a dock at 1280x720 still reads its channel's range and its share
of zeros (the statistics line was cut to "... std 0.000  zero…")."""

from __future__ import annotations

import torch

from actviz.core.edit_kinds import ablate
from tests.ui.tiny_models import TinyCNN


def test_the_statistics_line_keeps_range_and_zeros_when_narrow(actviz_window):
    torch.manual_seed(0)
    x = torch.randn(1, 3, 16, 16, generator=torch.Generator().manual_seed(1))
    win = actviz_window(TinyCNN().eval(), x, ["conv1", "conv2", "fc"], size=(1024, 640))
    win.run_and_wait()
    w = win.window
    with win.expect_run():
        win.whatif.add_edit("conv2", ablate([1]))
        w.runs.run()
    win.open_dock("Edits")
    assert w.display.open_channel("conv2", 1)
    win.settle()
    label = w.host.channel_view.stats_label
    full = label.text()
    assert full.startswith("min 0.000  max 0.000") and full.endswith("zeros 100.0 %")
    shown = label.shown_text()
    assert shown != full, "the view was wide enough for the whole line: nothing tested"
    assert shown.startswith("min 0.000 max 0.000"), shown
    assert shown.endswith("zeros 100.0 %"), shown
    assert label.fontMetrics().horizontalAdvance(shown) <= label.contentsRect().width()
