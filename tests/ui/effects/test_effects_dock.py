"""The "Channels that matter" dock: bars equal the engine's estimates of the result shown,
Verify adds the exact values the engine computes, Ablate top k edits and re-runs."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from PySide6.QtCore import Qt

from actviz.analysis.effects.channel_effects import estimate_from_capture, verify
from actviz.ui.effects.view import BarRow
from tests.helpers import frame
from tests.ui.tiny_models import seeded_tiny_cnn

LAYERS = ["conv1", "conv2"]


def _tiny_with_effects(actviz_window):
    model = seeded_tiny_cnn()
    win = actviz_window(model, frame(3), LAYERS)
    result = win.run_and_wait()
    feature = win.effects.feature
    assert feature.effects is None  # nothing is estimated while the dock is closed
    win.effects.open()  # the estimates made (asserted)
    return win, model, result, feature


def test_bars_are_the_estimates_of_the_result_shown(actviz_window):
    win, model, result, feature = _tiny_with_effects(actviz_window)
    expected = estimate_from_capture(model, result.capture, LAYERS)
    eff = feature.effects
    assert eff is not None and eff.layers == tuple(LAYERS)
    for layer in LAYERS:
        np.testing.assert_array_equal(eff.estimate(layer), expected.estimate(layer))
        assert np.abs(expected.estimate(layer)).max() > 0
    bars = feature.view.sections["conv2"].bars
    k = feature.view.top
    want = [BarRow(r.channel, r.estimate, None) for r in expected.top("conv2", k)]
    assert list(bars.rows) == want
    assert len(bars.rows) == min(k, 6)
    # Largest |estimate| first; the tooltip holds the numbers.
    sizes = [abs(r.estimate) for r in bars.rows]
    assert sizes == sorted(sizes, reverse=True)
    text = bars.hover_text(0)
    assert f"ch {want[0].channel}" in text and f"{want[0].estimate:+.4g}" in text
    # Fewer bars shown follow the spin box.
    feature.view.top_spin.setValue(2)
    assert [r.channel for r in bars.rows] == [r.channel for r in want[:2]]


def test_a_bar_click_opens_the_channel(actviz_window):
    win, _model, _result, feature = _tiny_with_effects(actviz_window)
    bars = feature.view.sections["conv1"].bars
    channel = bars.rows[1].channel
    with win.qtbot.waitSignal(bars.channel_clicked):
        from PySide6.QtCore import QPoint, Qt

        win.qtbot.mouseClick(bars, Qt.MouseButton.LeftButton, pos=QPoint(100, 4 + 20 + 10))
    view = win.window.host.channel_view
    assert (view.name, view.channel) == ("conv1", channel)


def test_a_new_result_updates_the_estimates(actviz_window):
    win, model, _result, feature = _tiny_with_effects(actviz_window)
    before = feature.effects.estimate("conv2").copy()
    win.set_input(frame(3) * -2.0)
    result = win.run_and_wait()
    win.effects.wait_estimates()
    expected = estimate_from_capture(model, result.capture, LAYERS)
    np.testing.assert_array_equal(feature.effects.estimate("conv2"), expected.estimate("conv2"))
    assert not np.array_equal(before, expected.estimate("conv2"))


def test_verify_shows_the_exact_effects(actviz_window):
    win, model, result, feature = _tiny_with_effects(actviz_window)
    expected = verify(model, estimate_from_capture(model, result.capture, LAYERS), channels=16)
    assert feature.verify()
    assert feature.is_busy() and not feature.view.verify_button.isVisible()  # Cancel instead
    win.qtbot.waitUntil(lambda: not feature.is_busy(), timeout=30_000)
    eff = feature.effects
    assert eff.method == "exact"
    for layer in LAYERS:
        assert eff[layer].verified.all()
        np.testing.assert_allclose(eff.exact(layer), expected.exact(layer), rtol=0, atol=1e-9)
    # The window kept its result: the verification was the feature's job.
    assert win.window.session.result is result
    bars = feature.view.sections["conv2"].bars
    assert all(r.exact is not None for r in bars.rows)
    assert bars.rows[0].exact == expected["conv2"].row(bars.rows[0].channel).exact
    rho = expected.rank_correlation("conv2")
    assert f"ρ = {rho:.2f}" in feature.view.sections["conv2"].info.text()
    assert "exact" in bars.hover_text(0)


def test_cancel_stops_the_verification(actviz_window):
    win, _model, _result, feature = _tiny_with_effects(actviz_window)
    assert feature.verify()
    win.window.cancel()  # Esc
    win.qtbot.waitUntil(lambda: not feature.is_busy(), timeout=30_000)
    assert feature.effects.method == "estimate"
    assert "cancelled" in feature.view.message.text()
    assert feature.view.verify_button.isVisible() and feature.view.verify_button.isEnabled()


def test_ablate_top_three_changes_the_prediction(actviz_window):
    win, model, result, feature = _tiny_with_effects(actviz_window)
    top = feature.effects.top_channels("conv2", 3)
    before = result.capture.output.detach().clone()
    with win.expect_run():
        assert feature.ablate_top("conv2", 3)
    after = win.window.session.result
    win.effects.wait_estimates()
    entries = win.window.session.edits.entries
    assert [(e.layer, e.edit.kind) for e in entries] == [("conv2", "ablate")]
    assert tuple(after.capture.edits["conv2"][0].channels) == tuple(top)
    assert not torch.allclose(after.capture.output, before)
    # The ablated channels are zero in the edited run, so their estimates are 0 now.
    est = feature.effects.estimate("conv2")
    assert np.all(est[list(top)] == 0)


def test_keep_only_top_k_and_marking_the_panels(actviz_window):
    win, _model, _result, feature = _tiny_with_effects(actviz_window)
    top = list(feature.effects.top_channels("conv1", 2))
    feature.view.top_spin.setValue(2)
    feature.view.mark_check.setChecked(True)
    assert win.panel("conv1").selected_channels() == sorted(top)
    with win.expect_run():
        assert feature.keep_top("conv1")
    edit = win.window.session.edits.entries[0].edit
    assert edit.kind == "keep" and tuple(edit.channels) == tuple(top)


def test_live_frames_update_the_estimates(actviz_window):
    win, model, result, feature = _tiny_with_effects(actviz_window)
    clean = feature.effects.estimate("conv1").copy()
    shown = win.live.occlude()  # a live frame: the input occluded
    assert shown is not result and shown.origin is not None
    win.effects.wait_estimates()
    expected = estimate_from_capture(model, shown.capture, LAYERS)
    np.testing.assert_array_equal(feature.effects.estimate("conv1"), expected.estimate("conv1"))
    assert not np.array_equal(clean, expected.estimate("conv1"))


def test_a_session_keeps_the_top_k_and_the_marking(actviz_window):
    win = actviz_window(seeded_tiny_cnn(), frame(3), LAYERS)
    feature = win.effects.feature
    feature.view.top_spin.setValue(5)
    feature.view.mark_check.setChecked(True)
    parts = win.window.host.session_parts()
    assert parts["effects"] == {"top": 5, "mark": True, "sort": False}
    other = actviz_window(seeded_tiny_cnn(), frame(3), LAYERS)
    other.window.host.restore_session_parts(parts)
    assert other.effects.view.top == 5
    assert other.effects.view.mark_check.isChecked()


def test_logits_layer_and_verifying_an_edited_run(actviz_window):
    model = seeded_tiny_cnn()
    win = actviz_window(model, frame(3), ["conv2", "fc"])
    result = win.run_and_wait()
    feature = win.effects.feature
    win.effects.open()  # the estimates made (asserted)
    # fc's channels are the logits: zeroing the target's logit changes the target by -logit,
    # and no other logit moves it.
    cap = result.capture
    est = feature.effects.estimate("fc")
    target = cap.target_index
    assert est[target] == pytest.approx(-cap.target_value, abs=1e-6)
    assert np.all(np.delete(est, target) == 0)
    assert feature.rows("fc")[0].channel == target
    # An edited run is verified with its edits applied.
    with win.expect_run():
        feature.ablate_top("conv2", 1)
    win.effects.wait_estimates()
    edited = win.window.session.result.capture
    assert edited.edits
    assert feature.verify()
    win.qtbot.waitUntil(lambda: not feature.is_busy(), timeout=30_000)
    # The target is held to the unedited run's top-1 (issue 39), whatever the edit made lead.
    assert edited.target_index == target
    estimated = estimate_from_capture(model, edited, ["conv2", "fc"], target=target)
    expected = verify(model, estimated, channels=16)
    for layer in ("conv2", "fc"):
        np.testing.assert_allclose(
            feature.effects.exact(layer), expected.exact(layer), rtol=0, atol=1e-9
        )
    # Linear after fc: exact equals estimate, -logit of the edited run's target.
    fc = feature.effects["fc"]
    np.testing.assert_allclose(fc.exact[fc.verified], fc.estimate[fc.verified], atol=1e-5)
    assert fc.exact[edited.target_index] == pytest.approx(-edited.target_value, abs=1e-5)


def test_the_report_holds_the_channels_that_matter(actviz_window, tmp_path):
    win, _model, _result, feature = _tiny_with_effects(actviz_window)
    parts = win.window.host.report_parts()
    figures = parts["figures"]()
    captions = [caption for caption, _ in figures]
    assert captions == [f"Channels that matter: {layer}" for layer in feature.effects.results]
    sessions = win.sessions.feature
    out = tmp_path / "report.html"
    assert sessions.export_report(out, wait=True)
    assert "Channels that matter: conv1" in out.read_text()


def test_the_dock_fits_its_width(actviz_window):
    win, _model, _result, feature = _tiny_with_effects(actviz_window)
    win.settle()
    viewport = feature.dock.widget().viewport().width()
    # No line sets a least width beyond the dock's (its scroll area never scrolls sideways,
    # so a wider one was cut off: the legend's "darker: exact", the bars' right ends).
    assert 0 < feature.view.minimumSizeHint().width() <= viewport
    assert feature.view.width() <= viewport


def test_opened_before_any_run_the_dock_says_what_to_do_not_an_error(actviz_window):
    """No input yet is no error: the dock's line said "Run the model..." in red."""
    from actviz.ui.effects.feature import RUN_FIRST

    win = actviz_window(seeded_tiny_cnn(), None, LAYERS)
    win.open_dock("Channels that matter")
    line = win.effects.feature.view.message
    assert line.text() == RUN_FIRST and line.isVisible()
    assert "color" not in line.styleSheet()
    # A run brings the bars and says what they rank.
    win.set_input(frame(3))
    win.run_and_wait()
    win.effects.wait_estimates()
    assert win.effects.feature.effects is not None
    assert line.text().startswith("target: top-1 logit (class 2)")
    assert "color" not in line.styleSheet()


