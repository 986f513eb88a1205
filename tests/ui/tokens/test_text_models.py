"""Text models get a real Overview: next-token (or class) top-5 with token texts, the target
and status bar naming the token's text, saliency per token on the tokens, every block ticked
by default, and layer names shortened in the middle with the full name on hover.

Tiny Hugging Face models saved with a word-level tokenizer (tests/io/hf_tiny.py), opened as a
user opens them (``open_model_source``), with a text input.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch
from PySide6 import QtCore
from torch import nn

from actviz.core.tree import module_tree
from actviz.io.models.demo_model import build_demo_model
from actviz.workspace.session_state import default_layers

transformers = pytest.importorskip("transformers")
pytest.importorskip("tokenizers")

from tests.display.seq_models import tiny_bert, tiny_gpt2  # noqa: E402
from tests.io.hf_tiny import LABELS, save_tiny_bert, save_tiny_gpt2  # noqa: E402

LOAD_MS = 60_000
TEXT = "the cat sat on the"


def _open_text_model(win, folder) -> None:
    w = win.window
    assert w.files.open_model_source(str(folder))
    win.wait_idle(LOAD_MS)
    with win.expect_run(LOAD_MS):
        assert w.files.open_input_source("text:" + TEXT)
    win.wait_idle(LOAD_MS)
    assert not [m for m in win.banner_messages() if "rror" in m or "Could not" in m]


def test_default_ticks_of_text_models_are_every_block_plus_the_head():
    assert default_layers(module_tree(tiny_gpt2())) == [
        "transformer.h.0", "transformer.h.1", "lm_head",
    ]  # fmt: skip
    assert default_layers(module_tree(tiny_bert())) == [
        "bert.encoder.layer.0", "bert.encoder.layer.1", "classifier",
    ]  # fmt: skip
    # Every block, also past the image models' limit of 8 (GPT-2 small has 12).
    config = transformers.GPT2Config(
        n_layer=12, n_embd=8, n_head=2, vocab_size=20, n_positions=8
    )  # fmt: skip
    twelve = default_layers(module_tree(transformers.GPT2LMHeadModel(config)))
    assert twelve == [f"transformer.h.{i}" for i in range(12)] + ["lm_head"]
    # Image models keep their defaults; a text model without block list keeps the old rule.
    demo = default_layers(module_tree(build_demo_model()))
    assert demo == [
        "features.block1", "features.block2", "features.block3", "features.block4", "fc",
    ]  # fmt: skip
    bag = nn.Sequential(nn.Embedding(10, 4), nn.Flatten(), nn.Linear(4, 2))
    assert default_layers(module_tree(bag)) == ["0", "1", "2"]


def test_a_causal_lm_gets_token_predictions_saliency_and_block_ticks(actviz_window, tmp_path):
    folder = save_tiny_gpt2(tmp_path / "gpt2")
    win = actviz_window(auto_run=True)
    w = win.window
    _open_text_model(win, folder)
    assert w.session.ticked == ["transformer.h.0", "transformer.h.1", "lm_head"]
    result = w.session.result
    tok = w.session.loaded_model.tokenizer
    ids = w.session.input.value["input_ids"]
    model = w.session.model
    with torch.no_grad():
        probs = torch.softmax(model(input_ids=ids).logits[0, -1].double(), dim=0)
    top = torch.topk(probs, 5)
    words = [tok.decode([i]) for i in top.indices.tolist()]

    # The prediction panel: the next-token top-5, each token's text and its probability.
    panel = w.centre.prediction_panel
    assert panel.row_texts() == [repr(word) for word in words]
    assert [i for i, _label, _p in panel.predictions()] == top.indices.tolist()
    assert [p for _i, _label, p in panel.predictions()] == pytest.approx(top.values.tolist())
    assert not panel.placeholder.isVisible()
    first = int(top.indices[0])
    assert panel._rows[0].label.toolTip() == f"token {first}: {words[0]!r}"
    # The target and the status bar name the token by its text.
    named = f"token {first} {words[0]!r}"
    assert named in panel.target_label.text()
    assert named in win.status_text()
    # The Input panel says the text once (the source, "text:...", is not its file name).
    caption = w.model_dock.input_preview.caption_label.text()
    assert caption.startswith(f"text {TEXT!r}: 5 tokens") and caption.count(TEXT) == 1
    # The sample picker offers pictures: off for a text model, with why (it offered them).
    combo = w.commands.sample_combo
    assert not combo.isEnabled() and "reads the text typed" in combo.toolTip()

    # Saliency: |gradient x input embedding| per token, on the tokens.
    sal = w.centre.saliency_panel
    assert sal.token_strip is not None and sal.token_strip.isVisibleTo(sal)
    assert not sal.canvas.isVisibleTo(sal)
    assert "not a float tensor" not in sal.message_label.text()
    tokens = w.session.input.tokens
    assert sal.token_strip.labels == tuple(tokens)
    cap = result.capture
    emb, grad = cap["transformer.wte"].tensor, cap["transformer.wte"].grad
    want = (emb * grad).sum(dim=-1).abs()[0].numpy()
    np.testing.assert_allclose(sal.token_strip.values, want, rtol=1e-5, atol=1e-9)
    assert "transformer.wte" not in w.host.layer_panels  # recorded for saliency, not shown

    # The last block's outputs at the earlier tokens never reach the last token's logit: their
    # gradient is exactly 0 and the panel says so; the first block's reach it by attention.
    last, first = win.reveal("transformer.h.1"), win.reveal("transformer.h.0")
    zero = (cap["transformer.h.1"].grad[0].abs().sum(-1) == 0).tolist()
    assert zero == [True, True, True, True, False]
    assert (
        last.status_label.text() == "5 tokens x 16 features · gradient exactly 0 at 4 of 5 tokens"
    )
    assert (cap["transformer.h.0"].grad[0].abs().sum(-1) > 0).all()
    assert first.status_label.text() == "5 tokens x 16 features"

    # The statistics table shortens long names in the middle, the full name on hover.
    stats = w.centre.stats_table
    assert stats.name_view.textElideMode() == QtCore.Qt.TextElideMode.ElideMiddle
    assert stats.view.textElideMode() == QtCore.Qt.TextElideMode.ElideMiddle
    metrics = stats.name_view.fontMetrics()
    shown = metrics.elidedText(
        "transformer.h.1", stats.name_view.textElideMode(), metrics.horizontalAdvance("transf…h.1")
    )
    assert shown.startswith("tr") and shown.endswith(".1") and "…" in shown
    row = stats.names().index("transformer.h.1")
    index = stats.model.index(row, 0)
    assert stats.model.data(index, QtCore.Qt.ItemDataRole.ToolTipRole) == "transformer.h.1"

    # An image model again: the samples are offered again.
    win.set_model(torch.nn.Sequential(torch.nn.Conv2d(3, 4, 3)), ["0"])
    assert combo.isEnabled() and combo.toolTip() == "Pick a bundled sample image"


def test_a_sequence_classifier_gets_class_names_and_token_saliency(actviz_window, tmp_path):
    folder = save_tiny_bert(tmp_path / "bert")
    win = actviz_window(auto_run=True)
    w = win.window
    _open_text_model(win, folder)
    assert w.session.ticked == ["bert.encoder.layer.0", "classifier"]
    panel = w.centre.prediction_panel
    assert sorted(panel.row_texts()) == sorted(LABELS.values())
    index, label, _p = panel.predictions()[0]
    assert panel._rows[0].label.toolTip() == f"class {index}: {label}"
    assert panel.target_label.text().endswith(f": {label}")
    sal = w.centre.saliency_panel
    assert sal.token_strip is not None and sal.token_strip.isVisibleTo(sal)
    assert sal.token_strip.labels[0] == "[CLS]" and len(sal.token_strip.values) == 7


def test_the_saliency_strip_reads_out_the_token_under_the_mouse(actviz_window, tmp_path):
    folder = save_tiny_gpt2(tmp_path / "gpt2")
    win = actviz_window(auto_run=True)
    w = win.window
    _open_text_model(win, folder)
    w.centre.tabs.setCurrentWidget(w.centre.overview_tab)
    win.wait_idle(LOAD_MS)
    sal = w.centre.saliency_panel
    strip = sal.token_strip
    win.qtbot.waitUntil(lambda: strip.isVisible() and strip.plot.vb.height() > 50)
    win.settle()  # the strip's rows where the pointer lands, not where they were a pass ago
    tokens = w.session.result.token_saliency
    # Token 2's row, in the bars' area.
    point = strip.mapFromScene(strip.plot.vb.mapViewToScene(QtCore.QPointF(0.0, 2.5)))
    win.qtbot.mouseMove(strip.viewport(), QtCore.QPoint(point.x() + 4, point.y()))
    want = tokens.describe(2)
    assert want.startswith(f"token 2 {tokens.tokens[2]!r}: |grad × embedding| ")
    win.qtbot.waitUntil(lambda: sal.status_label.text() == want, timeout=10_000)
    ticks = [label for _pos, label in strip.plot.getAxis("left")._tickLevels[0]]
    assert ticks == list(tokens.tokens)


def test_the_gradcam_layer_selector_shortens_names_in_the_middle(qtbot):
    from actviz.ui.panels.overlay import OverlayPanel

    panel = OverlayPanel("Grad-CAM", with_layer_selector=True)
    qtbot.addWidget(panel)
    names = ["transformer.h.0.mlp.c_proj", "transformer.h.11.mlp.c_proj"]
    panel.set_layers(names, names[1])
    combo = panel.layer_combo
    combo.setFixedWidth(combo.fontMetrics().horizontalAdvance("transformer.h") + 40)
    panel.show()
    qtbot.waitExposed(panel)
    shown = combo.shown_text()
    assert "…" in shown and shown.startswith("tr") and shown.endswith("proj")
    qtbot.waitUntil(lambda: combo.toolTip() == names[1], timeout=10_000)
    assert combo.view().textElideMode() == QtCore.Qt.TextElideMode.ElideMiddle


def test_the_attention_layer_selector_shortens_names_in_the_middle(qtbot):
    from actviz.display.attention import capture_attention
    from actviz.ui.tokens.feature import AttentionPanel

    model = tiny_gpt2()
    maps = capture_attention(model, {"input_ids": torch.tensor([[1, 2, 3]])})
    panel = AttentionPanel()
    qtbot.addWidget(panel)
    panel.set_attention(maps, ["a", "b", "c"])
    combo = panel.layer_combo
    combo.setCurrentIndex(1)
    combo.setFixedWidth(combo.fontMetrics().horizontalAdvance("transformer.h") + 40)
    panel.show()
    qtbot.waitExposed(panel)
    shown = combo.shown_text()
    assert "…" in shown and shown.endswith("attn") and shown.startswith("tr")
    qtbot.waitUntil(lambda: combo.toolTip() == "transformer.h.1.attn", timeout=10_000)


def test_the_export_lists_the_same_next_tokens_as_the_window(actviz_window, tmp_path):
    import json

    folder = save_tiny_gpt2(tmp_path / "gpt2")
    win = actviz_window(auto_run=True)
    w = win.window
    _open_text_model(win, folder)
    out = tmp_path / "out"
    assert w.exports.export_all(out, wait=True)
    summary = json.loads((out / "summary.json").read_text())
    rows = [(r["index"], r["label"], r["probability"]) for r in summary["prediction"]]
    shown = w.centre.prediction_panel.predictions()
    assert [(i, label) for i, label, _p in rows] == [(i, label) for i, label, _p in shown]
    assert [p for _i, _l, p in rows] == pytest.approx([p for _i, _l, p in shown])
    assert rows[0][1].startswith("'")  # a token's text, quoted
