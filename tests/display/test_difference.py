"""prepare_difference (a - b through the one mosaic path) and prediction_change."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from torch import nn

import actviz
from actviz.display.colormaps import DIVERGING_CMAP
from actviz.display.difference import DIFFERENCE_CMAP, prediction_change, prepare_difference
from actviz.display.mosaic import mosaic
from actviz.display.prepared import DisplaySpec
from actviz.display.repage import with_page
from actviz.edits import ablate
from tests.helpers import make_capture


@pytest.fixture
def caps():
    g = torch.Generator().manual_seed(0)
    a = torch.randn(2, 5, 4, 4, generator=g)
    b = torch.randn(2, 5, 4, 4, generator=g)
    fa, fb = torch.randn(2, 7, generator=g), torch.randn(2, 7, generator=g)
    cap_a = make_capture({"conv": [a], "fc": [fa], "odd": [a]})
    cap_b = make_capture({"conv": [b], "fc": [fb], "odd": [b[:, :3]]})
    return cap_a, cap_b


def test_difference_mosaic_is_the_symmetric_mosaic_of_a_minus_b(caps):
    cap_a, cap_b = caps
    spec = DisplaySpec(sample=1, page_channels={"conv": 4})
    out = prepare_difference(cap_a, cap_b, spec, layers=["conv", "fc", "odd"])
    assert list(out) == ["conv", "fc"]  # "odd": shapes differ
    conv = out["conv"]
    diff = (cap_a["conv"].tensor - cap_b["conv"].tensor).numpy()
    np.testing.assert_array_equal(conv.view.data, diff[1])
    want = mosaic(diff[1], normalize="channel", max_channels=4, symmetric=True)
    assert conv.mosaic.symmetric and conv.mosaic.channels == 4 and conv.mosaic.total_channels == 5
    np.testing.assert_array_equal(conv.mosaic.indices, want.indices)
    # per channel, symmetric: the tile's largest |x| sits at 0 or 1, zero at mid-scale
    assert conv.stats["max_abs"] == pytest.approx(float(np.abs(diff).max()))
    assert conv.stats["colormap"] == DIFFERENCE_CMAP == DIVERGING_CMAP
    assert conv.stats["mean"] == pytest.approx(float(diff.mean()), abs=1e-6)
    assert conv.grad_view is None and conv.grad_mosaic is None
    # a page turn through the usual path keeps the symmetric normalisation
    page2 = with_page(conv, 4)
    assert page2.mosaic.first_channel == 4 and page2.mosaic.symmetric
    np.testing.assert_array_equal(
        page2.mosaic.indices,
        mosaic(diff[1], first_channel=4, max_channels=4, symmetric=True).indices,
    )
    fc = out["fc"]
    assert fc.view.kind == "bars" and fc.mosaic is None
    np.testing.assert_allclose(fc.view.data, (cap_a["fc"].tensor - cap_b["fc"].tensor)[1].numpy())
    # default layers: every layer both runs recorded (spec.layers empty), shared normalisation
    shared = prepare_difference(cap_a, cap_b, DisplaySpec(normalize="shared"))
    assert list(shared) == ["conv", "fc"]
    assert shared["conv"].mosaic.scale_range == pytest.approx(
        (-np.abs(diff[0]).max(), np.abs(diff[0]).max())
    )


def test_edited_minus_unedited_is_minus_the_ablated_channel():
    torch.manual_seed(0)
    model = nn.Sequential(nn.Conv2d(3, 4, 3), nn.ReLU(), nn.Conv2d(4, 2, 3)).eval()
    x = torch.randn(1, 3, 8, 8)
    plain = actviz.capture(model, x)
    edited = actviz.capture(model, x, edits={"0": ablate(2)})
    out = prepare_difference(edited, plain, DisplaySpec(layers=("0", "2")))
    d0 = out["0"].view.data
    np.testing.assert_array_equal(d0[2], -plain["0"].tensor[0, 2].numpy())
    assert not d0[[0, 1, 3]].any()
    assert out["2"].stats["max_abs"] > 0


def test_prediction_change_against_numpy():
    logits_b = torch.tensor([[2.0, 1.0, 0.5, -1.0, 0.0, 3.0]])
    logits_a = torch.tensor([[0.0, 1.0, 4.0, -1.0, 0.0, 3.0]])
    names = ["a", "b", "c", "d", "e", "f"]
    ch = prediction_change(logits_a, logits_b, k=2, categories=names, target=3)
    pa = np.exp(logits_a[0].double().numpy())
    pa /= pa.sum()
    pb = np.exp(logits_b[0].double().numpy())
    pb /= pb.sum()
    # top-2 of A: c, f; of B: f, a -> union, by the larger probability
    assert [r.index for r in ch.rows] == [2, 5, 0]
    for r in ch.rows:
        assert r.name == names[r.index]
        assert r.p_a == pytest.approx(pa[r.index]) and r.p_b == pytest.approx(pb[r.index])
        assert r.dp == pytest.approx(pa[r.index] - pb[r.index])
        assert r.dlogit == pytest.approx(float(logits_a[0, r.index] - logits_b[0, r.index]))
    assert ch.target.index == 3 and ch.target.dlogit == 0.0
    assert (ch.top_a, ch.top_b, ch.changed) == (2, 5, True)
    index, name, *_ = ch.rows[0]
    assert (index, name) == (2, "c")


def test_prediction_change_without_class_scores():
    empty = prediction_change(torch.zeros(1, 3, 4, 4), torch.zeros(1, 3, 4, 4))
    assert empty.rows == () and empty.message == "no class scores to compare"
    sizes = prediction_change(torch.zeros(1, 3), torch.zeros(1, 4))
    assert sizes.rows == () and "different sizes" in sizes.message
    nan = prediction_change(torch.tensor([float("nan"), 1.0]), torch.tensor([0.0, 1.0]), k=1)
    assert nan.top_a == 1 and nan.rows[0].p_a == pytest.approx(1.0)
    assert nan.rows[0].name == "class 1" and not nan.changed
