"""A layout change fits the scenes of the canvases on screen only; a canvas scrolled away
fits its scene when it is next painted, so what it shows once scrolled to is whole (#37: a
resize, a dock or a tick refitted every panel's canvas in one event-loop turn)."""

from __future__ import annotations

import torch
from torch import nn

from actviz.ui.panels.canvas import ImageCanvas
from tests.ui.qt_helpers import scene_fits


def _many_layers() -> nn.Module:
    torch.manual_seed(0)
    layers: list[nn.Module] = [nn.Conv2d(3, 8, 3, padding=1)]
    for _ in range(11):
        layers += [nn.ReLU(), nn.Conv2d(8, 8, 3, padding=1)]
    return nn.Sequential(*layers).eval()


def test_a_resize_fits_only_the_canvases_on_screen_and_the_rest_when_scrolled_to(
    actviz_window, monkeypatch
):
    model = _many_layers()
    convs = [n for n, m in model.named_modules() if isinstance(m, nn.Conv2d)]
    win = actviz_window(model, torch.randn(1, 3, 24, 24), layers=convs, size=(1280, 720))
    win.run_and_wait()
    win.settle()
    fitted: list[ImageCanvas] = []
    resize = ImageCanvas._resize

    def counted(self, event, **kwargs):
        fitted.append(self)
        return resize(self, event, **kwargs)

    monkeypatch.setattr(ImageCanvas, "_resize", counted)
    assert win.resize(1600, 900)
    canvases = [
        slot.image_canvas
        for name in convs
        for slot in (win.panel(name).activation_slot, win.panel(name).gradient_slot)
        if slot.image_canvas is not None and slot.image_canvas.isVisible()
    ]
    off = [c for c in canvases if not c.on_screen()]
    on = [c for c in canvases if c.on_screen()]
    assert on and len(off) >= 4  # twelve panels do not fit in 900 px
    # The old code fitted every canvas, on screen or not, in the resize's turn.
    assert not [c for c in off if c in fitted]
    assert all(scene_fits(c) for c in on)
    assert not all(scene_fits(c) for c in off)  # left for their paint

    last = win.reveal(convs[-1])
    win.settle()
    shown = [
        c
        for c in (last.activation_slot.image_canvas, last.gradient_slot.image_canvas)
        if c is not None and c.on_screen()
    ]
    assert shown
    win.window.grab()  # the paint that shows them
    assert all(scene_fits(c) for c in shown)
    # The image inside its canvas, as on screen: mapped through the fitted scene.
    for c in shown:
        rect = c.image_rect_on_screen()
        assert rect.width() > 10
        assert c.rect().adjusted(-1, -1, 1, 1).contains(rect.toRect())
