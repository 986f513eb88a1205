"""The one preparation path: exact and fast variants, the device copy, pages, normalisation,
immutability, the Grad-CAM rule and the sample rule."""

from __future__ import annotations

import dataclasses
import math
from types import MappingProxyType

import numpy as np
import pytest
import torch
import torchvision
from torch import nn

from actviz.core.capture import capture
from actviz.display import prepare as device_module
from actviz.display.colormaps import to_indices
from actviz.display.mosaic import MAX_MOSAIC_PIXELS, max_tile_for, mosaic
from actviz.display.prepare import copy_to_host, prepare
from actviz.display.prepared import DisplaySpec, LazyMap, LazyStats
from actviz.display.repage import current_mosaics, renormalised, reusable_mosaics, with_page
from actviz.display.stats import histogram, layer_stats, tensor_stats
from tests.helpers import random_frames
from tests.ui.tiny_models import TinyCNN

LAYERS = ("conv1", "relu", "conv2", "fc")


def _capture_tiny(batch: int = 1):
    torch.manual_seed(0)
    model = TinyCNN().eval()
    x = random_frames(batch, 5)
    cap = capture(model, x, list(LAYERS))
    return model, cap, DisplaySpec(layers=LAYERS)


def _same_layers(a, b, *, stats_rel=1e-5, mosaic_atol=1e-6):
    assert a.shown == b.shown
    for name in b.shown:
        x, y = a.layers[name], b.layers[name]
        np.testing.assert_allclose(x.view.data, y.view.data)
        if y.mosaic is not None:
            np.testing.assert_allclose(
                x.mosaic.image, y.mosaic.image, atol=mosaic_atol, equal_nan=True
            )
            np.testing.assert_allclose(
                x.grad_mosaic.image, y.grad_mosaic.image, atol=mosaic_atol, equal_nan=True
            )
            np.testing.assert_allclose(x.grad_view.data, y.grad_view.data, rtol=1e-6)
        for key in ("mean", "std", "min", "max", "zero_frac", "grad_norm"):
            assert x.stats[key] == pytest.approx(y.stats[key], rel=stats_rel, abs=1e-6), (name, key)


# ============================================================================ statistics
def test_fast_stats_agree_with_the_exact_ones_and_fall_back_on_nan():
    t = torch.randn(2, 8, 9, 9) * 3 + 1
    t[0, 0, 0, :4] = 0
    g = torch.randn_like(t)
    fast, exact = tensor_stats(t, g, exact=False), tensor_stats(t, g)
    assert fast.keys() == exact.keys()
    for key in ("shape", "numel", "nan", "inf", "zero_frac", "min", "max"):
        assert fast[key] == exact[key]
    for key in ("mean", "std", "grad_norm"):
        assert fast[key] == pytest.approx(exact[key], rel=1e-5, abs=1e-6)
    assert exact["mean"] == pytest.approx(float(t.double().mean()), rel=1e-12)
    assert exact["std"] == pytest.approx(float(t.double().std(unbiased=False)), rel=1e-12)
    assert exact["grad_norm"] == pytest.approx(float(g.double().norm()), rel=1e-12)
    t[1, 2, 3, 4] = float("nan")
    t[1, 2, 3, 5] = float("inf")
    assert tensor_stats(t, exact=False) == tensor_stats(t)  # the exact path handles NaN/Inf
    st = tensor_stats(t)
    assert (st["nan"], st["inf"]) == (1, 1)
    finite = t[torch.isfinite(t)].double()
    assert st["mean"] == pytest.approx(float(finite.mean()), rel=1e-12)


def test_histogram_counts_the_finite_values_like_numpy():
    t = torch.randn(1, 4, 16, 16)
    counts, edges = histogram(t)
    ref_counts, ref_edges = np.histogram(t.numpy(), bins=64)
    assert counts.sum() == t.numel()
    assert np.abs(counts - ref_counts).sum() <= 2  # float64 binning vs numpy's edge correction
    np.testing.assert_allclose(edges, ref_edges, rtol=1e-6, atol=1e-6)  # numpy: float32 edges


