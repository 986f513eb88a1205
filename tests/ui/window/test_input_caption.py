"""An input made in memory without a description is still described in the Model dock: a
text input set from a script (token ids and tokens) was captioned "no input"."""

from __future__ import annotations

import pytest
import torch

pytest.importorskip("transformers")

from tests.display.seq_models import tiny_bert  # noqa: E402

IDS = torch.tensor([[2, 5, 17, 33, 3]])


def test_a_text_input_from_a_script_is_not_called_no_input(actviz_window):
    win = actviz_window(size=(1280, 720))
    w = win.window
    w.script.set_model(tiny_bert(), layers=["classifier"])
    w.session.set_input(
        {"input_ids": IDS, "attention_mask": torch.ones_like(IDS)},
        kind="text",
        tokens=["[CLS]", "the", "cat", "sat", "[SEP]"],
    )
    preview = w.model_dock.input_preview
    assert preview.placeholder.text() != "no input"
    assert "5 tokens: [CLS] the cat sat [SEP]" in preview.caption_label.text()
    w.session.set_input({"input_ids": IDS})
    assert "dict: input_ids (1, 5) int64" in preview.caption_label.text()