@pytest.mark.parametrize("size", [(1024, 640), (1280, 720)])
def test_the_dock_content_fits_its_width_idle_and_verifying(actviz_window, resnet, size):
    """Dragged as narrow as it goes (at 1024x640 beside the channel view it was ~250 px), the
    dock's check boxes and Cancel ran past its right edge (cut, no way to scroll sideways), and
    every wrapped line under them was cut at that wider width too."""
    from PySide6.QtWidgets import QAbstractButton, QLabel

    x = torch.randn(1, 3, 64, 64, generator=torch.Generator().manual_seed(0))
    # ResNet-18's verification (16 ablations a layer) lasts while its busy row is looked at.
    win = actviz_window(resnet, x, ["layer1", "layer2", "layer3", "layer4"], size=size)
    win.run_and_wait()
    win.effects.open()
    feature = win.effects.feature
    view, viewport = feature.view, feature.dock.widget().viewport()
    win.window.resizeDocks([feature.dock], [120], Qt.Orientation.Horizontal)  # a user's drag
    win.settle()
    assert feature.dock.width() < 260

    def fits(settle: bool = True) -> None:
        win.settle() if settle else win.qtbot.wait(30)  # (laid out, the job still running)
        assert view.width() <= viewport.width()
        for widget in [*view.findChildren(QAbstractButton), *view.findChildren(QLabel)]:
            if widget.isVisible():
                right = widget.mapTo(viewport, widget.rect().topRight()).x()
                assert right <= viewport.width(), widget.text()
                if isinstance(widget, QAbstractButton) and widget.text():
                    assert widget.width() >= widget.sizeHint().width(), widget.text()

    fits()
    assert not view.cancel_button.isVisible()
    win.qtbot.mouseClick(view.verify_button, Qt.MouseButton.LeftButton)
    # Cancel takes the Verify button's place while it runs.
    assert view.cancel_button.isVisible() and not view.verify_button.isVisible()
    fits(settle=False)
    assert feature.is_busy()
    win.qtbot.waitUntil(lambda: not feature.is_busy(), timeout=60_000)
    assert view.verify_button.isVisible() and not view.cancel_button.isVisible()
    fits()


def test_verify_waits_for_estimates_to_verify(actviz_window):
    """Before any result (and after a model switch) there is nothing to verify: the button is
    off under the dock's "run the model" line, on once the estimates are there."""
    model = seeded_tiny_cnn()
    win = actviz_window(model, None, LAYERS)
    feature = win.effects.feature
    win.open_dock(feature.dock.windowTitle())
    assert feature.effects is None and not feature.view.verify_button.isEnabled()
    win.set_input(frame(3))
    win.run_and_wait()
    win.effects.wait_estimates()
    assert feature.view.verify_button.isEnabled()
    win.qtbot.mouseClick(feature.view.verify_button, Qt.MouseButton.LeftButton)
    win.qtbot.waitUntil(lambda: not feature.is_busy(), timeout=60_000)
    assert any(feature.effects[layer].verified.any() for layer in LAYERS)
    win.set_model(seeded_tiny_cnn(), LAYERS)  # another model: its estimates are not made yet
    assert feature.effects is None and not feature.view.verify_button.isEnabled()
