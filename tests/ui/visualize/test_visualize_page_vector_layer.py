"""What channels want for a layer whose panel has no mosaic (a Linear layer's logits, drawn as
bars): the page holds several outputs, not the single "page" of a panel without pages."""

from __future__ import annotations

from tests.ui.conftest import frame


def test_a_linear_layers_page_holds_its_outputs_and_the_message_counts_right(
    actviz_window, tiny_cnn
):
    win = actviz_window(tiny_cnn, frame(3), ["conv2", "fc"])
    win.run_and_wait()
    feature = win.visualize.feature
    section, page = feature.section, feature.page
    section.steps_spin.setValue(2)
    section.size_spin.setValue(16)
    assert feature.visualise_page("fc")
    win.qtbot.waitUntil(lambda: not feature.is_busy(), timeout=60_000)
    # fc has 5 outputs: one page of them all (it was one output per page: "ch 0-0 of 5").
    assert page.channels == (0, 1, 2, 3, 4)
    assert page.dock.mosaic.filled() == page.channels
    assert "ch 0-4 of 5" in page.dock.title_label.text()
    assert page.dock.message.text().startswith("5 channels at 2 steps, 16 px;")
    # The message keeps the settings the tiles were made with when the popover changes.
    section.steps_spin.setValue(7)
    assert "2 steps, 16 px" in page.dock.message.text()
    # One channel is "1 channel", not "1 channels".
    win.window.session.set_page_channels("conv2", 1)
    assert feature.visualise_page("conv2", 0)
    win.qtbot.waitUntil(lambda: not feature.is_busy(), timeout=60_000)
    assert page.channels == (0,)
    assert page.dock.message.text().startswith("1 channel at"), page.dock.message.text()


def test_a_page_holds_at_most_max_page_channels_and_pages_on(actviz_window, tiny_cnn, monkeypatch):
    # A wide panel showing a whole layer gave a page of all its channels (192 for a ViT
    # block: over two minutes at 3 steps, hours at the default 256).
    from actviz.ui.visualize import page as page_module

    monkeypatch.setattr(page_module, "MAX_PAGE", 4)
    win = actviz_window(tiny_cnn, frame(3), ["conv2"])
    win.run_and_wait()
    feature = win.visualize.feature
    feature.section.steps_spin.setValue(2)
    feature.section.size_spin.setValue(16)
    win.window.session.set_page_channels("conv2", 6)  # the panel shows all 6
    assert feature.visualise_page("conv2", 0)
    win.qtbot.waitUntil(lambda: not feature.is_busy(), timeout=60_000)
    page = feature.page
    assert page.channels == (0, 1, 2, 3)
    assert "ch 0-3 of 6" in page.dock.title_label.text()
    page.dock.next_button.click()
    win.qtbot.waitUntil(lambda: not feature.is_busy(), timeout=60_000)
    assert page.channels == (4, 5) and page.dock.mosaic.filled() == (4, 5)


def test_a_layer_without_a_panel_gets_a_full_page_and_no_model_says_open_one(
    actviz_window, tiny_cnn
):
    # Run > Visualise channels on a layer selected in the tree but not ticked (no panel,
    # no page size): it got a page of one channel, "ch 0-0".
    win = actviz_window(tiny_cnn, frame(3), ["conv2"])
    win.run_and_wait()
    feature = win.visualize.feature
    feature.section.steps_spin.setValue(2)
    feature.section.size_spin.setValue(16)
    assert feature.visualise_page("conv1")
    win.qtbot.waitUntil(lambda: not feature.is_busy(), timeout=60_000)
    assert feature.page.channels == (0, 1, 2, 3)  # conv1's 4 channels


def test_visualise_selected_without_a_model_asks_for_one(actviz_window):
    win = actviz_window()
    feature = win.visualize.feature
    assert not feature.visualise_selected()
    assert any("Open a model" in m for m in win.banner_messages()), win.banner_messages()
