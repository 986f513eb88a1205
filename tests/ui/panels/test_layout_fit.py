"""Layouts that follow the room they get: canvases whose scene keeps the canvas's size, layer
panels and the channel view that stack their sides when narrow, Overview rows that go down
on a narrow page, a Model dock that never scrolls sideways. The whole window over sizes,
docks and tabs: test_layout_matrix.py."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from PySide6.QtCore import Qt

from actviz.testing.layout_check import layout_problems
from tests.ui.qt_helpers import process_events


def _show_small(qtbot, window) -> None:
    """Show ``window`` at 300x200 and let its layout settle."""
    window.resize(300, 200)
    window.show()
    qtbot.waitExposed(window)
    process_events()


def test_canvas_scene_follows_the_canvas_down_after_a_tall_image(qtbot):
    from actviz.ui.panels.canvas import ImageCanvas

    canvas = ImageCanvas(passive=True)
    qtbot.addWidget(canvas)
    canvas.set_image(np.random.default_rng(0).random((16, 64), dtype=np.float32), (0.0, 1.0))
    canvas.resize(300, 600)  # the wide image letterboxed in a tall canvas: wide bar margins
    canvas.show()
    qtbot.waitExposed(canvas)
    process_events()
    assert sum(canvas.colorbar.margins) > 300
    canvas.resize(300, 90)
    process_events()
    scene = canvas.ci.geometry().size().toSize()
    assert (scene.width(), scene.height()) == (300, 90)
    assert canvas.image_rect_on_screen().bottom() <= 90


def test_a_mosaic_canvas_asks_its_height_for_the_width_it_gets(qtbot):
    from actviz.ui.panels.canvas import ImageCanvas

    canvas = ImageCanvas(passive=True, fit_width=True)
    qtbot.addWidget(canvas)
    assert not canvas.hasHeightForWidth()  # no image yet: nothing to fit
    canvas.set_image(np.zeros((30, 60), np.float32), (0.0, 1.0))
    assert canvas.hasHeightForWidth() and canvas.sizePolicy().hasHeightForWidth()
    small, large = canvas.heightForWidth(200), canvas.heightForWidth(400)
    # Half as high as the image area is wide (the colour bar takes its share of the width).
    assert large - small == pytest.approx(100, abs=1)
    assert small == pytest.approx(canvas.image_area_width(200) / 2 + 14, abs=1)


@pytest.mark.parametrize("width, narrow", [(250, True), (620, False)])
def test_layer_panel_stacks_its_sides_when_narrow(qtbot, width, narrow):
    from actviz.display.layer_views import layer_view
    from actviz.display.mosaic import mosaic
    from actviz.ui.panels.feature_map import NARROW_MIN_PX, LayerPanel

    x = torch.randn(1, 8, 12, 12, generator=torch.Generator().manual_seed(0))
    panel = LayerPanel("features.block1.conv", module_type="Conv2d")
    qtbot.addWidget(panel)
    view = layer_view(x)
    panel.set_activation(view, mosaic(view.data))
    panel.set_gradient(layer_view(x.abs()), mosaic(layer_view(x.abs()).data))
    panel.set_edit_badge("ablate ch 0, 1, 2, 3, 4, 5 and a long description of it")
    panel.resize(width, 400)
    panel.show()
    qtbot.waitExposed(panel)
    process_events()
    assert panel.is_narrow() == narrow
    assert panel.minimumSizeHint().width() == NARROW_MIN_PX  # whatever the arrangement
    act = panel.activation_slot.image_canvas
    grad = panel.gradient_slot.image_canvas
    if narrow:
        assert (
            grad.mapTo(panel, grad.rect().topLeft()).y()
            > act.mapTo(panel, act.rect().bottomLeft()).y()
        )
        assert panel.heightForWidth(width) >= act.heightForWidth(act.width()) * 2
    else:
        assert (
            grad.mapTo(panel, grad.rect().topLeft()).x()
            > act.mapTo(panel, act.rect().topRight()).x()
        )
    # The long badge is shortened to the room it has, the whole edit on hover.
    assert (
        panel.edit_badge.text().endswith("…") and "long description" in panel.edit_badge.toolTip()
    )
    assert panel.edit_badge.width() <= panel.width()


def test_channel_view_stacks_its_columns_when_narrow(qtbot):
    from actviz.ui.panels.channel_view import NARROW_VIEW_PX, ChannelView

    view = ChannelView()
    qtbot.addWidget(view)
    data = np.random.default_rng(0).random((16, 16), dtype=np.float32)
    view.set_channel("conv1", 0, data, data, channels=4)
    view.resize(NARROW_VIEW_PX + 200, 500)
    view.show()
    qtbot.waitExposed(view)
    process_events()
    assert not view.is_narrow()
    view.resize(340, 640)
    process_events()
    assert view.is_narrow()
    act, grad = view.activation_canvas, view.gradient_canvas
    assert (
        grad.mapTo(view, grad.rect().topLeft()).y() > act.mapTo(view, act.rect().bottomLeft()).y()
    )
    assert not [p for p in layout_problems(view) if "ChannelView" in p.widget]


@pytest.mark.parametrize("tall", [True, False])
def test_channel_view_fills_a_tall_view(qtbot, tall):
    from actviz.ui.panels.channel_view import ChannelView

    view = ChannelView()
    qtbot.addWidget(view)
    rng = np.random.default_rng(0)
    data = rng.random((32, 32), dtype=np.float32)
    view.set_channel("features.block2", 3, data, rng.random((32, 32), dtype=np.float32))
    # The channel view of a 1280x1080 window (tall), and of a 1920x1080 one (wide).
    view.resize(*((560, 900) if tall else (1000, 560)))
    view.show()
    qtbot.waitExposed(view)
    process_events()
    assert not view.is_narrow() and view.is_stacked() == tall
    act, grad = view.activation_canvas, view.gradient_canvas
    images = [c.image_rect_on_screen() for c in (act, grad)]
    row = view._columns.geometry()
    if tall:
        # One above the other, the two images take most of the height (side by side, each
        # was half the width high: blank bands above and below).
        assert sum(r.height() for r in images) > 0.7 * row.height()
        assert (
            grad.mapTo(view, grad.rect().topLeft()).y()
            > act.mapTo(view, act.rect().bottomLeft()).y()
        )
    else:
        assert images[0].height() > 0.7 * row.height()
    assert all(abs(r.width() - r.height()) <= 2 for r in images)  # square pixels kept
    assert not [p for p in layout_problems(view) if p.kind == "blank"]
    if tall:
        # A section under the images takes most of the height: what is left is wide, and
        # the images go side by side again (no resize of the view tells it).
        from PySide6.QtWidgets import QWidget

        section = QWidget()
        section.setFixedHeight(420)
        view.add_section(section)
        process_events()
        assert not view.is_stacked()
        assert not [p for p in layout_problems(view) if p.kind == "blank"]


def test_the_check_finds_blank_bands_in_a_view_to_be_filled(qtbot):
    from PySide6.QtWidgets import QBoxLayout, QHBoxLayout, QWidget

    from actviz.testing.layout_check import FILL_PROPERTY
    from actviz.ui.panels.canvas import ImageCanvas

    window = QWidget()
    qtbot.addWidget(window)
    row = QHBoxLayout(window)
    rng = np.random.default_rng(0)
    canvases = [ImageCanvas(passive=True) for _ in range(2)]
    for canvas in canvases:
        row.addWidget(canvas)
        canvas.set_image(rng.random((16, 16), dtype=np.float32), (0.0, 1.0))
    window.resize(520, 900)  # two square maps side by side in a tall view
    window.show()
    qtbot.waitExposed(window)
    process_events()

    def blank() -> list:
        return [p for p in layout_problems(window) if p.kind == "blank"]

    assert not blank()  # not a view to be filled
    window.setProperty(FILL_PROPERTY, True)
    found = blank()
    assert len(found) == 2 and "above and below" in found[0].detail, found
    assert "side by side in a view taller than wide (520x900)" in found[0].detail
    row.setDirection(QBoxLayout.Direction.TopToBottom)  # one above the other: filled
    process_events()
    assert not blank()
    canvases[1].hide()  # one image alone: its bands are its shape's, not the arrangement's
    row.setDirection(QBoxLayout.Direction.LeftToRight)
    process_events()
    assert not blank()


def test_overview_rows_go_down_when_the_page_is_narrow(actviz_window):
    win = actviz_window(size=(1280, 720))
    page = win.window.centre.overview_tab
    _rows, top, bottom = win.window.centre.overview_splitters
    page.fit_rows(300)
    assert top.orientation() == bottom.orientation() == Qt.Orientation.Vertical
    page.fit_rows(1800)
    assert top.orientation() == bottom.orientation() == Qt.Orientation.Horizontal


def test_module_details_fit_a_narrow_dock(qtbot):
    from actviz.core.tree import module_tree
    from actviz.ui.tree.dock import ModuleDetails, _shrink_to

    assert _shrink_to([100, 80, 60], 500, 36) == [100, 80, 60]
    assert sum(_shrink_to([100, 80, 60, 50, 70], 300, 36)) == 300
    assert _shrink_to([100, 80, 60], 60, 36) == [36, 36, 36]  # never below the floor

    model = torch.nn.Sequential(torch.nn.Conv2d(3, 64, 3), torch.nn.BatchNorm2d(64))
    details = ModuleDetails()
    qtbot.addWidget(details)
    details.resize(210, 260)
    details.show()
    qtbot.waitExposed(details)
    details.show_node(module_tree(model)["1"])  # parameters and buffers: five rows
    process_events()
    table = details.table
    assert table.rowCount() == 5
    assert table.horizontalScrollBar().maximum() == 0
    header = table.horizontalHeader()
    assert sum(header.sectionSize(c) for c in range(5)) == table.viewport().width()
    assert table.item(0, 0).toolTip() == table.item(0, 0).text()
    # The summary above the table is never cut at the bottom.
    label = details.header
    assert label.height() >= label.heightForWidth(label.width())


def test_compare_tab_fits_a_narrow_page_without_scrolling_sideways(qtbot):
    from PySide6.QtWidgets import QScrollArea

    from actviz.ui.compare.view import CompareView

    page = QScrollArea()
    qtbot.addWidget(page)
    page.setWidgetResizable(True)
    view = CompareView()
    page.setWidget(view)
    page.resize(1200, 600)
    page.show()
    qtbot.waitExposed(page)
    process_events()
    assert not view._bar_split
    assert view.top_splitter.orientation() == Qt.Orientation.Horizontal
    page.resize(380, 600)
    process_events()
    assert view._bar_split  # the source and Compare on a second line
    assert view.top_splitter.orientation() == Qt.Orientation.Vertical
    assert page.horizontalScrollBar().maximum() == 0
    assert not [p for p in layout_problems(page) if p.kind in ("page scroll bar", "button")]
    button = view.compare_button
    assert button.mapTo(page, button.rect().topRight()).x() <= page.viewport().width()


def test_atlas_tab_puts_its_strips_under_the_map_on_a_narrow_page(qtbot):
    from actviz.ui.atlas.view import NARROW_TAB_PX, THUMB, AtlasView

    view = AtlasView()
    qtbot.addWidget(view)
    view.set_choices(view.layer_combo, ["features.block2", "fc"], "features.block2")
    view.set_choices(view.method_combo, ["PCA"], "PCA")
    view.show_map()
    view.resize(NARROW_TAB_PX + 400, 560)
    view.show()
    qtbot.waitExposed(view)
    process_events()
    assert not view.is_narrow()
    plot, strip = view.plot, view.nearest_strip
    # Beside it: the map takes most of the width (the strips' title wraps, not widens them).
    assert plot.width() > 2 * strip.width()
    view.resize(360, 560)  # a 1024 px window's tab with three docks
    process_events()
    assert view.is_narrow()
    assert (
        strip.mapTo(view, strip.rect().topLeft()).y()
        > plot.mapTo(view, plot.rect().bottomLeft()).y()
    )
    assert strip.height() >= THUMB  # one row of thumbnails, not cut in half
    found = [p for p in layout_problems(view) if p.kind in ("page scroll bar", "button", "label")]
    assert not found, found


def test_the_check_finds_a_page_scrolling_sideways(qtbot):
    from PySide6.QtWidgets import QScrollArea, QVBoxLayout, QWidget

    window = QWidget()
    qtbot.addWidget(window)
    page = QScrollArea(window)
    page.setWidgetResizable(True)
    wide = QWidget()
    wide.setMinimumWidth(800)
    page.setWidget(wide)
    QVBoxLayout(window).addWidget(page)
    _show_small(qtbot, window)
    found = [p for p in layout_problems(window) if p.kind == "page scroll bar"]
    assert len(found) == 1 and "800 px wide" in found[0].detail
    wide.setMinimumWidth(100)
    process_events()
    assert not [p for p in layout_problems(window) if p.kind == "page scroll bar"]


def test_the_check_finds_a_number_cut_in_a_table_cell(qtbot):
    from PySide6.QtWidgets import QTableWidget, QTableWidgetItem, QVBoxLayout, QWidget

    window = QWidget()
    qtbot.addWidget(window)
    table = QTableWidget(1, 2)
    QVBoxLayout(window).addWidget(table)
    table.setItem(0, 0, QTableWidgetItem("94.8123456 %"))
    table.setItem(0, 1, QTableWidgetItem("ok"))
    table.setColumnWidth(0, 30)
    _show_small(qtbot, window)
    found = [p for p in layout_problems(window) if p.kind == "cell"]
    assert len(found) == 1 and "'94.8123456 %'" in found[0].detail
    table.item(0, 0).setToolTip("94.8123456 %")  # shortened, but said whole on hover
    assert not [p for p in layout_problems(window) if p.kind == "cell"]


def test_module_details_hide_the_table_of_a_module_without_parameters(qtbot):
    from actviz.core.tree import module_tree
    from actviz.ui.tree.dock import ModuleDetails

    tree = module_tree(torch.nn.Sequential(torch.nn.ReLU(), torch.nn.Linear(3, 2)))
    details = ModuleDetails()
    qtbot.addWidget(details)
    details.show()
    qtbot.waitExposed(details)
    details.show_node(tree[""])  # the container: no parameters of its own
    assert "0 own parameters" in details.header.text()
    assert details.table.isHidden()
    details.show_node(tree["1"])
    assert not details.table.isHidden() and details.table.rowCount() == 2
    details.show_node(None)
    assert details.table.isHidden()


def _tiles_beside_the_channel_view(actviz_window, side: int):
    """The tiny CNN on a ``side`` px input at 1024x640 with the Edits dock and the channel view
    open: conv1's four maps (``side`` px wide, no page to turn) in a narrow panel column."""
    from tests.ui.tiny_models import TinyCNN

    torch.manual_seed(0)
    x = torch.randn(1, 3, side, side, generator=torch.Generator().manual_seed(0))
    win = actviz_window(TinyCNN().eval(), x, ["conv1", "conv2"], size=(1024, 640))
    win.run_and_wait()
    win.open_dock("editsDock")
    assert win.window.display.open_channel("conv1", 0)
    win.resize(1024, 640)
    panel = win.panel("conv1")
    mosaic = panel.activation_slot.mosaic
    assert (mosaic.channels, mosaic.total_channels, mosaic.tile_w) == (4, 4, side)
    assert not panel.page_bar.isVisible()
    tile = panel.activation_slot.image_canvas.grid.tile_screen_px()
    assert 0 < tile < 32  # crowded: under the readable size, with no page control
    return win, tile


