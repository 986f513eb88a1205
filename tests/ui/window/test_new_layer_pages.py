"""A layer ticked after a run comes paged for its panel's width: its first result is shown as
prepared, not paged again on the GUI thread (it came as one page of 256 channels, then the
window re-made a page of 35-54 tiles in the display pass)."""

from __future__ import annotations

import torch

from actviz.display import repage

NEW = "layer4.1.conv2"  # 512 channels: many pages at a panel's width


def test_a_layer_ticked_after_a_run_is_prepared_at_its_panels_page_size(
    actviz_window, resnet, monkeypatch
):
    x = torch.randn(1, 3, 64, 64, generator=torch.Generator().manual_seed(0))
    win = actviz_window(resnet, x, ["layer1.0.conv1"], size=(1360, 820))
    win.run_and_wait()
    win.settle()
    session = win.window.session
    width = session.mosaic_width
    assert width == win.panel("layer1.0.conv1").mosaic_width() > 0
    remade: list[str] = []
    real = repage._remade
    monkeypatch.setattr(
        repage, "_remade", lambda layer, *a: remade.append(layer.name) or real(layer, *a)
    )
    win.tick(NEW)
    win.run_and_wait()
    win.settle()
    layer = session.result.layers[NEW]
    size = session.page_channels[NEW]  # the window's page for the panel as laid out
    assert 4 <= size < 512
    assert layer.mosaic.page_size == layer.mosaic.channels == size
    assert layer.grad_mosaic.channels == size
    assert win.panel(NEW).activation_slot.mosaic is layer.mosaic  # shown as prepared
    assert NEW not in remade
    # A normalisation change keeps its page (the pages are re-made from the session's sizes).
    combo = win.window.commands.normalize_combo
    combo.setCurrentIndex(combo.findData("shared"))
    assert win.wait_idle()  # the pages are re-made in a job (a loaded machine: after settle)
    win.settle()
    shared = session.result.layers[NEW].mosaic
    assert shared.normalize == "shared" and shared.page_size == shared.channels == size
    assert win.panel(NEW).activation_slot.mosaic is shared
