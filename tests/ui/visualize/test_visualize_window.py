"""The channel view's "What it wants": the picture is the engine's, a reopened channel shows
it at once from the cache, a long synthesis cancels and the window stays usable."""

from __future__ import annotations

import numpy as np
from PySide6 import QtGui

from actviz.analysis.visualize.feature_vis import layer_channels, visualize
from tests.ui.conftest import frame
from tests.ui.qt_helpers import wait_not_busy

LAYERS = ["conv1", "conv2"]
SETTINGS = {"objective": "channel", "steps": 6, "size": 24}


def _visualize_opened(actviz_window, tiny_cnn, channel=2):
    win = actviz_window(tiny_cnn, frame(3), LAYERS)
    win.run_and_wait()
    feature = win.visualize.feature
    section = feature.section
    section.objective_box.setCurrentText(SETTINGS["objective"])
    section.steps_spin.setValue(SETTINGS["steps"])
    section.size_spin.setValue(SETTINGS["size"])
    assert win.window.display.open_channel("conv2", channel)
    assert section.isVisible()
    _looked_up(win, feature)
    return win, feature, section


def _looked_up(win, feature):
    """Wait for the cache's answer for the channel shown (asked off the GUI thread)."""
    win.qtbot.waitUntil(lambda: not feature.looking_up(), timeout=30_000)


def _picture_pixels(section) -> np.ndarray:
    image = section.picture.pixmap().toImage().convertToFormat(QtGui.QImage.Format.Format_RGB888)
    h, w = image.height(), image.width()
    rows = np.frombuffer(image.constBits(), np.uint8).reshape(h, image.bytesPerLine())
    return rows[:, : 3 * w].reshape(h, w, 3).copy()


def _wait_done(win, feature):
    win.qtbot.waitUntil(lambda: not feature.is_busy(), timeout=60_000)


def test_what_it_wants_shows_the_engines_picture_and_reopens_from_the_cache(
    actviz_window, tiny_cnn
):
    win, feature, section = _visualize_opened(actviz_window, tiny_cnn)
    assert feature.shown is None and not section.picture.isVisible()  # nothing cached yet
    section.button.click()
    assert feature.is_busy() and section.cancel_button.isVisible()
    _wait_done(win, feature)
    want = visualize(tiny_cnn, "conv2", [2], **SETTINGS)
    vis = feature.shown
    assert vis is not None and vis.channels == (2,) and vis.from_cache == (False,)
    np.testing.assert_array_equal(vis.images, want.images)
    np.testing.assert_array_equal(section.image, want.image_uint8(0))
    # The label draws those pixels, each enlarged by a whole factor.
    shown = _picture_pixels(section)
    factor = shown.shape[0] // SETTINGS["size"]
    assert factor >= 1 and shown.shape[:2] == (24 * factor, 24 * factor)
    np.testing.assert_array_equal(shown[::factor, ::factor], want.image_uint8(0))
    assert want.image_uint8(0).std() > 0

    # Another channel: nothing cached for it; back to channel 2: shown at once, from the cache.
    assert win.window.display.open_channel("conv2", 3)
    _looked_up(win, feature)
    assert feature.shown is None and not section.picture.isVisible()
    assert win.window.display.open_channel("conv2", 2)
    assert feature.shown is None  # until the cache answered
    _looked_up(win, feature)
    vis = feature.shown
    assert vis is not None and vis.from_cache == (True,) and not feature.is_busy()
    np.testing.assert_array_equal(section.image, want.image_uint8(0))
    assert "(saved)" in section.message.text()
    # Other settings are another picture (not cached).
    section.steps_spin.setValue(SETTINGS["steps"] + 1)
    _looked_up(win, feature)
    assert feature.shown is None and not section.picture.isVisible()
    section.steps_spin.setValue(SETTINGS["steps"])
    _looked_up(win, feature)
    assert feature.shown is not None and feature.shown.from_cache == (True,)


