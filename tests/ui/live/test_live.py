"""Live mode: frame sources, perturbations, coalescing, and the controller driving a real
window on tiny models (the per-frame preparation is tested in tests/display)."""

from __future__ import annotations

import gc
import math
import sys
import time
import weakref
from types import MappingProxyType

import numpy as np
import pytest
import torch
from PIL import Image
from PySide6.QtCore import QPointF, Qt, QTimer
from torch import nn

from actviz.core.capture import capture
from actviz.display.mosaic import MIN_PAGE_CHANNELS, mosaic
from actviz.testing import RUN_TIMEOUT_MS
from actviz.ui.live.frames import (
    WEBCAM_MISSING,
    Coalescer,
    ImageFolder,
    Player,
    RateMeter,
    StillFrame,
    TensorFrames,
    estimate_bytes,
    webcam_status,
)
from actviz.ui.live.perturbation import Perturbation
from actviz.ui.live.playback import LiveStatus
from actviz.ui.panels.style import READOUT_INTERVAL_S
from actviz.workspace.budget import parse_bytes
from tests.helpers import random_frames
from tests.ui.live.live_windows import LIVE_LAYERS, live_window
from tests.ui.tiny_models import seeded_tiny_cnn


# ============================================================================ perturbations
def test_identity_perturbation_returns_the_same_objects():
    x = random_frames(1, 0)
    img = np.zeros((16, 16, 3), np.uint8)
    value, image = Perturbation().apply(x, img)
    assert value is x and image is img


def test_occlusion_fills_the_patch_with_each_channels_mean_and_leaves_the_rest():
    x = random_frames(1, 0)
    before = x.clone()
    p = Perturbation(occlusion=(0.25, 0.5), occlusion_size=0.25)
    assert p.patch_box(16, 16) == (6, 10, 2, 6)
    out, _ = p.apply(x)
    assert torch.equal(x, before)  # never in place
    mean = x.mean(dim=(2, 3))
    for c in range(3):
        assert torch.allclose(out[0, c, 6:10, 2:6], mean[0, c].expand(4, 4))
    mask = torch.ones(16, 16, dtype=torch.bool)
    mask[6:10, 2:6] = False
    assert torch.equal(out[0][:, mask], x[0][:, mask])


def test_patch_is_clipped_at_the_border_and_vanishes_outside():
    p = Perturbation(occlusion=(0.0, 1.0), occlusion_size=0.5)
    assert p.patch_box(20, 10) == (18, 20, 0, 3)  # side 5 centred on the corner (0, 20)
    assert Perturbation(occlusion=(2.0, 0.5)).patch_box(8, 8) is None
    assert Perturbation(occlusion=(0.5, 0.5), occlusion_size=0.5).patch_box(8, 8) == (2, 6, 2, 6)


def test_noise_is_one_fixed_pattern_scaled_by_the_level():
    x = random_frames(1, 0)
    a, _ = Perturbation(noise=0.2, seed=3).apply(x)
    b, _ = Perturbation(noise=0.4, seed=3).apply(x)
    c, _ = Perturbation(noise=0.2, seed=4).apply(x)
    torch.testing.assert_close(b - x, 2 * (a - x), rtol=1e-4, atol=1e-5)
    assert not torch.allclose(a, c)
    # The amplitude is relative to the frame's own spread.
    assert float((a - x).std()) == pytest.approx(0.2 * float(x.std()), rel=0.15)


def test_brightness_and_contrast_are_relative_to_the_frame():
    x = random_frames(1, 0)
    span = float(x.amax() - x.amin())
    bright, _ = Perturbation(brightness=0.1).apply(x)
    torch.testing.assert_close(bright - x, torch.full_like(x, 0.1 * span))
    flat, _ = Perturbation(contrast=0.0).apply(x)
    torch.testing.assert_close(flat, x.mean(dim=(2, 3), keepdim=True).expand_as(x))
    double, _ = Perturbation(contrast=2.0).apply(x)
    torch.testing.assert_close(double.mean(dim=(2, 3)), x.mean(dim=(2, 3)), rtol=1e-4, atol=1e-5)
    torch.testing.assert_close(double.std(dim=(2, 3)), 2 * x.std(dim=(2, 3)), rtol=1e-4, atol=1e-5)


def test_the_picture_gets_the_same_patch_and_noise_pattern():
    x = random_frames(1, 0)
    img = (np.arange(16 * 16 * 3) % 251).astype(np.uint8).reshape(16, 16, 3)
    p = Perturbation(occlusion=(0.5, 0.5), occlusion_size=0.25)
    _, out = p.apply(x, img)
    mean = img.reshape(-1, 3).mean(axis=0)
    assert np.array_equal(
        out[6:10, 6:10], np.broadcast_to(np.round(mean).astype(np.uint8), (4, 4, 3))
    )
    assert np.array_equal(out[:6], img[:6])
    # Noise: the picture moves where the tensor moved (same field).
    noisy, nimg = Perturbation(noise=0.5, seed=1).apply(x, img)
    dz = (noisy - x)[0, 0].numpy()
    di = nimg[..., 0].astype(np.float32) - img[..., 0]
    inside = (img[..., 0] > 40) & (img[..., 0] < 215)  # away from clipping
    assert np.corrcoef(dz[inside], di[inside])[0, 1] > 0.95


def test_tuple_and_dict_inputs_perturb_their_image_tensor_only():
    x = random_frames(1, 0)
    ids = torch.arange(4)
    p = Perturbation(brightness=0.5)
    out_t, _ = p.apply((ids, x))
    assert out_t[0] is ids and not torch.equal(out_t[1], x)
    out_d, _ = p.apply({"ids": ids, "pixels": x})
    assert out_d["ids"] is ids and not torch.equal(out_d["pixels"], x)
    assert p.apply(ids)[0] is ids  # nothing image-like: unchanged


# ============================================================================ player / rate / coalescer
def test_player_steps_wraps_clamps_and_stops_at_the_end():
    p = Player(3, fps=40, loop=True)
    assert p.interval_ms == 25
    assert [p.step(1) for _ in range(4)] == [1, 2, 0, 1]
    assert p.step(-2) == 2
    p.loop = False
    assert p.step(5) == 2 and p.step(-7) == 0
    p.seek(1)
    p.play()
    assert p.advance() == 2 and p.advance() is None and not p.playing
    p.play()  # at the end of a non-looping run, play starts over
    assert p.index == 0 and p.playing
    p.set_fps(1000)
    assert p.fps == Player.MAX_FPS
    one = Player(1)
    one.play()
    assert not one.playing  # one frame: nothing to play


