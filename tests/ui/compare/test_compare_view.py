"""The Compare tab, driven in the real window: the latest run against a pin, another input
and a second model opened through the Open model dialog; the chart's figures are those of
``actviz.compare`` on the same captures."""

from __future__ import annotations

import gc
import weakref

import numpy as np
import pytest
import torch
import torchvision  # noqa: F401 - the Open model dialog lists its models (imported once per run)
from PySide6.QtCore import Qt
from torch import nn

from actviz.core.capture import capture
from actviz.core.compare import compare
from actviz.io.input_files import open_input
from actviz.workspace.run_request import INPUT, MODEL, PIN
from tests.ui.conftest import frame
from tests.ui.qt_helpers import cell_texts
from tests.ui.tiny_models import TinyCNN

TIMEOUT_MS = 30_000
LAYERS = ["conv1", "conv2", "fc"]


class OtherNet(nn.Module):
    """Another architecture: no conv2, a conv1 of another kind."""

    def __init__(self) -> None:
        super().__init__()
        self.conv1 = nn.Linear(3, 4)
        self.fc = nn.Linear(4, 5)


def _compare_tab_after_a_run(actviz_window, tiny_cnn):
    """A window on the tiny CNN showing its Compare tab, run once on ``frame(1)``; returns the
    driver and the Compare view."""
    win = actviz_window(tiny_cnn, None, LAYERS)
    win.compare.show_page()
    win.window.script.set_input(frame(1))
    win.run_and_wait(TIMEOUT_MS)
    return win, win.compare.view


def _assert_chart_is(view, expected) -> None:
    chart = view.chart
    assert chart.names == [d.name for d in expected.layers]
    np.testing.assert_allclose(chart.cosine, [d.cosine for d in expected.layers], rtol=1e-12)
    np.testing.assert_allclose(chart.rel_l2, [d.rel_l2 for d in expected.layers], rtol=1e-12)
    np.testing.assert_allclose(chart.max_abs, [d.max_abs for d in expected.layers], rtol=1e-12)
    first = expected.first_divergence
    index = None if first is None else chart.names.index(first.name)
    assert chart.divergence == index
    assert chart.divergence_line.isVisible() == (index is not None)


def test_compare_is_off_until_there_are_runs_a_and_b(qtbot, actviz_window, tiny_cnn):
    win = actviz_window(tiny_cnn, None, LAYERS)
    win.compare.show_page()
    view = win.compare.view
    button = view.compare_button
    # Before any run: no run A.
    assert not button.isEnabled() and "No run A yet" in button.toolTip()
    win.window.script.set_input(frame(1))
    win.run_and_wait(TIMEOUT_MS)
    view.set_source(INPUT)
    view.input_combo.setEditText("")
    assert not button.isEnabled() and "Type or browse" in button.toolTip()
    qtbot.keyClicks(view.input_combo.lineEdit(), "random:1")
    assert button.isEnabled()
    view.set_source(MODEL)
    assert not button.isEnabled() and "Open model B first" in button.toolTip()
    # A new model forgets run A: off again, whatever the source.
    view.set_source(INPUT)
    assert button.isEnabled()
    win.window.script.set_model(TinyCNN())
    assert win.window.session.result is None
    assert not button.isEnabled() and "No run A yet" in button.toolTip()


