"""The display package's pieces: mosaics, layer views, saliency, Grad-CAM, stats, colour."""

from __future__ import annotations

import numpy as np
import pytest
import torch
import torchvision

import actviz
from actviz.display.attribution import grad_cam, saliency, top_k
from actviz.display.colormaps import colorize, overlay, table
from actviz.display.layer_views import layer_view, magnitude_view
from actviz.display.mosaic import clamp_first_channel, mosaic
from actviz.display.stats import histogram, layer_stats, tensor_stats
from tests.core.seed_models import SeedMLP


def test_mosaic_layout_and_channel_lookup():
    data = np.arange(10 * 4 * 5, dtype=np.float32).reshape(10, 4, 5)
    m = mosaic(data, normalize="channel")
    assert (m.rows, m.cols, m.tile_h, m.tile_w, m.channels) == (3, 4, 4, 5, 10)
    assert m.image.shape == (3 * 5 - 1, 4 * 6 - 1)
    assert m.image.dtype == np.float32 and m.image.flags.c_contiguous
    # channel 6 sits at row 1, col 2; each tile stretched to [0, 1]
    y0, x0 = m.tile_origin(6)
    assert (y0, x0) == (5, 12)
    tile = m.image[y0 : y0 + 4, x0 : x0 + 5]
    assert tile.min() == 0.0 and tile.max() == 1.0
    assert np.allclose(tile, (data[6] - data[6].min()) / (data[6].max() - data[6].min()))
    assert m.channel_at(x0 + 1, y0 + 1) == 6
    assert m.channel_at(x0 + 5, y0) is None  # padding column
    assert m.channel_at(23 - 1, 14 - 1) is None  # empty 12th slot
    assert np.isnan(m.image[4, 0])  # padding row
    assert m.value_range == (0.0, 199.0)


def test_mosaic_shared_normalisation_and_nan():
    data = np.stack(
        [np.zeros((2, 2)), np.full((2, 2), 4.0), np.array([[np.nan, 1], [np.inf, 2]])]
    ).astype(np.float32)
    m = mosaic(data, normalize="shared")
    assert m.value_range == (0.0, 4.0)
    assert m.image[0, 0] == 0.0 and m.image[0, 3] == 1.0
    y0, x0 = m.tile_origin(2)
    assert np.isnan(m.image[y0, x0]) and np.isnan(m.image[y0 + 1, x0])
    assert m.image[y0, x0 + 1] == pytest.approx(0.25)
    const = mosaic(np.ones((2, 3, 3), np.float32))
    # A constant channel does not divide by zero; other than 0, it paints mid-scale (issue 39:
    # at the bottom a constant gradient read as none), 0 at the bottom.
    assert np.nanmin(const.image) == np.nanmax(const.image) == 0.5
    assert np.nanmax(mosaic(np.zeros((2, 3, 3), np.float32)).image) == 0.0
    assert np.nanmax(mosaic(np.ones((2, 3, 3), np.float32), normalize="shared").image) == 0.5


def test_mosaic_caps_tiles_and_channels():
    big = torch.randn(4096, 64, 64)
    m = mosaic(big, max_tile=16, max_channels=1024)
    assert m.channels == 1024 and m.total_channels == 4096 and m.tile_h == 16 and m.scale == 4
    assert m.image.shape[0] * m.image.shape[1] < 1100 * 1100


def test_mosaic_pages_through_channels():
    data = np.random.default_rng(0).normal(size=(10, 3, 3)).astype(np.float32)
    page = mosaic(data, max_channels=4, first_channel=4, pad=0)
    assert (page.first_channel, page.channels, page.last_channel, page.total_channels) == (
        4,
        4,
        7,
        10,
    )
    alone = mosaic(data[4:8], pad=0)
    np.testing.assert_array_equal(page.image, alone.image)
    # Tiles answer with the layer's channel, not their place on the page.
    y0, x0 = page.tile_origin(6)
    assert (y0, x0) == alone.tile_origin(2)
    assert page.channel_at(x0 + 1, y0 + 1) == 6
    np.testing.assert_allclose(
        page.image[y0 : y0 + 3, x0 : x0 + 3],
        (data[6] - data[6].min()) / (data[6].max() - data[6].min()),
        rtol=1e-6,
    )
    with pytest.raises(IndexError, match="channel 2 is not on this mosaic"):
        page.tile_origin(2)
    last = mosaic(data, max_channels=4, first_channel=8)
    assert (last.first_channel, last.channels) == (8, 2)
    assert mosaic(data, max_channels=4, first_channel=99).first_channel == 9
    assert mosaic(data, max_channels=4, first_channel=-3).first_channel == 0
    assert clamp_first_channel(5, 0) == 0


def test_layer_view_kinds_by_rank():
    assert layer_view(torch.randn(2, 8, 5, 6)).kind == "maps"
    v = layer_view(torch.randn(2, 8, 5, 6), sample=1)
    assert v.data.shape == (8, 5, 6) and "sample 1 of 2" in v.description
    assert layer_view(torch.randn(1, 10)).kind == "bars"
    seq = layer_view(torch.randn(1, 7, 16))
    assert seq.kind == "heatmap" and seq.data.shape == (7, 16)
    assert layer_view(torch.tensor(3.5)).kind == "scalar"
    assert layer_view(torch.randn(1, 4, 3, 5, 5)).data.shape == (4, 5, 5)
    cap = actviz.capture(SeedMLP(), torch.tensor([0.05, 0.1]))
    bars = layer_view(cap["s1"].output)
    assert bars.kind == "bars" and np.allclose(bars.data, [0.5933, 0.5969], atol=1e-4)