# ============================================================================ mosaics
@pytest.mark.parametrize("normalize", ["channel", "shared"])
def test_mosaic_normalises_every_channel_to_its_own_or_one_shared_range(normalize):
    rng = np.random.default_rng(0)
    data = rng.standard_normal((7, 5, 6)).astype(np.float32)
    data[2] = 0.5  # a constant channel
    m = mosaic(data, normalize=normalize, pad=1)
    for c in range(7):
        y0, x0 = m.tile_origin(c)
        tile = m.image[y0 : y0 + 5, x0 : x0 + 6]
        lo, hi = (
            (data[c].min(), data[c].max()) if normalize == "channel" else (data.min(), data.max())
        )
        # A constant tile (other than 0) paints mid-scale.
        ref = np.full_like(data[c], 0.5) if hi == lo else (data[c] - lo) / (hi - lo)
        np.testing.assert_allclose(tile, ref, atol=1e-6)
    np.testing.assert_array_equal(m.indices, to_indices(m.image, m.levels))
    assert not m.image.flags.writeable and not m.indices.flags.writeable


def test_max_tile_keeps_the_mosaic_under_the_pixel_budget():
    assert max_tile_for(64, 56, 56, max_pixels=512 * 512) is None
    tile = max_tile_for(256, 56, 56, max_pixels=256 * 256)
    scale = math.ceil(56 / tile)
    assert 256 * math.ceil(56 / scale) ** 2 <= 256 * 256
    big = max_tile_for(1, 1024, 1024)
    assert math.ceil(1024 / math.ceil(1024 / big)) ** 2 <= MAX_MOSAIC_PIXELS


def test_downsampling_is_an_area_average_with_or_without_whole_blocks():
    rng = np.random.default_rng(1)
    data = rng.standard_normal((300, 16, 16)).astype(np.float32)
    m = mosaic(data, max_channels=256, max_tile=8, pad=0)
    assert (m.scale, m.total_channels, m.channels) == (2, 300, 256)
    pooled = torch.nn.functional.avg_pool2d(torch.from_numpy(data[:256]), 2).numpy()
    y0, x0 = m.tile_origin(3)
    tile = m.image[y0 : y0 + 8, x0 : x0 + 8]
    lo, hi = pooled[3].min(), pooled[3].max()
    np.testing.assert_allclose(tile, (pooled[3] - lo) / (hi - lo), atol=1e-5)
    odd = mosaic(data[:4, :15, :15], max_tile=8, pad=0)  # ceil-mode borders
    assert (odd.tile_h, odd.scale) == (8, 2)


# ============================================================================ fast vs exact
def test_fast_variant_agrees_with_the_exact_one_on_resnet18():
    torch.manual_seed(0)
    model = torchvision.models.resnet18(weights=None).eval()
    x = torch.randn(1, 3, 64, 64, generator=torch.Generator().manual_seed(1))
    layers = ("conv1", "bn1", "layer1", "layer2", "layer3", "layer4", "avgpool", "fc")
    cap = capture(model, x, list(layers))
    spec = DisplaySpec(layers=layers)
    exact = prepare(cap, spec, model=model)
    fast = prepare(cap, spec, fast=True, model=model, eager_hist=["layer2"])
    _same_layers(fast, exact)
    assert fast.predictions == exact.predictions
    assert (fast.gradcam_default, fast.target_text) == (exact.gradcam_default, exact.target_text)
    assert isinstance(fast.grad_cams, LazyMap)
    assert fast.grad_cams.computed() == [fast.gradcam_default]  # the others on first read
    assert sorted(exact.grad_cams.computed()) == sorted(exact.grad_cams)
    for name in exact.grad_cams:
        np.testing.assert_allclose(fast.grad_cams[name], exact.grad_cams[name], atol=1e-6)
    np.testing.assert_allclose(fast.saliency, exact.saliency)
    assert fast.layers["layer2"].hist_lazy.ready and not fast.layers["layer3"].hist_lazy.ready
    np.testing.assert_array_equal(fast.layers["layer3"].hist[0], exact.layers["layer3"].hist[0])
    assert fast.tree is not None
    again = prepare(cap, spec, fast=True, model=model, previous_shapes=fast.output_shapes)
    assert again.tree is None  # same shapes: the window keeps its tree


