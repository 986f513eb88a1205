"""Settings that would make every run fail are refused where they are set, with a message."""

from __future__ import annotations

import torch

from tests.ui.tiny_models import TinyCNN


def _ran(actviz_window):
    torch.manual_seed(0)
    win = actviz_window(TinyCNN().eval(), torch.randn(1, 3, 16, 16), ["conv1", "fc"])
    win.run_and_wait()
    return win


def test_a_target_beyond_the_classes_is_refused_in_the_box(actviz_window):
    win = _ran(actviz_window)
    w = win.window
    classes = w.session.result.capture.output.shape[-1]
    assert not w.host.set_target_text(str(classes))
    assert w.session.target is None
    assert any(f"class {classes} is out of range" in m for m in win.banner_messages())
    assert w.commands.target_combo.currentIndex() == 0  # "auto" again, not the refused text
    assert not w.host.set_target_text("-1")
    assert w.host.set_target_text(str(classes - 1)) and w.session.target == classes - 1
    result = win.run_and_wait()
    assert result.capture.target_index == classes - 1


def test_a_list_input_for_a_batch_model_is_refused_and_unticked(actviz_window):
    win = _ran(actviz_window)
    w = win.window
    action = w.commands.input_list_action
    action.trigger()
    assert not action.isChecked() and not w.session.input_as_list
    assert any("takes a batch tensor, not a list" in m for m in win.banner_messages())
    win.run_and_wait()  # the run still works
