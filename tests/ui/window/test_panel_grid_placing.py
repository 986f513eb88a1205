"""Panels made a few a pass join the Layers grid without re-placing those already there
(issue #37: each pass took every panel out of the grid and put it back, a relayout each:
35 ms of GUI thread with ResNet-18's leaves); the grid still shows them in execution order,
columns following the width, and unticked panels leave it."""

from __future__ import annotations

import torch

from actviz.ui.window import display_steps, result_display
from tests.ui.tiny_models import TinyCNN

LAYERS = ["conv1", "relu", "conv2", "pool", "flatten", "fc"]


def _cells(w) -> dict[str, tuple[int, int]]:
    grid = w.display.layers_grid
    names = {id(p): n for n, p in w.host.layer_panels.items()}
    cells = {}
    for i in range(grid.count()):
        widget = grid.itemAt(i).widget()
        if widget is not None and id(widget) in names:
            cells[names[id(widget)]] = grid.getItemPosition(i)[:2]
    return cells


def test_new_panels_join_the_grid_and_the_others_stay(actviz_window, monkeypatch):
    monkeypatch.setattr(result_display, "CREATE_BUDGET_S", 0.0)  # one panel a pass
    monkeypatch.setattr(display_steps, "DISPLAY_PASS_S", 0.0)
    torch.manual_seed(0)
    win = actviz_window(TinyCNN().eval(), torch.randn(1, 3, 16, 16), LAYERS, size=(1280, 720))
    w = win.window
    grid = w.display.layers_grid
    added: list[int] = []
    removed: list[int] = []
    add, remove = grid.addWidget, grid.removeWidget
    monkeypatch.setattr(
        grid, "addWidget", lambda widget, *a: (added.append(id(widget)), add(widget, *a))[1]
    )
    monkeypatch.setattr(
        grid, "removeWidget", lambda widget: (removed.append(id(widget)), remove(widget))[1]
    )
    with win.expect_run(flush=False):
        w.runs.run()
    panels = w.host.layer_panels
    assert list(panels) == LAYERS
    # Six panels made in six passes: each joined once; none of them left the grid.
    assert sorted(added) == sorted(id(p) for p in panels.values())
    assert not set(removed) & {id(p) for p in panels.values()}
    columns = w.display.grid._columns
    assert _cells(w) == {n: (i // columns, i % columns) for i, n in enumerate(LAYERS)}
    # Unticked: the panels after the gone ones move up, in order.
    win.untick("relu", "pool")
    win.run_and_wait()
    kept = ["conv1", "conv2", "flatten", "fc"]
    assert list(panels := w.host.layer_panels) == kept
    assert _cells(w) == {n: (i // columns, i % columns) for i, n in enumerate(kept)}
    assert all(p.isVisible() for p in panels.values())