def test_statistics_can_wait_for_their_first_read_with_the_same_values():
    """Live frames with the Overview hidden: every statistic waits, the gradient's norm too
    (on its own: the gradient flow reads it alone), then reads exactly what an eager fast
    preparation gives."""
    torch.manual_seed(0)
    model = torchvision.models.resnet18(weights=None).eval()
    x = torch.randn(1, 3, 64, 64, generator=torch.Generator().manual_seed(2))
    layers = ("conv1", "layer1", "layer3", "fc")
    cap = capture(model, x, list(layers))
    spec = DisplaySpec(layers=layers)
    eager = prepare(cap, spec, fast=True, model=model)
    lazy = prepare(cap, spec, fast=True, model=model, eager_stats=["layer1"])
    assert isinstance(lazy.layers["layer1"].stats, MappingProxyType)
    for name in ("conv1", "layer3", "fc"):
        stats = lazy.layers[name].stats
        assert isinstance(stats, LazyStats) and not stats.ready
        # Known without computing: what the panels read per frame.
        assert stats["name"] == name and stats["shape"] == eager.layers[name].stats["shape"]
        assert not stats.ready_for("grad_norm")  # nothing read it yet
    assert not lazy.grad_norms_ready and not eager.grad_norms_ready
    np.testing.assert_array_equal(lazy.grad_norms, eager.grad_norms)  # the gradient flow's read
    assert lazy.grad_norms_ready and lazy.grad_norms.min() > 0
    for name in ("conv1", "layer3", "fc"):
        stats = lazy.layers[name].stats
        assert stats.ready_for("grad_norm") and not stats.ready  # the norm alone was computed
        assert stats["grad_norm"] == eager.layers[name].stats["grad_norm"] > 0
    # A copy (a page turn, the live frame's origin) reads its own layers' norms.
    moved = dataclasses.replace(lazy, origin={"input": "frame"})
    assert not moved.grad_norms_ready
    np.testing.assert_array_equal(moved.grad_norms, eager.grad_norms)
    with pytest.raises(ValueError):
        lazy.grad_norms[0] = 0.0
    assert lazy.stats_rows() == eager.stats_rows()  # read: computed, the same values
    assert all(lazy.layers[n].stats.ready for n in ("conv1", "layer3", "fc"))
    assert dict(lazy.layers["layer3"].stats)["mean"] == eager.layers["layer3"].stats["mean"]
    with pytest.raises(TypeError):
        lazy.layers["conv1"].stats["mean"] = 0.0  # type: ignore[index]


def test_fast_variant_agrees_with_the_exact_one_on_a_2048_channel_layer():
    torch.manual_seed(2)
    model = nn.Sequential(nn.Conv2d(3, 2048, 3, padding=1), nn.ReLU()).eval()
    x = torch.randn(1, 3, 48, 48)
    cap = capture(model, x, ["0"])
    # A named colour map: the signed convolution is stretched min..max, not symmetrically.
    spec = DisplaySpec(layers=("0",), channel_pages={"0": 1792}, colormap="viridis")
    exact = prepare(cap, spec).layers["0"]
    fast = prepare(cap, spec, fast=True).layers["0"]
    for key in ("mean", "std", "min", "max", "zero_frac", "grad_norm"):
        assert fast.stats[key] == pytest.approx(exact.stats[key], rel=1e-5, abs=1e-6), key
    # 256 tiles of 48x48 exceed the pixel budget: the fast mosaic is area-averaged by 2.
    e, f = exact.mosaic, fast.mosaic
    assert (e.first_channel, e.channels, e.scale) == (1792, 256, 1)
    assert (f.first_channel, f.channels, f.scale) == (1792, 256, 2)
    assert f.image.size <= MAX_MOSAIC_PIXELS * 1.1
    ref = mosaic(exact.view.data, first_channel=1792, max_channels=256, max_tile=24)
    np.testing.assert_allclose(f.image, ref.image, atol=1e-5, equal_nan=True)
    # The same channel's tile, averaged from the exact one, within 2/255 of a colour step.
    y0, x0 = e.tile_origin(2000)
    fy, fx = f.tile_origin(2000)
    tile = e.image[y0 : y0 + 48, x0 : x0 + 48].reshape(24, 2, 24, 2).mean(axis=(1, 3))
    lo, hi = exact.view.data[2000].min(), exact.view.data[2000].max()
    raw = exact.view.data[2000].reshape(24, 2, 24, 2).mean(axis=(1, 3))
    np.testing.assert_allclose(
        f.image[fy : fy + 24, fx : fx + 24], (raw - raw.min()) / (raw.max() - raw.min()), atol=1e-5
    )
    assert np.abs(tile * (hi - lo) + lo - raw).max() < 1e-4


