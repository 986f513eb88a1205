"""The channel view says when the layer it shows is edited: an ablated channel opened large was
a flat map with nothing saying why (the layer panel's badge is out of sight beside it)."""

from __future__ import annotations

import torch

from actviz.core.edit_kinds import ablate
from tests.ui.tiny_models import TinyCNN


def test_the_channel_view_names_the_layers_edits(actviz_window):
    torch.manual_seed(0)
    x = torch.randn(1, 3, 16, 16, generator=torch.Generator().manual_seed(1))
    win = actviz_window(TinyCNN().eval(), x, ["conv1", "conv2", "fc"], size=(1280, 720))
    win.run_and_wait()
    w = win.window
    view = w.host.channel_view
    assert w.display.open_channel("conv2", 1)
    assert not view.edit_label.isVisible()
    whatif = win.whatif.feature
    with win.expect_run():
        whatif.add_edit("conv2", ablate([1]))
        w.runs.run()
    win.wait_idle()
    assert w.display.open_channel("conv2", 1)
    assert view.edit_label.isVisible()
    assert view.edit_label.text() == "edited: ablate ch 1"
    # Another layer, not edited: no note; the edits cleared: none either.
    assert w.display.open_channel("conv1", 0)
    assert not view.edit_label.isVisible()
    assert w.display.open_channel("conv2", 1)
    with win.expect_run():
        whatif.clear_edits()
        w.runs.run()
    win.wait_idle()
    assert view.name == "conv2" and not view.edit_label.isVisible()
