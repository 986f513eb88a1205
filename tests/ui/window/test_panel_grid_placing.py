"""Panels made a few a pass join the Layers grid without re-placing those already there
(issue #37: each pass took every panel out of the grid and put it back, a relayout each:
35 ms of GUI thread with ResNet-18's leaves); the grid still shows them in execution order,
columns following the width, and unticked panels leave it. Dropped panels are hidden at once
and deleted a few a pass."""

from __future__ import annotations

from collections import Counter

import shiboken6
import torch
from PySide6.QtCore import QEvent, QObject, QTimer
from PySide6.QtWidgets import QApplication

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


def test_dropped_panels_are_hidden_at_once_and_deleted_a_few_a_pass(actviz_window, monkeypatch):
    """Another model's panels were all deleted in one event-loop turn (45-130 ms of GUI thread
    on a model switch with ResNet-18's leaves): they go out of sight at once and are deleted
    DELETES_PER_PASS a pass; the window is idle only once they are gone."""
    monkeypatch.setattr(result_display, "DELETES_PER_PASS", 2)
    torch.manual_seed(0)
    win = actviz_window(TinyCNN().eval(), torch.randn(1, 3, 16, 16), LAYERS, size=(1280, 720))
    win.run_and_wait()
    w = win.window
    old = list(w.host.layer_panels.values())
    assert len(old) == 6
    turn = [0]
    timer = QTimer()
    timer.setInterval(0)
    timer.timeout.connect(lambda: turn.__setitem__(0, turn[0] + 1))
    timer.start()
    deaths: Counter[int] = Counter()
    for panel in old:
        panel.destroyed.connect(lambda *_: deaths.update([turn[0]]))
    w.display.clear_panels()  # what opening another model does
    # Out of sight: those on screen hidden, the others only moved out of the grid's way.
    assert not any(p.isVisible() and not p.visibleRegion().isEmpty() for p in old)
    assert all(not p.isVisible() or p.geometry().right() < 0 for p in old)
    # A hide reaches every child widget: only those seen are hidden (issue #37).
    assert 0 < sum(not p.isVisible() for p in old) < len(old)
    assert w.display._to_delete and w.display.display_pending()
    w.wait_until(lambda: not w.display.display_pending())
    # The last few were handed to deleteLater in the pass that emptied the list.
    w.wait_until(lambda: not any(shiboken6.isValid(p) for p in old))
    assert sum(deaths.values()) == 6
    assert max(deaths.values()) <= 2 and len(deaths) >= 3  # a few a pass, not all at once
    # Done, it stops: it asked for itself again each turn with none left (a GUI thread that
    # never slept: 19,000 calls in 0.35 s after a model switch, until the window closed).
    calls = [0]
    w.display._delete_soon._timer.timeout.connect(lambda: calls.__setitem__(0, calls[0] + 1))
    start = turn[0]
    w.wait_until(lambda: turn[0] >= start + 20)
    timer.stop()
    assert calls[0] <= 1 and not w.display._delete_soon.pending()


def test_no_panel_is_laid_out_lower_than_it_asks_for(actviz_window, monkeypatch):
    """Qt lays a grid out at once when one of its panels is shown (a new panel, a canvas in
    place of its placeholder), in a container the scroll area grows only later: every row was
    squeezed for a pass, then restored, moving all the panels twice (turns of up to 150 ms
    with ResNet-18's leaves). The container takes the rows' height first."""
    monkeypatch.setattr(result_display, "CREATE_BUDGET_S", 0.0)  # one panel a pass
    monkeypatch.setattr(display_steps, "DISPLAY_PASS_S", 0.0)
    torch.manual_seed(0)
    win = actviz_window(TinyCNN().eval(), torch.randn(1, 3, 16, 16), LAYERS, size=(1280, 720))
    w = win.window
    container = w.display.layers_scroll.widget()
    squeezed: list[tuple[int, int]] = []

    class Spy(QObject):
        def eventFilter(self, obj, event):  # noqa: N802 - Qt name
            if event.type() == QEvent.Type.Resize and obj.parent() is container:
                size = event.size()
                if obj.hasHeightForWidth() and size.height() < obj.heightForWidth(size.width()):
                    squeezed.append((size.height(), obj.heightForWidth(size.width())))
            return False

    spy = Spy()
    QApplication.instance().installEventFilter(spy)
    try:
        with win.expect_run(flush=False):
            w.runs.run()
        w.wait_until(lambda: not w.display.display_pending())
    finally:
        QApplication.instance().removeEventFilter(spy)
    panels = list(w.host.layer_panels.values())
    assert len(panels) == 6 and container.height() > w.display.layers_scroll.viewport().height()
    assert squeezed == []
    assert all(p.height() >= p.heightForWidth(p.width()) for p in panels)


