"""export_capture writes readable PNGs, raw arrays and a summary with real values."""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch
import torchvision
from PIL import Image

import actviz
from actviz.display.colormaps import DEFAULT_ACTIVATION_CMAP, OVERLAY_CMAP, table
from actviz.display.layer_views import layer_view
from actviz.display.mosaic import mosaic
from actviz.io.export.capture_export import export_capture
from actviz.io.export.typeset import channel_pages, pick_gradcam_layer, render_layer_png
from tests.core.seed_models import SeedMLP


@pytest.fixture(scope="module")
def resnet_cap():
    torch.manual_seed(0)
    model = torchvision.models.resnet18(weights=None).eval()
    x = torch.rand(1, 3, 64, 64)
    cap = actviz.capture(model, x, ["conv1", "layer1.0.relu", "layer4", "fc"], target=5)
    image = (x[0].permute(1, 2, 0).numpy() * 255).astype(np.uint8)
    return cap, image


def test_export_files_and_summary(resnet_cap, tmp_path):
    cap, image = resnet_cap
    seen = []
    files = export_capture(
        cap,
        tmp_path,
        image=image,
        categories=[f"c{i}" for i in range(1000)],
        model_name="resnet18",
        input_name="random",
        progress=lambda d, t, w: seen.append((d, t)),
    )
    names = {p.name for p in files}
    for layer in ("conv1", "layer1.0.relu", "layer4", "fc"):
        assert {f"{layer}_features.png", f"{layer}_grad.png", f"{layer}.npz"} <= names
    assert {"saliency.png", "gradcam.png", "summary.json", "input.png"} <= names
    assert files[-1].name == "summary.json" and seen[-1] == (5, 5)
    summary = json.loads((tmp_path / "summary.json").read_text())
    assert summary["target"] == {
        "description": "class 5",
        "text": "class 5: c5",
        "kind": "class",
        "value": pytest.approx(cap.target_value),
        "index": 5,
        "label": "c5",
        "chosen": "picked",
    }
    assert summary["attribution"]["gradcam_layer"] == "layer4"
    conv1 = summary["layers"]["conv1"]
    assert conv1["shape"] == [1, 64, 32, 32]
    assert conv1["mean"] == pytest.approx(float(cap["conv1"].output.mean()), rel=1e-5)
    assert summary["layers"]["layer1.0.relu"]["calls"] == 2
    assert len(summary["prediction"]) == 5 and summary["prediction"][0]["label"].startswith("c")
    # raw arrays are the exact captured values; a reused module keeps every call
    arrs = np.load(tmp_path / "layer1.0.relu.npz")
    assert set(arrs.files) >= {"call0_output", "call1_output", "call0_grad_output"}
    assert np.array_equal(arrs["call1_output"], cap.calls("layer1.0.relu")[1].output.numpy())
    assert np.array_equal(np.load(tmp_path / "conv1.npz")["output"], cap["conv1"].output.numpy())
    sal = np.load(tmp_path / "saliency.npy")
    assert sal.shape == (64, 64) and sal.max() == pytest.approx(1.0)


def test_pngs_are_readable_not_grey_noise(resnet_cap, tmp_path):
    cap, image = resnet_cap
    export_capture(cap, tmp_path, image=image)
    feat = np.asarray(Image.open(tmp_path / "conv1_features.png").convert("RGB"))
    # a colormap (not grey): many distinct hues, and the image is larger than the raw 32x32 tiles
    assert feat.shape[0] > 300 and feat.shape[1] > 300
    sat = feat.max(axis=2).astype(int) - feat.min(axis=2)
    assert (sat > 60).mean() > 0.3
    cam = np.asarray(Image.open(tmp_path / "gradcam.png").convert("RGB"))
    assert cam.shape[0] >= 256


def test_seed_mlp_exports_bar_charts(tmp_path):
    cap = actviz.capture(SeedMLP(), torch.tensor([0.05, 0.1]))
    files = export_capture(cap, tmp_path)
    assert (tmp_path / "s2_features.png").exists() and (tmp_path / "fc1_grad.png").exists()
    assert "gradcam.png" not in {p.name for p in files}  # no spatial layer
    summary = json.loads((tmp_path / "summary.json").read_text())
    assert summary["layers"]["s2"]["max"] == pytest.approx(0.7729, abs=1e-4)
    assert pick_gradcam_layer(cap) is None
    img = render_layer_png(layer_view(cap["s1"].output), "s1")
    assert img.width >= 200


