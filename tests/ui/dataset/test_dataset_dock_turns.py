"""View > Dataset shows no layer panel in its own event-loop turn: closing the Dataset dock
brings the "Channels that matter" dock tabbed under it to the front, whose outlines turn each
panel to the page holding its top channels; those panels are shown again in the display
passes, one a pass, not all in the turn of the menu click (a 1.35 s block in the stress run,
every panel's mosaic re-made and its canvas re-fitted)."""

from __future__ import annotations

import torch
import torchvision

from actviz.ui.window import display_steps
from actviz.ui.window.panel_grid import PanelGrid
from tests.ui.turns import TurnCounter

LAYERS = ["layer3.0", "layer3.1", "layer4.0", "layer4.1"]


def test_view_dataset_shows_no_panel_in_its_turn(actviz_window, monkeypatch):
    torch.manual_seed(0)
    model = torchvision.models.resnet18(weights=None).eval()
    x = torch.randn(1, 3, 64, 64, generator=torch.Generator().manual_seed(1))
    win = actviz_window(model, x, LAYERS, size=(1400, 900))
    win.run_and_wait()
    w = win.window
    effects = win.effects.feature
    effects_dock = win.open_dock("Channels that matter")
    win.qtbot.waitUntil(lambda: not effects.estimating(), timeout=60_000)
    effects.view.mark_check.setChecked(True)
    dataset = win.dataset.dock
    win.open_dock("Dataset")
    w.tabifyDockWidget(effects_dock, dataset)
    dataset.raise_()
    assert win.wait_idle()
    assert effects_dock.visibleRegion().isEmpty()  # its tab is behind the Dataset's
    # The user went to each layer's last page: its top channel is on another.
    tops = {name: effects.effects.top_channels(name, effects.view.top)[0] for name in LAYERS}
    for name in LAYERS:
        size = w.display.page_size(name)
        last = (w.session.result.layers[name].mosaic.total_channels - 1) // size * size
        w.display.turn_page(name, last // size - w.display.page_first(name) // size)
        assert w.display.page_first(name) == last > tops[name], name
    assert win.wait_idle()

    # One display step a pass (a pass otherwise runs steps for 4 ms: these panels are quick).
    monkeypatch.setattr(display_steps, "DISPLAY_PASS_S", 0.0)
    shown = TurnCounter(monkeypatch, PanelGrid, "update", lambda _g, p, _l: p.name)
    action = next(a for a in w.commands.view_menu.actions() if a.text() == "Dataset")
    action.trigger()  # View > Dataset: closed, "Channels that matter" in front
    assert not dataset.isVisible()
    assert shown.count() == 0, shown.calls  # none in the menu's turn
    win.qtbot.waitUntil(lambda: not effects_dock.visibleRegion().isEmpty(), timeout=30_000)
    win.qtbot.waitUntil(lambda: not w.display.display_pending(), timeout=30_000)
    assert shown.most_in_a_turn() <= 1, shown.calls
    w.display.flush_panel_updates()
    # Each panel shows the page holding its top channel, outlined.
    for name in LAYERS:
        size = w.display.page_size(name)
        assert w.display.page_first(name) == tops[name] // size * size, name
        assert tops[name] in w.host.layer_panels[name].selected_channels()
