"""The Compare tab compares the layers the window shows: a text model's run also records its
embedding (for the saliency on tokens), and the chart counted and plotted that unticked layer
("4 layer(s) compared" for 3 ticked)."""

from __future__ import annotations

import pytest
import torch

pytest.importorskip("transformers")

from actviz.core.edit_kinds import ablate  # noqa: E402
from tests.display.seq_models import tiny_bert  # noqa: E402

TOKENS = ["[CLS]", "the", "cat", "sat", "[SEP]"]
IDS = torch.tensor([[2, 5, 17, 33, 3]])
TICKED = ["bert.encoder.layer.0", "bert.encoder.layer.1", "classifier"]


def test_a_comparison_of_a_text_model_holds_the_ticked_layers_only(actviz_window):
    win = actviz_window(size=(1280, 720))
    w = win.window
    w.script.set_model(tiny_bert(), layers=TICKED)
    w.session.set_input(
        {"input_ids": IDS, "attention_mask": torch.ones_like(IDS)}, kind="text", tokens=TOKENS
    )
    win.run_and_wait()
    extra = [n for n in w.session.result.capture.names if n not in w.session.result.shown]
    assert extra, "the run recorded no layer beyond the ticked ones: nothing tested"
    pin = w.pins_ui.pin_result()
    with win.expect_run():
        win.whatif.add_edit("bert.encoder.layer.0", ablate([1]))
        w.runs.run()
    compare = win.compare.feature
    with win.qtbot.waitSignal(compare.compare_finished, timeout=60_000):
        assert w.pins_ui.compare_with_pin(pin)
    names = [d.name for d in compare.outcome.comparison.layers]
    assert names == TICKED
    assert compare.view.chart.names == TICKED
    assert "3 layer(s) compared" in compare.view.message()
