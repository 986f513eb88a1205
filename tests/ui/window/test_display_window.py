"""The window on the one display path: held results never change, and an export has exactly
the panel's pixels."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from PIL import Image

from actviz.display.mosaic import mosaic
from actviz.io.export.typeset import MOSAIC_BACKGROUND
from tests.helpers import frame, tile_pixels

#: The core window is what these tests drive: built without the features.
pytestmark = pytest.mark.window_features()

SIZE = (1400, 900)


def test_a_pinned_result_is_unchanged_by_page_turns_and_normalisation(qtbot, actviz_window, resnet):
    win = actviz_window(resnet, frame(3, 64), ["layer3", "layer4"], size=SIZE)
    win.run_and_wait()
    window = win.window
    pin = window.pins_ui.pin_result()
    held = pin.result.layers["layer4"]
    before = (
        held.mosaic,
        held.grad_mosaic,
        held.mosaic.image.copy(),
        held.grad_mosaic.image.copy(),
    )
    panel = window.host.layer_panels["layer4"]
    # The page size follows the panel's width (re-paged from the views, the pin untouched).
    qtbot.waitUntil(lambda: "layer4" in window.session.page_channels, timeout=30_000)
    window.display.flush_panel_updates()
    size = window.session.page_channels["layer4"]
    assert panel.activation_slot.mosaic.page_size == size and size < 512
    assert window.display.turn_page("layer4", 1)
    assert panel.page_bar.text() == f"ch {size}-{min(2 * size, 512) - 1} of 512"
    with win.expect_run():
        window.commands.normalize_combo.setCurrentIndex(
            window.commands.normalize_combo.findData("shared")
        )
    shown = panel.activation_slot.mosaic
    assert (shown.normalize, shown.first_channel) == ("shared", size)
    assert window.session.result is not pin.result  # the window shows a new result
    # The pin: same objects, same pixels, page 0, per-channel normalisation.
    held = pin.result.layers["layer4"]
    assert held.mosaic is before[0] and held.grad_mosaic is before[1]
    assert (held.mosaic.first_channel, held.mosaic.normalize) == (0, "channel")
    np.testing.assert_array_equal(held.mosaic.image, before[2])
    np.testing.assert_array_equal(held.grad_mosaic.image, before[3])
    # Shown again, the pin is drawn on the page and normalisation chosen since, as a new view.
    assert window.pins_ui.show_pinned(pin)
    window.display.flush_panel_updates()
    assert (panel.activation_slot.mosaic.first_channel, panel.activation_slot.mosaic.normalize) == (
        size,
        "channel",
    )
    assert pin.result.layers["layer4"].mosaic is before[0]


@pytest.mark.parametrize(
    ("cmap", "normalize", "layers", "painted_with"),
    [
        ("magma", "shared", ["layer1", "layer2"], {"layer1": "magma", "layer2": "magma"}),
        ("viridis", "channel", ["layer1", "layer2"], {"layer1": "viridis", "layer2": "viridis"}),
        # "auto": the signed convolution diverging about 0, the ReLU'd stage sequential.
        ("auto", "channel", ["conv1", "layer1"], {"conv1": "CET-D1", "layer1": "viridis"}),
        ("auto", "shared", ["conv1", "layer1"], {"conv1": "CET-D1", "layer1": "viridis"}),
    ],
)
def test_exported_mosaic_pixels_are_the_panels_pixels(
    qtbot, actviz_window, resnet, tmp_path, cmap, normalize, layers, painted_with
):
    win = actviz_window(resnet, frame(3, 96), layers, size=SIZE)
    window = win.window
    window.commands.colormap_combo.setCurrentText(cmap)
    window.commands.normalize_combo.setCurrentIndex(
        window.commands.normalize_combo.findData(normalize)
    )
    win.run_and_wait()
    # Pages sized to the panels' widths (the export writes whole layers: compare tile by tile).
    qtbot.waitUntil(lambda: set(window.session.page_channels) == set(layers), timeout=30_000)
    window.display.flush_panel_updates()
    assert window.exports.export_all(tmp_path / "out", wait=True)
    for name in layers:
        panel = window.host.layer_panels[name]
        layer = window.session.result.layers[name]
        view = layer.view
        m = panel.activation_slot.mosaic
        signed = painted_with[name] == "CET-D1"
        assert view.signed == signed and m.symmetric == signed
        assert m.normalize == normalize and m.page_size == window.session.page_channels[name]
        assert panel.activation_slot.image_canvas.colormap_name() == painted_with[name]
        painted = win.shown_pixels(name)
        exported = np.asarray(
            Image.open(tmp_path / "out" / f"{name}_features_1x.png").convert("RGB")
        )
        whole = mosaic(view.data, normalize=normalize, symmetric=signed)
        assert exported.shape[:2] == whole.image.shape and painted.shape[:2] == m.image.shape
        for channel in range(m.first_channel, m.last_channel + 1):
            np.testing.assert_array_equal(
                tile_pixels(exported, whole, channel), tile_pixels(painted, m, channel)[..., :3]
            )
        tiles = painted[..., 3] == 255
        pad = painted[..., 3] == 0
        assert tiles.sum() == np.isfinite(m.image).sum() and (tiles | pad).all()
        assert (exported[np.isnan(whole.image)] == MOSAIC_BACKGROUND).all()
        # And the mosaic is the layer's output, normalised as asked.
        ref = mosaic(
            window.session.result.capture[name].tensor[0],
            normalize=normalize,
            first_channel=m.first_channel,
            max_channels=m.page_size,
            symmetric=signed,
        )
        np.testing.assert_allclose(m.image, ref.image, atol=1e-6, equal_nan=True)
        if signed:  # zero is the middle colour: the diverging map's centre
            bound = float(np.abs(view.data).max())
            if normalize == "shared":
                assert m.scale_range == pytest.approx((-bound, bound))
                assert panel.activation_slot.image_canvas.colorbar.levels() == pytest.approx(
                    (-bound, bound)
                )


def test_a_detector_takes_a_list_and_its_detections_are_the_targets(qtbot, actviz_window):
    from torchvision.models.detection import fasterrcnn_mobilenet_v3_large_320_fpn

    torch.manual_seed(0)
    model = fasterrcnn_mobilenet_v3_large_320_fpn(
        weights=None, weights_backbone=None, box_score_thresh=0.0, min_size=128, max_size=128
    ).eval()
    image = torch.rand(1, 3, 96, 128, generator=torch.Generator().manual_seed(3))
    win = actviz_window(model, image, ["backbone.body.1"], size=SIZE)
    window = win.window
    # forward(images: List[Tensor]): the batch goes in as a list of one image, and the menu says so.
    assert window.session.input_as_list and window.commands.input_list_action.isChecked()
    value = window.session.input.value
    assert isinstance(value, list) and len(value) == 1 and torch.equal(value[0], image[0])
    win.run_and_wait()
    with torch.no_grad():
        reference = model([image[0]])[0]
    combo = window.commands.target_combo
    assert combo.itemText(0) == "auto (top detection)" and combo.count() == 1 + 100
    assert combo.itemText(4).startswith(
        f"score of detection 3: label {int(reference['labels'][3])}"
    )
    top = int(reference["scores"].argmax())
    assert window.session.result.target_text.startswith(f"score of detection {top}")
    rows = window.session.result.predictions
    assert [
        r[1].endswith(f"(detection {i})")
        for r, i in zip(
            rows, torch.argsort(reference["scores"], descending=True)[:5].tolist(), strict=True
        )
    ] == [True] * 5
    assert rows[0][2] == pytest.approx(float(reference["scores"][top]))
    # Picking detection 3 makes its score the target.
    combo.setCurrentIndex(4)
    combo.activated.emit(4)
    assert window.session.target == 3
    win.run_and_wait()
    assert window.session.result.target_text.startswith("score of detection 3")
    assert window.session.result.capture.target_value == pytest.approx(
        float(reference["scores"][3])
    )
    assert combo.currentIndex() == 4  # the list was rebuilt for the new result, choice kept
    # Unticking the menu entry feeds the batch tensor again.
    window.commands.input_list_action.setChecked(False)
    assert torch.equal(window.session.input.value, image)
