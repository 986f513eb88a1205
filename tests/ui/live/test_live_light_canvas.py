"""Live frames painted by the canvases without their scenes (LightPaint): what is on
screen is what the scene paints, the hover read-out reads the frame shown, and a stopped live
session leaves the pixels a normal run on the same input shows."""

from __future__ import annotations

import numpy as np
import torch
from PySide6.QtWidgets import QApplication

from actviz.testing import RUN_TIMEOUT_MS
from actviz.ui.live.frames import TensorFrames
from actviz.ui.panels.style import format_value
from tests.ui.qt_helpers import rgba_array
from tests.ui.tiny_models import TinyCNN

LAYERS = ["conv1", "conv2"]


def _pixels(widget) -> np.ndarray:
    """``widget``'s pixels as on screen now: the window's backing store, not a new paint."""
    image = QApplication.primaryScreen().grabWindow(widget.window().winId()).toImage()
    top_left = widget.mapTo(widget.window(), widget.rect().topLeft())
    rect = widget.rect().translated(top_left)
    return rgba_array(image.copy(rect))


def _window(qtbot, actviz_window, frames: torch.Tensor):
    torch.manual_seed(0)
    win = actviz_window(TinyCNN().eval(), frames[:1].clone(), LAYERS, size=(1200, 800))
    win.run_and_wait()
    window = win.window
    live = win.live.configure(max_fps=1000)
    live.set_source(TensorFrames(frames, "clip"))
    qtbot.waitUntil(lambda: live.frames_shown >= 1 and live.idle, timeout=RUN_TIMEOUT_MS)
    return window, live


def _play(qtbot, window, live, count: int) -> None:
    live.set_loop(False)
    live.set_speed(200)
    painted = _light_paints(window)
    start = live.frames_shown
    live.play()
    qtbot.waitUntil(lambda: live.frames_shown >= start + count, timeout=RUN_TIMEOUT_MS)
    live.pause()
    qtbot.waitUntil(lambda: live.idle, timeout=RUN_TIMEOUT_MS)
    window.display.flush_panel_updates()
    for _ in range(5):
        QApplication.processEvents()
    assert _light_paints(window) > painted  # the frames went the light way


def _light_paints(window) -> int:
    return sum(
        slot.image_canvas._light.painted  # noqa: SLF001
        for panel in window.host.layer_panels.values()
        for slot in (panel.activation_slot, panel.gradient_slot)
        if slot.image_canvas is not None
    )


def test_live_frames_on_screen_are_what_the_scene_paints_and_the_hover_reads_them(
    qtbot, actviz_window
):
    frames = torch.randn(6, 3, 16, 16, generator=torch.Generator().manual_seed(4))
    window, live = _window(qtbot, actviz_window, frames)
    _play(qtbot, window, live, 3)
    panel = window.host.layer_panels["conv2"]
    canvas = panel.activation_slot.image_canvas
    # On screen (painted by the light path) == painted again by the scene, pixel for pixel.
    shown = _pixels(canvas.viewport())
    np.testing.assert_array_equal(shown, rgba_array(canvas.viewport().grab().toImage()))
    # The hover read-out names the tile's channel and reads the frame shown.
    m = panel.activation_slot.mosaic
    y0, x0 = m.tile_origin(4)
    # From another point first: a move to where the pointer already is sends no event.
    qtbot.mouseMove(canvas.viewport(), canvas.image_to_widget(x0 + 0.5, y0 + 0.5))
    qtbot.mouseMove(canvas.viewport(), canvas.image_to_widget(x0 + 2.5, y0 + 1.5))
    value = window.session.result.layers["conv2"].view.data[4, 1, 2]
    want = f"ch 4  (x=2, y=1)  value {_format(value)}"
    qtbot.waitUntil(lambda: panel.status_label.text().startswith(want), timeout=30_000)
    index = live.status().last.index
    expected = _conv2(window, frames[index : index + 1])[4, 1, 2]
    assert abs(float(value) - expected) <= 1e-5 * max(1.0, abs(expected))


def test_a_stopped_live_session_leaves_the_pixels_of_a_normal_run(qtbot, actviz_window):
    frames = torch.randn(6, 3, 16, 16, generator=torch.Generator().manual_seed(5))
    window, live = _window(qtbot, actviz_window, frames)
    _play(qtbot, window, live, 3)
    index = live.status().last.index
    canvases = [window.host.layer_panels[n].activation_slot.image_canvas for n in LAYERS]
    after_live = [_pixels(c.viewport()) for c in canvases]
    # The same frame through a normal run: the window's own input, live mode off.
    live.set_source(None)
    window.script.set_input(frames[index : index + 1].clone())
    window.runs.run()
    qtbot.waitUntil(lambda: not window.is_busy(), timeout=RUN_TIMEOUT_MS)
    window.script.wait_idle()
    for _ in range(5):
        QApplication.processEvents()
    torch.testing.assert_close(window.session.result.capture.inputs, frames[index : index + 1])
    for canvas, live_pixels in zip(canvases, after_live, strict=True):
        np.testing.assert_array_equal(live_pixels, _pixels(canvas.viewport()))


def _format(value: float) -> str:
    return format_value(float(value))


def _conv2(window, x: torch.Tensor) -> np.ndarray:
    """conv2's output for ``x``, captured again on the window's model."""
    from actviz.core.capture import capture

    return capture(window.session.model, x, ["conv2"])["conv2"].tensor[0].numpy()
