"""A model saved as ``.pt`` (the most common name for a checkpoint or a TorchScript file)
dropped on the window opens as the model. ``.pt`` is also a tensor input's suffix, so it was
read as an input and refused ("is a model file (torchscript), not an input")."""

from __future__ import annotations

import pytest
import torch

from tests.helpers import ConvMean
from tests.ui.conftest import LOAD_TIMEOUT_MS, frame

#: The core window is what these tests drive: built without the features.
pytestmark = pytest.mark.window_features()


def _dropped_net_window(actviz_window):
    torch.manual_seed(0)
    return actviz_window(ConvMean(4).eval(), frame(0), layers=["conv"])


def test_a_dropped_torchscript_pt_opens_as_the_model(qtbot, actviz_window, tmp_path):
    win = _dropped_net_window(actviz_window)
    path = tmp_path / "scripted.pt"
    torch.jit.save(torch.jit.script(ConvMean(4).eval()), str(path))
    with qtbot.waitSignal(win.window.model_loaded, timeout=LOAD_TIMEOUT_MS):
        win.window.files.open_dropped(path)
    assert win.session.model_name == "scripted.pt (TorchScript)"
    assert not any("not an input" in t for t in win.banner_messages())


def test_a_dropped_state_dict_pt_is_opened_as_the_model(qtbot, actviz_window, tmp_path):
    win = _dropped_net_window(actviz_window)
    path = tmp_path / "weights.pt"
    torch.save(ConvMean(4).state_dict(), path)
    with qtbot.waitSignal(win.window.model_load_failed, timeout=LOAD_TIMEOUT_MS) as blocker:
        win.window.files.open_dropped(path)
    # Opened as a model: the window asks for its architecture (nothing knows ConvMean).
    assert "holds only weights" in blocker.args[0]
    assert not any("not an input" in t for t in win.banner_messages())


def test_a_dropped_tensor_pt_is_still_an_input(qtbot, actviz_window, tmp_path):
    win = _dropped_net_window(actviz_window)
    path = tmp_path / "x.pt"
    torch.save(frame(1), path)
    with qtbot.waitSignal(win.window.input_loaded, timeout=LOAD_TIMEOUT_MS):
        win.window.files.open_dropped(path)
    assert win.session.input.source == str(path)
