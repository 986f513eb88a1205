"""Sorting the layer panels by effect and measuring a channel from the tile menu (real window):
the tiles are the channels in effect order, each labelled and opened as itself, pages turn
through the order, a new run re-sorts on the same page, and unticking gives the natural order
and the page from before back."""

from __future__ import annotations

import numpy as np
import torch
from PySide6.QtCore import QPoint, Qt
from torch import nn

from actviz.analysis.effects.channel_effects import estimate_from_capture, verify
from actviz.display.mosaic import mosaic
from tests.helpers import frame


class Wide(nn.Module):
    """conv1 (8 ch, 16x16) -> relu -> conv2 (300 ch, 4x4): more channels than one page holds."""

    def __init__(self) -> None:
        super().__init__()
        self.conv1 = nn.Conv2d(3, 8, 3, padding=1)
        self.relu = nn.ReLU()
        self.conv2 = nn.Conv2d(8, 300, 3, stride=4, padding=1)
        self.head = nn.Sequential(nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(300, 5))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(self.conv2(self.relu(self.conv1(x))))


def _wide_with_effects(actviz_window):
    torch.manual_seed(0)
    model = Wide().eval()
    # Only what these tests use: the effects dock, live mode (a live frame), what-if (the
    # tile menu, the difference view).
    win = actviz_window(model, frame(3), ["conv2"], features=["effects", "live", "whatif"])
    win.run_and_wait()
    feature = win.effects.feature
    win.effects.open()  # the estimates made (asserted)
    return win, model, feature


def _shown(win):
    win.window.display.flush_panel_updates()
    return win.panel("conv2").activation_slot.mosaic


def test_sort_by_effect_pages_and_back(actviz_window):
    win, model, feature = _wide_with_effects(actviz_window)
    window, session = win.window, win.window.session
    panel = win.panel("conv2")
    natural = _shown(win)
    size = natural.page_size
    assert natural.order is None and 0 < size < 300  # several pages
    assert window.display.turn_page("conv2", 1)  # the user is on page 2 before sorting
    assert _shown(win).first_channel == size

    feature.view.sort_check.setChecked(True)
    order = tuple(int(c) for c in feature.effects["conv2"].order())
    est = np.abs(feature.effects.estimate("conv2"))
    assert est[order[0]] == est.max() and order != tuple(range(300))
    m = _shown(win)
    # The first page holds the channels that matter, each tile its own channel.
    assert m.tile_channels == order[:size] and m.order.label == "by effect"
    assert panel.page_bar.text() == f"by effect: 1-{size} of 300"
    assert not panel.page_bar.prev_button.isEnabled() and panel.page_bar.next_button.isEnabled()
    assert panel.activation_slot.image_canvas.grid._channel_ids == order[:size]
    data = window.session.result.layers["conv2"].view.data
    np.testing.assert_allclose(
        m.image, mosaic(data[list(order[:size])], symmetric=m.symmetric).image, atol=1e-6,
        equal_nan=True,
    )  # fmt: skip
    # The gradient side is in the same order.
    assert panel.gradient_slot.mosaic.tile_channels == order[:size]
    # Next page: ranks size+1.. of the order.
    assert window.display.turn_page("conv2", 1)
    m2 = _shown(win)
    assert m2.tile_channels == order[size : 2 * size] and m2.position == size
    assert panel.page_bar.text().startswith(f"by effect: {size + 1}-")
    assert window.display.turn_page("conv2", -1) and _shown(win).position == 0
    assert not window.display.turn_page("conv2", -1)
    assert window.display.turn_page("conv2", 1)

    # A new input: re-sorted by its own effects, on the same page of the order.
    win.set_input(frame(9))
    result = win.run_and_wait()
    win.qtbot.waitUntil(lambda: not feature.estimating(), timeout=30_000)
    expected = estimate_from_capture(model, result.capture, ["conv2"])
    new_order = tuple(int(c) for c in expected["conv2"].order())
    assert new_order != order
    m3 = _shown(win)
    assert m3.tile_channels == new_order[size : 2 * size]

    # Hover and click name and open the real channel of the third tile.
    m = _shown(win)
    third = m.tile_channels[2]
    assert third == new_order[size + 2]
    canvas = panel.activation_slot.image_canvas
    y0, x0 = m.tile_origin(third)
    assert m.channel_at(x0 + 1, y0 + 1) == third
    win.reveal("conv2")
    pos = canvas.image_to_widget(x0 + 1.5, y0 + 1.5)
    win.qtbot.mouseClick(canvas.viewport(), Qt.MouseButton.LeftButton, pos=QPoint(pos))
    win.qtbot.waitUntil(lambda: window.host.channel_view.channel == third, timeout=30_000)
    assert window.host.channel_view.name == "conv2"
    # Opening a channel keeps the sorted page holding it (the panel narrows beside the
    # channel view: fewer tiles per page, the page still the one holding it).
    m = _shown(win)
    assert m.order is not None and third in m.tile_channels
    # Unticked: the natural order, and the page the user was on before sorting.
    feature.view.sort_check.setChecked(False)
    m4 = _shown(win)
    assert m4.order is None and m4.shows(size)  # the channel that page began with
    assert panel.page_bar.text().startswith(f"ch {m4.first_channel}-")
    assert session.channel_orders == {}
    assert list(feature.marks.sorted) == []


