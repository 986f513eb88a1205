"""A mosaic's painted indices, written straight into the cropped uint8 image, are exactly
``to_indices`` of its float image: every tile, every padding pixel, every layout."""

from __future__ import annotations

import numpy as np
import pytest

from actviz.display.colormaps import PAD_INDEX, to_indices
from actviz.display.mosaic import mosaic


def test_indices_of_a_small_mosaic_pinned():
    # Two 2x2 tiles side by side (grid 1x2), one pixel of padding between them.
    x = np.array([[[0.0, 1.0], [2.0, 3.0]], [[5.0, 5.0], [5.0, 5.0]]], np.float32)
    m = mosaic(x)
    assert (m.rows, m.cols, m.pad) == (1, 2, 0)  # 2x2 tiles are laid out without padding
    # Channel 0 over 0..3: 0, 1/3, 2/3, 1 -> 0, 85, 170, 254 (255 is the padding's index);
    # channel 1 is constant and not 0: mid-scale, 0.5 * 255 = 127.5 -> 127.
    np.testing.assert_array_equal(m.indices, [[0, 85, 127, 127], [170, 254, 127, 127]])
    padded = mosaic(np.repeat(x, 3, axis=0).reshape(6, 2, 2), pad=1)
    assert padded.indices.shape == (padded.rows * 3 - 1, padded.cols * 3 - 1)
    assert (padded.indices[2, :] == PAD_INDEX).all()  # the padding row between tile rows
    assert padded.indices.flags.c_contiguous and not padded.indices.flags.writeable


@pytest.mark.parametrize(
    "shape",
    [(64, 32, 32), (64, 16, 16), (7, 5, 9), (3, 2, 2), (1, 1, 1), (130, 3, 3), (10, 1, 20)],
)
@pytest.mark.parametrize(
    "options",
    [
        {},
        {"symmetric": True},
        {"normalize": "shared"},
        {"normalize": "shared", "symmetric": True},
        {"max_channels": 16, "first_channel": 5},
        {"max_pixels": 5000},
        {"pad": 2},
    ],
)
def test_indices_are_to_indices_of_the_image(shape, options):
    rng = np.random.default_rng(sum(shape))
    x = rng.standard_normal(shape).astype(np.float32) * 37.0
    x[0] = np.round(x[0])  # exact ties at the ends of a tile's range
    if shape[0] > 2:
        x[2] = 4.0  # a constant tile (painted mid-scale)
    m = mosaic(x, **options)
    expected = to_indices(m.image, (0.0, 1.0))
    np.testing.assert_array_equal(m.indices, expected)
    assert m.indices.dtype == np.uint8 and m.indices.shape == m.image.shape
    # Every painted pixel is a colour (< 255), every padding pixel the transparent index.
    assert ((m.indices == PAD_INDEX) == np.isnan(m.image)).all()