def test_rate_meter_counts_events_in_its_window():
    now = [0.0]
    meter = RateMeter(window_s=1.0, clock=lambda: now[0])
    for t in (0.0, 0.1, 0.2, 0.3, 0.4):
        meter.tick(t)
    now[0] = 0.4
    assert meter.rate() == pytest.approx(10.0)
    now[0] = 1.35  # only 0.4 is left in the window
    assert meter.rate() == 0.0


def test_coalescer_keeps_only_the_latest_waiting_item_and_spaces_starts():
    now = [10.0]
    c = Coalescer(min_interval_s=0.1, clock=lambda: now[0])
    c.offer("a")
    assert c.take() == (True, "a")
    for item in ("b", "c", "d"):
        c.offer(item)
    assert c.take() == (False, None)  # "a" still in flight
    assert c.dropped == 2
    c.finish()
    assert c.take() == (False, None) and c.wait_s() == pytest.approx(0.1)
    now[0] += 0.1
    assert c.take() == (True, "d")
    assert not c.has_pending and c.started == 2 and c.offered == 4


def test_coalescer_with_a_limit_of_two_starts_a_second_item_before_the_first_ends():
    c = Coalescer(min_interval_s=0.0, clock=lambda: 0.0, limit=2)
    c.offer("a")
    assert c.take() == (True, "a") and not c.busy
    c.offer("b")
    assert c.take() == (True, "b") and c.busy and c.in_flight == 2
    c.offer("c")
    assert c.take() == (False, None)
    c.limit = 1  # paused: no new start until both have ended
    c.finish()
    assert c.busy and c.take() == (False, None)
    c.finish()
    c.finish()  # an extra finish (a superseded frame) does not go below zero
    assert c.in_flight == 0 and c.take() == (True, "c")


# ============================================================================ sources
def test_tensor_frames_give_one_batch_of_one_per_frame(tmp_path):
    frames = random_frames(4, 0)
    src = TensorFrames(frames, "clip")
    assert len(src) == 4
    f = src.frame(6)  # wraps
    assert f.index == 2 and torch.equal(f.value, frames[2:3]) and f.label == "clip[2]"
    assert f.image.shape == (16, 16, 3) and f.image.dtype == np.uint8
    path = tmp_path / "clip.pt"
    torch.save(frames, path)
    loaded = TensorFrames.from_file(path, seeded_tiny_cnn())
    assert len(loaded) == 4 and torch.equal(loaded.frame(1).value, frames[1:2])
    torch.save((frames, frames), tmp_path / "pair.pt")
    with pytest.raises(ValueError, match=r"\(T, C, H, W\)"):
        TensorFrames.from_file(tmp_path / "pair.pt")
    with pytest.raises(ValueError):
        TensorFrames(torch.zeros(3))


def test_image_folder_plays_images_in_name_order_at_the_models_size(tmp_path):
    for name, colour in (("b.png", (0, 255, 0)), ("a.png", (255, 0, 0)), ("c.jpg", (0, 0, 255))):
        Image.new("RGB", (20, 12), colour).save(tmp_path / name)
    (tmp_path / "notes.txt").write_text("not an image")
    src = ImageFolder(tmp_path, seeded_tiny_cnn())
    assert [p.name for p in src.files] == ["a.png", "b.png", "c.jpg"]
    first = src.frame(0)
    assert first.label == "a.png" and first.value.shape[:2] == (1, 3)
    assert first.image[..., 0].mean() > 200 and first.image[..., 1].mean() < 50
    assert src.frame(0) is first  # cached
    empty = tmp_path / "empty"
    empty.mkdir()
    with pytest.raises(ValueError, match="no images"):
        ImageFolder(empty)


def test_webcam_is_reported_missing_without_qtmultimedia(monkeypatch):
    import importlib.util

    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None)
    assert webcam_status() == (False, WEBCAM_MISSING)
    assert WEBCAM_MISSING == "webcam needs PySide6-Addons (QtMultimedia)"


def test_memory_estimate_and_budget_parsing():
    shapes = {"a": (1, 4, 8, 8), "b": (1, 10)}
    assert estimate_bytes(shapes, ["a", "b"]) == (256 + 10) * 4 * 2
    assert estimate_bytes(shapes, ["a"], gradients=False) == 1024
    assert estimate_bytes(shapes, ["a", "zzz"]) is None
    assert parse_bytes("512MiB") == 512 << 20
    assert parse_bytes("2 GiB") == 2 << 30
    assert parse_bytes("1.5G") == int(1.5 * (1 << 30))
    assert parse_bytes("4096") == 4096
    for bad in ("lots", "-1G", "3Q"):
        with pytest.raises(ValueError):
            parse_bytes(bad)


# ============================================================================ controller + window


def _wait_frames(qtbot, live, count: int) -> None:
    qtbot.waitUntil(lambda: live.frames_shown >= count, timeout=RUN_TIMEOUT_MS)


def _wait_idle(qtbot, live) -> None:
    qtbot.waitUntil(lambda: live.idle, timeout=RUN_TIMEOUT_MS)


def _fast_clip(win, seed: int):
    """Live mode at up to 1000 fps on an 8-frame clip: its first frame shown, then idle.
    Returns the controller and the frames."""
    live = win.live.configure(max_fps=1000)
    frames = random_frames(8, seed)
    live.set_source(TensorFrames(frames, "clip"))
    win.live.wait_frames(1)
    win.live.wait_idle()
    return live, frames


def _play_through_in_order(qtbot, window, live, frames) -> None:
    """Play the clip once, fast: frames arrive in order, each with its own input, and none is
    lost on the way (the last one included)."""
    shown = []
    live.frame_changed.connect(
        lambda i, n, label: shown.append((i, window.session.result.capture.inputs.clone()))
    )
    live.set_loop(False)
    live.set_speed(200)
    live.play()
    qtbot.waitUntil(lambda: not live.playing, timeout=RUN_TIMEOUT_MS)
    _wait_idle(qtbot, live)
    indices = [i for i, _ in shown]
    assert indices == sorted(indices) and indices[-1] == len(frames) - 1
    for i, inputs in shown:
        torch.testing.assert_close(inputs, frames[i : i + 1], rtol=0, atol=0)


