"""Live sources as a user picks them from the Live dock's combo: a folder of class subfolders
plays (as Data > Scan reads it) and a folder without pictures says so under the combo; going
back to "Opened input" shows the opened input at once, occluded if the patch is on, not the
last frame of the folder."""

from __future__ import annotations

import torch
from PIL import Image

from actviz.ui.live import dock as live_dock
from actviz.ui.live.frames import ImageFolder, TensorFrames
from tests.ui.tiny_models import TinyCNN


def _running_window(actviz_window):
    torch.manual_seed(0)
    x = torch.randn(1, 3, 16, 16, generator=torch.Generator().manual_seed(9))
    win = actviz_window(TinyCNN().eval(), x, ["conv1"], size=(1280, 720), auto_run=True)
    win.run_and_wait()
    return win


def _pick(win, dock, index):
    combo = dock.source_combo
    combo.setCurrentIndex(index)
    combo.activated.emit(index)  # what choosing the item with the mouse sends
    win.wait_idle()


def test_a_folder_of_class_subfolders_plays(actviz_window, tmp_path):
    win = _running_window(actviz_window)
    dock = win.open_dock("Live")
    live = win.live.controller
    for label, colour in (("cats", (200, 40, 40)), ("dogs", (40, 40, 200))):
        (tmp_path / label).mkdir()
        for i in range(2):
            Image.new("RGB", (16, 16), (colour[0], 20 * i, colour[2])).save(
                tmp_path / label / f"{i}.png"
            )
    (tmp_path / "empty").mkdir()
    dock.choose_folder = lambda _parent: str(tmp_path / "empty")
    _pick(win, dock, live_dock._FOLDER)
    assert dock.source_combo.currentIndex() == live_dock._STILL  # nothing plays
    assert "no images" in dock.message_label.text()
    assert dock.message_label.isVisibleTo(dock)
    # Shown under the combo, inside the dock's visible part at 720 px.
    top = dock.message_label.mapTo(dock, dock.message_label.rect().topLeft()).y()
    assert top < dock.height() - dock.message_label.height()
    dock.choose_folder = lambda _parent: str(tmp_path)
    _pick(win, dock, live_dock._FOLDER)
    assert isinstance(live.source, ImageFolder) and len(live.source) == 4
    assert [p.parent.name for p in live.source.files] == ["cats", "cats", "dogs", "dogs"]


def test_back_to_the_opened_input_shows_it_at_once(actviz_window, tmp_path):
    win = _running_window(actviz_window)
    window = win.window
    dock = win.open_dock("Live")
    live = win.live.controller
    opened = window.session.input.value.clone()
    for i in range(2):
        Image.new("RGB", (16, 16), (100 * i, 80, 20)).save(tmp_path / f"f{i}.png")
    dock.choose_folder = lambda _parent: str(tmp_path)
    _pick(win, dock, live_dock._FOLDER)
    shown_before = live.frames_shown
    dock.occlusion_check.click()  # the patch on, over a folder frame
    win.qtbot.waitUntil(lambda: live.frames_shown > shown_before and live.idle, timeout=30_000)
    folder_frame = window.session.result.capture.inputs.clone()
    assert not torch.equal(folder_frame, opened)
    before = live.frames_shown
    _pick(win, dock, live_dock._STILL)
    win.qtbot.waitUntil(lambda: live.frames_shown > before and live.idle, timeout=30_000)
    shown = window.session.result.capture.inputs
    assert shown.shape == opened.shape and not torch.equal(shown, folder_frame)
    patched, _ = live.perturbation.apply(opened, None)
    torch.testing.assert_close(shown, patched, rtol=0, atol=0)  # the opened input, occluded


def test_a_clip_given_back_for_the_opened_input_leaves_no_frame_in_the_input_panel_or_pad(
    actviz_window,
):
    """Without a perturbation the way back is a run of the window's own, which shows no picture:
    the Input panel and the pad show the opened input again, not the clip's last frame, whether
    the combo or a script (``set_source(None)``) asked."""
    win = _running_window(actviz_window)
    dock = win.open_dock("Live")
    live = win.live.controller
    caption = win.window.model_dock.input_preview.caption_label.text
    opened_caption, opened_pad = caption(), dock.pad.rgb.copy()
    live.set_source(TensorFrames(torch.rand(3, 3, 16, 16), "clip"))
    win.qtbot.waitUntil(lambda: live.frames_shown > 0 and live.idle, timeout=30_000)
    win.wait_idle()
    assert caption() != opened_caption
    live.set_source(None)
    win.qtbot.waitUntil(lambda: live.idle, timeout=30_000)
    win.wait_idle()
    assert caption() == opened_caption
    assert (dock.pad.rgb == opened_pad).all()