def test_a_long_synthesis_cancels_and_the_window_stays_usable(actviz_window, tiny_cnn):
    win, feature, section = _visualize_opened(actviz_window, tiny_cnn, channel=1)
    section.steps_spin.setValue(100_000 if section.steps_spin.maximum() >= 100_000 else 4096)
    section.button.click()
    win.qtbot.waitUntil(lambda: feature.job.progress[0] >= 2, timeout=60_000)
    win.window.cancel()  # Esc
    _wait_done(win, feature)
    assert feature.shown is None and "Cancelled" in section.message.text()
    assert section.button.isEnabled() and not section.cancel_button.isVisible()
    # The window still runs, and another synthesis works.
    win.run_and_wait()
    section.steps_spin.setValue(3)
    section.button.click()
    _wait_done(win, feature)
    assert feature.shown is not None and feature.shown.settings["steps"] == 3


def test_the_report_holds_what_the_channel_wants(actviz_window, tiny_cnn):
    win, feature, section = _visualize_opened(actviz_window, tiny_cnn)
    assert "figures" not in win.window.host.report_parts()  # nothing shown yet
    section.button.click()
    _wait_done(win, feature)
    ((caption, picture),) = win.window.host.report_parts()["figures"]()
    assert caption.startswith("What conv2 ch 2 wants")
    np.testing.assert_array_equal(picture, feature.shown.image_uint8(0))


def test_visualise_channels_fills_the_page_mosaic_from_the_engine_and_the_cache(
    actviz_window, tiny_cnn
):
    win, feature, section = _visualize_opened(actviz_window, tiny_cnn)
    page, dock = feature.page, feature.page.dock
    size = win.window.host.page_channels("conv2")
    assert feature.visualise_page("conv2")
    assert dock.isVisible() and feature.is_busy() and dock.cancel_button.isVisible()
    wait_not_busy(win.qtbot, feature.page)
    channels = tuple(range(min(size, layer_channels(tiny_cnn, "conv2"))))
    assert len(channels) >= 4
    assert page.channels == channels and dock.mosaic.filled() == channels
    got = page.result()
    assert got.channels == channels and not any(got.from_cache)
    # Each tile is the engine's picture of its channel with the same settings, bit for bit
    # (computed on the model's copy, in batches of a few channels).
    want = visualize(tiny_cnn, "conv2", list(channels), **SETTINGS)
    np.testing.assert_array_equal(got.images, want.images)
    assert f"{len(channels)} channels" in dock.message.text()
    assert not dock.cancel_button.isVisible()
    # The model the window captures with was not touched, and the window still runs.
    assert not tiny_cnn.conv2._forward_hooks and all(p.grad is None for p in tiny_cnn.parameters())
    win.run_and_wait()
    # A run asked for at once after the page supersedes the model copy's job on the capture
    # worker: the page still gets its copy and fills.
    feature.page.forget()  # no copy kept: the next page asks for one
    assert feature.visualise_page("conv2", 0)
    win.window.runs.run()
    wait_not_busy(win.qtbot, feature.page)
    assert dock.mosaic.filled() == page.channels
    assert all(page.result().from_cache[: len(channels)])
    assert not tiny_cnn.conv2._forward_hooks and all(p.grad is None for p in tiny_cnn.parameters())
    win.run_and_wait()

    # The channel view's "What it wants" finds the page's picture in the shared cache.
    assert win.window.display.open_channel("conv2", 1)
    _looked_up(win, feature)
    assert feature.shown is not None and feature.shown.from_cache == (True,)
    np.testing.assert_array_equal(feature.shown.images[0], want.images[1])
    # Reopened, the channels done come from the cache (the page may hold more now: its size
    # follows the panel's width, which the dock took); a click on a tile opens its channel.
    assert feature.visualise_page("conv2", 0)
    wait_not_busy(win.qtbot, feature.page)
    again = page.result()
    assert again.channels[: len(channels)] == channels
    assert all(again.from_cache[: len(channels)]) and dock.mosaic.filled() == page.channels
    assert f"{sum(again.from_cache)} saved before" in dock.message.text()
    dock.mosaic.tile_clicked.emit(3)
    assert win.window.host.channel_view.channel == 3