def test_playing_a_tensor_sequence_updates_the_panels_every_frame(qtbot, actviz_window):
    win = live_window(actviz_window)
    window = win.window
    live = win.live.controller
    frames = random_frames(6, 2)
    live.set_source(TensorFrames(frames, "clip"))
    _wait_frames(qtbot, live, 1)
    seen = {}
    live.frame_changed.connect(
        lambda i, n, label: seen.setdefault(
            i, window.session.result.layers["conv1"].view.data.copy()
        )
    )
    live.set_speed(60)
    # A speed set in code shows in the dock.
    assert win.live.dock.speed_spin.value() == 60
    live.play()
    assert live.playing
    qtbot.waitUntil(lambda: len(seen) >= 3, timeout=RUN_TIMEOUT_MS)
    live.pause()
    _wait_idle(qtbot, live)
    model = window.session.model
    for index, data in list(seen.items())[:3]:
        expected = capture(model, frames[index : index + 1], ["conv1"])["conv1"].tensor[0]
        np.testing.assert_allclose(data, expected.numpy(), rtol=1e-5, atol=1e-6)
    assert "frame" in window.model_dock.input_preview.caption_label.text()
    status = live.status()
    assert status.frames >= 3 and status.last.capture_ms > 0
    # Paused: no stale rate from when it played.
    assert win.live.stats_text().startswith("paused · capture ")
    assert "fps" not in win.live.stats_text()
    assert "held" in win.live.memory_text()
    assert win.live.status_text() == "live paused"
    view_menu = next(a.menu() for a in window.menuBar().actions() if "View" in a.text())
    assert win.live.dock.toggleViewAction() in view_menu.actions()
    # The session keeps the opened input: live frames do not replace it.
    assert window.session.input.value.shape == (1, 3, 16, 16)


def test_playing_pipelines_the_next_capture_behind_the_frame_being_prepared(
    qtbot, actviz_window, monkeypatch
):
    win = live_window(actviz_window)
    window = win.window
    from actviz.ui.live import frame_runner as live_mode

    real_prepare = live_mode.prepare

    def slow_prepare(*args, **kwargs):
        time.sleep(0.05)  # longer than a tiny capture: the next one must start meanwhile
        return real_prepare(*args, **kwargs)

    monkeypatch.setattr(live_mode, "prepare", slow_prepare)
    live, frames = _fast_clip(win, seed=4)
    submits = []
    real_submit = window.worker.submit

    def submit(job, *, supersede=True, **kw):
        submits.append(supersede)
        return real_submit(job, supersede=supersede, **kw)

    window.worker.submit = submit
    _play_through_in_order(qtbot, window, live, frames)
    # Some frames were submitted while the previous one was still being prepared.
    assert False in submits
    assert not window.worker.is_busy()
    # Frames that ended while the next one ran kept the busy state: at the end it is idle.
    assert not window.commands.cancel_action.isEnabled()


def test_playing_queues_the_next_capture_behind_the_one_running(qtbot, actviz_window, monkeypatch):
    win = live_window(actviz_window)
    window = win.window
    import actviz.core.capture as core_capture

    real_capture = core_capture.capture
    captured: list[int] = []  # one entry per live capture that returned (worker thread)

    def slow_capture(*args, **kwargs):
        time.sleep(0.03)  # a capture long enough for the next submit to find it running
        out = real_capture(*args, **kwargs)
        captured.append(1)
        return out

    monkeypatch.setattr(core_capture, "capture", slow_capture)
    live, frames = _fast_clip(win, seed=5)
    live.capture_threads = window.worker.threads  # one lane (two: see the test below)
    submitted: list[int] = []
    waiting_at_submit: list[int] = []  # our captures not yet done when each frame was submitted
    real_submit = window.worker.submit

    def submit(job, *, supersede=True, **kw):
        waiting_at_submit.append(len(submitted) - len(captured))
        gen = real_submit(job, supersede=supersede, **kw)
        submitted.append(gen)
        return gen

    window.worker.submit = submit
    captured.clear()
    # Paused: one capture at a time, so a step shows the latest request closely.
    for _ in range(2):
        n = live.frames_shown
        live.step(1)
        _wait_frames(qtbot, live, n + 1)
        _wait_idle(qtbot, live)
    assert waiting_at_submit and set(waiting_at_submit) == {0}
    _play_through_in_order(qtbot, window, live, frames)
    # Playing: the next frame was queued while the one before was still being captured, and
    # never more than one ahead.
    assert max(waiting_at_submit) == 1
    assert not window.worker.is_busy() and live.coalescer.in_flight == 0


def test_a_turned_channel_page_stays_while_frames_play(qtbot, actviz_window):
    win = live_window(actviz_window)
    window = win.window
    torch.manual_seed(0)
    window.script.set_model(nn.Sequential(nn.Conv2d(3, 300, 3, padding=1)).eval(), layers=["0"])
    live = win.live.controller
    frames = random_frames(6, 4)
    live.set_source(TensorFrames(frames))
    _wait_frames(qtbot, live, 1)
    live.set_speed(60)
    live.play()
    _wait_frames(qtbot, live, 2)
    panel = window.host.layer_panels["0"]
    # The page size follows the panel's width (tiles >= 32 px; the frames ask for it too).
    qtbot.waitUntil(lambda: "0" in window.session.page_channels, timeout=30_000)
    size = window.session.page_channels["0"]
    assert MIN_PAGE_CHANNELS <= size < 150
    qtbot.waitUntil(
        lambda: window.session.result.layers["0"].mosaic.page_size == size, timeout=30_000
    )
    window.display.flush_panel_updates()
    assert panel.page_bar.text() == f"ch 0-{size - 1} of 300"
    live.pause()
    _wait_idle(qtbot, live)
    pin = window.pins_ui.pin_result()  # a result made on page 0
    live.play()
    _wait_frames(qtbot, live, live.frames_shown + 1)
    assert window.session.result is not pin.result
    assert window.display.turn_page("0", 1)  # while frames requested on page 0 are in flight
    shown = live.frames_shown
    _wait_frames(qtbot, live, shown + 3)
    live.pause()
    _wait_idle(qtbot, live)
    window.display.flush_panel_updates()
    layer = window.session.result.layers["0"]
    assert panel.page_bar.text() == f"ch {size}-{2 * size - 1} of 300"
    assert panel.activation_slot.mosaic is layer.mosaic
    assert (layer.mosaic.first_channel, layer.mosaic.channels) == (size, size)
    # The default "auto" colour map: the signed convolution is symmetric about 0.
    assert layer.mosaic.symmetric
    ref = mosaic(layer.view.data[size : 2 * size], pad=1, symmetric=True)
    np.testing.assert_allclose(layer.mosaic.image, ref.image, atol=1e-6, equal_nan=True)
    # Results made before the turn are shown on the page the user chose, and not edited.
    assert window.pins_ui.show_pinned(pin)
    window.display.flush_panel_updates()
    assert pin.result.layers["0"].mosaic.first_channel == 0
    assert panel.activation_slot.mosaic.first_channel == size
    assert panel.page_bar.text() == f"ch {size}-{2 * size - 1} of 300"


