"""What a comparison holds is counted without making its mosaics' float images (reading
``Mosaic.image`` to count it made them all on the GUI thread: 72 ms for ResNet-18's 52 leaves,
and the images were then held too)."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np

from actviz.display.mosaic import mosaic
from actviz.workspace.run_request import CompareOutcome


def test_held_bytes_count_what_the_mosaics_hold_without_making_their_images():
    rng = np.random.default_rng(0)
    fmap = rng.standard_normal((8, 5, 7)).astype(np.float32)
    grad = rng.standard_normal((8, 5, 7)).astype(np.float32)
    act, grad_m = mosaic(fmap, symmetric=True), mosaic(grad)
    view = SimpleNamespace(data=fmap)
    layer = SimpleNamespace(view=view, grad_view=None, mosaic=act, grad_mosaic=grad_m)
    outcome = CompareOutcome(comparison=None, differences={"conv": layer}, predictions=None)
    # The normalised tiles (8 x 5 x 7 float32) and the painted indices of each mosaic.
    tiles = 8 * 5 * 7 * 4
    expected = fmap.nbytes + 2 * tiles + act.indices.nbytes + grad_m.indices.nbytes
    assert outcome.held_bytes == expected
    assert act._image is None and grad_m._image is None  # not made by counting
    # Once made (an export reads it), the image is what the mosaic holds instead.
    image = act.image
    assert act.nbytes == image.nbytes + act.indices.nbytes
    assert outcome.held_bytes == expected - tiles + image.nbytes


def test_held_bytes_leave_a_magnitude_not_read_unmade():
    """``|A - B|`` of a difference is made when read (a hover, a page): counting what the
    comparison holds made it for every layer on the GUI thread (a stress block of 115 ms after
    Compare), and held the copies."""
    from actviz.display.layer_views import layer_view, magnitude_view

    diff = np.random.default_rng(1).standard_normal((1, 6, 4, 4)).astype(np.float32)
    view = layer_view(diff)
    grad_view = magnitude_view(view)
    layer = SimpleNamespace(view=view, grad_view=grad_view, mosaic=None, grad_mosaic=None)
    outcome = CompareOutcome(comparison=None, differences={"conv": layer}, predictions=None)
    assert outcome.held_bytes == view.data.nbytes
    assert "data" not in vars(grad_view)  # not made by counting
    np.testing.assert_array_equal(grad_view.data, np.abs(diff[0]))  # read: made, then counted
    assert outcome.held_bytes == 2 * view.data.nbytes
