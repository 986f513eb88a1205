"""No stale display: a control changed on one tab reaches every panel showing that data."""

from __future__ import annotations

import pathlib

from actviz.testing import RUN_TIMEOUT_MS
from tests.helpers import random_frames  # noqa: E402
from tests.ui.conftest import frame
from tests.ui.live.live_windows import live_window  # noqa: E402


def _normalisations(window) -> dict[str, str]:
    return {
        name: panel.activation_slot.mosaic.normalize
        for name, panel in window.host.layer_panels.items()
        if panel.activation_slot.mosaic is not None
    }


def _play_frames(qtbot, win, on_frame, checked: list, count: int) -> None:
    """Play at 60 frames a second with ``on_frame`` on every frame shown until it checked
    ``count`` of them, then pause and wait for the last frame's display."""
    live = win.live.controller
    live.frame_changed.connect(on_frame)
    live.set_speed(60)
    live.play()
    qtbot.waitUntil(lambda: len(checked) >= count, timeout=RUN_TIMEOUT_MS)
    live.pause()
    win.live.wait_idle()


def test_scale_changed_on_the_overview_reaches_the_layer_panels_without_a_run(
    qtbot, actviz_window, tiny_cnn
):
    win = actviz_window(
        tiny_cnn, frame(1), ["conv1", "conv2", "fc"], size=(1400, 900), auto_run=True
    )
    win.run_and_wait()
    window = win.window
    assert _normalisations(window) == {"conv1": "channel", "conv2": "channel"}
    with qtbot.waitSignal(window.run_finished, timeout=RUN_TIMEOUT_MS):
        window.centre.tabs.setCurrentWidget(window.centre.overview_tab)  # re-runs for the saliency
    captures = []
    window.run_started.connect(lambda: captures.append(1))
    with qtbot.waitSignal(window.run_finished, timeout=RUN_TIMEOUT_MS):
        window.commands.normalize_combo.setCurrentIndex(
            window.commands.normalize_combo.findData("shared")
        )
    qtbot.waitUntil(lambda: not window.display.display_pending(), timeout=30_000)
    window.centre.tabs.setCurrentWidget(window.centre.layers_splitter)
    qtbot.waitUntil(
        lambda: _normalisations(window) == {"conv1": "shared", "conv2": "shared"}, timeout=30_000
    )
    for name, panel in window.host.layer_panels.items():
        if panel.activation_slot.mosaic is not None:
            assert panel.activation_slot.mosaic is window.session.result.layers[name].mosaic
    assert captures == []  # no new capture: the result's views were re-normalised


# ============================================================================ live mode
import json  # noqa: E402

import numpy as np  # noqa: E402
import torch  # noqa: E402
from PIL import Image  # noqa: E402
from PySide6.QtWidgets import QDialogButtonBox  # noqa: E402

import actviz.core.capture as core_capture  # noqa: E402
from actviz.ui.live.frames import ImageFolder, TensorFrames  # noqa: E402
from actviz.ui.window.dialogs import ExportFolderDialog  # noqa: E402


def _record_captures(monkeypatch) -> list[torch.Tensor]:
    """The input of every capture the live jobs run (they import ``capture`` when they run)."""
    seen: list[torch.Tensor] = []
    real = core_capture.capture

    def recording(model, inputs, *args, **kwargs):
        seen.append(inputs.detach().clone())
        return real(model, inputs, *args, **kwargs)

    monkeypatch.setattr(core_capture, "capture", recording)
    return seen


def _minmax_picture(clean: torch.Tensor, value: torch.Tensor) -> np.ndarray:
    """``value`` drawn with the min-max map that made ``clean``'s picture (TensorFrames')."""
    lo, hi = float(clean.min()), float(clean.max())
    arr = ((value[0].double() - lo) / (hi - lo)).clamp(0, 1) * 255
    return arr.round().to(torch.uint8).permute(1, 2, 0).numpy()


