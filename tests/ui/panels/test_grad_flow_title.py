"""The Gradient flow chart's axis title is never cut: in a narrow Overview column (1280x720,
a dock open) it read "layer (execution or"; it says "layer" there, the whole title where it
fits."""

from __future__ import annotations

import torch

from actviz.ui.panels.plot_panel import AXIS_TITLE, SHORT_AXIS_TITLE
from tests.ui.tiny_models import TinyCNN


def _title_fits(panel) -> bool:
    label = panel.axis.label
    return label.sceneBoundingRect().width() <= panel.plot.vb.sceneBoundingRect().width()


def test_the_axis_title_fits_under_the_bars(actviz_window):
    torch.manual_seed(0)
    x = torch.randn(1, 3, 16, 16, generator=torch.Generator().manual_seed(1))
    win = actviz_window(TinyCNN().eval(), x, ["conv1", "conv2", "fc"], size=(1280, 720))
    w = win.window
    w.host.show_tab(w.centre.overview_tab)
    win.open_dock("Edits")
    win.run_and_wait()
    win.wait_idle()
    panel = w.centre.grad_flow_panel
    win.settle()
    assert panel.plot.vb.sceneBoundingRect().width() < panel._title_px  # narrow: tested
    assert panel.axis.labelText == SHORT_AXIS_TITLE and _title_fits(panel)
    win.whatif.dock.close()
    w.resize(1920, 1080)
    win.settle()
    win.qtbot.waitUntil(lambda: panel.axis.labelText == AXIS_TITLE, timeout=30_000)
    assert _title_fits(panel)