# ============================================================================ the sample rule
def test_live_and_window_show_the_same_sample_and_gradient_for_a_batch_of_two():
    model, cap, spec = _capture_tiny(batch=2)
    for sample in (0, 1):
        s = dataclasses.replace(spec, sample=sample)
        window = prepare(cap, s)
        live = prepare(cap, s, fast=True)
        dev = prepare(cap, s, fast=True, device=True)
        for result in (window, live, dev):
            conv2 = result.layers["conv2"]
            np.testing.assert_allclose(conv2.view.data, cap["conv2"].tensor[sample].numpy())
            np.testing.assert_allclose(
                conv2.grad_view.data, cap["conv2"].grad[sample].abs().numpy(), rtol=1e-6
            )
            # Norms and statistics are the batch's, in every path.
            assert conv2.stats["grad_norm"] == pytest.approx(
                float(cap["conv2"].grad.norm()), rel=1e-5
            )
            assert conv2.stats["shape"] == (2, 6, 8, 8)
            assert f"sample {sample} of 2" in conv2.view.description
            ig = cap.input_grads[sample].abs().amax(0)
            np.testing.assert_allclose(result.saliency, (ig / ig.max()).numpy(), atol=1e-6)
            assert result.predictions[0][0] == int(cap.output[sample].argmax())
        np.testing.assert_allclose(live.grad_cams["conv2"], window.grad_cams["conv2"], atol=1e-6)
        np.testing.assert_allclose(dev.grad_cams["conv2"], window.grad_cams["conv2"], atol=1e-6)


# ============================================================================ the device copy
def test_the_device_path_shows_what_the_host_path_shows_with_one_copy(monkeypatch):
    model, cap, spec = _capture_tiny(batch=2)
    copies = []
    real = device_module._to_host
    monkeypatch.setattr(device_module, "_to_host", lambda b: copies.append(1) or real(b))
    host = prepare(cap, spec, fast=True, device=False)
    assert copies == []
    dev = prepare(cap, spec, fast=True, device=True, eager_hist=["conv1"])
    assert copies == [1]
    assert dev.grad_cams.computed() == [dev.gradcam_default]
    np.testing.assert_allclose(dev.saliency, host.saliency, atol=1e-6)
    _same_layers(dev, host)
    assert dev.layers["conv1"].hist_lazy.ready
    np.testing.assert_array_equal(dev.layers["conv1"].hist[0], host.layers["conv1"].hist[0])


def test_grad_cam_maps_can_all_wait_for_their_first_read_on_either_path():
    model, cap, spec = _capture_tiny()
    spec = dataclasses.replace(spec, image=np.zeros((16, 16, 3), np.uint8))
    exact = prepare(cap, spec)
    assert exact.gradcam_default is not None and len(exact.grad_cams) >= 2
    for device in (False, True):
        lazy = prepare(cap, spec, fast=True, device=device, eager_cams=[])
        assert lazy.grad_cams.computed() == [] and lazy.gradcam_default == exact.gradcam_default
        one = prepare(cap, spec, fast=True, device=device, eager_cams=["conv1"])
        assert one.grad_cams.computed() == ["conv1"]
        for name in exact.grad_cams:  # read later: the same maps
            np.testing.assert_allclose(lazy.grad_cams[name], exact.grad_cams[name], atol=1e-6)
            np.testing.assert_allclose(one.grad_cams[name], exact.grad_cams[name], atol=1e-6)


