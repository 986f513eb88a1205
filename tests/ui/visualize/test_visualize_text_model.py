"""What channels want on a text model (a tiny BERT built from a config): one readable line
saying why it cannot be done, and no grey tiles that look like pictures still to come."""

from __future__ import annotations

import torch

from tests.display.seq_models import tiny_bert_encoder


def test_a_text_models_page_says_why_in_words_and_shows_no_pending_tiles(actviz_window):
    bert = tiny_bert_encoder()
    layer = "encoder.layer.0.output"
    win = actviz_window(bert, {"input_ids": torch.randint(0, 50, (1, 6))}, [layer])
    win.run_and_wait()
    feature = win.visualize.feature
    dock = feature.page.dock
    assert feature.visualise_page(layer)
    win.qtbot.waitUntil(lambda: not feature.is_busy(), timeout=60_000)
    text = dock.message.text()
    assert text.startswith("Could not visualise: the model's embeddings.word_embeddings"), text
    assert "VisualizeError" not in text and "token ids" in text
    # No page of grey tiles under the error (16 of them said "ch 0-15 of ?").
    assert dock.mosaic.channels == ()
    assert dock.visualise_button.isEnabled()  # the same layer can be asked again
