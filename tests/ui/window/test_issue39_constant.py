"""Issue 39, defect 9: a constant |gradient| tile (TinyCNN's conv2 feeds an average pool, so
d target / d conv2 is one value per channel) paints mid-scale under per-channel scaling, not
the bottom colour that reads as "no gradient"; a layer of class scores names its classes."""

from __future__ import annotations

import numpy as np
import torch

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
