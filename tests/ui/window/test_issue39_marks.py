"""Issue 39, defect 6: unticking "Mark the top channels" (or closing Channels that matter)
takes the outlines away; a right click then acts on the tile clicked, not on the marked ones."""

from __future__ import annotations

import torch
from PySide6.QtCore import Qt

from tests.ui.tiny_models import TinyCNN


def _click(win, box) -> None:
    win.qtbot.mouseClick(box, Qt.MouseButton.LeftButton, pos=box.rect().center())


def test_unticking_the_marks_and_closing_the_dock_clears_the_outlines(actviz_window):
    torch.manual_seed(0)
    x = torch.randn(1, 3, 16, 16, generator=torch.Generator().manual_seed(3))
    win = actviz_window(TinyCNN().eval(), x, ["conv1", "conv2"])
    win.run_and_wait()
    feature = win.effects.feature
    dock = win.open_dock("Channels that matter")
    win.qtbot.waitUntil(lambda: not feature.estimating() and feature.effects is not None)
    box = feature.view.mark_check
    _click(win, box)
    assert box.isChecked()
    top = sorted(feature.effects.top_channels("conv2", feature.view.top))
    assert len(top) > 1 and win.panel("conv2").selected_channels() == top
    _click(win, box)  # unticked: the outlines go
    assert not box.isChecked()
    assert win.panel("conv2").selected_channels() == []
    assert win.panel("conv1").selected_channels() == []
    # Ticked again, then the dock closed (its title bar's close, the View menu entry).
    _click(win, box)
    assert win.panel("conv2").selected_channels() == top
    dock.toggleViewAction().trigger()
    win.qtbot.waitUntil(lambda: not dock.isVisible(), timeout=10_000)
    assert win.panel("conv2").selected_channels() == []
    # The tile menu speaks of the tile clicked alone.
    menu = win.tile_menu("conv2", 1)
    texts = [a.text() for a in menu.actions() if a.text()]
    assert "Ablate ch 1" in texts and not any("channels" in t for t in texts if "Ablate" in t)
    menu.close()
    # Opened again (still ticked): the marks come back.
    win.open_dock("Channels that matter")
    win.qtbot.waitUntil(lambda: win.panel("conv2").selected_channels() == top, timeout=10_000)


def test_marking_lays_out_no_panel_whose_page_keeps_its_shape(actviz_window, resnet, monkeypatch):
    """Marking re-shows each marked layer on its page: a page of the same shape takes no room
    of its own (issue 37: a panel's layouts activated for it blocked 43 ms over 12 panels)."""
    import sys

    from PySide6.QtWidgets import QLayout

    # 64 px: layer4's maps are 2x2 (at 32 px they are 1x1, shown as bars: no mosaic to mark).
    x = torch.randn(1, 3, 64, 64, generator=torch.Generator().manual_seed(3))
    win = actviz_window(resnet, x, ["layer3", "layer4"])
    win.run_and_wait()
    feature = win.effects.feature
    win.open_dock("Channels that matter")
    win.qtbot.waitUntil(lambda: not feature.estimating() and feature.effects is not None)
    activate, made_room = QLayout.activate, []

    def counted(layout: QLayout) -> bool:
        made_room.append(sys._getframe(1).f_code.co_name == "expect_mosaic_shape")
        return activate(layout)

    monkeypatch.setattr(QLayout, "activate", counted)
    _click(win, feature.view.mark_check)
    win.wait_idle()
    assert win.panel("layer4").selected_channels() != []
    assert len(made_room) > 0 and not any(made_room)  # laid out, but not to make room
    # A page of another shape still takes its room first (the layouts up to the panel).
    win.panel("layer4").expect_mosaic_shape((500, 20))
    assert made_room.count(True) >= 2
