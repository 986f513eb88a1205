"""``actviz atlas``: atlas.png coloured by class with a legend, atlas.npz and atlas.json that
agree with the engine; a run over the memory budget is refused with one line."""

from __future__ import annotations

import json

import numpy as np
import pytest
from PIL import Image

from actviz.cli import main
from actviz.data import scan
from actviz.data.atlas_image import SELECTED_RGB, atlas_image, class_colours
from actviz.data.atlas_map import project
from actviz.io.models.loading import open_model


def test_atlas_command_writes_the_picture_the_arrays_and_the_summary(
    image_folder, tmp_path, capsys
):
    out = tmp_path / "atlas"
    rc = main(
        [
            "atlas",
            "-m",
            "demo",
            "-d",
            str(image_folder),
            "-l",
            "features.block2",
            "-o",
            str(out),
            "--workers",
            "0",
            "--size",
            "640x360",
        ]
    )
    assert rc == 0
    printed = capsys.readouterr()
    assert "mapped 60 images of 'features.block2'" in printed.out
    assert "embeddings: 60 images x" in printed.err  # the memory, before the scan
    summary = json.loads((out / "atlas.json").read_text())
    assert summary["images"] == 60 and summary["method"] == "pca" and summary["dims"] == 2
    assert summary["class_names"] == ["a", "b"] and summary["class_counts"] == {"a": 30, "b": 30}
    arrays = np.load(out / "atlas.npz")
    # The same vectors and coordinates as the engine gives
    loaded = open_model("demo")
    result = scan(loaded, image_folder, ["features.block2"], num_workers=0, embeddings=True)
    assert result.from_cache  # the command's scan is in the cache
    emb = result.embeddings("features.block2")
    np.testing.assert_array_equal(arrays["vectors"], emb.vectors)
    np.testing.assert_allclose(arrays["coords"], project(emb.vectors).coords, atol=1e-9)
    assert list(arrays["sources"]) == [str(s) for s in emb.sources]
    assert list(arrays["labels"]) == list(emb.labels) and list(arrays["class_names"]) == ["a", "b"]
    img = np.asarray(Image.open(out / "atlas.png").convert("RGB"))
    assert img.shape == (360, 640, 3)
    colours = class_colours(2)
    for c in colours:  # both classes' dots (and their legend swatches) are drawn
        assert (img == c).all(axis=-1).sum() > 60


def test_atlas_command_refuses_a_run_over_the_memory_budget(image_folder, tmp_path, capsys):
    rc = main(
        [
            "atlas",
            "-m",
            "demo",
            "-d",
            str(image_folder),
            "-l",
            "features.block2",
            "-o",
            str(tmp_path / "out"),
            "--memory-budget",
            "100",
        ]
    )
    err = capsys.readouterr().err
    assert rc != 0 and "over the 100 B memory budget" in err
    assert not (tmp_path / "out").exists()


def test_atlas_image_puts_points_where_their_coordinates_say():
    coords = np.array([[0.0, 0.0], [1.0, 1.0], [1.0, 0.0]])
    img = np.asarray(atlas_image(coords, np.array([0, 1, -1]), ["x", "y"], size=(400, 300), dot=3))
    colours = class_colours(2)

    def where(colour):
        ys, xs = np.nonzero((img == colour).all(axis=-1))
        return xs, ys

    xs0, ys0 = where(colours[0])
    xs1, ys1 = where(colours[1])
    # point 0 at the bottom left of the plot, point 1 at the top right (y grows upwards), the
    # legend's swatches right of both
    assert xs0.min() < 30 and ys0.max() > 270
    assert ys1.min() < 30 and xs1.min() > 250
    assert (img == (110, 110, 110)).all(axis=-1).sum() >= 9  # the unlabelled point, grey
    assert len({tuple(c) for c in class_colours(40)}) == 40
    with pytest.raises(ValueError):
        atlas_image(np.zeros(3))


def test_splat_dots_draws_squares_and_leaves_the_rest_transparent():
    from actviz.data.atlas_image import splat_dots

    rgba = np.array([[255, 0, 0], [0, 0, 255]], dtype=np.uint8)
    img = splat_dots(np.array([2.2, 9.0]), np.array([3.0, 0.0]), rgba, 10, 6, dot=3)
    assert img.shape == (6, 10, 4)
    red = (img == (255, 0, 0, 255)).all(-1)
    assert np.array_equal(np.argwhere(red), [[y, x] for y in (2, 3, 4) for x in (1, 2, 3)])
    blue = (img == (0, 0, 255, 255)).all(-1)
    assert np.array_equal(np.argwhere(blue), [[0, 8], [0, 9], [1, 8], [1, 9]])  # clipped
    assert (img[..., 3] > 0).sum() == 13
    # drawn into a reused image, later points on top
    again = splat_dots(np.array([2.0, 2.0]), np.array([3.0, 3.0]), rgba, 10, 6, 1, out=img)
    assert again is img and tuple(img[3, 2]) == (0, 0, 255, 255)


def test_atlas_image_draws_a_windows_colours_selection_and_colour_bar():
    coords = np.array([[0.0, 0.0], [1.0, 1.0], [1.0, 0.0], [0.0, 1.0]])
    rgb = np.array([[10, 200, 30], [200, 10, 30], [10, 200, 30], [10, 200, 30]], np.uint8)
    img = np.asarray(
        atlas_image(
            coords,
            rgb=rgb,
            legend=[("right", (10, 200, 30), 3), ("wrong", (200, 10, 30), 1)],
            selected=[1],
            size=(400, 300),
            dot=3,
        )
    )
    red = np.argwhere((img == (200, 10, 30)).all(axis=-1))
    # The selected dot: its 3 x 3 square (plus the legend's swatch) inside a 7 x 7 black
    # frame (orange was the second class colour's twin: a selection of it did not show).
    dot = red[red[:, 1] < 250]
    assert len(dot) == 9
    (y0, x0), (y1, x1) = dot.min(axis=0) - 3, dot.max(axis=0) + 3
    around = img[y0 : y1 + 1, x0 : x1 + 1]
    frame = np.argwhere((around == SELECTED_RGB).all(axis=-1)) + (y0, x0)
    assert len(frame) == 49 - 9
    assert frame.min(axis=0).tolist() == (dot.min(axis=0) - 2).tolist()
    far = np.sqrt(((class_colours(40).astype(float) - SELECTED_RGB) ** 2).sum(axis=1))
    assert far.min() > 100  # no class colour near the frame's
    assert len(red[red[:, 1] >= 250]) > 9  # the legend's swatch for "wrong"
    # A colour bar instead of a legend: the palette from high (top) to low.
    palette = np.stack([np.arange(64) * 4, np.zeros(64), 255 - np.arange(64) * 4], 1)
    bar = np.asarray(
        atlas_image(coords, colour_bar=(0.5, 2.5, palette.astype(np.uint8)), size=(400, 300))
    )

    def rows_of(colour):
        return np.flatnonzero((bar[:, 300:] == colour).all(axis=-1).any(axis=1))

    high, low = rows_of(palette[-1]), rows_of(palette[0])
    assert len(high) and len(low) and high.max() < low.min()
    assert len(rows_of(palette[32])) and high.max() < rows_of(palette[32]).min() < low.min()
