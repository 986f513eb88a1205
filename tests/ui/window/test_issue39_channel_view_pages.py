"""Issue 39 (smaller items): with the channel view open, the layer column beside it kept pages
of 4-6 tiles and cut its hover read-out (its panels put activation and gradient side by side
in 340 px at 1280x720). The column now stacks them: pages that follow the mosaic's width hold
16 channels or more, and a tile's read-out shows whole (its short form in a narrower column,
never cut without a mark)."""

from __future__ import annotations

import pytest
import torch
from PySide6.QtCore import Qt
from PySide6.QtWidgets import QApplication

from actviz.display.mosaic import MIN_TILE_SCREEN_PX

LAYERS = ["layer1", "layer2", "layer3"]


def _hover_tile(win, panel, channel: int) -> str:
    """Move the pointer over ``channel``'s tile of ``panel``'s activation mosaic; the read-out
    as drawn."""
    win.window.display.layers_scroll.ensureWidgetVisible(panel)
    win.settle()
    slot = panel.activation_slot
    m, canvas = slot.mosaic, slot.image_canvas
    y0, x0 = m.tile_origin(channel)
    point = canvas.image_to_widget(x0 + m.tile_w / 2, y0 + m.tile_h / 2)
    win.qtbot.mouseMove(canvas.viewport(), point)
    win.qtbot.waitUntil(
        lambda: panel.status_label.text().startswith(f"ch {channel} "), timeout=30_000
    )
    return panel.status_label.shown_text()


@pytest.mark.parametrize("size", [(1280, 720), (1024, 640)])
def test_the_layer_column_beside_the_channel_view_keeps_readable_pages(actviz_window, resnet, size):
    x = torch.rand(1, 3, 224, 224, generator=torch.Generator().manual_seed(0))
    win = actviz_window(resnet, x, LAYERS, size=size)
    win.run_and_wait()
    display = win.window.display
    assert win.window.display.open_channel("layer2", 5)
    win.settle()
    win.window.display.flush_panel_updates()
    win.settle()
    assert display.channel_box.isVisible()
    least = 16 if size == (1280, 720) else 12
    for name in LAYERS:
        panel = display.layer_panels[name]
        page = display.page_size(name)
        # The page follows the mosaic's width: as many channels as tiles of >= 32 px allow,
        # and that is a page worth turning (was 6, 6 and 4 at 1280x720).
        assert page >= least, (name, page)
        assert panel.activation_slot.mosaic.channels == page
        assert panel.activation_slot.image_canvas.width() >= 4 * MIN_TILE_SCREEN_PX
    panel = display.layer_panels["layer2"]
    shown = _hover_tile(win, panel, panel.activation_slot.mosaic.first_channel + 1)
    full = panel.status_label.text()
    assert "value " in full and "|grad| " in full
    # Whole, the long form or its short one: never cut with "…" (was cut to 190 px).
    assert not shown.endswith("…"), shown
    assert shown == full or (shown.startswith("ch ") and "|g| " in shown), shown
    if size == (1280, 720):
        assert panel.status_label.width() >= 320  # the column's width, not half of it


def test_closing_the_channel_view_re_pages_in_the_layout_pass_not_a_turn_later(
    actviz_window, resnet
):
    # Re-paged on the next turn, every canvas was fitted and painted at the old page's height
    # first, then again at the new one: 84 -> 46 ms of GUI CPU in one turn with 21 panels.
    x = torch.rand(1, 3, 224, 224, generator=torch.Generator().manual_seed(0))
    win = actviz_window(resnet, x, LAYERS, size=(1280, 720))
    win.run_and_wait()
    display = win.window.display

    def settled() -> tuple[dict[str, int], dict[str, int]]:
        win.settle()
        display.flush_panel_updates()
        win.settle()
        return layout()

    def layout() -> tuple[dict[str, int], dict[str, int]]:
        panels = {name: display.layer_panels[name] for name in LAYERS}
        sizes = {name: display.page_size(name) for name in LAYERS}
        return sizes, {name: p.activation_slot.image_canvas.height() for name, p in panels.items()}

    assert display.open_channel("layer2", 5)
    beside, _ = settled()
    win.qtbot.mouseClick(display.channel_view.close_button, Qt.MouseButton.LeftButton)
    QApplication.sendPostedEvents()  # the layout pass, no timer: what is painted next
    passed = layout()
    assert settled() == passed
    assert passed[0] != beside  # wider: other pages
