"""Many ticked layers: panels are made a few per event-loop pass, never all in one block."""

from __future__ import annotations

import torch

from actviz.ui.window import display_steps, result_display
from tests.ui.tiny_models import TinyCNN

LAYERS = ["conv1", "relu", "conv2", "pool", "flatten", "fc"]


def test_panels_are_made_over_several_passes_in_execution_order(actviz_window, monkeypatch):
    # No time for a second panel per pass: each pass makes exactly one (and runs one step:
    # a pass otherwise runs steps for 4 ms, and these panels are made quicker than that).
    monkeypatch.setattr(result_display, "CREATE_BUDGET_S", 0.0)
    monkeypatch.setattr(display_steps, "DISPLAY_PASS_S", 0.0)
    torch.manual_seed(0)
    win = actviz_window(TinyCNN().eval(), torch.randn(1, 3, 16, 16), LAYERS)
    w = win.window
    made_per_pass: list[int] = []
    w.panel_created.connect(lambda name, panel: made_per_pass.append(len(w.host.layer_panels)))
    passes: list[int] = []  # panels made when each event-loop pass of the display ran
    w.display.defer_display(lambda: None)  # (the timer runs while steps wait)
    w.display.steps._timer.timeout.connect(lambda: passes.append(len(w.host.layer_panels)))
    with win.expect_run(flush=False):
        w.runs.run()
    result = w.session.result
    # run_finished promises every panel exists; they were made over several passes.
    assert list(w.host.layer_panels) == list(result.shown)
    assert made_per_pass == list(range(1, len(result.shown) + 1))  # one more each time
    assert len(set(passes)) >= len(result.shown) - 1
    # A panel made over its pass's budget is filled on a pass of its own (making and filling
    # one in a single pass blocked the GUI thread over 100 ms): once they ran, each shows it.
    w.display.flush_panel_updates()
    for name in result.shown:
        assert w.host.layer_panels[name].activation_slot.view is not None


def test_a_newer_result_replaces_the_panels_still_to_be_made(actviz_window, monkeypatch):
    monkeypatch.setattr(result_display, "CREATE_BUDGET_S", 0.0)
    torch.manual_seed(0)
    win = actviz_window(TinyCNN().eval(), torch.randn(1, 3, 16, 16), LAYERS)
    w = win.window
    with win.expect_run(flush=False):
        w.runs.run()
    win.untick("relu", "pool", "flatten")
    win.run_and_wait()  # flushes: every panel of the new result, none of the old one
    assert list(w.host.layer_panels) == ["conv1", "conv2", "fc"]
    assert not w.display.panels_pending()


def test_a_panel_filled_beside_another_does_not_stretch_it_on_the_way(actviz_window):
    """A new panel's parts are shown one by one, and Qt lays out every layout above a part as
    it is shown: the whole grid was laid out at each (five a panel), its row-mate stretched to
    the new panel's unfitted height and back each time. Now the grid is laid out once."""
    from PySide6.QtCore import QEvent, QObject

    from actviz.io.models.demo_model import demo_sample_tensor, load_demo_model

    x, _image = demo_sample_tensor()
    layers = ["features.block1", "features.block2", "features.block3"]
    win = actviz_window(load_demo_model(), x, layers, size=(1920, 1000), auto_run=True)
    win.run_and_wait()
    win.settle()
    grid = win.window.display.layers_grid
    mate = win.panel("features.block3")
    assert grid.getItemPosition(grid.indexOf(mate))[:2] == (1, 0)  # two columns: a row alone
    heights: list[int] = []

    class Sizes(QObject):
        def eventFilter(self, watched: QObject, event: QEvent) -> bool:  # noqa: N802
            if event.type() == QEvent.Type.Resize:
                heights.append(event.size().height())
            return False

    sizes = Sizes()
    mate.installEventFilter(sizes)
    settled = mate.height()  # (for the message)
    with win.expect_run():
        win.tick("features.block4")  # its panel comes beside block3
    win.settle()
    mate.removeEventFilter(sizes)
    assert grid.getItemPosition(grid.indexOf(win.panel("features.block4")))[:2] == (1, 1)
    # Its height settles (a wrapped caption a few px), with no detour through the new
    # panel's unfitted height (436 and 578 px for a 312 px row before).
    assert heights and max(heights) <= 1.1 * mate.height(), (heights, settled)
