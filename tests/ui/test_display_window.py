"""The window on the one display path: held results never change, and an export has exactly
the panel's pixels."""

from __future__ import annotations

import numpy as np
import pytest
import torch
import torchvision
from PIL import Image
from PySide6.QtCore import QSettings
from PySide6.QtGui import QImage

from actviz.display.mosaic import mosaic
from actviz.io.export import MOSAIC_BACKGROUND
from actviz.ui.main_window import MainWindow

RUN_TIMEOUT_MS = 60_000


@pytest.fixture
def window(qtbot, tmp_path):
    settings = QSettings(str(tmp_path / "actviz.ini"), QSettings.Format.IniFormat)
    w = MainWindow(settings=settings, debounce_ms=20, auto_run=False)
    qtbot.addWidget(w)
    w.resize(1400, 900)
    w.show()
    qtbot.waitExposed(w)
    yield w
    w.close()


def _run(qtbot, window: MainWindow) -> None:
    with qtbot.waitSignal(window.run_finished, timeout=RUN_TIMEOUT_MS):
        assert window.run() is not None
    window.flush_panel_updates()


def _resnet(window: MainWindow, layers: list[str], size: int = 64) -> None:
    torch.manual_seed(0)
    window.set_model(torchvision.models.resnet18(weights=None).eval(), layers=layers)
    window.set_input(torch.randn(1, 3, size, size, generator=torch.Generator().manual_seed(3)))


def _painted(canvas) -> np.ndarray:
    """The RGBA pixels pyqtgraph paints for a canvas's image item (its rendered QImage)."""
    item = canvas.image
    item.render()
    q = item.qimage.convertToFormat(QImage.Format.Format_RGBA8888)
    rows = np.frombuffer(q.constBits(), np.uint8, q.sizeInBytes()).reshape(q.height(), -1)
    return rows[:, : q.width() * 4].reshape(q.height(), q.width(), 4).copy()


def test_a_pinned_result_is_unchanged_by_page_turns_and_normalisation(qtbot, window):
    _resnet(window, ["layer3", "layer4"])
    _run(qtbot, window)
    pin = window.pin_result()
    held = pin.result.layers["layer4"]
    before = (
        held.mosaic,
        held.grad_mosaic,
        held.mosaic.image.copy(),
        held.grad_mosaic.image.copy(),
    )
    panel = window.layer_panels["layer4"]
    assert window.turn_page("layer4", 1)
    assert panel.page_text() == "ch 256-511 of 512"
    with qtbot.waitSignal(window.run_finished, timeout=RUN_TIMEOUT_MS):
        window.normalize_combo.setCurrentIndex(window.normalize_combo.findData("shared"))
    window.flush_panel_updates()
    shown = panel.activation_slot.mosaic
    assert (shown.normalize, shown.first_channel) == ("shared", 256)
    assert window.result is not pin.result  # the window shows a new result
    # The pin: same objects, same pixels, page 0, per-channel normalisation.
    held = pin.result.layers["layer4"]
    assert held.mosaic is before[0] and held.grad_mosaic is before[1]
    assert (held.mosaic.first_channel, held.mosaic.normalize) == (0, "channel")
    np.testing.assert_array_equal(held.mosaic.image, before[2])
    np.testing.assert_array_equal(held.grad_mosaic.image, before[3])
    # Shown again, the pin is drawn on the page and normalisation chosen since, as a new view.
    assert window.show_pinned(pin)
    window.flush_panel_updates()
    assert (panel.activation_slot.mosaic.first_channel, panel.activation_slot.mosaic.normalize) == (
        256,
        "channel",
    )
    assert pin.result.layers["layer4"].mosaic is before[0]


@pytest.mark.parametrize(("cmap", "normalize"), [("magma", "shared"), ("viridis", "channel")])
def test_exported_mosaic_pixels_are_the_panels_pixels(qtbot, window, tmp_path, cmap, normalize):
    _resnet(window, ["layer1", "layer2"], size=96)
    window.colormap_combo.setCurrentText(cmap)
    window.normalize_combo.setCurrentIndex(window.normalize_combo.findData(normalize))
    _run(qtbot, window)
    assert window.export_all(tmp_path / "out", wait=True)
    for name in ("layer1", "layer2"):
        panel = window.layer_panels[name]
        layer = window.result.layers[name]
        m = panel.activation_slot.mosaic
        assert m is layer.mosaic and m.normalize == normalize
        assert panel.activation_slot.image_canvas.colormap_name() == cmap
        painted = _painted(panel.activation_slot.image_canvas)
        exported = np.asarray(
            Image.open(tmp_path / "out" / f"{name}_features_1x.png").convert("RGB")
        )
        assert exported.shape[:2] == painted.shape[:2] == m.image.shape
        tiles = painted[..., 3] == 255
        pad = painted[..., 3] == 0
        assert tiles.sum() == np.isfinite(m.image).sum() and (tiles | pad).all()
        np.testing.assert_array_equal(exported[tiles], painted[tiles][:, :3])
        assert (exported[pad] == MOSAIC_BACKGROUND).all()
        # And the mosaic is the layer's output, normalised as asked.
        ref = mosaic(window.result.capture[name].tensor[0], normalize=normalize, max_channels=256)
        np.testing.assert_allclose(m.image, ref.image, atol=1e-6, equal_nan=True)
