"""A text model's token panel with "difference" on shows edited minus unedited on its tokens
(it kept showing the edited values, the toggle checked, nothing saying otherwise)."""

from __future__ import annotations

import numpy as np
import pytest
import torch

pytest.importorskip("transformers")

from actviz.core.edit_kinds import ablate  # noqa: E402
from tests.display.seq_models import tiny_bert  # noqa: E402

TOKENS = ["[CLS]", "the", "cat", "sat", "[SEP]"]
IDS = torch.tensor([[2, 5, 17, 33, 3]])
LAYER = "bert.encoder.layer.1"


def test_the_difference_toggle_shows_edited_minus_unedited_on_the_tokens(actviz_window):
    win = actviz_window(size=(1280, 720))
    w = win.window
    w.script.set_model(tiny_bert(), layers=["bert.encoder.layer.0", LAYER, "classifier"])
    w.session.set_input(
        {"input_ids": IDS, "attention_mask": torch.ones_like(IDS)}, kind="text", tokens=TOKENS
    )
    win.run_and_wait()
    with win.expect_run():
        win.whatif.add_edit("bert.encoder.layer.0", ablate([0, 3]))
        w.runs.run()
    result = w.session.result
    edited = result.capture[LAYER].tensor[0].numpy()
    unedited = result.baseline[LAYER].tensor[0].numpy()
    assert not np.allclose(edited, unedited)
    panel = win.reveal(LAYER)
    np.testing.assert_array_equal(panel.token_canvas.heat, edited)
    panel.difference_button.setChecked(True)
    win.wait_idle()
    assert panel.difference_shown()
    np.testing.assert_allclose(panel.token_canvas.heat, edited - unedited, atol=1e-6)
    assert panel.status_label.text().startswith("edited − unedited: 5 tokens x 32 features")
    # Off again: the edited values, as before.
    panel.difference_button.setChecked(False)
    win.wait_idle()
    np.testing.assert_array_equal(panel.token_canvas.heat, edited)
    # (The classifier reads [CLS] alone: the last layer's other tokens get no gradient.)
    assert (
        panel.status_label.text() == "5 tokens x 32 features · gradient exactly 0 at 4 of 5 tokens"
    )
    assert (result.capture[LAYER].grad[0, 1:] == 0).all() and result.capture[LAYER].grad[0, 0].any()
