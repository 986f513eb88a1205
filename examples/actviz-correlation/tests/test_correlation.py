"""The correlation view: its numbers, its picture, and its widget's pixels and clicks."""

from __future__ import annotations

import numpy as np
import pytest
from actviz_correlation import accepts, correlation, picture, plugin, prepare

from actviz.plugins import LayerData, ViewContext, ViewSettings, paint


def maps(c: int = 6, seed: int = 0) -> np.ndarray:
    rng = np.random.default_rng(seed)
    base = rng.standard_normal((c, 5, 7)).astype(np.float32)
    base[1] = 2 * base[0] + 0.1 * base[1]  # strongly correlated with channel 0
    base[2] = -base[0]  # exactly anti-correlated
    return base


def layer(data: np.ndarray) -> LayerData:
    return LayerData("conv", "Conv2d", (1, *data.shape), "maps", data)


def test_the_matrix_is_numpys_corrcoef_of_the_channels():
    data = maps()
    got = prepare(layer(data), ViewSettings(colormap="viridis"))
    np.testing.assert_allclose(got.matrix, np.corrcoef(data.reshape(6, -1)), atol=1e-12)
    assert got.matrix[0, 2] == pytest.approx(-1.0) and got.matrix[0, 1] > 0.99
    assert got.colormap == "viridis"


def test_it_follows_the_channel_page_and_the_auto_colour_map():
    data = maps(10)
    got = prepare(layer(data), ViewSettings(first_channel=4, page_size=4))
    assert got.first == 4 and got.matrix.shape == (4, 4)
    np.testing.assert_allclose(got.matrix, np.corrcoef(data[4:8].reshape(4, -1)))
    assert got.colormap == ViewSettings().resolved(signed=True)  # diverging under "auto"


def test_only_layers_with_several_maps_are_offered():
    assert accepts(layer(maps()))
    assert not accepts(LayerData("fc", "Linear", (1, 10), "bars", np.zeros(10, np.float32)))
    assert not accepts(layer(maps()[:1]))


def test_a_constant_channel_has_no_correlation():
    data = maps()
    data[3] = 1.0
    assert np.isnan(correlation(data)[3]).all()


def test_the_picture_is_the_matrix_painted_cell_by_cell():
    data = maps()
    got = prepare(layer(data), ViewSettings(colormap="viridis"))
    pixels = picture(got)
    scale = pixels.shape[0] // 6
    assert pixels.shape == (6 * scale, 6 * scale, 3) and pixels.shape[0] >= 256
    expected = paint(np.corrcoef(data.reshape(6, -1)), -1, 1, "viridis")
    np.testing.assert_array_equal(pixels[scale // 2 :: scale, scale // 2 :: scale], expected)


def test_the_plugin_is_one_layer_view():
    (view,) = plugin.contributions
    assert (view.name, view.title) == ("correlation", "Channel correlation")


def test_the_widget_paints_the_matrix_and_a_click_opens_both_channels(qtbot):
    from PySide6.QtCore import Qt

    opened: list[int] = []
    context = ViewContext("conv", lambda c: opened.append(c) or True)
    (view,) = plugin.contributions
    widget = view.widget(context)
    qtbot.addWidget(widget)
    widget.resize(300, 300)
    data = maps()
    widget.set_data(prepare(layer(data), ViewSettings(colormap="viridis")))
    widget.show()
    qtbot.waitExposed(widget)
    image = widget.grab().toImage()
    expected = paint(np.corrcoef(data.reshape(6, -1)), -1, 1, "viridis")
    for i in range(6):
        for j in range(6):
            p = widget.cell_center(i, j)
            c = image.pixelColor(p)
            assert (c.red(), c.green(), c.blue()) == tuple(expected[i, j])
    p = widget.cell_center(1, 4)
    qtbot.mouseClick(widget, Qt.MouseButton.LeftButton, pos=p)
    qtbot.mouseClick(widget, Qt.MouseButton.LeftButton, pos=p)
    assert opened == [1, 4]


def test_the_caption_says_what_is_shown_and_keys_the_colours(qtbot):
    (view,) = plugin.contributions
    widget = view.widget(ViewContext("conv", lambda c: True))
    qtbot.addWidget(widget)
    widget.resize(300, 300)
    widget.set_data(prepare(layer(maps()), ViewSettings(colormap="viridis", first_channel=2)))
    widget.show()
    qtbot.waitExposed(widget)
    assert widget.caption() == "Pearson r, channels 2-5 · click a cell to open it"
    rect = widget.matrix_rect()
    assert rect.bottom() + widget.caption_height() <= widget.height()
    # The key's ramp runs from the colour of r = -1 to that of r = +1, under the matrix.
    image = widget.grab().toImage()
    line = widget.fontMetrics().height()
    y = rect.bottom() + 6 + line + line // 2
    ends = paint(np.array([[-1.0, 1.0]]), -1, 1, "viridis")[0]
    row = [image.pixelColor(x, y) for x in range(widget.width())]
    colours = {(c.red(), c.green(), c.blue()) for c in row}
    assert tuple(ends[0]) in colours and tuple(ends[1]) in colours