def test_compare_with_a_pin_and_click_a_point(qtbot, actviz_window, tiny_cnn):
    win, view = _compare_tab_after_a_run(actviz_window, tiny_cnn)
    window = win.window
    # No pin yet: Compare is off, its tip says why; Enter in a box asks and is told in red.
    view.set_source(PIN)
    assert not view.compare_button.isEnabled()
    assert "No pinned result" in view.compare_button.toolTip()
    assert not win.compare.feature.compare() and view.is_error()
    assert "No pinned result" in view.message()
    pin = window.pins_ui.pin_result()
    assert view.compare_button.isEnabled()
    assert view.pin_combo.isEnabled() and view.pin_combo.currentText() == pin.label
    window.script.set_input(frame(2))
    win.run_and_wait(TIMEOUT_MS)
    win.compare.click_compare(TIMEOUT_MS)

    cap_a, cap_b = window.session.result.capture, pin.result.capture
    expected = compare(cap_a, cap_b)
    _assert_chart_is(view, expected)
    assert expected.first_divergence.name == "conv1"  # another input: differs from the start
    assert not view.is_error() and "first divergence: conv1" in view.message()
    # A - B of the sample shown, per layer, in the layer panels the Layers tab uses.
    # (each panel painted as it comes near the area's view: conv1 and conv2 are there)
    assert view.diffs.order() == LAYERS
    # Panels in view are painted in the pass that shows the result, those near it one per
    # event-loop pass after.
    qtbot.waitUntil(lambda: {"conv1", "conv2"} <= set(view.diffs.panels), timeout=10_000)
    for name in ("conv1", "conv2"):
        shown = view.diffs.panels[name].activation_slot.view.data
        diff = (cap_a[name].tensor - cap_b[name].tensor)[0].numpy()
        np.testing.assert_allclose(shown, diff)
        assert view.diffs.panels[name].activation_slot.mosaic.symmetric
        # |A - B| beside it, where the Layers tab shows |gradient|.
        np.testing.assert_allclose(view.diffs.panels[name].gradient_slot.view.data, np.abs(diff))
    # The first divergence's panel is selected and scrolled to.
    qtbot.waitUntil(lambda: view.diffs.panels["conv1"].is_selected(), timeout=10_000)
    # Both predictions: A's and B's probabilities of every class listed.
    p_a = torch.softmax(cap_a.output[0].double(), 0).numpy()
    p_b = torch.softmax(cap_b.output[0].double(), 0).numpy()
    rows = view.predictions.rows()
    assert sorted(r[0] for r in rows) == list(range(5))  # top-5 of 5 classes
    for index, _name, pa, pb, dp, *_ in rows:
        assert pa == pytest.approx(p_a[index], abs=1e-6)
        assert pb == pytest.approx(p_b[index], abs=1e-6)
        assert dp == pytest.approx(p_a[index] - p_b[index], abs=1e-6)
    # Read as A | B | changes A - B (the what-if's table shows before | after instead).
    table = view.predictions.table
    headers = [table.horizontalHeaderItem(c).text() for c in range(table.columnCount())]
    assert headers == ["A", "B", "Δp", "Δlogit"]
    first = rows[0]
    texts = cell_texts(view.predictions)[0]
    assert texts[1:4] == [
        f"{100 * first.p_a:.1f}%",
        f"{100 * first.p_b:.1f}%",
        f"{100 * first.dp:+.1f}",
    ]

    # A difference tile reads out A - B and |A - B|; a click opens run A's channel large.
    panel = view.diffs.panels["conv2"]
    view.diffs.ensureWidgetVisible(panel)
    m, canvas = panel.activation_slot.mosaic, panel.activation_slot.image_canvas
    y0, x0 = m.tile_origin(3)
    point = canvas.image_to_widget(x0 + m.tile_w / 2, y0 + m.tile_h / 2)
    qtbot.mouseMove(canvas.viewport(), point)
    qtbot.waitUntil(lambda: panel.status_label.text().startswith("ch 3"), timeout=10_000)
    assert "A−B " in panel.status_label.text() and "|A−B| " in panel.status_label.text()
    with qtbot.waitSignal(panel.channel_clicked, timeout=10_000):
        qtbot.mouseClick(canvas.viewport(), Qt.MouseButton.LeftButton, pos=point)
    assert window.centre.tabs.currentWidget() is window.centre.layers_splitter
    qtbot.waitUntil(window.centre.channel_box.isVisible, timeout=10_000)
    assert (window.centre.channel_view.name, window.centre.channel_view.channel) == ("conv2", 3)
    win.compare.show_page()

    # Hover names the layer; a click on its point shows its panel in the Layers tab.
    chart = view.chart
    where = chart.point_position(1)
    qtbot.mouseMove(chart.plot_widget.viewport(), where)
    qtbot.waitUntil(lambda: "conv2" in chart.status_label.text(), timeout=10_000)
    qtbot.mouseClick(chart.plot_widget.viewport(), Qt.MouseButton.LeftButton, pos=where)
    assert window.centre.tabs.currentWidget() is window.centre.layers_splitter
    assert window.display.selected_layer == "conv2"
    assert window.host.layer_panels["conv2"].is_selected()


