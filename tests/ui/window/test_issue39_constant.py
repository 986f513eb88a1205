"""Issue 39, defect 9: a constant |gradient| tile (TinyCNN's conv2 feeds an average pool, so
d target / d conv2 is one value per channel) paints mid-scale under per-channel scaling, not
the bottom colour that reads as "no gradient"; a layer of class scores names its classes."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from PySide6.QtCore import QPoint, Qt

from actviz.display.colormaps import table
from tests.ui.tiny_models import TinyCNN


def test_a_constant_gradient_tile_is_not_painted_as_no_gradient(actviz_window):
    torch.manual_seed(0)
    win = actviz_window(TinyCNN().eval(), torch.randn(1, 3, 16, 16), ["conv1", "conv2"])
    result = win.run_and_wait()
    grad = result.capture["conv2"].grad[0]
    flat = grad.reshape(grad.shape[0], -1)
    assert torch.all(flat.amax(1) == flat.amin(1)) and torch.all(flat.abs().amax(1) > 0)
    panel = win.reveal("conv2")
    assert panel.gradient_slot.image_canvas.colormap_name() == "inferno"
    painted = win.shown_pixels("conv2", gradient=True)
    tiles = painted[painted[..., 3] == 255][:, :3]
    mid = table("inferno")[128]
    bottom = table("inferno")[0]
    assert len(tiles) and np.all(np.abs(tiles.astype(int) - mid).max(axis=1) <= 2), tiles[:3]
    assert not np.any(np.all(tiles == bottom, axis=1))
    # The legend says why a tile is one colour (a "0-1 of its own min-max" has no range there).
    channels = grad.shape[0]
    assert panel.gradient_slot.legend.text().endswith(
        f" · {channels} flat tiles (one value), painted mid\u2011scale"
    )
    assert "flat" not in panel.activation_slot.legend.text()
    assert result.layers["conv2"].grad_mosaic.flat_tiles == channels
    assert result.layers["conv2"].mosaic.flat_tiles == 0


CLASSES = ["circle", "square", "star", "arrow", "cross"]


def test_the_class_scores_bars_name_their_classes(actviz_window):
    from PySide6.QtCore import QPoint, QPointF

    torch.manual_seed(0)
    win = actviz_window()
    win.set_model(TinyCNN().eval(), categories=CLASSES, layers=["conv2", "fc"])
    win.set_input(torch.randn(1, 3, 16, 16))
    result = win.run_and_wait()
    panel = win.reveal("fc")
    canvas = panel.activation_slot.bar_canvas
    assert panel.activation_slot.view.kind == "bars"
    assert "class" in canvas.bottom_axis.labelText
    # The pointer over bar 2: the read-out names the class.
    height = float(np.asarray(panel.activation_slot.view.data)[2])
    scene = canvas.view.mapViewToScene(QPointF(2.0, height / 2))
    win.qtbot.mouseMove(canvas.viewport(), QPoint(canvas.mapFromScene(scene)))
    win.qtbot.waitUntil(lambda: "class 2: star" in panel.status_label.text(), timeout=10_000)
    # A layer that is not the class scores keeps "unit".
    assert result.layers["fc"].shape == (1, 5)
    from actviz.display.layer_views import class_units

    assert class_units((1, 5), (1, 5), CLASSES) == tuple(CLASSES)
    assert class_units((1, 6), (1, 5), CLASSES) is None
    assert class_units((1, 5, 2), (1, 5, 2), CLASSES) is None


def test_the_channel_view_paints_a_constant_gradient_mid_scale_as_the_panel_does(actviz_window):
    """The panels painted a constant |gradient| mid-scale, the channel view (and exports, by
    the same levels) at the bottom colour on a made-up 1-wide range: "no gradient" again."""
    from actviz.display.colormaps import heat_levels
    from actviz.testing.driver import painted_pixels

    torch.manual_seed(0)
    win = actviz_window(TinyCNN().eval(), torch.randn(1, 3, 16, 16), ["conv1", "conv2"])
    result = win.run_and_wait()
    value = float(result.capture["conv2"].grad[0, 3].abs().flatten()[0])
    slot = win.reveal("conv2").activation_slot
    y0, x0 = slot.mosaic.tile_origin(3)
    point = slot.image_canvas.image_to_widget(x0 + 1.5, y0 + 1.5)
    canvas = slot.image_canvas.viewport()
    win.qtbot.mouseClick(canvas, Qt.MouseButton.LeftButton, pos=QPoint(point))  # opens ch 3
    view = win.window.display.channel_view
    win.qtbot.waitUntil(lambda: view.gradient is not None, timeout=10_000)
    win.settle()
    column = view._grad_box  # noqa: SLF001 - the gradient column's own canvas
    low, high = column.levels()
    assert low == 0.0 and high == pytest.approx(2 * value, rel=1e-6)  # the value mid-scale
    pixels = painted_pixels(column.canvas)
    inside = pixels[pixels[..., 3] == 255][:, :3]
    mid, bottom = table("inferno")[128], table("inferno")[0]
    assert len(inside) and np.all(np.abs(inside.astype(int) - mid).max(axis=1) <= 2)
    assert not np.any(np.all(inside == bottom, axis=1))
    # The shared rule: a constant c is mid-scale on [0, 2c] ([2c, 0] below 0); 0 stays 0..1.
    assert heat_levels(np.full((2, 2), 0.25)) == (0.0, 0.5)
    assert heat_levels(np.full((2, 2), -2.0)) == (-4.0, 0.0)
    assert heat_levels(np.zeros((2, 2))) == (0.0, 1.0)
