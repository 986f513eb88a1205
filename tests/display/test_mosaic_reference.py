"""Mosaics against a straightforward reference, bit for bit, and what a live frame's off-screen
layers leave for later (#39)."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
import torch.nn.functional as F

from actviz.core.capture import capture
from actviz.display.colormaps import AUTO, to_indices
from actviz.display.layer_views import LazyLayerView
from actviz.display.mosaic import ChannelOrder, max_tile_for, mosaic
from actviz.display.prepare import prepare
from actviz.display.prepared import DisplaySpec
from actviz.display.repage import current_mosaics, reusable_mosaics, with_page
from tests.helpers import random_frames
from tests.ui.tiny_models import TinyCNN

F32 = np.float32


def _reference_downsample(maps: np.ndarray, s: int) -> np.ndarray:
    """Block means summed block pixel by block pixel from 0 (ceil mode: avg_pool2d)."""
    c, h, w = maps.shape
    if s <= 1:
        return maps
    if h % s or w % s:
        t = torch.from_numpy(np.ascontiguousarray(maps))[None]
        return F.avg_pool2d(t, kernel_size=s, stride=s, ceil_mode=True)[0].numpy()
    out = np.zeros((c, h // s, w // s), F32)
    for dy in range(s):
        for dx in range(s):
            out = out + maps[:, dy::s, dx::s]
    return out * F32(1.0 / (s * s))


def _finite_range(x: np.ndarray) -> tuple[F32, F32]:
    v = x[np.isfinite(x)]
    return (v.min(), v.max()) if v.size else (F32(0), F32(0))


def _reference(data, *, normalize, first, page, max_pixels, symmetric, value_range, order):
    """``(image, indices, value_range)`` of a mosaic, channel by channel."""
    total, h0, w0 = data.shape
    if order is not None:
        pos = min(first, len(order.channels) - 1)
        shown = data[list(order.channels[pos : pos + page])]
    else:
        start = min(first, total - 1)
        shown = data[start : start + page]
    tile = max_tile_for(total, h0, w0, max_channels=page, max_pixels=max_pixels)
    s = math.ceil(max(h0, w0) / tile) if tile is not None and max(h0, w0) > tile else 1
    shown = _reference_downsample(shown, s)
    c = shown.shape[0]
    ranges = [_finite_range(shown[i]) for i in range(c)]
    lo_all, hi_all = min(r[0] for r in ranges), max(r[1] for r in ranges)
    shared = None
    if normalize == "shared":  # one range, in Python floats
        if value_range is not None:
            lo_s, hi_s = float(value_range[0]), float(value_range[1])
        elif c == total and s == 1:
            lo_s, hi_s = float(lo_all), float(hi_all)
        else:
            lo_s, hi_s = (float(v) for v in _finite_range(data))
        if symmetric:
            b = max(abs(lo_s), abs(hi_s)) or 1.0
            lo_s, hi_s = -b, b
        span_s = hi_s - lo_s
        shared = (F32(lo_s), F32(1.0 / span_s if span_s > 0 else 0.0), span_s == 0 and lo_s != 0)
    norms, mids = [], []
    for i, (lo, hi) in enumerate(ranges):
        if shared is not None:
            lo, mul, constant = shared
        else:  # each tile its own range, in float32
            if symmetric:
                b = max(abs(lo), abs(hi))
                b = b if b > 0 else F32(1)
                lo, hi = -b, b
            span = F32(hi - lo)
            mul = F32(1) / span if span > 0 else F32(0)
            constant = span == 0 and lo != 0
        mids.append(F32(0.5) if constant else F32(0))
        norms.append((shown[i] - F32(lo)) * mul)
    if any(mids):  # every tile gets its mid (+0 for the others)
        norms = [n + m for n, m in zip(norms, mids, strict=True)]
    h, w = shown.shape[1:]
    pad = 0 if max(h, w) <= 3 else 1
    cols = min(max(1, round(math.sqrt(c * h * 1.6 / max(w, 1)))), c)
    rows = math.ceil(c / cols)
    image = np.full((rows * (h + pad) - pad, cols * (w + pad) - pad), np.nan, F32)
    for i, n in enumerate(norms):
        y, x = (i // cols) * (h + pad), (i % cols) * (w + pad)
        tile = np.clip(n, F32(0), F32(1))
        image[y : y + h, x : x + w] = np.where(np.isfinite(shown[i]), tile, F32(np.nan))
    return image, to_indices(image, (0.0, 1.0)), (float(lo_all), float(hi_all))


def _random_case(rng: np.random.Generator):
    c, h, w = (int(v) for v in rng.integers(1, 40, 3))
    if rng.random() < 0.4:
        h = w = int(rng.choice([2, 4, 8, 16, 28, 32]))
    data = (rng.standard_normal((c, h, w)) * rng.choice([1.0, 1e-3, 1e20])).astype(F32)
    kind = rng.integers(8)
    if kind == 0:
        data[rng.integers(c)] = np.nan  # an all-NaN channel
    elif kind == 1:
        data.flat[rng.integers(data.size, size=3)] = rng.choice([np.inf, -np.inf, np.nan], 3)
    elif kind == 2:
        data[rng.integers(c)] = rng.choice([0.0, -0.0, 2.5, -1.0])  # a constant channel
    elif kind == 3:
        data = np.maximum(data, F32(0))  # a ReLU's
    elif kind == 4:
        data[:] = F32(-0.0)
    elif kind == 5:
        data = np.abs(data)  # a gradient's magnitude
    page = int(rng.integers(1, 2 * c + 1))
    options = dict(
        normalize=str(rng.choice(["channel", "shared"])),
        first=int(rng.integers(0, c)),
        page=page,
        max_pixels=int(rng.choice([10**9, rng.integers(16, 4000)])),
        symmetric=bool(rng.random() < 0.5),
        value_range=(float(rng.normal()), float(rng.normal()) + 2) if rng.random() < 0.1 else None,
        order=ChannelOrder(tuple(int(i) for i in rng.permutation(c)))
        if rng.random() < 0.15
        else None,
    )
    return data, options


@pytest.mark.parametrize("seed", range(4))
def test_mosaics_are_the_reference_bit_for_bit(seed):
    rng = np.random.default_rng(seed)
    with np.errstate(all="ignore"):
        for _ in range(150):
            data, o = _random_case(rng)
            got = mosaic(
                data,
                normalize=o["normalize"],
                first_channel=o["first"],
                max_channels=o["page"],
                max_pixels=o["max_pixels"],
                symmetric=o["symmetric"],
                value_range=o["value_range"],
                order=o["order"],
            )
            image, indices, value_range = _reference(data, **o)
            assert got.indices.dtype == np.uint8 and got.indices.flags.c_contiguous
            assert got.indices.tobytes() == indices.tobytes(), o
            assert got.image.tobytes() == image.tobytes(), o  # NaN and the sign of 0 included
            assert got.value_range == value_range


def test_off_screen_layers_of_a_live_frame_leave_sign_and_gradient_for_their_read():
    torch.manual_seed(0)
    model = TinyCNN().eval()
    layers = ["conv1", "relu", "conv2", "fc"]
    spec = DisplaySpec(layers=tuple(layers), colormap=AUTO)
    first = prepare(capture(model, random_frames(1, 5), layers), spec, fast=True)
    cap = capture(model, random_frames(1, 6), layers)
    live = prepare(cap, spec, fast=True, mosaic_layers={"conv1"}, reuse=reusable_mosaics(first))
    fresh = prepare(cap, spec, fast=True)
    kept = live.layers["conv2"]
    assert kept.stale_mosaics
    assert "signed" not in vars(kept.view)  # off screen: no pass over the layer for its sign
    assert isinstance(kept.grad_view, LazyLayerView) and "data" not in vars(kept.grad_view)
    want = fresh.layers["conv2"]
    assert np.array_equal(kept.grad_view.data, np.abs(cap["conv2"].grad[0].numpy()))
    assert kept.grad_view.description == want.grad_view.description
    # Scrolled to, the panel grid makes them again under the colour map's range.
    for symmetric in (True, False):
        shown = with_page(current_mosaics(kept), 0, symmetric=symmetric)
        again = with_page(want, 0, symmetric=symmetric)
        for a, b in ((shown.mosaic, again.mosaic), (shown.grad_mosaic, again.grad_mosaic)):
            assert a.symmetric == b.symmetric
            assert a.indices.tobytes() == b.indices.tobytes()
    on_screen = live.layers["conv1"]
    assert "signed" in vars(on_screen.view) and not on_screen.stale_mosaics


def _grid_cases():
    rng = np.random.default_rng(7)
    base = rng.standard_normal((9, 12, 12))
    variants = {
        "plain": base,
        "nan_inf": np.where(rng.random(base.shape) < 0.02, np.inf, base)
        * np.where(rng.random(base.shape) < 0.02, np.nan, 1.0),
        "constant": np.concatenate(
            [base[:3], np.zeros((2, 12, 12)), np.full((2, 12, 12), 2.5), np.full((2, 12, 12), -1.0)]
        ),
        "relu": np.maximum(base, 0.0),
        # (1.5e38: a span that overflows float32 paints 0 in indices and NaN in image, as before)
        "huge": np.where(base > 0, 1.5e38, -1.5e38) * np.abs(base).clip(0, 1),
        "tiny_tiles": rng.standard_normal((40, 3, 3)),
        "wide": rng.standard_normal((5, 7, 31)),
    }
    orders = (None, ChannelOrder(tuple(range(8, -1, -1))))
    for (name, data), dtype in (
        (v, d) for v in variants.items() for d in (F32, np.float16, np.float64)
    ):
        for normalize, symmetric, order in (
            (n, s, o) for n in ("channel", "shared") for s in (False, True) for o in orders
        ):
            for page, first, extra in (
                (None, 0, {}),
                (4, 3, {}),
                (6, 2, {"max_tile": 5}),
                (None, 0, {"max_pixels": 300}),
                (3, 1, {"pad": 0}),
                (4, 0, {"value_range": (-0.5, 0.7)}),
            ):
                yield (
                    name,
                    data.astype(dtype),
                    dict(
                        normalize=normalize,
                        symmetric=symmetric,
                        order=order,
                        first_channel=first,
                        max_channels=page,
                        **extra,
                    ),
                )


def test_painted_indices_are_the_images_indices_bit_for_bit():
    """``indices`` are ``to_indices(image, levels)`` (their documented meaning) over a grid of
    dtypes, non-finite and constant channels, normalisations, orders, pages and tile sizes,
    whichever of the two is read first."""
    with np.errstate(all="ignore"):
        for name, data, options in _grid_cases():
            for source in (data, torch.from_numpy(data)):
                m = mosaic(source, **options)
                want = to_indices(m.image, m.levels)
                assert m.indices.tobytes() == want.tobytes(), (name, data.dtype, options)
                again = mosaic(source, **options)  # indices read after the image was made
                assert again.image.tobytes() == m.image.tobytes(), (name, options)
                assert again.indices.tobytes() == m.indices.tobytes(), (name, options)
                assert m.image.shape == m.indices.shape and not m.image.flags.writeable


def test_a_mosaic_keeps_its_indices_and_the_layers_values_not_a_float_copy_of_its_page():
    """A shown or pinned result holds its mosaics' indices; the float image is made from the
    layer's own (read-only) values when read, and a caller's array changed later is not seen."""
    rng = np.random.default_rng(3)
    data = rng.standard_normal((12, 9, 9)).astype(F32)
    data.setflags(write=False)  # as a layer view's data
    m = mosaic(data, max_channels=8)
    assert m.nbytes == m.indices.nbytes  # no (8, 9, 9) float32 copy held beside them
    image = m.image
    assert m.nbytes == image.nbytes + m.indices.nbytes
    writable = rng.standard_normal((12, 9, 9)).astype(F32)
    want = mosaic(writable.copy(), max_channels=8).image
    later = mosaic(writable, max_channels=8)
    writable[:] = 0.0
    assert later.image.tobytes() == want.tobytes()


def test_an_off_screen_layers_kept_mosaics_let_the_older_capture_go():
    import gc

    uses = getattr(torch._C, "_storage_Use_Count", None)
    if uses is None:
        pytest.skip("this torch cannot count a storage's users")
    torch.manual_seed(0)
    model = TinyCNN().eval()
    layers = ["conv1", "conv2", "fc"]
    spec = DisplaySpec(layers=tuple(layers))
    first = prepare(capture(model, random_frames(1, 5), layers), spec, fast=True)
    storages = [first.capture["conv2"].tensor.untyped_storage()]
    storages.append(first.capture["conv2"].grad.untyped_storage())
    cap = capture(model, random_frames(1, 6), layers)
    live = prepare(cap, spec, fast=True, mosaic_layers={"conv1"}, reuse=reusable_mosaics(first))
    assert live.layers["conv2"].stale_mosaics
    del first
    gc.collect()
    # The kept mosaics hold pictures of their own, not the older frame's values: only the
    # handles here still use its storages.
    assert [uses(s._cdata) for s in storages] == [1, 1]
    assert live.layers["conv2"].mosaic.image.shape == live.layers["conv2"].mosaic.indices.shape


def test_a_magnitude_mosaic_is_the_mosaic_of_the_magnitude_bit_for_bit():
    """``absolute=True`` (a gradient's |g|, taken of the page alone) paints and reads exactly
    as the mosaic of ``|fmap|`` over the same grid of cases, and keeps no copy of the page."""
    with np.errstate(all="ignore"):
        for name, data, options in _grid_cases():
            signed = np.ascontiguousarray(data)
            signed.setflags(write=False)
            got = mosaic(signed, absolute=True, **options)
            want = mosaic(np.abs(signed), **options)
            assert got.indices.tobytes() == want.indices.tobytes(), (name, options)
            assert got.value_range == want.value_range, (name, options)
            assert got.image.tobytes() == want.image.tobytes(), (name, options)
    data = np.random.default_rng(5).standard_normal((6, 8, 8)).astype(F32)
    data.setflags(write=False)
    m = mosaic(data, absolute=True)
    assert m.nbytes == m.indices.nbytes