def test_small_tiles_of_smaller_maps_are_whole(actviz_window):
    win, tile = _tiles_beside_the_channel_view(actviz_window, 16)
    assert tile > 16  # each 16 px map is drawn larger than its own pixels: nothing lost
    assert not [p for p in layout_problems(win.window) if p.kind == "tiles"]


def test_small_tiles_of_larger_maps_are_flagged(actviz_window):
    win, tile = _tiles_beside_the_channel_view(actviz_window, 64)
    found = [p for p in layout_problems(win.window) if p.kind == "tiles"]
    assert [p.widget for p in found] == ["LayerPanel 'conv1'"], found
    assert f"tiles {tile:.0f} px wide" in found[0].detail and "64 px wide maps" in found[0].detail


def _panel_at(qtbot, width: int):
    from actviz.ui.panels.feature_map import LayerPanel

    panel = LayerPanel("layer", module_type="Conv2d")
    qtbot.addWidget(panel)
    panel.resize(width, 400)
    panel.show()
    qtbot.waitExposed(panel)
    return panel


def test_a_page_bar_coming_or_going_moves_nothing(qtbot):
    """Four tiles of four channels (no page bar) and four of eight (a page bar) are as high:
    the read-out line keeps the bar's height (a resize re-paged the panels one a pass, and
    each bar shown moved every panel below by 6 px)."""
    from actviz.display.layer_views import layer_view
    from actviz.display.mosaic import mosaic

    panel = _panel_at(qtbot, 620)
    x = torch.randn(1, 8, 12, 12, generator=torch.Generator().manual_seed(0))
    whole, paged = layer_view(x[:, :4]), layer_view(x)
    panel.set_activation(whole, mosaic(whole.data))
    process_events()
    assert panel.page_bar.text() == ""
    alone = panel.heightForWidth(620)
    panel.set_activation(paged, mosaic(paged.data, max_channels=4))
    process_events()
    assert panel.page_bar.text() == "ch 0-3 of 8"
    assert panel.heightForWidth(620) == alone


def test_a_panel_takes_its_new_pages_height_before_the_page_is_shown(qtbot):
    from actviz.display.layer_views import layer_view
    from actviz.display.mosaic import mosaic, page_image_shape

    panel = _panel_at(qtbot, 620)
    view = layer_view(torch.randn(1, 64, 8, 8, generator=torch.Generator().manual_seed(1)))
    shown = mosaic(view.data, max_channels=64)
    panel.set_activation(view, shown)
    panel.set_gradient(view, shown)
    process_events()
    before = panel.heightForWidth(620)
    panel.expect_mosaic_shape(page_image_shape(shown, 16, 0))
    process_events()
    expected = panel.heightForWidth(620)
    assert expected > before + 10  # 16 tiles, 4 rows of 5 (35x44 px); 64 were 7 of 10 (62x89)
    page = mosaic(view.data, max_channels=16)
    panel.set_activation(view, page)
    panel.set_gradient(view, page)
    process_events()
    assert panel.heightForWidth(620) == expected
    # The room made for a shape that did not come goes with the next image.
    panel.expect_mosaic_shape((500, 20))
    panel.set_activation(view, page)
    panel.set_gradient(view, page)
    process_events()
    assert panel.heightForWidth(620) == expected
