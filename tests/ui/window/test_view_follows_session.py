"""The toolbar's colour map and normalisation follow the Session: a script that changes them
there (``session.set_view``) sees the window show what a saved session will keep."""

from __future__ import annotations

import torch

from tests.ui.tiny_models import TinyCNN


def test_session_set_view_moves_the_toolbar_and_the_panels(actviz_window):
    torch.manual_seed(0)
    x = torch.randn(1, 3, 16, 16, generator=torch.Generator().manual_seed(1))
    win = actviz_window(TinyCNN().eval(), x, ["conv1", "conv2"])
    win.run_and_wait()
    window, session = win.window, win.window.session
    a = window.commands
    session.set_view(colormap="magma", normalize="shared")
    win.settle()
    assert a.colormap_combo.currentText() == "magma"
    assert a.normalize_combo.currentData() == "shared"
    assert window.settings.colormap == "magma" and window.settings.normalize == "shared"
    panel = window.display.layer_panels["conv1"]
    assert panel.activation_slot.colormap() == "magma"
    # The toolbar still drives the Session as before.
    a.colormap_combo.setCurrentText("viridis")
    assert session.colormap == "viridis"
