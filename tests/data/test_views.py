"""Receptive fields (analytic and from the gradient) and the top-k crops."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch
from PIL import Image
from torch import nn

from actviz.data import receptive_box, scan, top_views
from actviz.data.receptive import _square, receptive_field
from actviz.io.input_files import open_input
from tests.data.conftest import tiny_net


def conv_chain() -> nn.Sequential:
    torch.manual_seed(0)
    return nn.Sequential(
        nn.Conv2d(1, 1, 3, padding=1),
        nn.ReLU(inplace=True),
        nn.MaxPool2d(2),
        nn.Conv2d(1, 1, 3, stride=2, dilation=2),
    )


class Residual(nn.Module):
    """Not a chain: ``c2(c1(x) + x)``; a position of c2 sees 2 + 1 pixels each way."""

    def __init__(self) -> None:
        super().__init__()
        torch.manual_seed(0)
        self.c1 = nn.Conv2d(1, 1, 3, padding=1)
        self.c2 = nn.Conv2d(1, 1, 5, padding=2)

    def forward(self, x):
        return self.c2(self.c1(x) + x)


def test_receptive_box_of_a_conv_pool_chain_is_exact():
    net = conv_chain()
    shape = (1, 32, 32)
    # conv 3x3 pad 1: row 5 sees rows 4..6
    assert receptive_box(net, "0", shape, (5, 7)) == (4, 7, 6, 9)
    # pool 2: row 3 -> rows 6..7 -> conv: 5..8
    assert receptive_box(net, "2", shape, (3, 4)) == (5, 9, 7, 11)
    # conv 3x3 stride 2 dilation 2: row 2 -> pool rows 4..8 -> 8..17 -> 7..18
    assert receptive_box(net, "3", shape, (2, 1)) == (7, 19, 3, 15)
    assert receptive_box(net, "3", shape, (0, 0)) == (0, 11, 0, 11)  # clipped at the border
    assert receptive_field(net, "3", shape).method == "analytic"
    assert receptive_box(net, "3", (32, 32), None) == (0, 32, 0, 32)


def test_gradient_support_gives_the_same_box_without_a_chain():
    net = Residual()
    assert receptive_field(net, "c2", (1, 24, 24)).method == "gradient"
    assert receptive_box(net, "c2", (1, 24, 24), (10, 10)) == (7, 14, 7, 14)
    assert receptive_box(net, "c2", (1, 24, 24), (0, 23)) == (0, 4, 20, 24)
    linear_chain = nn.Sequential(nn.Conv2d(1, 2, 3, padding=1), nn.Conv2d(2, 1, 5, stride=2))
    for loc in [(3, 4), (0, 0), (5, 5)]:
        assert receptive_box(linear_chain, "1", (1, 20, 20), loc, method="gradient") == (
            receptive_box(linear_chain, "1", (1, 20, 20), loc, method="analytic")
        )
    # The crops' fast path (one support measured, shifted) agrees for a stride-1 model, and
    # one measured on a larger input is not cut at the border.
    rf = receptive_field(net, "c2", (1, 24, 24))
    assert rf.box((10, 10)) == (7, 14, 7, 14) and rf.box((0, 23)) == (0, 4, 20, 24)
    assert receptive_field(net, "c2", (1, 24, 24)) is rf  # remembered per model
    with pytest.raises(ValueError, match="not reached through a plain chain"):
        receptive_box(net, "c2", (1, 24, 24), (1, 1), method="analytic")


def test_top_views_stop_when_asked(image_folder, no_hooks_left):
    """A superseded request stops at its next model pass, hooks removed (it ran seconds after
    the next channel was asked for, a receptive field's backward included)."""
    from actviz.core.capture import CaptureCancelled

    net = tiny_net()
    result = scan(net, image_folder, ["1", "4"], k=4, num_workers=0, cache=False)
    asked: list[int] = []
    views = top_views(net, result, "1", 2, size=24, should_stop=lambda: bool(asked.append(1)))
    assert [v.entry for v in views] == list(result.top("1", 2))
    polls = len(asked)  # one before each module call of the capture, one before the boxes
    for last in (0, polls - 3, polls - 2):  # in the capture, at its last call, before the boxes
        asked.clear()
        with pytest.raises(CaptureCancelled):
            top_views(
                net,
                result,
                "1",
                2,
                size=24,
                should_stop=lambda last=last: len(asked) > last or asked.append(1),
            )
        no_hooks_left(net)


def test_a_gradient_box_runs_the_model_to_the_layer_only_and_stops_when_asked(no_hooks_left):
    """The template's passes (a 3x input, a batch of four) end at the layer and at the next
    module once ``should_stop()`` is true; a cancelled template is measured again later."""
    from actviz.core.capture import CaptureCancelled

    net = nn.Sequential(Residual(), nn.Conv2d(1, 1, 3), nn.ReLU())
    after: list[int] = []
    counting = net[1].register_forward_hook(lambda *_: after.append(1))
    rf = receptive_field(net, "0.c2", (1, 24, 24))
    assert rf.method == "gradient" and after == [1]  # the field's own no-grad pass runs it all
    after.clear()
    asked: list[int] = []
    assert rf.box((10, 10), lambda: bool(asked.append(1))) == (7, 14, 7, 14)
    assert after == []  # nothing after the layer ran, in either pass of the template
    polls = len(asked)  # after each module before the layer (c1), in both passes; the backward
    assert polls == 2 * 1 + 1
    for last in range(-1, polls - 1):  # stopped at each poll in turn
        other = nn.Sequential(Residual(), nn.ReLU())  # the field holds its model weakly
        fresh = receptive_field(other, "0.c2", (1, 24, 24))
        asked.clear()
        with pytest.raises(CaptureCancelled):
            fresh.box((10, 10), lambda last=last: len(asked) > last or asked.append(1))
        assert fresh._cache.get("template", False) is False  # not remembered as "no template"
        no_hooks_left(other)
        assert fresh.box((0, 23)) == (0, 4, 20, 24)  # measured again, uncancelled
    counting.remove()
    no_hooks_left(net)


def test_top_views_crop_each_top_image_around_its_maximum(image_folder, no_hooks_left):
    net = tiny_net()
    result = scan(net, image_folder, ["1", "4"], k=4, num_workers=0, cache=False)
    views = top_views(net, result, "1", 2, size=24)
    assert [v.entry for v in views] == list(result.top("1", 2))
    no_hooks_left(net)
    for view in views:
        assert view.image.shape == (24, 24, 3) and view.image.dtype == np.uint8
        assert view.heat.shape == (24, 24) and view.heat.dtype == np.float32
        box = _square(receptive_box(net, "1", (3, 16, 16), view.entry.location), (16, 16))
        assert view.box == box and box[1] - box[0] == box[3] - box[2] == 3
        shown = open_input(view.entry.source, model=net).image
        y0, y1, x0, x1 = box
        expected = Image.fromarray(np.ascontiguousarray(shown[y0:y1, x0:x1])).resize(
            (24, 24), Image.BILINEAR
        )
        np.testing.assert_array_equal(view.image, np.asarray(expected))
        # The maximum sits in the crop: the bilinear heat peaks at (nearly) its value.
        assert view.heat.max() <= view.entry.value + 1e-5
        assert view.heat.max() > 0.5 * view.entry.value
    later = top_views(net, result, "4", 0, size=16)
    # Layer 4 (3x3 conv on the 2x2-pooled 3x3 conv): 8 input pixels each way.
    assert all(v.box[1] - v.box[0] == v.box[3] - v.box[2] == 8 for v in later)


def test_top_views_of_samples_need_the_data():
    net = tiny_net()
    data = torch.rand(10, 3, 12, 12, generator=torch.Generator().manual_seed(0))
    result = scan(net, data, ["4"], k=2, cache=False)
    with pytest.raises(ValueError, match="data="):
        top_views(net, result, "4", 1)
    views = top_views(net, result, "4", 1, size=12, data=data)
    assert [v.entry.source for v in views] == [e.index for e in result.top("4", 1)]


def test_contact_sheet_blanks_an_image_deleted_since_the_scan(image_folder):
    from actviz.data.scan_file import contact_sheet

    net = tiny_net()
    result = scan(net, image_folder, ["4"], k=1, num_workers=0, cache=False)
    best = result.top("4", 0)[0]
    full = np.asarray(contact_sheet(net, result, "4", tile=8))
    Path(best.source).unlink()
    sheet = np.asarray(contact_sheet(net, result, "4", tile=8))
    assert sheet.shape == full.shape
    y, x = 30 + 6 + 14, 8 + 6  # channel 0's tile
    assert (sheet[y : y + 8, x : x + 8] == 235).all()
    assert not (full[y : y + 8, x : x + 8] == 235).all()
