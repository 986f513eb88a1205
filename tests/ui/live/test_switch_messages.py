"""What the window says after ordinary transitions is true: the Overview's saliency panel after
a run made from the Layers tab, the banner after a typed input that did not fit a new model,
and the rows a smaller model's prediction panel no longer uses."""

from __future__ import annotations

import pytest
import torch

from actviz.io.input_files import DEFAULT_PROMPT
from tests.ui.tiny_models import TinyCNN

LOAD_MS = 120_000


def _layers_tab_run(actviz_window, **kwargs):
    torch.manual_seed(0)
    win = actviz_window(
        TinyCNN().eval(), torch.randn(1, 3, 16, 16), ["conv1", "conv2", "fc"], **kwargs
    )
    w = win.window
    w.host.show_tab(None)  # the Layers tab: runs skip the input gradient
    result = win.run_and_wait()
    assert result.capture.input_grads is None
    return win


def test_overview_saliency_after_a_layers_tab_run_is_computed_not_misnamed(actviz_window):
    win = _layers_tab_run(actviz_window, auto_run=True)
    w = win.window
    sal = w.centre.saliency_panel
    # The result shown says why it has no saliency: not a reason that is false here.
    text = w.session.result.saliency_message
    assert "not a float tensor" not in text and "did not differentiate" in text
    # Shown: the window runs again with the input gradient, and the map is painted.
    with win.expect_run():
        w.host.show_tab(w.centre.overview_tab)
    win.wait_idle()
    assert (
        w.session.result.capture.input_grads is not None and w.session.result.saliency is not None
    )
    assert "not a float tensor" not in sal.message_label.text()


def test_overview_saliency_without_auto_run_says_why_it_is_missing(actviz_window):
    win = _layers_tab_run(actviz_window)
    w = win.window
    w.runs.auto_run = False
    w.host.show_tab(w.centre.overview_tab)
    win.settle()
    w.display.flush_panel_updates()
    text = w.centre.saliency_panel.message_label.text()
    # The input is a float tensor: the run simply did not differentiate back to it.
    assert "not a float tensor" not in text
    assert "Computing" not in text  # nothing computes it without auto-run
    assert "Run" in text and "input gradient" in text


def test_a_typed_input_that_fails_during_a_model_switch_stays_said(actviz_window, tmp_path):
    pytest.importorskip("transformers")
    from tests.io.hf_tiny import save_tiny_gpt2

    gpt2 = save_tiny_gpt2(tmp_path / "gpt2")
    bad = tmp_path / "broken.png"
    bad.write_bytes(b"not a picture at all")
    win = actviz_window(auto_run=True)
    w = win.window
    with win.expect_run(LOAD_MS):
        w.files.load_demo()
    win.wait_idle(LOAD_MS)
    # The picture typed while GPT-2 opens waits for it, fails, and the demo's picture does
    # not fit GPT-2 either: the model's prompt is shown instead.
    with win.expect_run(LOAD_MS):
        assert w.files.open_model_source(str(gpt2))
        assert w.files.open_input_source(str(bad))
    win.wait_idle(LOAD_MS)
    assert w.session.input.source == "text:" + DEFAULT_PROMPT
    said = [m for m in win.banner_messages() if "broken.png" in m]
    assert len(said) == 1, win.banner_messages()
    assert said[0].startswith("'broken.png' could not be opened for gpt2")
    assert "instead" in said[0]


class _ThreeClasses(TinyCNN):
    """TinyCNN with a 3-class head."""

    def __init__(self) -> None:
        super().__init__()
        self.fc = torch.nn.Linear(6, 3)


def test_a_model_with_fewer_classes_leaves_no_old_label_in_the_prediction_panel(actviz_window):
    from PySide6.QtWidgets import QLabel

    torch.manual_seed(0)
    categories = [f"old class {i}" for i in range(5)]
    win = actviz_window(TinyCNN().eval(), torch.randn(1, 3, 16, 16), ["conv1", "fc"])
    w = win.window
    w.script.set_model(w.session.model, layers=["conv1", "fc"], categories=categories)
    win.run_and_wait()
    panel = w.centre.prediction_panel
    assert len(panel.predictions()) == 5 and "old class" in " ".join(panel.row_texts())
    win.set_model(_ThreeClasses().eval(), layers=["conv1", "fc"])
    win.run_and_wait()
    assert len(panel.predictions()) == 3
    texts = [lab.text() + lab.toolTip() for lab in panel.findChildren(QLabel)]
    assert not [t for t in texts if "old class" in t], texts


def test_the_live_docks_stats_start_over_with_another_model(actviz_window):
    from actviz.testing import RUN_TIMEOUT_MS
    from actviz.ui.live.frames import TensorFrames

    torch.manual_seed(0)
    win = actviz_window(TinyCNN().eval(), torch.randn(1, 3, 16, 16), ["conv1", "fc"])
    win.run_and_wait(flush=False)
    live_feature = win.live.feature
    live = live_feature.controller
    live.set_source(TensorFrames(torch.randn(6, 3, 16, 16), "clip"))
    live.set_speed(60)
    live.play()
    win.qtbot.waitUntil(lambda: live.frames_shown >= 2, timeout=RUN_TIMEOUT_MS)
    stats = live_feature.dock.stats_label
    assert "capture" in stats.text() and "frames" in stats.text()
    win.set_model(_ThreeClasses().eval(), layers=["conv1", "fc"])
    win.qtbot.waitUntil(lambda: live.idle, timeout=RUN_TIMEOUT_MS)
    win.settle()
    # Nothing of the old model's frames: no capture time, no frame count but zero.
    assert "capture" not in stats.text() and "ms" not in stats.text(), stats.text()
    assert live.status().frames == 0 and live.status().dropped == 0
