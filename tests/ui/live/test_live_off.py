"""Live perturbations end with live mode: closing the Live dock, or opening another model,
gives the window's runs the opened input again (not an occluded or noisy one)."""

from __future__ import annotations

import torch

from tests.helpers import frame
from tests.ui.tiny_models import seeded_tiny_cnn


def _occlude(win, live):
    win.live.occlude()
    assert not live.perturbation.is_identity()
    assert not torch.equal(win.window.session.result.capture.inputs, win.window.session.input.value)


def test_closing_the_live_dock_drops_the_occlusion_patch(actviz_window):
    win = actviz_window(seeded_tiny_cnn(), frame(3), ["conv1", "fc"], features=["live"])
    win.run_and_wait()
    live = win.live.controller
    _occlude(win, live)
    win.live.dock.close()
    assert live.perturbation.is_identity()
    assert not win.live.dock.occlusion_check.isChecked()
    win.wait_idle()
    result = win.run_and_wait()
    assert torch.equal(result.capture.inputs, win.window.session.input.value)


def test_another_model_runs_on_the_unperturbed_input(actviz_window):
    win = actviz_window(seeded_tiny_cnn(), frame(3), ["conv1", "fc"], features=["live"])
    win.run_and_wait()
    live = win.live.controller
    _occlude(win, live)
    with win.expect_run():
        win.set_model(seeded_tiny_cnn(), layers=["conv1"])
        win.window.runs.run()
    win.wait_idle()
    assert live.perturbation.is_identity()
    assert torch.equal(win.window.session.result.capture.inputs, win.window.session.input.value)


def test_the_input_caption_after_live_mode_is_the_opened_inputs(actviz_window):
    """The demo's caption says how its input was made ("via demo_transform"); a live frame of
    the opened input says the same, and so does the preview once the Live dock closes."""
    win = actviz_window(features=["live"])
    window = win.window
    assert window.files.load_demo()
    win.wait_idle()
    win.run_and_wait()
    caption = window.model_dock.input_preview.caption_label.text
    opened = caption()
    assert "via demo_transform" in opened
    live = win.live.controller
    _occlude(win, live)
    assert caption().startswith(opened + " · ")  # the opened input's line, then the patch
    win.live.dock.close()
    win.wait_idle()
    win.live.wait_idle()
    assert caption() == opened