def test_the_tile_menu_measures_a_channel_and_sorts(actviz_window):
    win, model, feature = _wide_with_effects(actviz_window)
    result = win.window.session.result
    eff = feature.effects
    # The least of the tiles shown, far from the top: shown after the top ones once measured.
    page = win.panel("conv2").activation_slot.mosaic.tile_channels
    channel = min(page, key=lambda c: abs(eff["conv2"].estimate[c]))
    assert channel not in eff.top_channels("conv2", feature.view.top)
    win.context_action("conv2", channel, f"Measure the effect of ch {channel}")  # clicked
    assert feature.is_busy()
    other = next(c for c in page if c != channel)
    assert not feature.measure("conv2", [other])  # one at a time: refused, not queued
    assert feature.asked == {"conv2": (channel,)}
    win.qtbot.waitUntil(lambda: not feature.is_busy(), timeout=30_000)
    expected = verify(
        model, estimate_from_capture(model, result.capture, ["conv2"]), {"conv2": [channel]}
    )
    res = feature.effects["conv2"]
    assert res.verified.sum() == 1 and res.verified[channel]
    assert res.exact[channel] == expected["conv2"].exact[channel]
    assert res.exact[channel] != 0  # a real change of the target
    rows = feature.view.sections["conv2"].bars.rows
    assert rows[-1].channel == channel and rows[-1].exact == res.exact[channel]
    assert len(rows) == feature.view.top + 1
    assert f"conv2 ch {channel}: exact {res.exact[channel]:+.4g}" in feature.view.message.text()
    # The same menu sorts the panel by effect (and says so when it is).
    assert not feature.view.sort_check.isChecked()
    win.context_action("conv2", channel, "Sort tiles by effect")  # clicked: ticked
    assert feature.view.sort_check.isChecked()
    assert _shown(win).tile_channels[0] == int(res.order()[0])
    # Clicked again (shown ticked): the natural order is back.
    action = win.context_action("conv2", int(res.order()[0]), "Sort tiles by effect")
    assert not action.isChecked() and not feature.view.sort_check.isChecked()
    assert _shown(win).order is None and _shown(win).first_channel == 0


def test_a_session_keeps_the_sorting(actviz_window):
    win, _model, feature = _wide_with_effects(actviz_window)
    feature.view.sort_check.setChecked(True)
    parts = win.window.host.session_parts()
    assert parts["effects"]["sort"] is True
    other = actviz_window(Wide().eval(), frame(3), ["conv2"])
    other.window.host.restore_session_parts(parts)
    theirs = other.effects.feature
    assert theirs.view.sort_check.isChecked()
    # Sorted without opening the dock: the estimates are made for the sorting.
    other.run_and_wait()
    other.qtbot.waitUntil(lambda: list(theirs.marks.sorted) == ["conv2"], timeout=30_000)
    order = tuple(int(c) for c in theirs.effects["conv2"].order())
    other.window.display.flush_panel_updates()
    assert other.panel("conv2").activation_slot.mosaic.tile_channels[0] == order[0]