def test_a_global_pool_of_channels_shows_as_bars_not_one_pixel_tiles():
    # ResNet-18's avgpool: one value a channel. As 1x1 tiles, each "0-1 of its own min-max"
    # was one colour (every tile mid-scale, dead channels dark): the values were not shown.
    torch.manual_seed(0)
    model = torchvision.models.resnet18(weights=None).eval()
    cap = actviz.capture(model, torch.randn(2, 3, 64, 64), layers=["avgpool", "layer4"])
    pooled = layer_view(cap["avgpool"].output, sample=1)
    expected = cap["layer4"].output[1].mean(dim=(1, 2))
    assert pooled.kind == "bars" and pooled.shape == (2, 512, 1, 1)
    np.testing.assert_allclose(pooled.data, expected.numpy(), rtol=1e-5, atol=1e-6)
    assert pooled.description == "512 channels of 1x1 (sample 1 of 2)"
    grad = magnitude_view(layer_view(cap["avgpool"].grad, sample=1))
    assert grad.kind == "bars" and grad.data.shape == (512,)
    assert layer_view(torch.randn(1, 8, 1, 2)).kind == "maps"  # 1 x 2: still a map


@pytest.fixture(scope="module")
def resnet_capture():
    torch.manual_seed(0)
    model = torchvision.models.resnet18(weights=None).eval()
    x = torch.randn(1, 3, 64, 64)
    return actviz.capture(model, x, layers=["layer4", "layer3.1.bn2", "fc"])


def test_saliency_and_grad_cam(resnet_capture):
    cap = resnet_capture
    sal = saliency(cap.input_grads)
    assert sal.shape == (64, 64) and sal.max() == 1.0 and sal.min() >= 0
    expected = cap.input_grads[0].abs().max(0).values
    assert np.allclose(sal, (expected / expected.max()).numpy(), atol=1e-6)
    rec = cap["layer4"]
    cam = grad_cam(rec.tensor, rec.grad)
    a, g = rec.tensor[0], rec.grad[0]
    manual = torch.relu((g.mean((1, 2))[:, None, None] * a).sum(0))
    assert np.allclose(cam, (manual / manual.max()).numpy(), atol=1e-6)
    up = grad_cam(rec.tensor, rec.grad, size=(64, 64))
    assert up.shape == (64, 64) and up.max() == pytest.approx(1.0)
    with pytest.raises(ValueError, match="spatial"):
        grad_cam(cap["fc"].tensor, cap["fc"].grad)


def test_stats_flow_histogram_topk(resnet_capture):
    cap = resnet_capture
    st = layer_stats(cap["layer3.1.bn2"])
    t = cap["layer3.1.bn2"].output
    assert st["mean"] == pytest.approx(float(t.mean()), rel=1e-5)
    assert st["min"] == float(t.min()) and st["nan"] == 0 and st["shape"] == (1, 256, 4, 4)
    assert st["grad_norm"] == pytest.approx(float(cap["layer3.1.bn2"].grad.norm()), rel=1e-5)
    norms = [layer_stats(cap[n])["grad_norm"] for n in cap.names]
    assert len(norms) == 3 and all(n > 0 for n in norms)
    counts, edges = histogram(torch.tensor([0.0, 1.0, 1.0, np.nan, np.inf]), bins=2)
    assert counts.tolist() == [1, 2] and edges.tolist() == [0.0, 0.5, 1.0]
    st_nan = tensor_stats(np.array([np.nan, np.inf, 0.0, 2.0], np.float32))
    assert (st_nan["nan"], st_nan["inf"], st_nan["zero_frac"], st_nan["max"]) == (1, 1, 0.25, 2.0)
    rows = top_k(torch.tensor([[0.0, 3.0, 1.0]]), k=2, categories=["a", "b", "c"])
    assert [r[:2] for r in rows] == [(1, "b"), (2, "c")]
    assert rows[0][2] == pytest.approx(np.exp(3) / (1 + np.exp(3) + np.exp(1)))


def test_colorize_and_overlay():
    img = np.array([[0.0, 1.0], [np.nan, 0.5]], np.float32)
    rgb = colorize(img, "gray")
    assert rgb.shape == (2, 2, 3) and rgb.dtype == np.uint8
    assert rgb[0, 0].tolist() == [0, 0, 0] and rgb[0, 1].tolist() == [255, 255, 255]
    assert rgb[1, 0].tolist() == [255, 255, 255]  # NaN -> background
    assert table("viridis")[0].tolist() == [68, 1, 84]
    base = np.zeros((8, 8, 3), np.uint8)
    out = overlay(base, np.ones((2, 2), np.float32), alpha=0.5, cmap="gray")
    assert out.shape == (8, 8, 3) and out.min() == 128
    with pytest.raises(ValueError, match="unknown colour map"):
        table("nope")


def test_a_view_is_signed_when_any_value_is_negative_nan_and_inf_included():
    cases = {
        (1.0, 2.0): False,
        (-1.0, 2.0): True,
        (0.0, -0.0): False,  # negative zero is not below zero
        (np.nan, 1.0): False,
        (np.nan, -1.0): True,  # a NaN does not hide the negative value after it
        (-np.inf, 1.0): True,
    }
    for values, signed in cases.items():
        view = layer_view(torch.tensor([list(values)]))
        assert view.kind == "bars" and view.signed is signed, values
    assert layer_view(torch.zeros(1, 0)).signed is False
