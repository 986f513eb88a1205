"""The first divergence's name in the Compare tab's chart sits above the points, not over the
cosine line at 1.0 (at 1280x720 beside the Edits dock its band was ~11 px, the text ~17)."""

from __future__ import annotations

import torch
from PySide6.QtCore import QPointF

from actviz.core.edit_kinds import ablate
from tests.ui.tiny_models import TinyCNN


def test_the_divergence_name_clears_the_points(actviz_window):
    torch.manual_seed(0)
    x = torch.randn(1, 3, 16, 16, generator=torch.Generator().manual_seed(1))
    win = actviz_window(TinyCNN().eval(), x, ["conv1", "relu", "conv2", "fc"], size=(1280, 720))
    win.run_and_wait()
    w = win.window
    pin = w.pins_ui.pin_result()
    with win.expect_run():
        win.whatif.add_edit("relu", ablate([0, 1]))
        w.runs.run()
    win.open_dock("Edits")
    compare = win.compare.feature
    with win.qtbot.waitSignal(compare.compare_finished, timeout=60_000):
        assert w.pins_ui.compare_with_pin(pin)
    w.host.show_tab(compare.page)
    win.settle()
    chart = compare.view.chart
    text = chart.divergence_text
    win.qtbot.waitUntil(text.isVisible, timeout=30_000)
    vb = chart.plot.vb
    highest = max(float(v) for v in [*chart.cosine, *chart.rel_l2])
    points_top = vb.mapViewToScene(QPointF(0.0, highest)).y()
    text_bottom = text.sceneBoundingRect().bottom()
    assert text_bottom <= points_top + 1, (text_bottom, points_top)
    assert vb.sceneBoundingRect().contains(text.sceneBoundingRect())
