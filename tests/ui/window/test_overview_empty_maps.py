"""The Overview's Grad-CAM panel without a map says why and shows nothing that reads as one:
no colour bar, no opacity slider, no empty layer selector (a text model showed all three
around a blank square, above its one line of explanation)."""

from __future__ import annotations

import pytest
import torch

pytest.importorskip("transformers")

from tests.display.seq_models import tiny_bert  # noqa: E402
from tests.ui.tiny_models import TinyCNN  # noqa: E402

TOKENS = ["[CLS]", "the", "cat", "sat", "[SEP]"]
IDS = torch.tensor([[2, 5, 17, 33, 3]])


def test_gradcam_without_a_map_hides_its_scale_and_controls(actviz_window):
    win = actviz_window(size=(1280, 720))
    w = win.window
    w.centre.tabs.setCurrentWidget(w.centre.overview_tab)
    w.script.set_model(tiny_bert(), layers=["bert.encoder.layer.0", "classifier"])
    w.session.set_input(
        {"input_ids": IDS, "attention_mask": torch.ones_like(IDS)}, kind="text", tokens=TOKENS
    )
    win.run_and_wait()
    win.wait_idle()
    panel = w.centre.gradcam_panel
    assert panel.heat is None
    assert panel.message_label.isVisible() and "Grad-CAM needs" in panel.message_label.text()
    assert not panel.canvas.colorbar.isVisible()
    assert not panel.controls.isVisible()
    assert not panel.layer_combo.isEnabled()

    # An image model with a spatial layer: the map, its colour bar and its controls are back.
    torch.manual_seed(0)
    w.script.set_model(TinyCNN().eval(), layers=["conv1", "fc"])
    w.script.set_input(torch.randn(1, 3, 16, 16, generator=torch.Generator().manual_seed(1)))
    win.run_and_wait()
    win.wait_idle()
    assert panel.heat is not None
    assert not panel.message_label.isVisible()
    assert panel.canvas.colorbar.isVisible()
    assert panel.controls.isVisible()
    assert panel.layer_combo.isEnabled() and panel.current_layer() == "conv1"