def test_nan_layer_exports(tmp_path):
    model = torch.nn.Sequential(torch.nn.Conv2d(1, 2, 3), torch.nn.ReLU())
    with torch.no_grad():
        model[0].weight.fill_(float("nan"))
    cap = actviz.capture(model, torch.rand(1, 1, 8, 8))
    export_capture(cap, tmp_path)
    summary = json.loads((tmp_path / "summary.json").read_text())
    assert summary["layers"]["0"]["nan"] == 72


def test_a_layer_wider_than_a_page_is_written_as_several_pngs(tmp_path):
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Conv2d(1, 2500, 1))
    cap = actviz.capture(model, torch.rand(1, 1, 2, 2), target=0)
    assert channel_pages(layer_view(cap["0"].tensor)) == [
        (0, ""),
        (1024, "_ch1024-2047"),
        (2048, "_ch2048-2499"),
    ]
    assert channel_pages(layer_view(torch.zeros(1, 10))) == [(0, "")]
    files = {p.name for p in export_capture(cap, tmp_path)}
    for kind in ("features", "grad"):
        pages = [f"0_{kind}.png", f"0_{kind}_ch1024-2047.png", f"0_{kind}_ch2048-2499.png"]
        assert set(pages) <= files
        summary = json.loads((tmp_path / "summary.json").read_text())
        assert set(pages) <= set(summary["layers"]["0"]["files"])
        sizes = [Image.open(tmp_path / name).size for name in pages]
        # Full pages are alike; the last holds 452 channels: a smaller mosaic.
        assert sizes[0] == sizes[1] and sizes[2][1] < sizes[1][1]
    # Each page shows its own channels, numbered as in the layer.
    first = np.asarray(Image.open(tmp_path / "0_features.png").convert("RGB"))
    third = np.asarray(Image.open(tmp_path / "0_features_ch2048-2499.png").convert("RGB"))
    assert not np.array_equal(first[40:200, 10:200], third[40:200, 10:200])


def test_tiles_are_numbered_with_the_layers_channels(monkeypatch):
    from PIL import ImageDraw

    labels = []
    real = ImageDraw.ImageDraw.text

    def record(self, xy, text, *args, **kwargs):
        labels.append(text)
        return real(self, xy, text, *args, **kwargs)

    monkeypatch.setattr(ImageDraw.ImageDraw, "text", record)
    maps = torch.rand(1, 30, 8, 8)
    render_layer_png(layer_view(maps), "wide", max_channels=10, first_channel=20)
    assert [t for t in labels if t.isdigit()] == [str(c) for c in range(20, 30)]
    assert any("channels 20-29 of 30" in t for t in labels)


# -------------------------------------------------------------------- PNGs against their arrays
def _png_body(path) -> np.ndarray:
    """The picture an exported PNG frames: the block between its title and its colour bar."""
    rgb = np.asarray(Image.open(path).convert("RGB")).astype(np.int16)
    ink = (rgb != 255).any(axis=2)  # the page is white; no colour map reaches pure white
    rows = np.flatnonzero(ink.any(axis=1))
    breaks = np.flatnonzero(np.diff(rows) > 1)
    starts, ends = np.r_[rows[0], rows[breaks + 1]], np.r_[rows[breaks], rows[-1]]
    assert len(starts) >= 3, "expected a title, a picture and a colour bar"
    top, bottom = starts[1], ends[1] + 1
    cols = np.flatnonzero(ink[top:bottom].any(axis=0))
    return rgb[top:bottom, cols[0] : cols[-1] + 1]


def _values(rgb: np.ndarray, cmap: str) -> np.ndarray:
    """Read colours back through the colour map: the value in [0, 1] whose colour is nearest."""
    colours = table(cmap).astype(np.int32)
    dist = ((rgb[..., None, :].astype(np.int32) - colours) ** 2).sum(axis=-1)
    return dist.argmin(axis=-1) / (len(colours) - 1)