def test_a_page_cancels_keeping_its_tiles_and_pages_on(actviz_window, tiny_cnn):
    win, feature, section = _visualize_opened(actviz_window, tiny_cnn)
    section.steps_spin.setValue(4096)
    win.window.session.set_page_channels("conv2", 4)
    assert feature.visualise_page("conv2", 0)
    win.qtbot.waitUntil(lambda: feature.page.job.progress[0] >= 2, timeout=60_000)
    win.window.cancel()  # Esc
    wait_not_busy(win.qtbot, feature.page)
    assert feature.page.result() is None
    n = len(feature.page.channels)
    assert feature.page.dock.message.text() == f"Cancelled (0 of {n} channels done)."
    section.steps_spin.setValue(3)
    assert feature.page.dock.next_button.isEnabled()
    assert layer_channels(tiny_cnn, "conv2") > 4
    # Pages on from channel 4 to the layer's last channel (each page as many channels as
    # the panel's page holds now: the dock took some of its width).
    dock, seen = feature.page.dock, []
    while dock.next_button.isEnabled():
        dock.next_button.click()
        wait_not_busy(win.qtbot, feature.page)
        page = feature.page.channels
        assert page and page[0] == (seen[-1] + 1 if seen else 4)
        assert feature.page.result().channels == page and dock.mosaic.filled() == page
        seen += page
    assert seen == list(range(4, layer_channels(tiny_cnn, "conv2")))
    assert dock.prev_button.isEnabled()


def test_export_writes_pngs_and_settings_that_make_them_again(actviz_window, tiny_cnn, tmp_path):
    import json

    from PIL import Image

    win, feature, section = _visualize_opened(actviz_window, tiny_cnn)
    assert feature.export_to(tmp_path / "none") == []  # nothing shown yet
    section.button.click()
    _wait_done(win, feature)
    win.window.session.set_page_channels("conv2", 4)
    assert feature.visualise_page("conv2", 4)
    wait_not_busy(win.qtbot, feature.page)
    files = feature.export_to(tmp_path)
    names = {p.relative_to(tmp_path).as_posix() for p in files}
    # TinyCNN's conv2 has 6 channels: the page from channel 4 holds 4 and 5.
    assert {"page/conv2_4.png", "page/conv2_5.png", "page/conv2_sheet.png"} <= names
    assert {"channel/conv2_2.png", "channel/visualize.json"} <= names
    meta = json.loads((tmp_path / "page" / "visualize.json").read_text())
    assert meta["channels"] == [4, 5] and meta["weights"]
    # visualize.json says how to make the pictures again: the same pixels.
    again = visualize(tiny_cnn, meta["layer"], meta["channels"], **meta["reproduce"]["kwargs"])
    for i, c in enumerate(meta["channels"]):
        png = np.asarray(Image.open(tmp_path / "page" / f"conv2_{c}.png"))
        np.testing.assert_array_equal(png, again.image_uint8(i))
    # The report holds the page's numbered sheet beside the channel's picture.
    captions = [c for c, _ in win.window.host.report_parts()["figures"]()]
    assert captions[-1].startswith("What conv2 ch 4-5 want")
    assert any(c.startswith("What conv2 ch 2 wants") for c in captions)


def test_the_tile_menu_visualises_the_panels_page_in_its_order(actviz_window, tiny_cnn):
    from actviz.display.mosaic import ChannelOrder
    from actviz.testing.layout_check import layout_problems

    win, feature, section = _visualize_opened(actviz_window, tiny_cnn)
    session = win.window.session
    # The panel's tiles sorted (as by effect): the page follows that order.
    session.set_channel_order("conv2", ChannelOrder((5, 3, 1, 0, 2, 4), "by effect"))
    session.set_page_channels("conv2", 3)
    menu = win.whatif.feature.tile_menu("conv2", [1])
    (action,) = [a for a in menu.actions() if a.text() == "Visualise channels"]
    action.trigger()
    wait_not_busy(win.qtbot, feature.page)
    page = feature.page
    order, n = (5, 3, 1, 0, 2, 4), len(page.channels)
    # The page the panel shows: the one holding the channel opened (2, at position 4).
    start = order.index(page.channels[0])
    assert n >= 1 and page.channels == order[start : start + n] and 2 in page.channels
    assert page.result().channels == page.channels
    title = page.dock.title_label.text()
    assert title.startswith(f"conv2 · by effect: {start + 1}-{start + n} of 6"), title
    assert page.dock.prev_button.isEnabled() == (start > 0)
    menu.deleteLater()
    # The dock open beside the panels squeezes nothing the layout check knows of.
    win.qtbot.wait(50)
    problems = [p for p in layout_problems(win.window) if "WhatChannelsWant" in str(p)]
    assert problems == []