def test_stepping_and_seeking_show_exactly_that_frame(qtbot, actviz_window):
    win = live_window(actviz_window)
    window = win.window
    live = win.live.controller
    frames = random_frames(4, 3)
    live.set_source(TensorFrames(frames))
    _wait_frames(qtbot, live, 1)
    live.step(2)
    _wait_frames(qtbot, live, 2)
    _wait_idle(qtbot, live)
    np.testing.assert_allclose(
        window.session.result.capture.inputs.numpy(), frames[2:3].numpy(), rtol=0, atol=0
    )
    live.seek(1)
    # Wait for frame 1 itself: the panels fitting their page size to the width may re-show the
    # current frame once, so "the next frame shown" is not necessarily the one sought.
    qtbot.waitUntil(lambda: win.live.dock.frame_slider.value() == 1, timeout=RUN_TIMEOUT_MS)
    _wait_idle(qtbot, live)
    assert live.player.index == 1
    np.testing.assert_allclose(
        window.session.result.capture.inputs.numpy(), frames[1:2].numpy(), rtol=0, atol=0
    )


def test_the_keyboard_and_the_live_menu_drive_playback(qtbot, actviz_window):
    win = live_window(actviz_window)
    window = win.window
    live = win.live.controller
    dock = win.live.dock
    menu = next(a.menu() for a in window.menuBar().actions() if a.text() == "&Live")
    assert [a.text() for a in menu.actions() if a.text()] == [
        "Play / pause",
        "Previous frame",
        "Next frame",
        "Reset perturbation",
        "Live",
    ]
    assert not dock.play_action.isEnabled()  # one still input: nothing to play
    live.set_source(TensorFrames(random_frames(4, 3)))
    _wait_frames(qtbot, live, 1)
    assert dock.play_action.isEnabled() and dock.next_action.isEnabled()
    window.activateWindow()
    qtbot.waitUntil(window.isActiveWindow, timeout=10_000)
    ctrl = Qt.KeyboardModifier.ControlModifier
    qtbot.keyClick(window, Qt.Key.Key_Right, ctrl)
    qtbot.keyClick(window, Qt.Key.Key_Right, ctrl)
    assert live.player.index == 2
    qtbot.keyClick(window, Qt.Key.Key_Left, ctrl)
    assert live.player.index == 1
    _wait_idle(qtbot, live)
    np.testing.assert_array_equal(
        window.session.result.capture.inputs.numpy(), random_frames(4, 3)[1:2].numpy()
    )
    qtbot.keyClick(window, Qt.Key.Key_Space, ctrl)
    assert live.playing
    qtbot.keyClick(window, Qt.Key.Key_Space, ctrl)
    assert not live.playing
    live.update_perturbation(noise=0.5)
    dock.hide()  # the shortcuts do not need the dock
    qtbot.keyClick(window, Qt.Key.Key_0, ctrl)
    assert live.perturbation.is_identity and dock.noise_slider.value() == 0
    _wait_idle(qtbot, live)


def test_dragging_the_occlusion_patch_reruns_with_the_latest_position_only(qtbot, actviz_window):
    win = live_window(actviz_window)
    window = win.window
    live = win.live.controller
    dock = win.live.dock
    pad = dock.pad
    pad.resize(160, 160)
    x = window.session.input.value
    start = live.frames_shown
    # A drag: many moves while one frame computes; only the last position is guaranteed.
    qtbot.mousePress(pad, Qt.MouseButton.LeftButton, pos=pad.from_fraction(0.2, 0.2).toPoint())
    for f in np.linspace(0.2, 0.75, 12):
        p = pad.from_fraction(float(f), float(f)).toPoint()
        qtbot.mouseMove(pad, p)
        pad.mouseMoveEvent(_move_event(p))
    _wait_idle(qtbot, live)
    assert dock.occlusion_check.isChecked()
    fx, fy = live.perturbation.occlusion
    assert fx == pytest.approx(0.75, abs=0.02) and fy == pytest.approx(0.75, abs=0.02)
    assert live.frames_shown > start
    assert live.frames_shown - start < 13  # coalesced, not one run per move
    shown = window.session.result.capture.inputs
    expected, _ = live.perturbation.apply(x)
    torch.testing.assert_close(shown, expected)
    y0, y1, x0, x1 = live.perturbation.patch_box(16, 16)
    assert torch.allclose(shown[0, :, y0:y1, x0:x1], x.mean(dim=(2, 3))[0, :, None, None])
    # The prediction changed with the input (a real forward ran on the occluded picture).
    ref = capture(window.session.model, expected, ["fc"])
    torch.testing.assert_close(window.session.result.capture.output, ref.output)
    # Reset brings the original input back.
    dock.reset_perturbation()
    _wait_idle(qtbot, live)
    qtbot.waitUntil(
        lambda: torch.equal(window.session.result.capture.inputs, x), timeout=RUN_TIMEOUT_MS
    )


def _move_event(point):
    from PySide6.QtCore import QEvent
    from PySide6.QtGui import QMouseEvent

    return QMouseEvent(
        QEvent.Type.MouseMove,
        QPointF(point),
        QPointF(point),
        Qt.MouseButton.NoButton,
        Qt.MouseButton.LeftButton,
        Qt.KeyboardModifier.NoModifier,
    )


def test_sliders_perturb_the_current_input(qtbot, actviz_window):
    win = live_window(actviz_window)
    window = win.window
    live = win.live.controller
    dock = win.live.dock
    x = window.session.input.value
    dock.noise_slider.setValue(50)
    dock.brightness_slider.setValue(20)
    dock.contrast_slider.setValue(150)
    _wait_idle(qtbot, live)
    p = live.perturbation
    assert (p.noise, p.brightness, p.contrast) == (0.5, 0.2, 1.5)
    expected, _ = p.apply(x)
    qtbot.waitUntil(
        lambda: torch.allclose(window.session.result.capture.inputs, expected),
        timeout=RUN_TIMEOUT_MS,
    )


def test_a_selection_over_the_memory_budget_is_refused_with_a_message(qtbot, actviz_window):
    win = live_window(actviz_window)
    window = win.window
    live = win.live.configure(memory_budget=1024)
    live.set_source(TensorFrames(random_frames(3, 0)))
    _wait_idle(qtbot, live)
    text = win.live.message_text()
    assert "Refused" in text and "budget" in text
    assert not live.playing and window.isVisible()
    # Raising the budget lets the next frame through.
    win.live.dock.budget_spin.setValue(64)
    assert live.memory_budget == 64 << 20
    before = live.frames_shown
    live.step(1)
    _wait_frames(qtbot, live, before + 1)


