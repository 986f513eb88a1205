"""A layer panel's title in a narrow column keeps the layer's name whole: the module type,
then the shape, are left out first (marked "…") (it showed "featu…32×32" beside the channel view and the Edits dock at
1280x720), and the full title is the tooltip."""

from __future__ import annotations

from collections import OrderedDict

import torch
from torch import nn


def _nested() -> nn.Module:
    torch.manual_seed(0)
    features = nn.Sequential(
        OrderedDict(
            block1=nn.Sequential(nn.Conv2d(3, 16, 3, padding=1), nn.ReLU()),
            block2=nn.Sequential(nn.Conv2d(16, 32, 3, stride=2, padding=1), nn.ReLU()),
        )
    )
    head = [nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(32, 4)]
    return nn.Sequential(OrderedDict(features=features, pool=head[0], flat=head[1], fc=head[2]))


def test_a_narrow_panel_keeps_the_layer_name_whole(actviz_window):
    x = torch.randn(1, 3, 32, 32, generator=torch.Generator().manual_seed(0))
    win = actviz_window(_nested(), x, ["features.block1", "features.block2", "fc"])
    win.run_and_wait()
    w = win.window
    panel = win.panel("features.block2")
    full = panel.title()
    assert full == "features.block2 · Sequential · 32×16×16"
    win.open_dock("Edits")
    assert w.display.open_channel("features.block2", 3)
    win.settle()
    win.reveal("features.block2")
    label = panel.title_label
    shown = label.shown_text()
    assert shown != full, "the panel was wide enough for its whole title: nothing tested"
    assert shown.startswith("features.block2"), shown
    assert shown in ("features.block2 · … · 32×16×16", "features.block2 · …")
    label.repaint()
    assert label.toolTip() == full
    # Wide again: the whole title, no tooltip.
    w.host.channel_view.close_requested.emit()
    win.whatif.dock.close()
    win.settle()
    win.qtbot.waitUntil(lambda: label.shown_text() == full, timeout=30_000)
    label.repaint()
    assert label.toolTip() == ""
