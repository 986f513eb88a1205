"""Labels tell the truth in every state, not only on the first path."""

from __future__ import annotations

import torch

from actviz.core.edit_kinds import ablate
from tests.ui.tiny_models import TinyCNN


def _win(actviz_window, layers=("conv1", "conv2", "fc")):
    torch.manual_seed(0)
    x = torch.randn(1, 3, 16, 16, generator=torch.Generator().manual_seed(1))
    return actviz_window(TinyCNN().eval(), x, list(layers))


def test_clear_all_edits_takes_the_difference_caption_away(actviz_window):
    win = _win(actviz_window)
    win.run_and_wait()
    whatif = win.whatif.feature
    with win.expect_run():
        whatif.add_edit("conv1", ablate([0]))
        win.window.runs.run()
    assert win.wait_idle()  # the panels are re-shown in the display passes after the run
    panel = win.panel("conv2")
    panel.difference_button.setChecked(True)
    assert win.wait_idle()  # the panel shows the difference in the next display pass
    assert panel.difference_shown()
    assert panel.activation_slot.caption.text() == "edited − unedited"
    with win.expect_run():
        whatif.clear_edits()
        win.window.runs.run()
    assert win.wait_idle()
    assert not panel.difference_shown()
    assert panel.activation_slot.caption.text() != "edited − unedited"


def test_the_compare_tab_says_another_model_only_after_a_comparison(actviz_window):
    from actviz.ui.compare.feature import FIRST_NOTE

    win = _win(actviz_window)
    compare = win.compare.feature
    assert compare.view.message() == FIRST_NOTE
    win.set_model(TinyCNN().eval(), layers=["conv1"])  # nothing was compared
    assert compare.view.message() == FIRST_NOTE


def test_an_input_without_a_picture_is_not_called_no_input(actviz_window):
    win = _win(actviz_window)
    preview = win.window.model_dock.input_preview
    win.set_input(torch.randn(1, 3, 16, 16), description="a tensor")
    win.set_input({"x": torch.randn(1, 3, 16, 16)}, description="a dict of tensors")
    assert preview.placeholder.text() != "no input"
    assert "a dict of tensors" in preview.caption_label.text()


def test_the_layers_placeholder_follows_model_ticks_input_and_run(actviz_window):
    win = actviz_window()
    w = win.window
    text = w.centre.layers_placeholder.text
    assert text().startswith("Open a model")
    torch.manual_seed(0)
    win.set_model(TinyCNN().eval(), layers=[])
    assert text().startswith("Tick layers")
    win.tick("conv1")
    assert text().startswith("Open an input")
    win.set_input(torch.randn(1, 3, 16, 16))
    with win.expect_run():
        assert w.runs.run() is not None
        assert text().startswith("Running the model on 1 ticked layer")


def test_the_live_status_is_cleared_when_live_mode_is_off(actviz_window):
    win = _win(actviz_window)
    win.run_and_wait()
    live = win.live.feature
    live.dock.show()
    with win.expect_run():
        live.controller.update_perturbation(noise=0.3)
    win.qtbot.waitUntil(lambda: live.controller.idle, timeout=60_000)
    assert live.status_label.text().startswith("live")
    live.dock.close()
    win.wait_idle()
    assert live.status_label.text() == ""


def test_an_edit_row_keeps_its_channel_when_the_layer_name_is_cut(actviz_window):
    from actviz.ui.whatif.feature import EditRow
    from actviz.workspace.edits_board import EditEntry

    win = _win(actviz_window)
    entry = EditEntry(1, "features.block1.very_long_module_name.conv", ablate([3]), "")
    row = EditRow(entry)
    win.qtbot.addWidget(row)
    row.resize(220, 30)
    row.show()
    shown = row.label.shown_text()
    assert shown != row.label.text() and shown.endswith(": ablate ch 3") and "…" in shown
