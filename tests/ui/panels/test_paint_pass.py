"""A window repaint shares its time among the canvases it paints: once it has run
``PAINT_PASS.budget_s`` the others paint in the next repaints (closing a dock over 20 panels,
or their first fits, blocked one turn 150-160 ms); a live frame's new pixels never wait, and a
``grab()`` always paints in full."""

from __future__ import annotations

import numpy as np
import torch
from PySide6.QtCore import QCoreApplication, QEvent

from actviz.ui.panels.canvas import ImageCanvas
from actviz.ui.panels.deferred import PAINT_PASS
from tests.ui.qt_helpers import rgba_array


def _shown_canvases(window) -> list[ImageCanvas]:
    return [c for c in window.findChildren(ImageCanvas) if c.on_screen()]


def _one_repaint(window, canvases: list[ImageCanvas]) -> list[ImageCanvas]:
    """Ask every canvas for a full repaint, run the window's repaint once; those left for later."""
    for canvas in canvases:
        canvas.viewport().update()
    QCoreApplication.sendPostedEvents(window, QEvent.Type.UpdateRequest)
    return [c for c in canvases if c._paint_later.pending()]  # noqa: SLF001


def test_a_repaint_past_its_time_leaves_the_other_canvases_to_the_next(
    actviz_window, resnet, monkeypatch
):
    layers = ["layer1.0.conv1", "layer1.0.conv2", "layer2.0.conv1", "layer2.0.conv2"]
    win = actviz_window(resnet, torch.randn(1, 3, 64, 64), layers, size=(1920, 1080))
    win.run_and_wait()
    win.settle()
    w = win.window
    canvases = _shown_canvases(w)
    assert len(canvases) >= 6  # activation and gradient of each panel on screen, the input
    # With time enough, one repaint paints them all.
    monkeypatch.setattr(PAINT_PASS, "budget_s", 60.0)
    assert _one_repaint(w, canvases) == []
    win.settle()
    # With none, it paints one; each later repaint paints one more until all are painted.
    monkeypatch.setattr(PAINT_PASS, "budget_s", 0.0)
    waiting = _one_repaint(w, canvases)
    assert len(waiting) == len(canvases) - 1
    # A grab is no window repaint: a canvas left waiting comes out whole (not one colour).
    picture = rgba_array(waiting[-1].grab().toImage())
    assert len(np.unique(picture.reshape(-1, 4), axis=0)) > 20
    win.settle()
    assert not any(c._paint_later.pending() for c in canvases)  # noqa: SLF001


def test_a_live_frame_is_painted_in_a_repaint_that_used_its_time(actviz_window, resnet):
    win = actviz_window(resnet, torch.randn(1, 3, 64, 64), ["layer1.0.conv1"], size=(1280, 720))
    win.run_and_wait()
    win.settle()
    w = win.window
    canvas = w.display.layer_panels["layer1.0.conv1"].activation_slot.image_canvas
    light = canvas._light  # noqa: SLF001
    indices = canvas.image.image.copy()
    indices[:4, :4] = 255 - indices[:4, :4]  # new pixels, same shape: the light path
    canvas.set_image(indices, canvas.levels())
    assert light.pending is not None
    painted = light.painted
    with PAINT_PASS.running():  # as if other canvases had used the repaint's time
        PAINT_PASS.painted, PAINT_PASS.started = True, 0.0
        canvas.viewport().repaint(light.pending)
    assert light.painted == painted + 1
    assert not canvas._paint_later.pending()  # noqa: SLF001