def test_capture_too_large_during_a_frame_is_refused_not_a_crash(qtbot, actviz_window):
    win = live_window(actviz_window)
    window = win.window
    live = win.live.controller
    # No earlier shapes to estimate from: the capture itself refuses.
    window.session.set_result(None)
    live.memory_budget = 512
    live.set_source(TensorFrames(random_frames(2, 0)))
    qtbot.waitUntil(
        lambda: "Refused" in win.live.message_text(),
        timeout=RUN_TIMEOUT_MS,
    )
    assert "512 B" in win.live.message_text()


def test_run_while_perturbing_refreshes_the_live_frame(qtbot, actviz_window):
    win = live_window(actviz_window)
    window = win.window
    live = win.live.controller
    live.update_perturbation(brightness=0.3)
    _wait_idle(qtbot, live)
    shown = live.frames_shown
    window.runs.run()
    _wait_frames(qtbot, live, shown + 1)
    _wait_idle(qtbot, live)
    expected, _ = live.perturbation.apply(window.session.input.value)
    torch.testing.assert_close(window.session.result.capture.inputs, expected)


def test_only_the_latest_capture_is_kept(qtbot, actviz_window):
    win = live_window(actviz_window)
    window = win.window
    live = win.live.controller
    live.set_source(TensorFrames(random_frames(6, 0)))
    _wait_frames(qtbot, live, 1)
    refs = [weakref.ref(window.session.result.capture)]
    for _ in range(3):
        n = live.frames_shown
        live.step(1)
        _wait_frames(qtbot, live, n + 1)
        _wait_idle(qtbot, live)
        refs.append(weakref.ref(window.session.result.capture))
    gc.collect()
    alive = [r() is not None for r in refs]
    assert alive[-1] and not any(alive[:-1])
    # Nor the frames and requests of finished jobs (the worker's pool keeps its runnables).
    from actviz.ui.live.frame_runner import FrameSpec

    assert not [o for o in gc.get_objects() if type(o) is FrameSpec]


def test_frames_with_panels_off_screen_are_followed_by_a_full_one(qtbot, actviz_window):
    win = live_window(actviz_window)
    window = win.window
    live = win.live.controller
    window.centre.tabs.setCurrentIndex(1)  # the overview: no layer panel is on screen
    qtbot.waitUntil(lambda: live.runner.visible_layers() == set(), timeout=10_000)
    before = len(live.timings)
    old = window.session.result.layers["conv1"].mosaic
    live.update_perturbation(brightness=0.2)
    qtbot.waitUntil(lambda: len(live.timings) >= before + 2, timeout=RUN_TIMEOUT_MS)
    _wait_idle(qtbot, live)
    # The settling frame rebuilt every mosaic for the perturbed input.
    expected, _ = live.perturbation.apply(window.session.input.value)
    ref = capture(window.session.model, expected, ["conv1"])["conv1"].tensor[0]
    m = window.session.result.layers["conv1"].mosaic
    assert m is not old
    # "auto" colour map: the signed convolution's mosaic is symmetric about 0.
    assert m.symmetric
    np.testing.assert_allclose(
        m.image, mosaic(ref, symmetric=True).image, atol=1e-6, equal_nan=True
    )


def test_the_webcam_entry_says_why_it_is_missing(qtbot, actviz_window, monkeypatch):
    from actviz.ui.live import dock as live_controls

    # Before the window: its live dock reads the webcam's status when it is made.
    monkeypatch.setattr(live_controls, "webcam_status", lambda: (False, WEBCAM_MISSING))
    win = actviz_window()
    live = win.live.controller
    dock = win.live.dock
    item = dock.source_combo.model().item(live_controls._WEBCAM)
    assert not item.isEnabled() and WEBCAM_MISSING in item.text()
    assert dock.webcam_label.text() == WEBCAM_MISSING
    monkeypatch.setattr("actviz.ui.live.playback.webcam_status", lambda: (False, WEBCAM_MISSING))
    assert not live.open_webcam()
    assert dock.message_label.text() == WEBCAM_MISSING


def test_folder_and_tensor_choices_go_through_injected_choosers(qtbot, actviz_window, tmp_path):
    win = live_window(actviz_window)
    from actviz.ui.live import dock as live_controls

    for i in range(3):
        Image.new("RGB", (16, 16), (80 * i, 40, 200)).save(tmp_path / f"f{i}.png")
    live = win.live.controller
    dock = win.live.dock
    dock.choose_folder = lambda parent: str(tmp_path)
    dock._on_source_activated(live_controls._FOLDER)
    assert isinstance(live.source, ImageFolder) and len(live.source) == 3
    _wait_frames(qtbot, live, 1)
    assert dock.play_button.isEnabled() and dock.frame_slider.maximum() == 2
    bad = tmp_path / "bad.pt"
    torch.save({"x": torch.zeros(2)}, bad)
    dock.choose_tensor_file = lambda parent: str(bad)
    dock._on_source_activated(live_controls._TENSOR)
    assert "Could not open bad.pt" in dock.message_label.text()
    assert isinstance(live.source, ImageFolder)  # what plays stays
    assert dock.source_combo.currentIndex() == live_controls._FOLDER
    dock._on_source_activated(live_controls._STILL)
    assert live.source is None and not live.engaged


def test_still_frame_source_and_status_text():
    frame = StillFrame(torch.zeros(1, 3, 4, 4), None, "x.png").frame(3)
    assert frame.index == 0 and frame.label == "x.png"
    st = LiveStatus(
        fps=2.5, frames=7, dropped=1, held_bytes=3 << 20, budget_bytes=1 << 30, playing=True
    )
    assert st.text().startswith("2.5 fps") and "dropped 1" in st.text()
    assert LiveStatus(fps=2.5, frames=7, sequence=True).text() == "paused · 7 frames"
    assert LiveStatus(fps=2.5, frames=7).text() == "still input · 7 frames"
    assert "3.0 MiB of 1.0 GiB" in st.memory_text()


def test_live_frames_skip_the_input_gradient_while_no_saliency_is_shown(qtbot, actviz_window):
    win = live_window(actviz_window)
    window = win.window
    live = win.live.controller
    frames = random_frames(3, 2)
    assert window.centre.tabs.currentWidget() is window.centre.layers_splitter
    live.set_source(TensorFrames(frames))
    _wait_frames(qtbot, live, 1)
    _wait_idle(qtbot, live)
    assert (
        window.session.result.capture.input_grads is None and window.session.result.saliency is None
    )
    window.centre.tabs.setCurrentWidget(window.centre.overview_tab)
    shown = live.frames_shown
    live.step(1)
    _wait_frames(qtbot, live, shown + 1)
    _wait_idle(qtbot, live)
    grads = window.session.result.capture.input_grads
    assert grads is not None and grads.shape == frames[:1].shape
    expected = grads[0].abs().amax(0)
    np.testing.assert_allclose(
        window.session.result.saliency, (expected / expected.max()).numpy(), atol=1e-6
    )


