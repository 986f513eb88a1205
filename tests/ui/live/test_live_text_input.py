"""The Live dock's perturbation controls are disabled, saying why, while the opened input has
no image tensor (a text model's token ids): moved, they re-ran frames and exports named a
noise or an occlusion that changed nothing."""

from __future__ import annotations

import pytest
import torch

pytest.importorskip("transformers")

from actviz.ui.live.dock import NO_PERTURBATION_TEXT  # noqa: E402
from tests.display.seq_models import tiny_bert  # noqa: E402
from tests.ui.tiny_models import TinyCNN  # noqa: E402

IDS = torch.tensor([[2, 5, 17, 33, 3]])


def test_perturbations_are_off_for_token_ids_and_back_for_images(actviz_window):
    win = actviz_window(size=(1280, 720))
    w = win.window
    dock = win.open_dock("Live")
    live = win.live.feature
    w.script.set_model(tiny_bert(), layers=["classifier"])
    w.session.set_input(
        {"input_ids": IDS, "attention_mask": torch.ones_like(IDS)},
        kind="text",
        tokens=["[CLS]", "the", "cat", "sat", "[SEP]"],
    )
    controls = live.dock.perturbation_controls()
    assert dock is live.dock
    assert all(not c.isEnabled() for c in controls)
    assert all(c.toolTip() == NO_PERTURBATION_TEXT for c in controls)
    assert live.dock.reset_button.isEnabled()

    torch.manual_seed(0)
    w.script.set_model(TinyCNN().eval(), layers=["conv1"])
    w.script.set_input(torch.randn(1, 3, 16, 16))
    assert all(c.isEnabled() for c in controls)
    assert live.dock.noise_slider.toolTip() == "Gaussian noise, % of the input's std"
    with win.expect_run():
        live.dock.noise_slider.setValue(50)
    assert not live.controller.perturbation.is_identity()
    win.wait_idle()