def test_compare_with_another_input_waits_for_the_run_and_says_what_failed(
    qtbot, actviz_window, tiny_cnn, tmp_path
):
    win = actviz_window(tiny_cnn, None, LAYERS)
    window = win.window
    view = win.compare.view
    window.script.set_input(frame(1))
    win.run_and_wait(TIMEOUT_MS)
    # Asked while a run is on its way: run A is that run's result.
    window.script.set_input(frame(3))
    with qtbot.waitSignal(win.compare.feature.compare_finished, timeout=TIMEOUT_MS):
        window.runs.run()
        assert win.compare.feature.compare_with_input("random:1x3x16x16:5")
        assert "Waiting" in view.message()
    model = window.session.model
    cap_a = window.session.result.capture
    np.testing.assert_array_equal(cap_a.inputs.numpy(), frame(3).numpy())
    cap_b = capture(model, open_input("random:1x3x16x16:5", model=model).value, LAYERS)
    _assert_chart_is(view, compare(cap_a, cap_b))
    assert "input B: random" in view.message()
    # Compared while the Layers tab was shown: the difference panels are filled once the
    # Compare tab is on screen (a canvas filled while hidden keeps its hidden size's range).
    assert win.compare.feature.painter.pending()
    win.compare.show_page()
    win.compare.wait_diff_panels(2000)
    diff = (cap_a["conv2"].tensor - cap_b["conv2"].tensor)[0].numpy()
    np.testing.assert_allclose(view.diffs.panels["conv2"].activation_slot.view.data, diff)
    # An input that cannot be read: the reason, in red; the comparison shown stays.
    with qtbot.waitSignal(win.compare.feature.compare_failed, timeout=TIMEOUT_MS) as failed:
        win.compare.feature.compare_with_input(str(tmp_path / "missing.png"))
    assert view.is_error() and "Could not compare" in failed.args[0]
    assert view.chart.names == LAYERS
    # A run started meanwhile replaces the comparison (never shown): said, not left hanging.
    assert win.compare.feature.compare_with_input("random:1x3x16x16:6")
    with win.expect_run(TIMEOUT_MS, flush=False):
        window.runs.run()
        assert "A new run replaced the comparison" in view.message()
    assert not win.compare.feature.is_busy() and view.compare_button.isEnabled()
    # Cancel (Esc) stops a comparison like a run; the window's panels are not touched.
    shown = window.session.result
    assert win.compare.feature.compare_with_input("random:1x3x16x16:7")
    with qtbot.waitSignal(win.compare.feature.compare_failed, timeout=TIMEOUT_MS) as failed:
        window.cancel()
    assert "cancelled" in failed.args[0] and window.session.result is shown


def test_a_second_model_from_the_open_dialog_diverges_where_its_weights_differ(
    qtbot, actviz_window, tiny_cnn, tmp_path
):
    win, view = _compare_tab_after_a_run(actviz_window, tiny_cnn)
    window = win.window
    other = tmp_path / "other.pt"
    torch.save(OtherNet().state_dict(), other)
    changed = TinyCNN().eval()
    changed.load_state_dict(window.session.model.state_dict())
    with torch.no_grad():
        changed.conv2.weight[0] += 0.5  # conv1 stays the same, conv2 and later differ
    weights = tmp_path / "changed.pt"
    torch.save(changed.state_dict(), weights)

    qtbot.mouseClick(view.open_model_button, Qt.MouseButton.LeftButton)
    dialog = win.compare.feature.model_dialog
    assert dialog is not None and dialog.isVisible()
    dialog.tabs.setCurrentIndex(1)
    # Another architecture: refused in the dialog, which stays open with the path.
    dialog.file_edit.setText(str(other))
    dialog.arch_combo.setEditText(f"{__name__}:OtherNet")
    with qtbot.waitSignal(win.compare.feature.compare_failed, timeout=TIMEOUT_MS):
        qtbot.mouseClick(dialog.open_button, Qt.MouseButton.LeftButton)
    assert dialog.isVisible()
    assert "not the architecture of run A" in dialog.message()
    assert "'conv2'" in dialog.message() and "conv1 (Linear, not Conv2d)" in dialog.message()
    assert win.compare.feature.model_b is None and window.session.model is not None

    dialog.file_edit.setText(str(weights))
    dialog.arch_combo.setEditText("tests.ui.tiny_models:TinyCNN")
    with qtbot.waitSignal(win.compare.feature.compare_finished, timeout=TIMEOUT_MS):
        qtbot.mouseClick(dialog.open_button, Qt.MouseButton.LeftButton)
    assert win.compare.feature.model_dialog is None and view.source == MODEL
    assert isinstance(window.session.model, TinyCNN)  # the window's model stays
    chart = view.chart
    assert chart.names == LAYERS
    assert chart.cosine[0] == pytest.approx(1.0) and chart.rel_l2[0] == 0.0
    assert chart.rel_l2[1] > 1e-3 and chart.divergence == 1  # conv2: where weights changed
    win.compare.wait_diff_panels(2000)
    np.testing.assert_array_equal(view.diffs.panels["conv1"].activation_slot.view.data, 0.0)
    cap_b = capture(changed, frame(1), LAYERS)
    _assert_chart_is(view, compare(window.session.result.capture, cap_b))
    # A new run: the comparison shown says it is of an older run A, and holds no capture.
    old = weakref.ref(window.session.result.capture)
    window.script.set_input(frame(2))
    win.run_and_wait(TIMEOUT_MS)
    gc.collect()
    assert old() is None
    assert view.message().startswith("Run A changed since this comparison")
    assert "first divergence: conv2" in view.message()