def test_a_hidden_overview_waits_for_its_tab_and_then_shows_the_frame(qtbot, actviz_window):
    win = live_window(actviz_window)
    window = win.window
    centre = window.centre
    assert centre.tabs.currentWidget() is centre.layers_splitter
    live = win.live.controller
    live.set_source(TensorFrames(random_frames(3, 2), "clip"))
    _wait_frames(qtbot, live, 1)
    _wait_idle(qtbot, live)

    def overview_shows(result) -> bool:
        selected = window.display.selected_layer
        return (
            np.allclose(centre.grad_flow_panel.norms, result.grad_norms)
            and centre.prediction_panel.predictions() == list(result.predictions)
            and np.array_equal(centre.gradcam_panel.heat, result.grad_cams[result.gradcam_default])
            and np.array_equal(centre.histogram_panel.counts, result.layers[selected].hist[0])
            and table_rows() == {row["name"]: row for row in result.stats_rows()}
        )

    def table_rows() -> dict[str, dict]:
        model = centre.stats_table.model
        return {row["name"]: row for row in map(model.row_dict, range(model.rowCount()))}

    # A live frame with the Overview hidden: its panels keep the opened input's run, and the
    # frame's Grad-CAM and histogram were not computed for them.
    frame = window.session.result
    assert frame.origin and frame.grad_cams.computed() == []
    assert not frame.layers[window.display.selected_layer].hist_lazy.ready
    # Nor its statistics (the table is on the Overview), but for the gradients' norms.
    assert not any(layer.stats.ready for layer in frame.layers.values())
    assert all(layer.stats["grad_norm"] is not None for layer in frame.layers.values())
    assert not np.allclose(centre.grad_flow_panel.norms, frame.grad_norms)
    # Export and tests flush: the Overview then shows the frame, exactly.
    window.display.flush_panel_updates()
    assert overview_shows(frame)
    # The next frame waits again, until the tab is shown.
    n = live.frames_shown
    live.step(1)
    _wait_frames(qtbot, live, n + 1)
    _wait_idle(qtbot, live)
    assert not np.allclose(centre.grad_flow_panel.norms, window.session.result.grad_norms)
    centre.tabs.setCurrentWidget(centre.overview_tab)
    qtbot.waitUntil(
        lambda: live.idle and overview_shows(window.session.result), timeout=RUN_TIMEOUT_MS
    )
    # Shown: later frames fill it as they come, their Grad-CAM computed off the GUI thread.
    n = live.frames_shown
    live.step(1)
    _wait_frames(qtbot, live, n + 1)
    _wait_idle(qtbot, live)
    assert window.session.result.grad_cams.computed() == [window.session.result.gradcam_default]
    qtbot.waitUntil(lambda: overview_shows(window.session.result), timeout=RUN_TIMEOUT_MS)
    # Its statistics were computed with the frame, off the GUI thread.
    assert all(
        isinstance(layer.stats, MappingProxyType) for layer in window.session.result.layers.values()
    )