def test_the_perturbation_preview_is_the_input_the_model_receives(
    qtbot, actviz_window, monkeypatch
):
    win = live_window(actviz_window)
    window = win.window
    live = win.live.controller
    dock = win.live.dock
    frames = random_frames(3, 4)
    live.set_source(TensorFrames(frames, "clip"))
    win.live.wait_idle()
    seen = _record_captures(monkeypatch)
    dock.noise_slider.setValue(20)
    dock.brightness_slider.setValue(10)
    dock.pad.moved.emit(0.25, 0.5)  # a click on the pad: the occlusion patch there
    win.live.wait_idle()
    received = seen[-1]
    assert live.perturbation.noise == 0.2 and live.perturbation.brightness == 0.1
    expected_value, _ = live.perturbation.apply(frames[0:1])
    torch.testing.assert_close(received, expected_value)
    expected = _minmax_picture(frames[0:1], received)
    for shown in (dock.pad._rgb, window.model_dock.input_preview.rgb):
        diff = np.abs(shown.astype(int) - expected)
        assert diff.max() <= 1 and (diff > 0).mean() < 0.05  # rounding at .5 only
    # Brighter than the clean frame by 10 % of its range, the patch flat, noise elsewhere.
    clean = TensorFrames(frames, "clip").frame(0).image
    assert dock.pad._rgb.astype(float).mean() - clean.astype(float).mean() > 15
    y0, y1, x0, x1 = live.perturbation.patch_box(16, 16)
    patch = dock.pad._rgb[y0:y1, x0:x1].reshape(-1, 3)
    assert (patch == patch[0]).all()


def test_perturbation_sliders_show_their_values(qtbot, actviz_window):
    win = live_window(actviz_window)
    dock = win.live.dock
    assert (dock.noise_value.text(), dock.brightness_value.text()) == ("0%", "+0%")
    assert (dock.contrast_value.text(), dock.size_value.text()) == ("100%", "25%")
    win.live.dock.show()
    for slider, label in (
        (dock.noise_slider, dock.noise_value),
        (dock.brightness_slider, dock.brightness_value),
        (dock.contrast_slider, dock.contrast_value),
        (dock.size_slider, dock.size_value),
    ):  # next to its slider, on screen
        qtbot.waitUntil(label.isVisible, timeout=10_000)
        assert label.parent() is slider.parent() and label.width() > 0
    dock.noise_slider.setValue(35)
    dock.brightness_slider.setValue(-20)
    dock.contrast_slider.setValue(150)
    dock.size_slider.setValue(40)
    assert dock.noise_value.text() == "35%" and dock.brightness_value.text() == "-20%"
    assert dock.contrast_value.text() == "150%" and dock.size_value.text() == "40%"
    dock.reset_perturbation()
    assert (dock.noise_value.text(), dock.brightness_value.text()) == ("0%", "+0%")
    assert dock.contrast_value.text() == "100%"


def test_the_input_preview_shows_the_frame_the_counter_names(qtbot, actviz_window):
    win = live_window(actviz_window)
    window = win.window
    live = win.live.configure(max_fps=1000)
    frames = random_frames(6, 5)
    source = TensorFrames(frames, "clip")
    live.set_source(source)
    win.live.wait_idle()
    mismatches, checked = [], []

    def on_frame(index: int, length: int, label: str) -> None:
        caption = window.model_dock.input_preview.caption_label.text()
        if not caption.startswith(f"frame {index + 1}/{length} · {label}"):
            mismatches.append((index, caption))
        if not np.array_equal(window.model_dock.input_preview.rgb, source.frame(index).image):
            mismatches.append((index, "image"))
        checked.append(index)

    _play_frames(qtbot, win, on_frame, checked, 5)
    assert mismatches == []
    # Once every display step ran, the preview still names the last frame shown.
    last = live.status().last.index
    assert window.model_dock.input_preview.caption_label.text().startswith(
        f"frame {last + 1}/6 · clip["
    )
    assert np.array_equal(window.model_dock.input_preview.rgb, source.frame(last).image)


def test_read_outs_say_paused_when_paused(qtbot, actviz_window):
    win = live_window(actviz_window)
    live = win.live.configure(max_fps=1000)
    live.set_source(TensorFrames(random_frames(4, 6), "clip"))
    live.set_speed(60)
    live.play()
    win.live.wait_frames(3)
    assert win.live.status_text().endswith(" fps")
    live.pause()
    win.live.wait_idle()
    assert win.live.status_text() == "live paused"
    text = win.live.stats_text()
    assert text.startswith("paused · capture ") and "fps" not in text


def _folder(tmp_path, count: int = 9):
    folder = tmp_path / "clip"
    folder.mkdir()
    rng = np.random.default_rng(0)
    for i in range(count):
        pixels = rng.integers(0, 256, (16, 16, 3), dtype=np.uint8)
        Image.fromarray(pixels).save(folder / f"frame_{i:03d}.png")
    return folder


