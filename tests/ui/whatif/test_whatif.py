"""What-if in the window: edits from a right click on a tile, the Edits dock, before/after
predictions, the difference view and live frames, on the tiny CNN (exact numbers from
``actviz.capture`` with the same edits)."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from PySide6.QtCore import Qt

from actviz.core.capture import capture
from actviz.display.difference import DIFFERENCE_CMAP
from actviz.display.mosaic import mosaic
from actviz.edits import ablate, clamp, scale
from actviz.testing import RUN_TIMEOUT_MS
from actviz.workspace.pins import result_bytes
from tests.ui.conftest import frame
from tests.ui.qt_helpers import cell_texts
from tests.ui.tiny_models import TinyCNN

LAYERS = ["conv1", "conv2", "fc"]
LEFT = Qt.MouseButton.LeftButton


def _click_menu_item(qtbot, menu, text: str) -> None:
    action = next(a for a in menu.actions() if a.text() == text)
    assert action.isEnabled(), f"{text!r} is disabled"
    qtbot.mouseClick(menu, LEFT, pos=menu.actionGeometry(action).center())


def test_edit_board_keeps_order_keys_and_switches():
    from actviz.workspace.edits_board import EditBoard

    changes = []
    board = EditBoard(lambda: changes.append(1))
    a = board.add("conv1", ablate([0]))
    b = board.add("conv1", scale([1], 2.0))
    c = board.add("fc", ablate(3), note="pin 1")
    assert board.request_edits() == {"conv1": (ablate([0]), scale([1], 2.0)), "fc": (ablate(3),)}
    board.set_enabled(a.key, False)
    board.set_value(b.key, 0.25)
    assert board.request_edits()["conv1"] == (scale([1], 0.25),)
    assert board.descriptions() == {"conv1": "scale ch 1 x0.25", "fc": "ablate ch 3"}
    assert board.get(c.key).describe() == "fc: ablate ch 3 (pin 1)"
    with pytest.raises(ValueError, match="no value"):
        board.set_value(a.key, 1.0)
    board.remove(b.key)
    assert [e.key for e in board] == [a.key, c.key] and len(changes) == 6
    board.clear()
    assert board.request_edits() == {} and len(changes) == 7


def test_capture_pair_reuses_the_unedited_capture_only_for_the_same_run():
    from actviz.workspace.edits_board import BaselineCache
    from actviz.workspace.run_request import capture_pair

    torch.manual_seed(0)
    model, x, cache = TinyCNN().eval(), frame(1), BaselineCache()
    plain, none = capture_pair(model, x, LAYERS, edits=None, cache=cache)
    assert none is None and cache.held is plain
    edited, base = capture_pair(model, x, LAYERS, edits={"conv2": (ablate(1),)}, cache=cache)
    assert base is plain and edited.edits == {"conv2": (ablate(1),)}
    # All edits off: the very capture (reuse) or a fresh one (no edits at all).
    assert capture_pair(model, x, LAYERS, edits={}, cache=cache)[0] is plain
    fresh = capture_pair(model, x, LAYERS, edits={}, cache=cache, reuse=False)[0]
    assert fresh is not plain and torch.equal(fresh.output, plain.output)
    # Another input object or target: a new unedited capture.
    _, other = capture_pair(model, x.clone(), LAYERS, edits={"conv2": (ablate(1),)}, cache=cache)
    assert other is not fresh and torch.equal(other.output, plain.output)
    _, target3 = capture_pair(
        model, x, LAYERS, edits={"conv2": (ablate(1),)}, cache=cache, target=3
    )
    assert target3.target_index == 3


def _softmax(t: torch.Tensor) -> np.ndarray:
    return torch.softmax(t.detach().double()[0], dim=0).numpy()


def test_ablate_by_right_click_changes_the_prediction_and_unticking_brings_it_back(
    qtbot, actviz_window, tiny_cnn
):
    win = actviz_window(tiny_cnn, frame(1), LAYERS, size=(1400, 900), auto_run=True)
    win.run_and_wait()
    window = win.window
    model, x = window.session.model, window.session.input.value
    first = window.session.result
    first_mosaic = window.host.layer_panels["conv2"].activation_slot.mosaic
    menu = win.tile_menu("conv2", 1)
    texts = [a.text() for a in menu.actions()]
    assert texts[1:4] == ["Ablate ch 1", "Scale ch 1…", "Keep only ch 1"]
    patch = next(a for a in menu.actions() if a.text() == "Patch from pin")
    assert not patch.isEnabled() and "Pin a run first" in patch.toolTip()

    with win.expect_run():
        _click_menu_item(qtbot, menu, "Ablate ch 1")
    result = window.session.result
    assert [e.describe() for e in result.capture.edits["conv2"]] == ["ablate ch 1"]
    # The window's run is the edited network's, exactly; the unedited twin is kept.
    edited = capture(model, x, LAYERS, edits={"conv2": ablate([1])})
    plain = capture(model, x, LAYERS)
    assert torch.equal(result.capture.output, edited.output)
    assert result.baseline is first.capture
    # Held: the edited run (its tensors and the panels' arrays) and the unedited capture.
    assert (
        window.session.held_bytes()
        == result_bytes(result)
        > (result.capture.held_bytes() + first.capture.held_bytes())
    )
    assert not np.abs(result.layers["conv2"].view.data[1]).any()
    # Before/after side by side: the rows' numbers are the two runs' probabilities and logits.
    view = win.whatif.change_view
    assert not view.isHidden() and not window.centre.prediction_panel.bars_visible()
    # Run A is the edited run (after), B the unedited one (before): changes are after - before.
    p_before, p_after = _softmax(plain.output), _softmax(edited.output)
    rows = view.rows()
    assert {r.index for r in rows} >= set(np.argsort(-p_before)[:5].tolist())
    for index, _name, pa, pb, dp, la, lb, dl in rows:
        assert pa == pytest.approx(p_after[index], abs=1e-6)
        assert pb == pytest.approx(p_before[index], abs=1e-6)
        assert dp == pytest.approx(p_after[index] - p_before[index], abs=1e-6)
        assert la == pytest.approx(float(edited.output[0, index]), abs=1e-5)
        assert lb == pytest.approx(float(plain.output[0, index]), abs=1e-5)
        assert dl == pytest.approx(
            float(edited.output[0, index] - plain.output[0, index]), abs=1e-5
        )
    # What the user reads: before | after, each run's number in its column.
    texts = cell_texts(view)
    top = rows[0]
    assert texts[0][0].startswith((f"{top.index}: {top.name}", f"class {top.index}"))
    assert texts[0][1:3] == [f"{100 * top.p_b:.1f}%", f"{100 * top.p_a:.1f}%"]
    assert texts[0][3] == f"{100 * top.dp:+.1f}"
    target = view.target_row()
    assert target is not None and target[0] == plain.target_index
    # One colon ("Target 7: arrow: 94.8 % →" read as two labels).
    summary = win.whatif.dock.summary.text()
    assert summary.startswith(f"Target class {plain.target_index}") and summary.count(":") == 1
    assert "→" in summary
    # Marked: the edited layer's badge, not the others'; the dock lists the edit.
    panels = window.host.layer_panels
    assert panels["conv2"].edit_badge_text() == "ablate ch 1"
    assert panels["conv1"].edit_badge_text() == ""
    dock = win.whatif.dock
    assert dock.isVisible() and [r.label.text() for r in dock.rows] == ["conv2: ablate ch 1"]

    # Off in the dock: the original run is back, exactly (the very capture, re-used).
    with win.expect_run():
        dock.rows[0].enabled_box.click()
    assert window.session.result.capture is first.capture and window.session.result.baseline is None
    shown = panels["conv2"].activation_slot.mosaic
    assert np.array_equal(shown.image, first_mosaic.image, equal_nan=True)
    assert panels["conv2"].edit_badge_text() == ""
    assert window.centre.prediction_panel.bars_visible() and view.isHidden()
    assert dock.rows[0].label.text() == "conv2: ablate ch 1 (off)"


def test_difference_toggle_scale_value_and_selection(qtbot, actviz_window, tiny_cnn):
    win = actviz_window(tiny_cnn, frame(1), LAYERS, size=(1400, 900), auto_run=True)
    win.run_and_wait()
    window = win.window
    model, x = window.session.model, window.session.input.value
    # Ctrl+click two tiles of conv1, then right-click one of them: the menu is about both.
    panel1 = window.host.layer_panels["conv1"]
    canvas = panel1.activation_slot.image_canvas
    m = panel1.activation_slot.mosaic
    for channel in (0, 2):
        y0, x0 = m.tile_origin(channel)
        qtbot.mouseClick(
            canvas.viewport(),
            LEFT,
            Qt.KeyboardModifier.ControlModifier,
            pos=canvas.image_to_widget(x0 + 1.5, y0 + 1.5),
        )
    assert panel1.selected_channels() == [0, 2] and len(canvas.marked()) == 2
    win.whatif.feature.ask_factor = lambda parent, prompt: 2.0
    menu = win.tile_menu("conv1", 2)
    with win.expect_run():
        _click_menu_item(qtbot, menu, "Scale ch 0, 2…")
    edited = capture(model, x, LAYERS, edits={"conv1": scale([0, 2], 2.0)})
    plain = capture(model, x, LAYERS)
    assert torch.equal(window.session.result.capture.output, edited.output)

    # The difference of a later layer: edited minus unedited, symmetric, diverging colours.
    panel2 = window.host.layer_panels["conv2"]
    assert panel2.difference_button.isVisible() and panel2.difference_button.isEnabled()
    window.commands.colormap_combo.setCurrentText(
        "viridis"
    )  # a difference is diverging whatever the map
    qtbot.mouseClick(panel2.difference_button, LEFT)
    win.wait_idle()  # the panel is shown anew in the next display pass
    assert panel2.difference_shown()
    want = (edited["conv2"].tensor - plain["conv2"].tensor)[0].numpy()
    slot = panel2.activation_slot
    np.testing.assert_allclose(slot.view.data, want, rtol=1e-5, atol=1e-6)
    expected = mosaic(want, normalize="channel", symmetric=True)
    np.testing.assert_allclose(slot.mosaic.image, expected.image, rtol=1e-5, atol=1e-6)
    assert slot.mosaic.symmetric and slot.image_canvas.colormap_name() == DIFFERENCE_CMAP
    assert (
        window.host.layer_panels["conv1"].activation_slot.image_canvas.colormap_name() == "viridis"
    )
    # The factor edited in the dock re-runs with the new value; the difference follows.
    dock = win.whatif.dock
    with win.expect_run():
        dock.rows[0].value_box.setValue(0.5)
    halved = capture(model, x, LAYERS, edits={"conv1": scale([0, 2], 0.5)})
    assert torch.equal(window.session.result.capture.output, halved.output)
    assert panel2.difference_shown()
    want = (halved["conv2"].tensor - plain["conv2"].tensor)[0].numpy()
    np.testing.assert_allclose(slot.view.data, want, rtol=1e-5, atol=1e-6)
    # Off again: the edited activation itself.
    qtbot.mouseClick(panel2.difference_button, LEFT)
    win.wait_idle()
    assert not panel2.difference_shown()
    np.testing.assert_array_equal(slot.view.data, window.session.result.layers["conv2"].view.data)
    # Clear all: no edits, no toggle, the plain run.
    with win.expect_run(flush=False):
        qtbot.mouseClick(dock.clear_button, LEFT)
    assert not dock.rows and not window.session.result.capture.edits
    assert panel2.difference_button.isHidden()


def test_clamp_from_the_tile_menu(qtbot, actviz_window, tiny_cnn):
    win = actviz_window(tiny_cnn, frame(1), LAYERS, size=(1400, 900), auto_run=True)
    win.run_and_wait()
    window = win.window
    model, x = window.session.model, window.session.input.value
    asked = []

    def ask(parent, prompt):
        asked.append(prompt)
        return (None, 0.05)

    win.whatif.feature.ask_range = ask
    menu = win.tile_menu("conv1", 1)
    with win.expect_run():
        _click_menu_item(qtbot, menu, "Clamp ch 1…")
    assert asked == ["Clamp ch 1 of conv1 to (empty: no bound):"]
    edited = capture(model, x, LAYERS, edits={"conv1": clamp(None, 0.05, channels=[1])})
    plain = capture(model, x, LAYERS)
    got = window.session.result.capture
    assert torch.equal(got["conv1"].tensor, edited["conv1"].tensor)
    assert got["conv1"].tensor[0, 1].max() <= 0.05 < plain["conv1"].tensor[0, 1].max()
    assert torch.equal(got["conv1"].tensor[0, 0], plain["conv1"].tensor[0, 0])  # others kept
    assert torch.equal(got.output, edited.output)
    assert "clamp" in window.host.layer_panels["conv1"].edit_badge_text()


def test_range_dialog_says_what_is_wrong_and_stays_open(qtbot):
    from actviz.ui.whatif.feature import RangeDialog

    dialog = RangeDialog(None, "Clamp ch 1 of conv1 to:")
    qtbot.addWidget(dialog)
    dialog.show()
    for low, high, said in (
        ("", "", "Give a lowest or a highest value (or both)."),
        ("abc", "", "Lowest: 'abc' is not a number."),
        ("0", "nan", "Highest: 'nan' is not a number."),
        ("2", "1", "The lowest value (2) is above the highest (1)."),
    ):
        dialog.min_edit.setText(low)
        dialog.max_edit.setText(high)
        qtbot.mouseClick(dialog.ok_button, LEFT)
        assert dialog.isVisible() and dialog.message_label.text() == said
        assert dialog.chosen() is None
    dialog.min_edit.setText(" -1.5 ")
    dialog.max_edit.setText("")
    qtbot.mouseClick(dialog.ok_button, LEFT)
    assert not dialog.isVisible() and dialog.chosen() == (-1.5, None)


def test_a_bad_edit_is_a_message_not_a_crash(qtbot, actviz_window, tiny_cnn):
    win = actviz_window(tiny_cnn, frame(1), LAYERS, size=(1400, 900), auto_run=True)
    win.run_and_wait()
    window = win.window
    first = window.session.result
    with qtbot.waitSignal(window.run_failed, timeout=RUN_TIMEOUT_MS) as failed:
        win.whatif.add_edit("conv2", ablate([99]))
    assert "99" in failed.args[0]
    assert (
        "99" in " ".join(window.centre.banner.texts())
        and "99" in win.whatif.dock.error_label.text()
    )
    assert window.session.result is first  # the panels keep the previous result
    with win.expect_run(flush=False):
        win.whatif.dock.rows[0].remove_button.click()
    assert window.session.result.capture.edits == {}
    assert torch.equal(window.session.result.capture.output, first.capture.output)
    assert win.whatif.dock.error_label.isHidden()


def test_the_same_edit_twice_in_a_row_is_one_entry_unless_twice_changes_something():
    from actviz.workspace.edits_board import EditBoard

    changes = []
    board = EditBoard(lambda: changes.append(1))
    first = board.add("conv1", ablate([0]))
    assert board.add("conv1", ablate([0])) is first and len(board) == 1 and len(changes) == 1
    board.add("conv1", scale([0], 2.0))
    board.add("conv1", scale([0], 2.0))  # x2 twice is x4
    board.add("conv1", clamp(0.0, 1.0))
    board.add("conv1", clamp(0.0, 1.0))
    board.add("conv1", ablate([0]))  # after other edits: not a repeat of the last one
    assert [e.edit.kind for e in board] == ["ablate", "scale", "scale", "clamp", "ablate"]
    board.set_enabled(board.entries[-1].key, False)
    board.add("conv1", ablate([0]))  # the last one switched off: a new entry
    assert len(board) == 6


def test_right_click_on_a_bar_ablates_that_unit_and_layout_reset_keeps_the_dock(
    qtbot, actviz_window, tiny_cnn
):
    win = actviz_window(tiny_cnn, frame(1), LAYERS, size=(1400, 900), auto_run=True)
    win.run_and_wait()
    window = win.window
    # A real right click on bar 2 of the (N, C) output, then its menu's first item.
    with win.expect_run(flush=False):
        assert win.context_action("fc", 2, "Ablate").text() == "Ablate ch 2"
    assert float(window.session.result.capture.output[0, 2]) == 0.0
    row = next(r for r in win.whatif.change_view.rows() if r.index == 2)
    assert row.logit_a == 0.0  # the logit after the edit (run A is the edited run)
    # The same ablation again: the window says it was made, and nothing re-runs.
    edited = window.session.result
    win.context_action("fc", 2, "Ablate")
    qtbot.wait(50)
    assert [e.describe() for e in window.session.edits] == ["fc: ablate ch 2"]
    assert window.session.result is edited and not window.worker.is_busy()
    assert "Already made: fc: ablate ch 2" in win.status_text()
    window.reset_layout()
    assert win.whatif.dock.isVisible()


def test_patch_from_a_pinned_run(qtbot, actviz_window, tiny_cnn):
    win = actviz_window(tiny_cnn, frame(1), LAYERS, size=(1400, 900), auto_run=True)
    win.run_and_wait()
    window = win.window
    model = window.session.model
    pinned = window.pins_ui.pin_result()
    assert pinned is not None
    window.script.set_input(frame(2))
    win.run_and_wait(start=False)
    menu = win.tile_menu("conv2", 3)
    sub = next(a for a in menu.actions() if a.text() == "Patch from pin").menu()
    assert [a.text() for a in sub.actions()] == [pinned.label]
    with win.expect_run():
        sub.actions()[0].trigger()
    source = capture(model, frame(1), LAYERS)
    edited = capture(model, frame(2), LAYERS)
    got = window.session.result.layers["conv2"].view.data
    np.testing.assert_allclose(got[3], source["conv2"].tensor[0, 3].numpy(), rtol=1e-6)
    np.testing.assert_allclose(got[0], edited["conv2"].tensor[0, 0].numpy(), rtol=1e-6)
    assert win.whatif.dock.rows[0].label.text().endswith(f"({pinned.label})")


def test_live_frames_apply_the_edits(qtbot, actviz_window, tiny_cnn):
    win = actviz_window(tiny_cnn, frame(1), LAYERS, size=(1400, 900), auto_run=True)
    win.run_and_wait()
    window = win.window
    from actviz.ui.live.frames import TensorFrames

    model = window.session.model
    live = win.live.controller
    with win.expect_run(flush=False):
        win.whatif.add_edit("conv1", ablate([0, 1]))
    frames = torch.randn(2, 3, 16, 16, generator=torch.Generator().manual_seed(5))
    shown = live.frames_shown
    live.set_source(TensorFrames(frames, "clip"))
    qtbot.waitUntil(lambda: live.frames_shown > shown, timeout=RUN_TIMEOUT_MS)
    qtbot.waitUntil(lambda: live.idle, timeout=RUN_TIMEOUT_MS)
    result = window.session.result
    assert result.origin is not None  # a live frame
    assert [e.describe() for e in result.capture.edits["conv1"]] == ["ablate ch 0, 1"]
    want = capture(model, frames[:1], LAYERS, edits={"conv1": ablate([0, 1])})
    np.testing.assert_allclose(
        result.layers["conv2"].view.data, want["conv2"].tensor[0].numpy(), rtol=1e-5, atol=1e-6
    )
    assert window.host.layer_panels["conv1"].edit_badge_text() == "ablate ch 0, 1"


def test_window_export_writes_a_reproduce_script_with_the_model_source_and_edits(
    qtbot, actviz_window, tiny_cnn, tmp_path
):
    win = actviz_window(tiny_cnn, frame(1), LAYERS, size=(1400, 900), auto_run=True)
    win.run_and_wait()
    window = win.window
    from pathlib import Path

    import tests.ui.tiny_models as tiny

    source = f"{Path(tiny.__file__).resolve()}:TinyCNN"
    with win.expect_run(flush=False):
        assert window.files.open_model_source(source, wait=True)
    window.script.tick(["conv2"])
    with win.expect_run(flush=False):
        win.whatif.add_edit("conv2", ablate([1]))
    assert window.session.model_open_args["arch"] is None
    assert window.exports.export_all(tmp_path / "out", wait=True)
    script = (tmp_path / "out" / "reproduce.py").read_text()
    assert "tiny_models.py:TinyCNN" in script and "ablate([1])" in script
