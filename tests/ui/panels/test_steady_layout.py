"""Per-frame text and repeated results leave the window's layouts alone."""

from __future__ import annotations

import torch
from PySide6.QtCore import QEvent, QObject
from PySide6.QtWidgets import QApplication, QVBoxLayout, QWidget
from torch import nn

from actviz.ui.panels import style


class _LayoutRequests(QObject):
    def __init__(self) -> None:
        super().__init__()
        self.count = 0

    def eventFilter(self, obj, event):  # noqa: N802 - Qt name
        if event.type() == QEvent.Type.LayoutRequest:
            self.count += 1
        return False


def test_steady_text_repaints_without_relaying_out_and_shortens_what_does_not_fit(qtbot):
    box = QWidget()
    qtbot.addWidget(box)
    layout = QVBoxLayout(box)
    text = style.caption_text("frame 1/8 · clip")
    layout.addWidget(text)
    box.resize(200, 80)
    box.show()
    QApplication.processEvents()
    height = text.height()
    assert height == 2 * text.fontMetrics().lineSpacing()
    requests = _LayoutRequests()
    box.installEventFilter(requests)
    for i in range(20):
        text.setText(f"frame {i + 1}/8 · clip · occlusion at (0.{i}, 0.5) of a longer name")
        QApplication.processEvents()
    assert requests.count == 0 and text.height() == height
    assert text.text().startswith("frame 20/8")
    lines = text.shown_lines()
    width = text.contentsRect().width()
    assert len(lines) == 2 and all(text.fontMetrics().horizontalAdvance(x) <= width for x in lines)
    # Too long for two lines at this width: the second ends with "…" and the tooltip says all.
    text.setText("word " * 40)
    text.grab()  # paint (the tooltip follows what was drawn)
    assert text.shown_lines()[-1].endswith("…") and text.toolTip() == "word " * 40
    text.setText("short")
    text.grab()
    assert text.shown_lines() == ["short"] and text.toolTip() == ""
    # One line: the rest is elided on it, not cut after the words that fit (the Dataset grid).
    one = style.caption_text("word " * 40, lines=1)
    layout.addWidget(one)
    QApplication.processEvents()
    assert len(one.shown_lines()) == 1 and one.shown_lines()[0].endswith("…")


def test_a_result_with_the_same_panels_does_not_take_the_grid_apart(qtbot, actviz_window):
    torch.manual_seed(0)
    model = nn.Sequential(nn.Conv2d(3, 4, 3), nn.ReLU(), nn.Conv2d(4, 4, 3)).eval()
    win = actviz_window(model, torch.randn(1, 3, 12, 12), ["0", "2"], auto_run=True)
    win.run_and_wait()
    window = win.window
    grid = window.display.layers_grid
    removed: list[object] = []
    real = grid.removeWidget
    grid.removeWidget = lambda w: (removed.append(w), real(w))[1]
    panels = dict(window.host.layer_panels)
    win.run_and_wait()
    assert removed == [] and window.host.layer_panels == panels
    assert [grid.itemAt(i).widget() for i in range(grid.count())] == list(panels.values())
    # Another set of layers: the grid is laid out again, in execution order.
    with win.expect_run():
        win.untick("0")
    assert list(window.host.layer_panels) == ["2"]
    assert [grid.itemAt(i).widget() for i in range(grid.count())] == [window.host.layer_panels["2"]]
    with win.expect_run():
        win.tick("0")
    assert list(window.host.layer_panels) == ["0", "2"]
    order = [grid.itemAt(i).widget() for i in range(grid.count())]
    assert order == [window.host.layer_panels["0"], window.host.layer_panels["2"]]