def test_panels_filled_after_the_first_take_its_page_width_and_are_filled_once(
    actviz_window, monkeypatch
):
    """Each panel's first page was made for a width its panel did not have yet, then made
    again once the panel reported its width: every panel filled twice, its height changing
    twice. Panels not filled yet are paged for the width the first ones reported."""
    monkeypatch.setattr(result_display, "CREATE_BUDGET_S", 0.0)  # one panel a pass
    monkeypatch.setattr(display_steps, "DISPLAY_PASS_S", 0.0)
    torch.manual_seed(0)
    model = torch.nn.Sequential(
        torch.nn.Conv2d(3, 96, 3), torch.nn.ReLU(), torch.nn.Conv2d(96, 96, 3), torch.nn.ReLU()
    ).eval()
    win = actviz_window(model, torch.randn(1, 3, 20, 20), ["0", "1", "2", "3"], size=(1280, 720))
    w = win.window
    fills: Counter[str] = Counter()
    real_update = w.display.grid.update
    monkeypatch.setattr(
        w.display.grid,
        "update",
        lambda panel, layer: (fills.update([layer.name]), real_update(panel, layer))[1],
    )
    with win.expect_run(flush=False):
        w.runs.run()
    w.wait_until(lambda: not w.display.display_pending())
    w.display.flush_panel_updates()
    panels = w.host.layer_panels
    sizes = {n: w.session.page_channels.get(n) for n in panels}
    # The first panel is filled again for its width; the others once.
    assert fills["0"] == 2 and [fills[n] for n in ("1", "2", "3")] == [1, 1, 1]
    # Pages fitted to the panels' width: fewer than the 96 channels, the same for all four.
    assert len(set(sizes.values())) == 1 and 0 < sizes["0"] < 96
    for name, panel in panels.items():
        assert panel.activation_slot.mosaic.page_size == sizes[name]


def test_a_resize_across_the_column_width_lays_the_panels_out_once(actviz_window):
    """Narrowed below two columns' width, the panels are laid out in one column at once: no
    pass lays them out two across in the narrow width first (each canvas re-paged, and the
    grid painted, for a layout replaced in the next pass)."""
    from actviz.ui.panels.canvas import ImageCanvas
    from actviz.ui.window.panel_grid import TWO_COLUMNS_PX

    torch.manual_seed(0)
    win = actviz_window(TinyCNN().eval(), torch.randn(1, 3, 16, 16), LAYERS, size=(1900, 900))
    w = win.window
    win.run_and_wait()
    win.settle()
    scroll = w.display.layers_scroll
    assert scroll.viewport().width() >= TWO_COLUMNS_PX
    assert w.display.grid._columns == 2
    canvas = w.host.layer_panels["conv1"].activation_slot.image_canvas
    widths: list[int] = []

    class Widths(QObject):
        def eventFilter(self, _obj, event):  # noqa: N802 - Qt name
            if event.type() == QEvent.Type.Resize:
                widths.append(event.size().width())
            return False

    spy = Widths()
    canvas.installEventFilter(spy)
    try:
        w.resize(w.width() - (scroll.viewport().width() - TWO_COLUMNS_PX) - 200, w.height())
        QApplication.processEvents()
        win.settle()
    finally:
        canvas.removeEventFilter(spy)
    assert w.display.grid._columns == 1
    assert isinstance(canvas, ImageCanvas) and widths
    # Every size the canvas took is the one-column width (before: half of it first).
    assert set(widths) == {canvas.width()}, widths