def test_device_copy_handles_nan_and_inf_without_branching():
    t = torch.randn(1, 3, 4, 4)
    t[0, 1, 2, 2] = float("nan")
    t[0, 2] = float("inf")
    got = copy_to_host([("x", t, None)])[0]["x"]
    exact = tensor_stats(t)
    assert (got.stats["nan"], got.stats["inf"]) == (1, 16)
    assert got.stats["mean"] == pytest.approx(exact["mean"], rel=1e-12)
    assert got.stats["grad_norm"] is None
    np.testing.assert_array_equal(got.sample, t.numpy())


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")
def test_records_on_cuda_take_the_device_path_with_one_copy(monkeypatch):
    model, cap, spec = _capture_tiny(batch=2)
    host = prepare(cap, spec, fast=True)
    for name in cap.names:
        for rec in cap.calls(name):
            rec.output = rec.output.cuda()
            rec.grad_output = rec.grad_output.cuda()
    cap.input_grads = cap.input_grads.cuda()
    copies = []
    real = device_module._to_host
    monkeypatch.setattr(device_module, "_to_host", lambda b: copies.append(b.device) or real(b))
    dev = prepare(cap, spec, fast=True)
    assert len(copies) == 1 and copies[0].type == "cuda"
    _same_layers(dev, host)
    for name in ("conv1", "conv2"):
        exact = layer_stats(cap[name])
        assert dev.layers[name].stats["mean"] == pytest.approx(exact["mean"], rel=1e-9)


# ============================================================================ pages, reuse
def test_every_path_shows_the_channel_page_asked_for():
    torch.manual_seed(0)
    model = nn.Sequential(nn.Conv2d(3, 600, 3, padding=1), nn.ReLU()).eval()
    x = torch.randn(1, 3, 12, 12)
    cap = capture(model, x, ["0", "1"])
    spec = DisplaySpec(layers=("0", "1"), channel_pages={"0": 512})
    for result in (
        prepare(cap, spec),
        prepare(cap, spec, fast=True),
        prepare(cap, spec, fast=True, device=True),
    ):
        layer = result.layers["0"]
        m, g = layer.mosaic, layer.grad_mosaic
        assert (m.first_channel, m.channels, m.total_channels) == (512, 88, 600)
        assert (g.first_channel, g.channels) == (512, 88)
        # The default "auto" colour map: the signed convolution is symmetric about 0, the
        # ReLU after it is not.
        assert m.symmetric and not result.layers["1"].mosaic.symmetric
        ref = mosaic(layer.view.data[512:], pad=1, symmetric=True)
        np.testing.assert_allclose(m.image, ref.image, atol=1e-6, equal_nan=True)
        assert result.layers["1"].mosaic.first_channel == 0
        assert layer.view.data.shape[0] == 600  # the view keeps every channel
    # An off-screen stand-in from another page is not reused; one from this page is.
    page0 = prepare(cap, dataclasses.replace(spec, channel_pages={}), fast=True)
    again = prepare(cap, spec, fast=True, mosaic_layers=set(), reuse=reusable_mosaics(page0))
    assert again.layers["0"].mosaic.first_channel == 512
    assert again.layers["1"].mosaic is page0.layers["1"].mosaic


def test_off_screen_layers_keep_their_mosaics_until_shown():
    model, cap, spec = _capture_tiny()
    first = prepare(cap, spec, fast=True)
    cap2 = capture(model, random_frames(1, 6), list(LAYERS))
    second = prepare(cap2, spec, fast=True, mosaic_layers={"conv1"}, reuse=reusable_mosaics(first))
    assert second.layers["conv2"].mosaic is first.layers["conv2"].mosaic  # off screen: reused
    assert second.layers["conv2"].grad_mosaic is first.layers["conv2"].grad_mosaic
    fresh = prepare(cap2, spec, fast=True)
    np.testing.assert_allclose(
        second.layers["conv1"].mosaic.image, fresh.layers["conv1"].mosaic.image
    )
    np.testing.assert_allclose(second.layers["conv2"].view.data, fresh.layers["conv2"].view.data)
    assert second.layers["conv2"].stats["mean"] == fresh.layers["conv2"].stats["mean"]
    shared = dataclasses.replace(spec, normalize="shared")
    third = prepare(cap2, shared, fast=True, mosaic_layers=set(), reuse=reusable_mosaics(first))
    assert third.layers["conv2"].mosaic.normalize == "shared"