def test_export_while_playing_a_folder_records_the_frame_and_perturbations(
    qtbot, actviz_window, tmp_path
):
    win = live_window(actviz_window)
    window = win.window
    live = win.live.controller
    folder = _folder(tmp_path)
    assert live.open_folder(folder)
    win.live.wait_idle()
    live.update_perturbation(noise=0.2, brightness=0.1, occlusion=(0.5, 0.25))
    live.seek(7)
    win.live.wait_idle()
    window.display.flush_panel_updates()
    assert window.session.result.origin["index"] == 7
    out = tmp_path / "new" / "export"  # does not exist yet
    assert window.exports.export_all(out, wait=True)
    summary = json.loads((out / "summary.json").read_text())
    assert summary["input"] == "frame_007.png" and summary["frame"] == 7
    assert summary["input_path"] == str(folder / "frame_007.png")
    assert summary["perturbation"] == {
        "noise": 0.2,
        "seed": 0,
        "brightness": 0.1,
        "occlusion": {"x": 0.5, "y": 0.25, "size": 0.25},
    }
    # input.png is the frame as the model received it.
    frame = ImageFolder(folder, window.session.model).frame(7)
    _, picture = live.perturbation.apply(frame.value, frame.image)
    assert np.array_equal(np.asarray(Image.open(out / "input.png")), picture)
    # A normalisation change re-prepares the same frame: still named.
    with qtbot.waitSignal(window.run_finished, timeout=RUN_TIMEOUT_MS):
        window.commands.normalize_combo.setCurrentIndex(
            window.commands.normalize_combo.findData("shared")
        )
    assert window.session.result.origin["input"] == "frame_007.png"


def test_export_of_an_ordinary_run_names_the_opened_input(qtbot, actviz_window, tmp_path):
    win = live_window(actviz_window)
    window = win.window
    assert window.session.result.origin is None
    assert window.exports.export_all(tmp_path / "out", wait=True)
    summary = json.loads((tmp_path / "out" / "summary.json").read_text())
    assert summary["input"] == "tensor" and summary["frame"] is None
    assert summary["perturbation"] == {} and summary["input_path"] == ""


def test_export_everything_accepts_a_folder_that_does_not_exist_yet(qtbot, actviz_window, tmp_path):
    win = live_window(actviz_window)
    window = win.window
    target = tmp_path / "results" / "run1"
    dialog = ExportFolderDialog(window, str(tmp_path))
    qtbot.addWidget(dialog)
    save = dialog.buttons.button(QDialogButtonBox.StandardButton.Save)
    assert save.isEnabled() and "replaced" in dialog.note_label.text()
    dialog.folder_edit.setText(str(target))
    assert save.isEnabled() and dialog.note_label.text() == (
        "This folder does not exist yet: it will be created."
    )
    (tmp_path / "a_file").write_text("x")
    dialog.folder_edit.setText(str(tmp_path / "a_file"))
    assert not save.isEnabled()
    dialog.folder_edit.setText(str(target))
    save.click()
    assert dialog.result() == ExportFolderDialog.DialogCode.Accepted
    assert dialog.folder() == str(target)
    # The Export everything action with that answer writes there, creating it.
    asked = []
    window.exports.choose_export_folder = lambda parent, start: asked.append(start) or str(target)
    with qtbot.waitSignal(window.export_finished, timeout=RUN_TIMEOUT_MS):
        window.commands.export_all_action.trigger()
    # The first folder dialog starts at home (not the folder the app was started from).
    assert (target / "summary.json").is_file() and asked == [str(pathlib.Path.home())]


def test_the_frame_counter_never_runs_ahead_of_the_panels_on_screen(qtbot, actviz_window):
    """The preview, the counter and the read-outs follow a frame in the display pass that
    fills its first panel on screen (one repaint of the window a frame, #39): when the
    counter names a frame, that panel shows it too, never the frame before."""
    win = live_window(actviz_window)
    window = win.window
    live = win.live.configure(max_fps=1000)
    live.set_source(TensorFrames(random_frames(6, 3), "clip"))
    win.live.wait_idle()
    grid, panels = window.display.grid, window.host.layer_panels
    first = next(n for n, p in panels.items() if grid._on_screen(p))  # noqa: SLF001
    behind: list[int] = []
    checked: list[int] = []

    def on_frame(index: int, _length: int, _label: str) -> None:
        view = panels[first].activation_slot.view
        shown = window.session.result.layers[first].view
        if first in grid.pending or not np.array_equal(view.data, shown.data):
            behind.append(index)
        checked.append(index)

    _play_frames(qtbot, win, on_frame, checked, 4)
    win.live.controller.frame_changed.disconnect(on_frame)
    assert behind == []
