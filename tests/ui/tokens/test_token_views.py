"""Token sequences, attention and the logit lens in the real window (tiny GPT-2 and ViT)."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from PySide6.QtCore import Qt

from actviz.display.attention import attention_rollout, capture_attention, rollout_map
from actviz.testing import RUN_TIMEOUT_MS
from actviz.ui.tokens.feature import MEAN
from tests.display.seq_models import tiny_gpt2, tiny_vit

TOKENS = ["The", " cat", " sat", " on", " a", " mat"]
IDS = torch.tensor([[5, 17, 33, 2, 9, 21]])


def test_token_layers_attention_and_lens_of_a_language_model(qtbot, actviz_window):
    win = actviz_window()
    window = win.window
    model = tiny_gpt2()
    window.script.set_model(model, layers=["transformer.h.1.mlp", "transformer.ln_f"])
    window.session.set_input(
        {"input_ids": IDS, "attention_mask": torch.ones_like(IDS)}, kind="text", tokens=TOKENS
    )
    win.run_and_wait()
    result = window.session.result
    cap = result.capture

    # Token panel: labels on the axis, the layer's values, norms, |gradient|; hover read-out.
    panel = win.reveal("transformer.ln_f")  # built in a display pass: hovered once laid out
    assert panel.token_view is not None and panel.token_box.isVisible()
    assert not panel.activation_slot.isVisible()
    canvas = panel.token_canvas
    assert canvas.row_labels == tuple(TOKENS)
    ticks = [label for _pos, label in canvas.plot.getAxis("left")._tickLevels[0]]
    assert ticks == TOKENS
    values = cap["transformer.ln_f"].tensor[0].numpy()
    np.testing.assert_array_equal(canvas.heat, values)
    np.testing.assert_allclose(canvas.bar_values, np.linalg.norm(values, axis=1), rtol=1e-5)
    # each bar beside its own row (both plots top-down)
    assert canvas.bars_plot.vb.yInverted() and canvas.plot.vb.yInverted()
    grad = np.abs(cap["transformer.ln_f"].grad[0].numpy())
    np.testing.assert_array_equal(panel.token_grad_canvas.heat, grad)
    qtbot.mouseMove(canvas.viewport(), canvas.cell_centre(2, 7))
    want = f"token 2 ' sat', feature 7: value {values[2, 7]:.4g}"
    qtbot.waitUntil(lambda: panel.status_label.text() == want, timeout=10_000)

    # Attention tab: the model's own attentions, per head and the mean; token labels.
    tabs = window.centre.tabs
    index = tabs.indexOf(win.tokens.feature.attention_page)
    assert tabs.isTabVisible(index)
    own = capture_attention(model, {"input_ids": IDS})
    att = win.tokens.attention_panel
    assert [att.layer_combo.itemText(i) for i in range(att.layer_combo.count())] == list(own.layers)
    assert att.head_combo.itemText(0) == MEAN and att.head_combo.count() == 5
    np.testing.assert_allclose(att.canvas.heat, own.mean(own.layers[0]), rtol=1e-6)
    att.set_layer("transformer.h.1.attn")
    att.head_combo.setCurrentIndex(3)  # head 2 (0: the mean)
    np.testing.assert_array_equal(att.canvas.heat, own.heads("transformer.h.1.attn")[2])
    assert att.labels == TOKENS
    heat = att.canvas.heat
    tabs.setCurrentIndex(index)
    qtbot.waitUntil(lambda: att.canvas.isVisible() and att.canvas.plot.vb.width() > 50)
    qtbot.mouseMove(att.canvas.viewport(), att.canvas.cell_centre(4, 1))
    want = f"query 4 ' a' -> key 1 ' cat': {float(heat[4, 1]):.4f}"
    qtbot.waitUntil(lambda: att.status_label.text() == want, timeout=10_000)
    assert "head 2" in att.title()

    # Logit lens: one row per block, the last block's top token is the model's prediction.
    lens = win.tokens.lens_panel
    assert lens.position() == len(TOKENS) - 1
    assert lens.table.rowCount() == 2
    logits = model(input_ids=IDS).logits[0, -1]
    top = int(logits.argmax())
    assert lens.table.item(1, 0).data(256) == top  # Qt.UserRole
    assert lens.table.item(1, 0).text().startswith(f"'#{top}' ")
    lens.position_combo.setCurrentIndex(1)
    assert lens.table.item(1, 0).data(256) == int(model(input_ids=IDS).logits[0, 1].argmax())


def test_vit_patch_maps_and_rollout_beside_gradcam(qtbot, actviz_window):
    win = actviz_window()
    window = win.window
    model = tiny_vit()
    x = torch.rand(1, 3, 32, 32, generator=torch.Generator().manual_seed(3))
    image = (np.random.default_rng(0).random((32, 32, 3)) * 255).astype(np.uint8)
    window.script.set_model(model, layers=["blocks.0"])
    window.script.set_input(x, image=image)
    win.run_and_wait()
    panel = window.host.layer_panels["blocks.0"]
    assert panel.token_view is None
    view = panel.activation_slot.view
    assert view.kind == "maps" and view.data.shape == (48, 2, 2)
    tokens = window.session.result.capture["blocks.0"].tensor[0]
    np.testing.assert_array_equal(view.data[3], tokens[1:, 3].reshape(2, 2).numpy())
    rollout = win.tokens.rollout_panel
    assert not rollout.isHidden()  # on the Overview tab (not the current one)
    own = capture_attention(model, x)
    expected = rollout_map(
        attention_rollout(own.stacked()), window.session.result.spec.layout, (32, 32)
    )
    np.testing.assert_allclose(window.session.result.rollout, expected, atol=1e-6)
    assert rollout.parentWidget() is window.centre.gradcam_panel.parentWidget()  # the same row
    assert win.tokens.attention_panel.labels[:2] == ["cls", "(0,0)"]


def test_typed_text_shows_token_views_of_a_model_folder(qtbot, actviz_window, tmp_path):
    win = actviz_window()
    window = win.window
    pytest.importorskip("transformers", reason="needs the hf extra")
    pytest.importorskip("tokenizers", reason="needs the hf extra")
    from tests.io.hf_tiny import save_tiny_gpt2

    folder = save_tiny_gpt2(tmp_path / "tiny-gpt2")
    views = win.tokens.feature
    assert views.text_bar.isHidden()
    assert window.files.open_model_source(str(folder), wait=True)
    assert not views.text_bar.isHidden() and views.text_action.isEnabled()
    window.script.tick(["transformer.h.0"])
    with qtbot.waitSignal(window.input_loaded, timeout=RUN_TIMEOUT_MS):
        qtbot.keyClicks(views.text_edit, "the cat sat on a log")
        qtbot.keyClick(views.text_edit, Qt.Key.Key_Return)
    assert window.session.input.tokens == ("the", "cat", "sat", "on", "a", "log")
    win.run_and_wait()
    result = window.session.result
    panel = window.host.layer_panels["transformer.h.0"]
    assert panel.token_canvas.row_labels == ("the", "cat", "sat", "on", "a", "log")
    np.testing.assert_array_equal(
        panel.token_canvas.heat, result.capture["transformer.h.0"].tensor[0].numpy()
    )
    logits = result.capture.output["logits"][0, -1]  # ModelOutput mapped to a dict
    assert result.target_index == int(logits.argmax())  # the next-token default target
    assert result.target_text.startswith("next-token logit at the last position")
    lens = win.tokens.lens_panel
    assert lens.position_combo.currentText().endswith("'log'")
    assert lens.table.item(1, 0).text()  # the tokenizer's strings, not ids
    assert not lens.table.item(1, 0).text().startswith("'#")

    # "Export everything" writes the token and attention views of the run shown.
    out = tmp_path / "export"
    assert window.exports.export_all(out, wait=True)
    heat = np.load(out / "transformer.h.0_tokens.npz")
    np.testing.assert_array_equal(heat["heat"], panel.token_canvas.heat)
    assert list(heat["tokens"]) == ["the", "cat", "sat", "on", "a", "log"]
    assert (out / "attention_transformer.h.0.attn.png").is_file()
    np.testing.assert_array_equal(
        np.load(out / "attention.npz")["transformer.h.0.attn"],
        result.attention.probs["transformer.h.0.attn"],
    )
    lens_json = (out / "logit_lens.json").read_text()
    assert '"layers": [' in lens_json and "transformer.h.1" in lens_json


def test_repeated_results_of_a_cnn_leave_the_attention_views_and_bars_alone(
    qtbot, actviz_window, monkeypatch
):
    win = actviz_window()
    window = win.window
    # Live mode sends a result per frame; the attention views, the before/after table and the
    # prediction bars have nothing new to show for a CNN, so they must not be redrawn (each
    # redraw was GUI-thread time per frame: lag p99 7.9 -> 5.5 ms when they stopped).
    from tests.ui.tiny_models import TinyCNN

    window.script.set_model(TinyCNN(), layers=["conv1"])
    window.session.set_input(torch.rand(1, 3, 16, 16))
    win.run_and_wait()
    views = win.tokens.feature
    whatif = win.whatif.feature
    calls: list[str] = []
    monkeypatch.setattr(
        views.attention_panel, "set_attention", lambda *a, **k: calls.append("attention")
    )
    monkeypatch.setattr(whatif.change_view.table, "setRowCount", lambda n: calls.append("table"))
    bars = window.centre.prediction_panel
    monkeypatch.setattr(bars, "set_predictions", lambda rows, **k: calls.append("bars"))
    win.run_and_wait()
    win.run_and_wait()
    assert "attention" not in calls and "table" not in calls
    assert calls.count("bars") <= 2  # the window's own update per run, not the what-if's too
    tabs = window.centre.tabs
    assert not tabs.isTabVisible(tabs.indexOf(views.attention_page))
    assert bars.bars_visible()


def test_hiding_the_tab_shown_goes_back_to_layers_not_to_compare(actviz_window):
    import torch

    from tests.ui.tiny_models import TinyCNN

    win = actviz_window(TinyCNN().eval(), torch.randn(1, 3, 16, 16), ["conv1"])
    w = win.window
    tabs = w.centre.tabs
    page = win.tokens.feature.attention_page
    w.host.set_tab_visible(page, True)
    tabs.setCurrentWidget(page)
    w.host.set_tab_visible(page, False)  # another model, without attention, was opened
    assert tabs.currentIndex() == 0 and tabs.tabText(0) == "Layers"