def _block_centres(body: np.ndarray, shape: tuple[int, int]) -> np.ndarray:
    """Sample an integer-upscaled picture at the centre of each source pixel."""
    k = body.shape[0] // shape[0]
    assert body.shape[:2] == (k * shape[0], k * shape[1]), (body.shape, shape)
    return body[k // 2 :: k, k // 2 :: k]


@pytest.fixture(scope="module")
def spatial_cap():
    """No pooling: gradients vary over the map, so every pixel of every PNG is distinct."""
    torch.manual_seed(3)
    model = torch.nn.Sequential(
        torch.nn.Conv2d(3, 4, 3, padding=1),
        torch.nn.ReLU(),
        torch.nn.Conv2d(4, 3, 3, padding=1),
        torch.nn.Flatten(),
        torch.nn.Linear(3 * 8 * 8, 5),
    ).eval()
    return actviz.capture(model, torch.rand(1, 3, 8, 8), ["0", "2"], target=1)


def test_saliency_and_gradcam_pngs_show_their_arrays(spatial_cap, tmp_path):
    cap = spatial_cap
    export_capture(cap, tmp_path)
    # The arrays, from first principles: saliency = max over channels of |d target / d x|,
    # scaled to 1; Grad-CAM = ReLU of the channel-mean-gradient-weighted maps, scaled to 1.
    sal = cap.input_grads[0].abs().amax(dim=0)
    sal = (sal / sal.max()).numpy()
    a, g = cap["2"].output[0], cap["2"].grad_output[0]
    cam = torch.relu((g.mean(dim=(1, 2))[:, None, None] * a).sum(dim=0))
    cam = (cam / cam.max()).numpy()
    np.testing.assert_allclose(np.load(tmp_path / "saliency.npy"), sal, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(np.load(tmp_path / "gradcam.npy"), cam, rtol=1e-5, atol=1e-6)
    summary = json.loads((tmp_path / "summary.json").read_text())
    assert summary["attribution"]["gradcam_layer"] == "2"
    # The pictures are those arrays, through the overlay colour map (8x8, upscaled for reading).
    for name, heat in (("saliency.png", sal), ("gradcam.png", cam)):
        shown = _values(_block_centres(_png_body(tmp_path / name), heat.shape), OVERLAY_CMAP)
        np.testing.assert_allclose(shown, heat, atol=0.03, err_msg=name)
    # A transposed or flipped map would not pass: the maps are far from symmetric.
    assert np.abs(sal - sal.T).max() > 0.2 and np.abs(cam - cam[::-1]).max() > 0.2


def test_gradient_pngs_show_the_gradient_magnitudes(spatial_cap, tmp_path):
    cap = spatial_cap
    export_capture(cap, tmp_path)
    for name in ("0", "2"):
        mag = cap[name].grad_output[0].abs().numpy()
        assert np.array_equal(
            np.load(tmp_path / f"{name}.npz")["grad_output"][0], cap[name].grad_output[0].numpy()
        )
        # Scaled per channel and painted with the map chosen, as the window paints |gradient|
        # (actviz.display.colormaps.painting; issue 39).
        lo = mag.min(axis=(1, 2), keepdims=True)
        hi = mag.max(axis=(1, 2), keepdims=True)
        expected = (mag - lo) / np.where(hi > lo, hi - lo, 1.0)
        geometry = mosaic(mag, normalize="channel")  # where each channel's tile sits
        body = _png_body(tmp_path / f"{name}_grad.png")
        k = body.shape[1] // geometry.image.shape[1]
        assert body.shape[:2] == (k * geometry.image.shape[0], k * geometry.image.shape[1])
        _, h, w = mag.shape
        for c in range(mag.shape[0]):
            y0, x0 = geometry.tile_origin(c)
            # the lower half of each tile: the channel number is drawn over its top-left corner
            rows = np.arange(h // 2, h)
            tile = body[((y0 + rows) * k + k // 2)[:, None], ((x0 + np.arange(w)) * k + k // 2)]
            np.testing.assert_allclose(
                _values(tile, DEFAULT_ACTIVATION_CMAP), expected[c, h // 2 :], atol=1.5 / 255,
                err_msg=f"{name} channel {c}",
            )  # fmt: skip


def test_a_long_title_is_never_cut_by_the_pictures_edge():
    """The picture widens to its title: a layer's full name and scale stay readable."""
    maps = torch.rand(1, 4, 6, 6)
    name = "encoder.layers.encoder_layer_11.mlp.linear_with_a_long_name · Linear"
    for img in (render_layer_png(layer_view(t), name) for t in (maps, torch.rand(1, 5))):
        rgb = np.asarray(img.convert("RGB"))
        title_band = (rgb[:28] != 255).any(axis=2)
        cols = np.flatnonzero(title_band.any(axis=0))
        assert cols.size and cols[-1] < img.width - 8  # the margin at the right is kept
        assert img.width > 320 + 100  # widened: the body alone is narrower
