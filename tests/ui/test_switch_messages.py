"""What the window says after ordinary transitions is true: the Overview's saliency panel after
a run made from the Layers tab, the banner after a typed input that did not fit a new model,
and the rows a smaller model's prediction panel no longer uses."""

from __future__ import annotations

import torch

from tests.ui.tiny_models import TinyCNN


def _layers_tab_run(actviz_window, **kwargs):
    torch.manual_seed(0)
    win = actviz_window(
        TinyCNN().eval(), torch.randn(1, 3, 16, 16), ["conv1", "conv2", "fc"], **kwargs
    )
    w = win.window
    w.show_tab(None)  # the Layers tab: runs skip the input gradient
    result = win.run_and_wait()
    assert result.capture.input_grads is None
    return win


def test_overview_saliency_after_a_layers_tab_run_is_computed_not_misnamed(actviz_window):
    win = _layers_tab_run(actviz_window, auto_run=True)
    w = win.window
    sal = w.centre.saliency_panel
    # The result shown says why it has no saliency: not a reason that is false here.
    text = w.result.saliency_message
    assert "not a float tensor" not in text and "did not differentiate" in text
    # Shown: the window runs again with the input gradient, and the map is painted.
    with win.expect_run():
        w.show_tab(w.centre.overview_tab)
    win.wait_idle()
    assert w.result.capture.input_grads is not None and w.result.saliency is not None
    assert "not a float tensor" not in sal.message_label.text()


def test_overview_saliency_without_auto_run_says_why_it_is_missing(actviz_window):
    win = _layers_tab_run(actviz_window)
    w = win.window
    w.runs.auto_run = False
    w.show_tab(w.centre.overview_tab)
    win.settle()
    w.flush_panel_updates()
    text = w.centre.saliency_panel.message_label.text()
    # The input is a float tensor: the run simply did not differentiate back to it.
    assert "not a float tensor" not in text
    assert "Computing" not in text  # nothing computes it without auto-run
    assert "Run" in text and "input gradient" in text