def test_frames_capture_on_the_workers_count_or_the_one_set(qtbot, actviz_window, monkeypatch):
    import actviz.core.capture as core_capture

    win = live_window(actviz_window)

    window = win.window
    live, frames = _fast_clip(win, seed=21)
    counts: list[int] = []
    on_session_model: list[int] = []  # the counts of captures on the window's model, not its copy
    real = core_capture.capture

    def counting(model, *args, **kwargs):
        counts.append(torch.get_num_threads())
        if model is window.session.model:
            on_session_model.append(counts[-1])
        return real(model, *args, **kwargs)

    monkeypatch.setattr(core_capture, "capture", counting)
    threads_before = torch.get_num_threads()
    _play_through_in_order(qtbot, window, live, frames)
    # One lane at the worker's count; once the model's copy is made, two at half of it each.
    half = max(1, threads_before // 2)
    assert counts and set(counts) <= {threads_before, half}  # (a loaded machine drops frames)
    # The frame that makes the copy captures alone, at the whole count (a frame on the copy may
    # reach its capture first: both lanes run at once).
    assert on_session_model[0] == threads_before
    live.capture_threads = 1  # a count set by the caller
    live.set_loop(False)
    live.seek(0)
    _wait_idle(qtbot, live)
    counts.clear()
    live.play()
    qtbot.waitUntil(lambda: not live.playing, timeout=RUN_TIMEOUT_MS)
    _wait_idle(qtbot, live)
    assert len(counts) >= len(frames) - 1 and set(counts) == {1}
    assert torch.get_num_threads() == threads_before  # the GUI thread's count untouched


def test_a_sequence_plays_on_two_lanes_the_model_and_its_copy_in_frame_order(qtbot, actviz_window):
    """Playing, frames alternate between the model (lane 0) and a copy (lane 1), each capture
    on half the threads; frames still show in order with the model's exact values. A weight
    changed in place is copied again before a frame uses the copy; a model switch drops it."""
    win = live_window(actviz_window)
    window = win.window
    live, frames = _fast_clip(win, seed=31)
    assert window.worker.threads >= 2  # the suite runs torch on two threads
    lanes: list[int] = []
    real_submit = window.worker.submit

    def submit(job, *, supersede=True, lane=0, threads=None):
        lanes.append(lane)
        return real_submit(job, supersede=supersede, lane=lane, threads=threads)

    window.worker.submit = submit
    model = window.session.model
    seen: dict[int, np.ndarray] = {}
    live.frame_changed.connect(
        lambda i, n, label: seen.setdefault(
            i, window.session.result.layers["conv1"].view.data.copy()
        )
    )
    _play_through_in_order(qtbot, window, live, frames)
    assert lanes[0] == 0 and 1 in lanes  # the copy is made on lane 0, then used
    replica = live.lanes.replica  # noqa: SLF001 - the copy this model got
    assert replica is not None and replica.original is model and replica.usable()
    # The copy's weights show in the dock's memory read-out.
    assert replica.nbytes == sum(p.numel() * 4 for p in model.parameters()) + sum(
        b.numel() * b.element_size() for b in model.buffers()
    )
    assert "model copy" in live.status().memory_text()
    for index, data in seen.items():
        expected = capture(model, frames[index : index + 1], ["conv1"])["conv1"].tensor[0]
        np.testing.assert_allclose(data, expected.numpy(), rtol=1e-5, atol=1e-6)

    # A weight changed in place: the copy is stale, made again, and frames show the new values.
    with torch.no_grad():
        model.conv1.weight.mul_(-1.0)
    assert not replica.usable()
    seen.clear()
    lanes.clear()
    live.seek(0)
    _wait_idle(qtbot, live)
    _play_through_in_order(qtbot, window, live, frames)
    assert live.lanes.replica is not replica and live.lanes.replica.usable()  # noqa: SLF001
    assert 1 in lanes
    for index, data in seen.items():
        expected = capture(model, frames[index : index + 1], ["conv1"])["conv1"].tensor[0]
        np.testing.assert_allclose(data, expected.numpy(), rtol=1e-5, atol=1e-6)

    # Paused or stepped: one lane. A new model: the copy goes with the old one.
    lanes.clear()
    live.step(1)
    _wait_idle(qtbot, live)
    assert lanes == [0]
    window.script.set_model(seeded_tiny_cnn(), layers=LIVE_LAYERS)
    assert live.lanes.replica is None  # noqa: SLF001
    assert "model copy" not in live.status().memory_text()
    assert not any(h for m in model.modules() for h in m._forward_hooks.values())  # noqa: SLF001


def test_playing_keeps_the_status_bar_steady_and_it_ends_on_the_frame_shown(qtbot, actviz_window):
    """No "Running…" per frame and no timing read-out per frame while a sequence plays (each
    one changes 30 times a second); once it stops, the read-out is the last frame's."""
    win = live_window(actviz_window)
    window = win.window
    live, frames = _fast_clip(win, seed=41)
    status, timing = window.status.status_label, window.status.timing_label
    texts: list[str] = []
    timings: list[tuple[float, str]] = []
    status.setText("before")

    bar_seen: list[bool] = []

    def watch() -> None:
        texts.append(status.text())
        bar_seen.append(window.status.progress_bar.isVisible())
        if not timings or timings[-1][1] != timing.text():
            timings.append((time.perf_counter(), timing.text()))

    probe = QTimer()
    probe.timeout.connect(watch)
    probe.start(1)
    t0 = time.perf_counter()
    live.frame_changed.connect(lambda *a: watch())
    live.set_loop(True)
    live.set_speed(200)
    live.play()
    _wait_frames(qtbot, live, live.frames_shown + 20)
    live.pause()
    _wait_idle(qtbot, live)

    from actviz.core.capture import format_bytes

    def trailing() -> bool:  # the last frame's read-out, at most one read-out interval later
        # (Its memory too: fast frames all run "in 1 ms", an earlier frame's read-out included.)
        ms = window.session.result.elapsed_s * 1000
        held = format_bytes(window.session.held_bytes())
        return timing.text().startswith(f"ran in {ms:.0f} ms") and f"{held} held" in timing.text()

    qtbot.waitUntil(trailing, timeout=int(READOUT_INTERVAL_S * 1000) + 2000)
    probe.stop()
    assert "Running…" not in texts and texts[-1].startswith("3 layer(s)")
    # No animated busy bar either (the stream has its rate read-out).
    assert bar_seen and not any(bar_seen)
    assert not window.commands.cancel_action.isEnabled()
    played_s = time.perf_counter() - t0
    changes = len(timings)
    assert changes <= played_s / 0.25 + 3, (changes, played_s)
    elapsed_ms = window.session.result.elapsed_s * 1000
    assert timing.text().startswith(f"ran in {elapsed_ms:.0f} ms")
    assert format_bytes(window.session.held_bytes()) in timing.text()
    # An ordinary run still says it runs.
    seen: list[tuple[str, bool]] = []
    # Connected once the run is submitted: after the window's own slot, which says
    # "Running…" when the run starts.
    window.run_started.connect(
        lambda: window.worker.jobs()[-1].started.connect(
            lambda: seen.append((status.text(), window.status.progress_bar.isVisible()))
        )
    )
    live.set_source(None)  # back to the opened input: an ordinary run
    qtbot.waitUntil(lambda: bool(seen) and not window.worker.is_busy(), timeout=RUN_TIMEOUT_MS)
    assert seen[-1] == ("Running…", True)
    assert not window.status.progress_bar.isVisible()


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="per-thread priority: Linux")
def test_frames_capture_below_the_gui_threads_priority(qtbot, actviz_window, monkeypatch):
    """Both cores capturing, the GUI thread must not wait for a time slice: the capture
    threads run CAPTURE_NICE steps lower."""
    import os
    import threading

    import actviz.core.capture as core_capture
    from actviz.ui.worker import CAPTURE_NICE

    win = live_window(actviz_window)

    window = win.window
    live, frames = _fast_clip(win, seed=51)
    gui = os.getpriority(os.PRIO_PROCESS, threading.get_native_id())
    seen: list[int] = []
    real = core_capture.capture

    def watching(*args, **kwargs):
        seen.append(os.getpriority(os.PRIO_PROCESS, threading.get_native_id()))
        return real(*args, **kwargs)

    monkeypatch.setattr(core_capture, "capture", watching)
    _play_through_in_order(qtbot, window, live, frames)
    assert seen and set(seen) == {min(19, gui + CAPTURE_NICE)}
    assert os.getpriority(os.PRIO_PROCESS, threading.get_native_id()) == gui


def test_a_copy_asked_for_by_a_frame_dropped_before_its_job_ran_is_asked_for_again(
    qtbot, actviz_window
):
    win = live_window(actviz_window)
    window = win.window
    live, _frames_ = _fast_clip(win, seed=61)
    model = window.session.model
    live.player.playing = True  # as while a sequence plays (no timer: nothing is submitted)

    def choose_lane(model):  # as the runner asks for the next frame's lane
        forced = live.capture_threads is not None
        inflight, threads = live.runner.inflight, live.worker.threads
        return live.lanes.choose(model, inflight, playing=True, threads=threads, forced=forced)

    try:
        lane, captured, build = choose_lane(model)  # noqa: SLF001
        assert (lane, captured) == (0, model) and build is live.lanes.replica  # noqa: SLF001
        live.lanes.build_job = object()  # noqa: SLF001 - never in flight
        # That frame was dropped: the next one carries the copy again, not lane 0 for good.
        lane, captured, again = choose_lane(model)  # noqa: SLF001
        assert again is build and build.twin is None
        live.runner.inflight[live.lanes.build_job] = None  # noqa: SLF001 - now it is on its way
        assert choose_lane(model)[2] is None  # noqa: SLF001
        del live.runner.inflight[live.lanes.build_job]  # noqa: SLF001
    finally:
        live.player.playing = False