def test_a_kept_mosaic_is_marked_and_made_again_from_this_frames_views():
    model, cap, spec = _capture_tiny()
    first = prepare(cap, spec, fast=True)
    cap2 = capture(model, random_frames(1, 6), list(LAYERS))
    second = prepare(cap2, spec, fast=True, mosaic_layers={"conv1"}, reuse=reusable_mosaics(first))
    fresh = prepare(cap2, spec, fast=True)
    assert not second.layers["conv1"].stale_mosaics
    kept = second.layers["conv2"]
    assert kept.stale_mosaics and kept.mosaic is first.layers["conv2"].mosaic
    # Not this frame's pixels until made again, then exactly a full preparation's.
    assert not np.array_equal(kept.mosaic.indices, fresh.layers["conv2"].mosaic.indices)
    made = current_mosaics(kept)
    assert not made.stale_mosaics
    for got, want in ((made.mosaic, fresh.layers["conv2"].mosaic),
                      (made.grad_mosaic, fresh.layers["conv2"].grad_mosaic)):  # fmt: skip
        assert np.array_equal(got.indices, want.indices)
        np.testing.assert_array_equal(got.image, want.image)
        assert (got.position, got.page_size, got.scale, got.symmetric) == (
            want.position,
            want.page_size,
            want.scale,
            want.symmetric,
        )
    assert current_mosaics(made) is made
    assert current_mosaics(fresh.layers["conv2"]) is fresh.layers["conv2"]


def test_with_page_makes_a_new_layer_with_the_same_downsampling():
    torch.manual_seed(1)
    model = nn.Sequential(nn.Conv2d(3, 300, 1)).eval()
    x = torch.randn(1, 3, 40, 40)
    cap = capture(model, x, ["0"])
    layer = prepare(cap, DisplaySpec(layers=("0",)), fast=True, max_pixels=64 * 64).layers["0"]
    # 256 tiles of 40x40 in 64x64 pixels: each tile averaged over 10x10 blocks.
    assert (layer.mosaic.scale, layer.mosaic.channels) == (10, 256)
    assert with_page(layer, 0) is layer  # already there
    before = layer.mosaic
    turned = with_page(layer, 256)
    assert turned is not layer and layer.mosaic is before  # the old layer is not edited
    m = turned.mosaic
    assert (m.first_channel, m.channels, m.scale) == (256, 44, 10)
    ref = mosaic(layer.view.data[256:], max_tile=4, pad=1, symmetric=True)
    np.testing.assert_allclose(m.image, ref.image, atol=1e-6, equal_nan=True)
    assert turned.grad_mosaic.first_channel == 256
    # A smaller page (the window's panel is narrow) and a named colour map (no symmetric
    # range): new mosaics from the same views, same downsampling, the old layer untouched.
    small = with_page(turned, 256, page_size=30, symmetric=False)
    s = small.mosaic
    assert (s.first_channel, s.channels, s.page_size, s.scale, s.symmetric) == (
        256,
        30,
        30,
        10,
        False,
    )
    assert (small.grad_mosaic.channels, small.grad_mosaic.page_size) == (30, 30)
    ref = mosaic(layer.view.data[256:286], max_tile=4, pad=1)
    np.testing.assert_allclose(s.image, ref.image, atol=1e-6, equal_nan=True)
    assert turned.mosaic is m and m.symmetric and m.page_size == 256
    assert with_page(small, 256, page_size=30) is small


def test_results_are_frozen_and_renormalising_makes_a_new_one():
    model, cap, spec = _capture_tiny()
    result = prepare(cap, spec)
    conv1 = result.layers["conv1"]
    image_before = conv1.mosaic.image.copy()
    with pytest.raises(dataclasses.FrozenInstanceError):
        conv1.mosaic = None  # type: ignore[misc]
    with pytest.raises(dataclasses.FrozenInstanceError):
        result.shown = ()  # type: ignore[misc]
    with pytest.raises(TypeError):
        result.layers["conv1"] = conv1  # type: ignore[index]
    with pytest.raises(ValueError):
        conv1.mosaic.image[0, 0] = 0.5
    with pytest.raises(ValueError):
        conv1.view.data[0, 0, 0] = 0.5
    shared = renormalised(result, "shared")
    assert shared is not result and shared.spec.normalize == "shared"
    assert shared.layers["conv1"].mosaic.normalize == "shared"
    assert result.layers["conv1"].mosaic is conv1.mosaic and conv1.mosaic.normalize == "channel"
    np.testing.assert_array_equal(conv1.mosaic.image, image_before)
    # The capture's own tensors stay writable: the views are read-only views of them.
    assert cap["conv1"].tensor.numpy().flags.writeable