def test_compare_with_a_pin_from_the_pinned_results_menu(qtbot, actviz_window, tiny_cnn):
    win = actviz_window(tiny_cnn, None, LAYERS)
    window = win.window
    window.script.set_input(frame(1))
    win.run_and_wait()
    first = window.pins_ui.pin_result()
    window.script.set_input(frame(2))
    win.run_and_wait()
    second = window.pins_ui.pin_result()
    window.script.set_input(frame(3))
    win.run_and_wait()
    entries = {a.text(): a for a in window.commands.pins_menu.actions()}
    sub = entries["Compare the latest run with"].menu()
    assert [a.text() for a in sub.actions()] == [first.label, second.label]
    assert window.centre.tabs.currentWidget() is not win.compare.page
    with qtbot.waitSignal(win.compare.feature.compare_finished, timeout=TIMEOUT_MS):
        sub.actions()[0].trigger()
    view = win.compare.view
    assert window.centre.tabs.currentWidget() is win.compare.page
    assert view.source == PIN and view.pin_combo.currentIndex() == 0
    _assert_chart_is(view, compare(window.session.result.capture, first.result.capture))
    # Unpinned, it leaves the menu.
    window.session.pins.unpin(first)
    entries = {a.text(): a for a in window.commands.pins_menu.actions()}
    assert [a.text() for a in entries["Compare the latest run with"].menu().actions()] == [
        second.label
    ]


def test_unpinning_while_a_comparison_waits_refuses_it_in_one_line(qtbot, actviz_window, tiny_cnn):
    """Found by the random-action stress run: compare with a pin while a run is on its way,
    then Unpin all before the comparison starts (it raised IndexError)."""
    win = actviz_window(tiny_cnn, None, LAYERS)
    window = win.window
    window.script.set_input(frame(1))
    win.run_and_wait()
    pin = window.pins_ui.pin_result()
    compare = win.compare.feature
    window.script.set_input(frame(2))
    with qtbot.waitSignal(compare.compare_failed, timeout=TIMEOUT_MS) as failed:
        assert window.runs.run() is not None  # run A on its way: the comparison waits for it
        assert compare.compare_with_pin(pin) and compare._waiting
        window.pins_ui.unpin_all()
    assert "was unpinned" in failed.args[0]
    win.wait_idle()


def test_a_run_compared_with_its_own_pin_reads_zero_on_every_bar(qtbot, actviz_window, tiny_cnn):
    """No difference anywhere: A - B sits mid-scale on -1..1 and |A - B| at the bottom of a bar
    that reads 0 there (a zero-width shared range left the bar at -1..1)."""
    win = actviz_window(tiny_cnn, frame(1), LAYERS)
    window = win.window
    win.run_and_wait()
    window.pins_ui.pin_result()
    entries = {a.text(): a for a in window.commands.pins_menu.actions()}
    with qtbot.waitSignal(win.compare.feature.compare_finished, timeout=TIMEOUT_MS):
        entries["Compare the latest run with"].menu().actions()[0].trigger()
    win.compare.wait_diff_panels()
    panel = win.compare.view.diffs.panel("conv1")
    difference, magnitude = panel.activation_slot, panel.gradient_slot
    assert magnitude.mosaic.value_range == (0.0, 0.0)
    assert difference.image_canvas.colorbar.levels() == (-1.0, 1.0)
    assert magnitude.image_canvas.colorbar.levels() == (0.0, 1.0)