def test_live_frames_re_sort_the_tiles(actviz_window):
    win, model, feature = _wide_with_effects(actviz_window)
    feature.view.sort_check.setChecked(True)
    first = _shown(win).tile_channels
    shown = win.live.occlude()  # a live frame: the input occluded
    assert shown.origin is not None
    win.qtbot.waitUntil(lambda: not feature.estimating(), timeout=30_000)
    expected = estimate_from_capture(model, shown.capture, ["conv2"])
    order = tuple(int(c) for c in expected["conv2"].order())
    m = _shown(win)
    assert m.tile_channels == order[: m.channels] and m.position == 0
    assert m.tile_channels != first[: m.channels]  # the frame's own ranking
    # The next frame's request carries the order: prepared in it, not re-paged afterwards.
    assert (
        win.window.session.make_request(allow_no_input=True).spec.channel_orders["conv2"] == m.order
    )


def test_the_difference_view_of_a_sorted_panel_keeps_its_order(actviz_window):
    win, _model, feature = _wide_with_effects(actviz_window)
    feature.view.sort_check.setChecked(True)
    top = feature.effects.top_channels("conv2", 3)
    with win.expect_run():
        assert feature.ablate_top("conv2", 3)
    win.qtbot.waitUntil(lambda: not feature.estimating(), timeout=30_000)
    shown = _shown(win)
    order = win.window.session.channel_orders["conv2"]
    assert shown.order == order and shown.tile_channels == order.channels[: shown.channels]
    # The ablated channels have no effect left: they went to the end of the order.
    assert set(order.channels[-3:]) == set(top)
    panel = win.panel("conv2")
    panel.difference_button.setChecked(True)
    win.qtbot.waitUntil(panel.difference_shown, timeout=30_000)
    diff = panel.activation_slot.mosaic
    assert diff.order == order and diff.tile_channels == shown.tile_channels
    assert panel.page_bar.text().startswith("by effect: 1-")
    result = win.window.session.result
    a = result.capture["conv2"].tensor[0] - result.baseline["conv2"].tensor[0]
    c = diff.tile_channels[0]
    y0, x0 = diff.tile_origin(c)
    tile = diff.image[y0 : y0 + diff.tile_h, x0 : x0 + diff.tile_w]
    want = mosaic(a[c : c + 1].numpy(), symmetric=True).image
    np.testing.assert_allclose(tile, want, atol=1e-6, equal_nan=True)


def test_the_channel_view_steps_through_the_effect_order(actviz_window):
    win, _model, feature = _wide_with_effects(actviz_window)
    window = win.window
    view = window.host.channel_view

    def step(by: int) -> int:  # the channel view's [ ] keys
        view.step_requested.emit(by)
        return view.channel

    feature.view.sort_check.setChecked(True)
    order = window.session.channel_orders["conv2"].channels
    assert window.display.open_channel("conv2", order[0])
    assert step(1) == order[1]
    assert step(1) == order[2]
    assert step(-1) == order[1]
    assert window.display.open_channel("conv2", order[0]) and step(-1) == order[0]  # the first
    feature.view.sort_check.setChecked(False)
    assert step(1) == order[0] + 1  # natural order again


def test_measuring_with_the_dock_closed_estimates_first(actviz_window):
    torch.manual_seed(0)
    model = Wide().eval()
    win = actviz_window(model, frame(3), ["conv2"])
    result = win.run_and_wait()
    feature = win.effects.feature
    assert feature.effects is None and not feature.dock.isVisible()
    channel = win.panel("conv2").activation_slot.mosaic.tile_channels[1]
    win.context_action("conv2", channel, f"Measure the effect of ch {channel}")
    assert feature.dock.isVisible()  # the dock opens; the estimates come first, then the job
    win.qtbot.waitUntil(
        lambda: feature.effects is not None and not feature.is_busy(), timeout=30_000
    )
    win.qtbot.waitUntil(lambda: bool(feature.effects["conv2"].verified.any()), timeout=30_000)
    expected = verify(
        model, estimate_from_capture(model, result.capture, ["conv2"]), {"conv2": [channel]}
    )
    res = feature.effects["conv2"]
    assert np.flatnonzero(res.verified).tolist() == [channel]
    assert res.exact[channel] == expected["conv2"].exact[channel]
    assert channel in [r.channel for r in feature.view.sections["conv2"].bars.rows]
