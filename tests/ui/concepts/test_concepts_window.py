"""Concepts in the window (issue 41, the window part), driven as a user would: Data > Open
concepts… attaches a SAELens folder to a ticked conv layer of a tiny CNN; its panel shows the
concepts most active for the input as tiles (the pixels of the concept maps' mosaic); a click
on a tile opens the Concept dock; Remove adds the concept edit and the re-run equals a
hand-written hook; a saved session opens with the dictionary and its names; Data > Train
concepts… trains on a folder of pictures with progress, and Cancel stops it."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from PIL import Image
from PySide6.QtCore import QPoint, Qt

import actviz
from actviz.analysis.concepts.tiles import ORDER_LABEL
from actviz.core.structures import first_tensor
from actviz.display.colormaps import indexed_table
from actviz.display.mosaic import ChannelOrder, mosaic
from tests.helpers import frame
from tests.ui.concepts.concepts_windows import (
    LAYER,
    concepts_opened,
    menu_action,
)
from tests.ui.tiny_models import TinyCNN


def _painted_equals(win, m):
    canvas = win.panel(LAYER).activation_slot.image_canvas
    painted = win.shown_pixels(LAYER)
    expected = indexed_table(canvas.colormap_name())[m.indices]
    assert painted.shape[:2] == m.image.shape
    np.testing.assert_array_equal(painted[..., :3], expected[..., :3])


def _click_concept_tile(win, concept: int) -> None:
    panel = win.reveal(LAYER)
    slot = panel.activation_slot
    y0, x0 = slot.mosaic.tile_origin(concept)
    canvas = slot.image_canvas
    pos = canvas.image_to_widget(x0 + 1.5, y0 + 1.5)
    win.qtbot.mouseClick(canvas.viewport(), Qt.MouseButton.LeftButton, pos=QPoint(pos))


def test_concept_tiles_view_and_remove(actviz_window, tmp_path):
    win, model, feature, c, folder = concepts_opened(actviz_window, tmp_path)
    session = win.session
    assert session.concepts[LAYER].folder == str(folder)
    panel = win.panel(LAYER)
    assert panel.tile_unit() == "concept"
    cap = win.window.session.result.capture
    maps = c.maps(cap, LAYER).numpy()
    peaks = maps.reshape(12, -1).max(1)
    firing = [int(i) for i in np.flatnonzero(peaks > 0)]
    order = tuple(sorted(firing, key=lambda i: (-peaks[i], i)))
    assert len(order) >= 2
    m = panel.activation_slot.mosaic
    # The tiles: the concepts that fire, most active first, each its own map.
    assert m.order.label == ORDER_LABEL and m.tile_channels == order[: m.channels]
    expected = mosaic(maps, max_channels=m.page_size, order=ChannelOrder(order, ORDER_LABEL))
    np.testing.assert_allclose(m.image, expected.image, atol=1e-6, equal_nan=True)
    _painted_equals(win, expected)
    assert panel.page_bar.text().startswith(f"{ORDER_LABEL}: 1-")
    assert not panel.gradient_shown()

    # A click on the second tile opens the Concept dock on that concept.
    second = order[1]
    _click_concept_tile(win, second)
    win.qtbot.waitUntil(lambda: feature.view.shown == (LAYER, second), timeout=30_000)
    assert feature.dock.isVisible()
    assert f"Concept {second} of 12" in feature.view.title.text()
    win.qtbot.waitUntil(lambda: "Removing it" in feature.view.effect_label.text(), timeout=10_000)
    shown_effect = feature.view.effect_label.text()

    # Remove: the concept edit on the board, the re-run equals a hand-written hook.
    with win.expect_run():
        win.qtbot.mouseClick(feature.view.remove_button, Qt.MouseButton.LeftButton)
    entries = list(session.edits)
    assert len(entries) == 1 and entries[0].layer == LAYER
    assert entries[0].edit.kind == "concept" and tuple(entries[0].edit.channels) == (second,)
    edited = win.window.session.result.capture.output

    def hook(_m, _args, out):
        x = out.movedim(1, -1)
        z = c.encode(x)
        return (x - z[..., second : second + 1] * c.W_dec[second]).movedim(-1, 1)

    handle = model.conv2.register_forward_hook(hook)
    try:
        with torch.no_grad():
            by_hand = model(frame(0))
    finally:
        handle.remove()
    with torch.no_grad():
        plain = model(frame(0))
    assert not torch.allclose(by_hand, plain, atol=1e-4)  # the concept mattered
    torch.testing.assert_close(edited, by_hand, atol=1e-5, rtol=0)
    # The effect the view said before the edit is the same change, in probabilities.
    t = int(plain[0].argmax())
    before, after = torch.softmax(plain[0], 0)[t], torch.softmax(by_hand[0], 0)[t]
    assert f"{100 * float(before):.1f} % → {100 * float(after):.1f} %" in shown_effect

    # The view measures the effect again on the new result, its own removal left out.
    win.qtbot.waitUntil(lambda: "Removing it" in feature.view.effect_label.text(), timeout=10_000)
    assert feature.view.effect_label.text() == shown_effect
    assert second not in panel.activation_slot.mosaic.tile_channels  # it fires no more

    # Show channels again from a concept tile's menu: the channel mosaic comes back.
    win.context_action(
        LAYER, win.panel(LAYER).activation_slot.mosaic.tile_channels[0], "Show channels"
    )
    win.window.display.flush_panel_updates()
    assert panel.tile_unit() == "" and panel.activation_slot.mosaic.order is None
    # And "Show concepts" from a channel tile's menu.
    win.context_action(LAYER, 0, "Show concepts")
    win.window.display.flush_panel_updates()
    assert panel.tile_unit() == "concept"


def test_session_keeps_the_dictionary(actviz_window, tmp_path):
    win, _model, feature, c, folder = concepts_opened(actviz_window, tmp_path)
    first = win.panel(LAYER).activation_slot.mosaic.tile_channels[0]
    feature.open_concept(LAYER, first)
    feature.view.name_edit.setText("bright blob")
    feature.view.name_edit.editingFinished.emit()
    assert win.session.concepts[LAYER].names == {first: "bright blob"}
    path = tmp_path / "concepts.actviz"
    win.sessions.save(path)

    torch.manual_seed(0)
    other = actviz_window(TinyCNN().eval(), frame(0), ["conv1", LAYER])
    assert other.session.concepts == {}
    other.sessions.open(path)
    other.wait_idle()
    other.window.display.flush_panel_updates()
    att = other.session.concepts[LAYER]
    assert att.folder == str(folder) and att.names == {first: "bright blob"} and att.shown
    for name in ("W_enc", "W_dec", "b_enc", "b_dec"):
        assert torch.equal(getattr(att.concepts, name), getattr(c, name)), name
    assert other.panel(LAYER).tile_unit() == "concept"
    # Reports name the dictionary and the named concept.
    part = other.concepts.feature.report_part()
    caption = part["figures"][0][0]
    assert str(folder) in caption and '"bright blob"' in caption


def test_session_keeps_a_concept_edit_bit_for_bit(actviz_window, tmp_path):
    win, _model, feature, c, folder = concepts_opened(actviz_window, tmp_path)
    second = win.panel(LAYER).activation_slot.mosaic.tile_channels[1]
    feature.open_concept(LAYER, second)
    win.qtbot.waitUntil(lambda: "Removing it" in feature.view.effect_label.text(), timeout=10_000)
    shown_effect = feature.view.effect_label.text()
    with win.expect_run():
        win.qtbot.mouseClick(feature.view.remove_button, Qt.MouseButton.LeftButton)
    edited = win.window.session.result.capture.output.clone()
    path = tmp_path / "removed.actviz"
    win.sessions.save(path)

    torch.manual_seed(0)
    other = actviz_window(TinyCNN().eval(), frame(0), ["conv1", LAYER])
    other.sessions.open(path)
    other.wait_idle()
    entries = list(other.session.edits)
    assert len(entries) == 1 and entries[0].layer == LAYER
    edit = entries[0].edit
    assert edit.kind == "concept" and tuple(edit.channels) == (second,) and edit.factor == 0
    for name, t in c.weights().items():
        assert torch.equal(edit.concepts.weights()[name], t), name
    assert other.session.concepts[LAYER].concepts.same_as(edit.concepts)
    # The saved result, and a new run with the restored edit: the output bit for bit.
    assert torch.equal(other.window.session.result.capture.output, edited)
    other.run_and_wait()
    assert torch.equal(other.window.session.result.capture.output, edited)
    # The concept's effect is measured without its own removal (the session's copy of the
    # dictionary counts as the attached one): what the view said before the edit.
    other.window.display.flush_panel_updates()
    ofeature = other.concepts.feature
    ofeature.open_concept(LAYER, second)
    view = ofeature.view
    other.qtbot.waitUntil(lambda: "Removing it" in view.effect_label.text(), timeout=10_000)
    assert view.effect_label.text() == shown_effect


def _pictures(folder, n: int, seed: int = 0):
    folder.mkdir()
    rng = np.random.default_rng(seed)
    for i in range(n):
        Image.fromarray(rng.integers(0, 256, (16, 16, 3), dtype=np.uint8)).save(
            folder / f"img{i:03d}.png"
        )
    return folder


def test_train_concepts_dialog_runs_and_cancels(actviz_window, tmp_path):
    torch.manual_seed(0)
    win = actviz_window(TinyCNN().eval(), frame(0), ["conv1", LAYER])
    win.run_and_wait()
    data = _pictures(tmp_path / "pictures", 24)
    feature = win.concepts.feature
    menu_action(win, "Data", "Train concepts…").trigger()
    dialog = feature.dialog
    assert dialog is not None and dialog.isVisible()
    dialog.layer_combo.setCurrentText(LAYER)
    dialog.n_spin.setValue(16)
    dialog.k_spin.setValue(2)
    dialog.epochs_spin.setValue(3)
    dialog.data_edit.setText(str(data))
    dialog.out_edit.setText(str(tmp_path / "trained"))
    said: list[str] = []
    feature.training_.handover.progressed.connect(lambda _p: said.append(dialog.message.text()))
    win.qtbot.mouseClick(dialog.train_button, Qt.MouseButton.LeftButton)
    win.qtbot.waitUntil(lambda: not feature.training(), timeout=60_000)
    assert said, dialog.message.text()
    text = dialog.message.text()
    assert text.startswith("Trained 16 concepts on 1,536 vectors of conv2"), text
    assert any(s.startswith("Collecting vectors:") and "vectors seen" in s for s in said)
    assert any("FVU so far" in s and "vectors seen" in s for s in said), said[-3:]
    att = win.session.concepts[LAYER]
    assert att.folder == str(tmp_path / "trained") and att.scan is not None
    assert att.scan.count == 24
    loaded = actviz.concepts.load(tmp_path / "trained")
    assert torch.equal(loaded.W_dec, att.concepts.W_dec)
    win.wait_idle()
    win.window.display.flush_panel_updates()
    assert win.panel(LAYER).tile_unit() == "concept"
    # Its concept view: the top images of the scan made after training, and what it wants.
    first = win.panel(LAYER).activation_slot.mosaic.tile_channels[0]
    _click_concept_tile(win, first)
    view = feature.view
    win.qtbot.waitUntil(lambda: view.top_label.text().startswith("Its top"), timeout=20_000)
    assert view.top_count == len(att.scan.top(first)) > 0
    assert f"of {att.scan.count} images" in view.top_label.text()
    win.qtbot.mouseClick(view.wants_button, Qt.MouseButton.LeftButton)
    win.qtbot.waitUntil(
        lambda: view.wants_label.text().startswith("What it wants:"), timeout=60_000
    )
    assert view.wants_picture.pixmap() is not None and not view.wants_picture.pixmap().isNull()

    # Cancel: many epochs on more pictures; Cancel while it trains.
    dialog.epochs_spin.setValue(1000)
    dialog.out_edit.setText(str(tmp_path / "never"))
    win.qtbot.mouseClick(dialog.train_button, Qt.MouseButton.LeftButton)
    win.qtbot.waitUntil(lambda: "Training: epoch" in dialog.message.text(), timeout=60_000)
    assert dialog.cancel_button.isEnabled() and not dialog.train_button.isEnabled()
    win.qtbot.mouseClick(dialog.cancel_button, Qt.MouseButton.LeftButton)
    win.qtbot.waitUntil(lambda: not feature.training(), timeout=30_000)
    assert dialog.message.text().startswith("Training cancelled"), dialog.message.text()
    assert dialog.train_button.isEnabled()
    assert not (tmp_path / "never").exists()
    assert win.session.concepts[LAYER].folder == str(tmp_path / "trained")


def test_train_concepts_dialog_follows_the_model(actviz_window, tmp_path):
    """The dialog offers the window's model's ticked layers each time (it kept the first
    model's), its concept count follows the layer chosen until typed, and a training that ends
    after a model switch is saved but not put on the new model's layers."""
    torch.manual_seed(0)
    win = actviz_window(TinyCNN().eval(), frame(0), ["conv1", LAYER])
    win.run_and_wait()
    feature = win.concepts.feature
    menu_action(win, "Data", "Train concepts…").trigger()
    dialog = feature.dialog
    combo = dialog.layer_combo
    assert [combo.itemText(i) for i in range(combo.count())] == ["conv1", LAYER]
    combo.setCurrentText("conv1")
    assert dialog.n_spin.value() == 32  # 8 x its 4 channels
    combo.setCurrentText(LAYER)
    assert dialog.n_spin.value() == 48  # 8 x 6
    win.qtbot.mouseClick(dialog.close_button, Qt.MouseButton.LeftButton)
    other = torch.nn.Sequential()
    other.add_module("stem", torch.nn.Conv2d(3, 10, 3, padding=1))
    other.add_module("act", torch.nn.ReLU())
    win.set_model(other.eval(), layers=["stem"])
    win.set_input(frame(0))
    win.run_and_wait()
    menu_action(win, "Data", "Train concepts…").trigger()
    assert [combo.itemText(i) for i in range(combo.count())] == ["stem"]
    assert dialog.n_spin.value() == 80
    win.tick("act")  # ticked while the dialog shows: offered at once
    assert [combo.itemText(i) for i in range(combo.count())] == ["stem", "act"]
    assert combo.currentText() == "stem"
    dialog.n_spin.setValue(24)  # the user's count stays whatever layer is chosen
    combo.setCurrentText("act")
    assert dialog.n_spin.value() == 24

    # A training on this model, ended after the window switched back to the CNN.
    dialog.k_spin.setValue(2)
    dialog.epochs_spin.setValue(40)
    dialog.data_edit.setText(str(_pictures(tmp_path / "pictures", 24)))
    dialog.out_edit.setText(str(tmp_path / "trained"))
    win.qtbot.mouseClick(dialog.train_button, Qt.MouseButton.LeftButton)
    win.qtbot.waitUntil(lambda: "Training: epoch" in dialog.message.text(), timeout=60_000)
    win.set_model(TinyCNN().eval(), layers=["conv1", LAYER])
    win.qtbot.waitUntil(lambda: not feature.training(), timeout=120_000)
    text = dialog.message.text()
    assert text.startswith("Trained 24 concepts on") and "not shown: the window's model" in text
    assert (tmp_path / "trained").is_dir() and dict(win.session.concepts) == {}
    assert [combo.itemText(i) for i in range(combo.count())] == ["conv1", LAYER]


def test_train_concepts_refuses_a_text_model_up_front(actviz_window, tmp_path):
    """Images through a text model failed after the fields were filled, with torch's words
    ("Expected tensor for argument #1 'indices' to have one of the following scalar types")."""
    pytest.importorskip("transformers", reason="needs the hf extra (transformers)")
    from tests.io.hf_tiny import save_tiny_gpt2

    win = actviz_window(size=(1280, 720))
    assert win.window.files.open_model_source(str(save_tiny_gpt2(tmp_path / "gpt2")), wait=True)
    feature = win.concepts.feature
    menu_action(win, "Data", "Train concepts…").trigger()
    dialog = feature.dialog
    said = "reads text, not images: scans and concept training run a folder of images"
    assert said in dialog.message.text() and dialog.message.isVisible()
    dialog.data_edit.setText(str(_pictures(tmp_path / "pictures", 4)))
    win.qtbot.mouseClick(dialog.train_button, Qt.MouseButton.LeftButton)
    assert not feature.training() and said in dialog.message.text()
    win.set_model(TinyCNN().eval(), layers=["conv1", LAYER])  # an image model: said no more
    assert dialog.message.text() == "" and not dialog.message.isVisible()


def test_a_text_models_layer_shows_its_tokens_by_concept(actviz_window, tmp_path):
    """Concepts on a text model's block: its panel kept the token x feature view while its title
    said the concept maps' shape, and the Concept dock painted a 1 x T strip as a picture. Now
    the panel shows tokens x the firing concepts (a click opens one), the dock says on which
    tokens it fires, and its effect is on the next token (the window's target)."""
    pytest.importorskip("transformers", reason="needs the hf extra (transformers)")
    from actviz.analysis.concepts.tiles import concept_tiles
    from tests.io.hf_tiny import save_tiny_gpt2

    win = actviz_window(size=(1280, 720), auto_run=True)
    window = win.window
    assert window.files.open_model_source(str(save_tiny_gpt2(tmp_path / "gpt2")), wait=True)
    with win.qtbot.waitSignal(window.input_loaded, timeout=30_000):
        window.files.open_default_input()
    layer = "transformer.h.0"
    win.tick(layer)
    win.wait_idle()
    torch.manual_seed(0)
    width = win.session.result.capture[layer].tensor.shape[-1]
    trained = actviz.concepts.train(torch.randn(1500, width), layer, n_concepts=24, k=3, seed=0)
    trained.save(tmp_path / "dictionary")
    feature = win.concepts.feature
    assert feature.open_folder(str(tmp_path / "dictionary"))
    win.wait_idle()
    window.display.flush_panel_updates()
    panel = win.reveal(layer)
    view = panel.token_view
    tiles = concept_tiles(trained, win.session.result.capture, layer, page=64)
    assert view.unit == "concept" and view.columns == tiles.order[: len(view.columns)]
    np.testing.assert_array_equal(view.heat, tiles.view.data[list(view.columns), 0, :].T)
    assert len(view.columns) == tiles.active and view.tokens == win.session.input.tokens
    text = panel.status_label.text()
    assert text == f"11 tokens x {tiles.active} of 24 concepts, most active first", text
    canvas = panel.token_canvas
    assert canvas.plot.getAxis("bottom").labelText == "concept"
    assert panel.title_label.text().endswith("· 11×24"), panel.title_label.text()
    col = 1
    win.qtbot.mouseClick(
        canvas.viewport(), Qt.MouseButton.LeftButton, pos=canvas.cell_centre(6, col)
    )
    concept = view.columns[col]
    dock = feature.view
    assert dock.shown == (layer, concept)
    values = tiles.view.data[concept].reshape(-1)
    firing = int((values > 0).sum())
    assert dock.picture.text().startswith(f"Fires on {firing} of 11 tokens: ")
    assert not dock.wants_button.isEnabled() and not dock.top_button.isVisible()
    win.qtbot.waitUntil(lambda: dock.effect_label.text().startswith("Removing it"), timeout=30_000)
    assert dock.effect_label.text().startswith("Removing it: next token ")
    # The report shows it as the panel does: a labelled tokens x concepts map, not 1 x T strips.
    (caption, picture), *_ = feature.report_part()["figures"]
    assert caption.startswith(f"Concepts of {layer}: 24 concepts")
    assert picture.ndim == 3 and picture.shape[0] > 100 and picture.shape[1] > 100, picture.shape
    # A right click on a column: the concept's menu; its last entry shows the features again.
    win.qtbot.mouseClick(
        canvas.viewport(), Qt.MouseButton.RightButton, pos=canvas.cell_centre(2, 0)
    )
    menu = feature.menu
    texts = [a.text() for a in menu.actions() if not a.isSeparator()]
    assert menu.isVisible() and menu.actions()[0].text() == f"{layer} · concept {view.columns[0]}"
    assert texts == [
        "Open concept", f"Remove concept {view.columns[0]}",
        f"Scale concept {view.columns[0]}…", "Name…", "Show features",
    ]  # fmt: skip
    menu.close()
    next(a for a in menu.actions() if a.text() == "Show features").trigger()
    win.wait_idle()
    window.display.flush_panel_updates()
    assert panel.token_view.unit == "feature" and panel.token_view.columns is None
    # A right click on a feature's column: an image tile's menu (nothing came up, so nothing
    # on the panel brought the concepts back); what a channel wants is a picture: off.
    win.qtbot.mouseClick(
        canvas.viewport(), Qt.MouseButton.RightButton, pos=canvas.cell_centre(2, 3)
    )
    menu = win.whatif.feature.menu
    texts = [a.text() for a in menu.actions() if not a.isSeparator()]
    assert menu.isVisible() and menu.actions()[0].text() == f"{layer} · ch 3"
    assert texts[:4] == ["Ablate ch 3", "Scale ch 3…", "Keep only ch 3", "Clamp ch 3…"]
    action = {a.text(): a for a in menu.actions()}
    vis = action["Visualise channels"]
    assert not vis.isEnabled() and vis.toolTip().endswith(
        "reads text: what a channel wants is a picture"
    )
    assert action["Show concepts"].isEnabled()
    menu.close()
    action["Ablate ch 3"].trigger()
    win.wait_idle()
    assert [r.edit.describe() for r in win.session.edits] == ["ablate ch 3"]
    hidden = first_tensor(win.session.result.capture[layer].output)
    assert hidden[..., 3].abs().max() == 0 and hidden[..., 2].abs().max() > 0
    action["Show concepts"].trigger()
    win.wait_idle()
    window.display.flush_panel_updates()
    assert panel.token_view.unit == "concept"


def test_concept_pages_turn_with_the_panels_arrows(actviz_window, tmp_path):
    """More concepts fire than a page holds: the panel's "next" arrow turned the layer's
    channel pages (hidden under the concepts) and the concepts past the first page could not
    be reached ("most active: 1-40 of 75", the arrow doing nothing)."""
    torch.manual_seed(0)
    win = actviz_window(TinyCNN().eval(), frame(0), ["conv1", LAYER], size=(1024, 640))
    win.run_and_wait()
    vectors = torch.randn(3000, 6, generator=torch.Generator().manual_seed(1)).abs()
    trained = actviz.concepts.train(vectors, LAYER, n_concepts=192, k=4, epochs=1, seed=0)
    feature = win.concepts.feature
    assert feature.open_folder(str(trained.save(tmp_path / "many")))
    win.wait_idle()
    win.window.display.flush_panel_updates()
    panel = win.reveal(LAYER)
    first = panel.activation_slot.mosaic
    order = feature.tiles[LAYER].order
    assert first.channels < len(order), (first.channels, len(order))  # more than one page
    channel_page = win.session.channel_pages.get(LAYER, 0)
    win.qtbot.mouseClick(panel.page_bar.next_button, Qt.MouseButton.LeftButton)
    second = panel.activation_slot.mosaic
    size = first.channels
    assert second.tile_channels == order[size : 2 * size]
    assert panel.page_bar.text().startswith(f"{ORDER_LABEL}: {size + 1}-")
    assert panel.page_bar.next_button.toolTip() == "Next concepts"
    assert win.session.channel_pages.get(LAYER, 0) == channel_page  # the channels' page stays
    win.qtbot.mouseClick(panel.page_bar.prev_button, Qt.MouseButton.LeftButton)
    assert panel.activation_slot.mosaic.tile_channels == order[:size]


def test_a_vits_concepts_are_maps_on_its_patch_grid(actviz_window, tmp_path):
    """A ViT block's concepts were 1 x 17 strips (the class token and 16 patches in a row) where
    the layer's own channels are maps on its 4 x 4 patch grid."""
    timm = pytest.importorskip("timm", reason="needs the timm extra")
    torch.manual_seed(0)
    vit = timm.create_model("vit_tiny_patch16_224", pretrained=False, img_size=64, num_classes=10)
    win = actviz_window(vit.eval(), torch.randn(1, 3, 64, 64), ["blocks.0"], auto_run=True)
    win.run_and_wait()
    width = win.session.result.capture["blocks.0"].tensor.shape[-1]
    trained = actviz.concepts.train(torch.randn(3000, width), "blocks.0", n_concepts=64, k=4)
    feature = win.concepts.feature
    assert feature.open_folder(str(trained.save(tmp_path / "vit")))
    win.wait_idle()
    win.window.display.flush_panel_updates()
    panel = win.reveal("blocks.0")
    m = panel.activation_slot.mosaic
    assert (m.tile_h, m.tile_w) == (4, 4) and panel.title_label.text().endswith("64×4×4")
    maps = trained.maps(win.session.result.capture, "blocks.0").numpy()  # (64, 17)
    on_grid = maps[:, 1:].reshape(64, 4, 4)
    tiles = feature.tiles["blocks.0"]
    np.testing.assert_array_equal(tiles.view.data, on_grid)
    peaks = on_grid.reshape(64, -1).max(1)
    assert tiles.order[0] == int(np.argmax(peaks)) and tiles.active == int((peaks > 0).sum())