# ============================================================================ Grad-CAM rule
def test_gradcam_is_never_a_1x1_layer_by_default():
    torch.manual_seed(0)
    model = torchvision.models.resnet18(weights=None).eval()
    x = torch.randn(1, 3, 64, 64)
    leaves = [n for n, m in model.named_modules() if n and not list(m.children())]
    cap = capture(model, x, leaves)  # "tick all leaves below": avgpool (1x1) is captured last
    image = np.zeros((64, 64, 3), np.uint8)
    result = prepare(cap, DisplaySpec(layers=tuple(leaves), image=image))
    assert "avgpool" in result.grad_cams  # it can be picked by hand
    # The last captured layer (execution order of first calls: the block's shared ReLU ran
    # before bn2) whose output is larger than 1x1.
    assert cap.names[-3:] == ["layer4.1.bn2", "avgpool", "fc"]
    assert result.gradcam_default == "layer4.1.bn2"
    assert cap["layer4.1.bn2"].tensor.shape[-2:] == (2, 2)
    cam = result.grad_cams[result.gradcam_default]
    assert cam.shape == (64, 64) and cam.max() == pytest.approx(1.0) and cam.std() > 0
    from actviz.io.export.typeset import pick_gradcam_layer

    assert pick_gradcam_layer(cap) == "layer4.1.bn2"  # export uses the same rule
    asked = prepare(cap, DisplaySpec(layers=tuple(leaves), image=image, gradcam_layer="avgpool"))
    assert asked.gradcam_default == "avgpool"


def test_an_off_screen_layers_gradient_view_is_made_on_its_first_read():
    """A live frame's |gradient| waits for a read (a fifth of the preparation on ResNet-18 at
    112 px, and a copy of the layer a result would hold); read, it is exactly a full
    preparation's."""
    from actviz.display.layer_views import LazyLayerView

    model, cap, spec = _capture_tiny()
    first = prepare(cap, spec, fast=True)
    cap2 = capture(model, random_frames(1, 6), list(LAYERS))
    second = prepare(cap2, spec, fast=True, mosaic_layers={"conv1"}, reuse=reusable_mosaics(first))
    fresh = prepare(cap2, spec, fast=True)
    kept, shown = second.layers["conv2"].grad_view, second.layers["conv1"].grad_view
    assert isinstance(kept, LazyLayerView) and "data" not in vars(kept)  # not made yet
    # On screen too: its mosaic took |g| of its page alone, the layer's |g| waits for a read.
    assert isinstance(shown, LazyLayerView) and "data" not in vars(shown)
    got, made = second.layers["conv1"].grad_mosaic, fresh.layers["conv1"].grad_mosaic
    assert got.indices.tobytes() == made.indices.tobytes()
    want = fresh.layers["conv2"].grad_view
    assert (kept.kind, kept.shape, kept.description) == (want.kind, want.shape, want.description)
    np.testing.assert_array_equal(kept.data, want.data)
    np.testing.assert_array_equal(kept.data, np.abs(cap2["conv2"].grad[0].numpy()))
    assert not kept.data.flags.writeable and kept.data is kept.data  # made once, read-only


def test_the_input_picture_is_the_min_max_scaled_input_as_before():
    """display_image in NumPy (every live frame's picture) gives the torch path's bytes."""
    from actviz.display.attribution import display_image

    def torch_path(x: torch.Tensor) -> np.ndarray:  # as it was
        arr = x.detach().float().cpu()
        lo, hi = float(arr.min()), float(arr.max())
        arr = (arr - lo) / (hi - lo) if hi > lo else torch.zeros_like(arr)
        arr = (arr.clamp(0, 1) * 255).round().to(torch.uint8)
        arr = arr.expand(3, *arr.shape[1:]) if arr.shape[0] == 1 else arr
        return np.ascontiguousarray(arr.permute(1, 2, 0).numpy())

    for s in range(24):
        g = torch.Generator().manual_seed(s)
        x = torch.randn(2, 1 if s % 3 == 0 else 3, 9 + s, 13, generator=g)
        x = x * 10.0 ** (s % 7 - 3) + s % 4
        x = torch.full_like(x, 0.5) if s % 10 == 0 else x
        x = x.double() if s % 11 == 1 else x.half() if s % 13 == 2 else x
        for sample in (0, 1):
            got = display_image(x, None, sample)
            assert got.dtype == np.uint8 and got.flags.c_contiguous and got.shape[2] == 3
            np.testing.assert_array_equal(got, torch_path(x[sample]))
