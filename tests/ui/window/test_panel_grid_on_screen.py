"""Filling a result's panels asks each waiting panel once whether it is on screen (#39)."""

from __future__ import annotations

import numpy as np
import torch

from actviz.ui.window.panel_grid import PanelGrid
from tests.ui.tiny_models import TinyCNN

LAYERS = ["conv1", "relu", "conv2", "pool", "flatten", "fc"]


def test_each_waiting_panel_is_asked_once_and_those_scrolled_to_are_filled(
    actviz_window, monkeypatch
):
    torch.manual_seed(0)
    # One column, two or three panels high: the others wait off screen.
    win = actviz_window(TinyCNN().eval(), torch.randn(1, 3, 16, 16), LAYERS, size=(900, 560))
    win.run_and_wait()
    win.run_and_wait()  # the panels at their heights: the view stays where it is
    w = win.window
    grid, panels = w.display.grid, w.host.layer_panels
    on_screen = [n for n, p in panels.items() if grid._on_screen(p)]  # noqa: SLF001
    assert 2 <= len(on_screen) < len(panels)
    asked: list[str] = []
    real = PanelGrid._on_screen  # noqa: SLF001

    def counting(self: PanelGrid, panel) -> bool:  # noqa: ANN001
        asked.append(panel.name)
        return real(self, panel)

    monkeypatch.setattr(PanelGrid, "_on_screen", counting)
    w.script.set_input(torch.randn(1, 3, 16, 16))  # other values: a stale panel would show
    with win.expect_run(flush=False):
        w.runs.run()
    w.wait_until(lambda: not w.display.display_pending())
    result = w.session.result
    # The panels on screen show the new result; the others wait, each asked once (and the
    # last one filled once more, to learn that none is left): 210 questions a frame with 20.
    assert all(panels[n].activation_slot.view is not None for n in on_screen)
    assert set(grid.pending) == set(result.shown) - set(on_screen)
    assert len(asked) <= len(result.shown) + 1, asked
    # Scrolled to, the waiting panels are filled (the view moved: they are asked again).
    bar = w.display.layers_scroll.verticalScrollBar()
    bar.setValue(bar.maximum())
    w.wait_until(lambda: not w.display.display_pending())
    last = result.shown[-1]
    assert last not in grid.pending
    shown = panels[last].activation_slot.view
    assert np.array_equal(shown.data, result.layers[last].view.data)