def test_closing_the_live_dock_drops_the_copy_and_the_memory_line_follows_runs(
    qtbot, actviz_window
):
    win = live_window(actviz_window)
    window = win.window
    feature = win.live.feature
    live, frames = _fast_clip(win, seed=71)
    feature.dock.show()
    _play_through_in_order(qtbot, window, live, frames)
    assert live.status().copy_bytes > 0
    shown: list[str] = []
    live.status_changed.connect(lambda st: shown.append(st.memory_text()))
    feature.dock.close()  # live mode off: the copy's memory goes back
    qtbot.waitUntil(lambda: live.lanes.replica is None, timeout=30_000)  # noqa: SLF001
    assert "model copy" not in shown[-1] and live.status().copy_bytes == 0
    # A run of the window changes what the session holds: the dock's line says so at once.
    live.set_source(None)  # back to the opened input: the window runs it
    qtbot.waitUntil(
        lambda: live.idle and not window.worker.is_busy() and not window.session.result.origin,
        timeout=RUN_TIMEOUT_MS,
    )
    before, old = len(shown), window.session.result
    window.runs.run()
    qtbot.waitUntil(lambda: window.session.result is not old, timeout=RUN_TIMEOUT_MS)
    from actviz.core.capture import format_bytes

    assert len(shown) > before
    assert shown[-1].startswith(f"held {format_bytes(window.session.held_bytes())} of ")


def test_a_panel_scrolled_into_view_after_frames_shows_that_frames_values(
    qtbot, actviz_window, monkeypatch
):
    """Frames build only the mosaics on screen; a panel scrolled to afterwards shows the
    frame on screen, not the earlier frame whose mosaic it kept (issue 39)."""
    layers = ["conv1", "relu", "conv2", "fc"]
    model = seeded_tiny_cnn()
    win = actviz_window(model, random_frames(1, 9), layers, size=(900, 520), auto_run=True)
    win.run_and_wait(flush=False)
    window = win.window
    live = win.live.configure(max_fps=1000)
    frames = random_frames(6, 4)
    live.set_source(TensorFrames(frames, "clip"))
    _wait_frames(qtbot, live, 1)
    _wait_idle(qtbot, live)
    # Without the settling full frame that follows, so the scroll alone must bring it up.
    offer = live.coalescer.offer
    monkeypatch.setattr(live.coalescer, "offer", lambda spec: None if spec.full else offer(spec))
    window.centre.layers_scroll.verticalScrollBar().setValue(0)
    qtbot.waitUntil(lambda: "conv1" in live.runner.visible_layers(), timeout=10_000)
    off = [n for n in ("relu", "conv2") if n not in live.runner.visible_layers()]
    assert off, "a maps panel must be off screen for this test"
    name = off[-1]
    shown = live.frames_shown
    live.seek(3)
    _wait_frames(qtbot, live, shown + 1)
    _wait_idle(qtbot, live)
    layer = window.session.result.layers[name]
    if not layer.stale_mosaics:  # timing: the frame was made while the panel was on screen
        pytest.skip("the frame built this panel's mosaic: nothing was kept to be made again")
    panel = window.host.layer_panels[name]
    window.centre.layers_scroll.ensureWidgetVisible(panel)
    ref = capture(model, frames[3:4], [name])[name].tensor[0]

    def shows_frame_3() -> bool:
        m = panel.activation_slot.mosaic
        return m is not None and np.array_equal(
            m.indices, mosaic(ref, symmetric=m.symmetric).indices
        )

    qtbot.waitUntil(shows_frame_3, timeout=RUN_TIMEOUT_MS)
    m = panel.activation_slot.mosaic
    # What is painted: the canvas's pixels are that mosaic's.
    assert np.array_equal(panel.activation_slot.image_canvas.image.image, m.indices)
    np.testing.assert_allclose(m.image, mosaic(ref, symmetric=m.symmetric).image, equal_nan=True)
    # The gradient side too: this frame's |gradient|.
    g = panel.gradient_slot.mosaic
    assert g is not None and np.array_equal(g.indices, mosaic(layer.grad_view.data).indices)
    torch.testing.assert_close(window.session.result.capture.inputs, frames[3:4], rtol=0, atol=0)


class _WideConv(nn.Module):
    """One 16-channel convolution on a 96x96 input: a mosaic page of ~150k pixels."""

    def __init__(self) -> None:
        super().__init__()
        self.conv = nn.Conv2d(3, 16, 3, padding=1)
        self.pool = nn.AdaptiveAvgPool2d(1)
        self.fc = nn.Linear(16, 4)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.fc(self.pool(self.conv(x)).flatten(1))


def test_live_mosaics_are_built_at_about_their_canvas_pixels(qtbot, actviz_window):
    """A frame's on-screen mosaic has about as many pixels as its canvas shows (tiles area
    averaged, as over any budget); the read-outs keep the layer's own values."""
    from actviz.display.mosaic import MAX_MOSAIC_PIXELS, max_tile_for
    from actviz.ui.live.frame_runner import MIN_LIVE_MOSAIC_PIXELS, mosaic_budget

    torch.manual_seed(0)
    model = _WideConv().eval()
    frames = torch.randn(3, 3, 96, 96, generator=torch.Generator().manual_seed(1))
    win = actviz_window(model, frames[:1], ["conv"], size=(1000, 700), auto_run=True)
    win.run_and_wait(flush=False)
    window = win.window
    live = win.live.configure(max_fps=1000)
    live.set_source(TensorFrames(frames, "clip"))
    _wait_frames(qtbot, live, 1)
    _wait_idle(qtbot, live)
    win.settle()  # the canvas at its size: the next frame's budget is read from it
    visible = live.runner.visible_layers()
    assert visible == {"conv"}
    canvas = window.host.layer_panels["conv"].activation_slot.image_canvas
    budget = mosaic_budget(window.host.layer_panels, visible)
    shown = canvas.image_area_width() * canvas.height() * canvas.devicePixelRatioF() ** 2
    assert MIN_LIVE_MOSAIC_PIXELS <= budget == int(shown) < MAX_MOSAIC_PIXELS
    shots = live.frames_shown
    live.seek(2)
    _wait_frames(qtbot, live, shots + 1)
    _wait_idle(qtbot, live)
    layer = window.session.result.layers["conv"]
    m = layer.mosaic
    page = window.session.page_channels.get("conv")
    tile = max_tile_for(16, 96, 96, max_channels=page or 16, max_pixels=budget)
    assert m.scale == math.ceil(96 / tile) > 1  # smaller than the layer: area averaged
    ref = capture(model, frames[2:3], ["conv"])["conv"].tensor[0]
    want = mosaic(ref, max_channels=page, max_pixels=budget, symmetric=m.symmetric)
    np.testing.assert_array_equal(m.indices, want.indices)
    assert np.array_equal(canvas.image.image, m.indices)  # what is painted
    # The values under the mouse are the layer's own, at full resolution.
    np.testing.assert_array_equal(layer.view.data, ref.numpy())
    # Every panel on screen: no full frame follows; a full frame keeps the usual budget.
    assert mosaic_budget(window.host.layer_panels, None) == MAX_MOSAIC_PIXELS
