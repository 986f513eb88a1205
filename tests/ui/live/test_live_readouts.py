"""The Live dock's frame counter and slider change a few times a second while playing (their
repaints every frame were a tenth of the GUI thread's time per frame on small models), at once
otherwise, and always end on the frame shown."""

from __future__ import annotations

import numpy as np
from PySide6.QtCore import QObject, Signal

from actviz.testing import RUN_TIMEOUT_MS
from actviz.ui.live.frames import TensorFrames
from actviz.ui.live.playback import SpacedReadout
from tests.helpers import random_frames
from tests.ui.live.live_windows import live_window


class _Player(QObject):
    playing_changed = Signal(bool)

    def __init__(self) -> None:
        super().__init__()
        self.playing = False

    def set_playing(self, playing: bool) -> None:
        self.playing = playing
        self.playing_changed.emit(playing)


def test_a_spaced_readout_shows_at_once_when_not_playing_and_the_last_one_when_due(qtbot):
    player, shown = _Player(), []
    readout = SpacedReadout(lambda *args: shown.append(args), player, interval_s=0.2)
    readout.offer(1, "a")
    readout.offer(2, "b")
    assert shown == [(1, "a"), (2, "b")]  # paused: every offer at once
    player.set_playing(True)
    shown.clear()
    readout.offer(3, "c")  # the interval since the last one is not over: it waits
    readout.offer(4, "d")  # replaces the waiting one
    assert shown == [] and readout.waiting
    qtbot.waitUntil(lambda: shown == [(4, "d")], timeout=10_000)  # shown when due
    assert not readout.waiting
    readout.offer(5, "e")
    readout.offer(6, "f")
    assert shown == [(4, "d")]
    player.set_playing(False)  # stopping shows what waits at once
    assert shown == [(4, "d"), (6, "f")] and not readout.waiting
    player.set_playing(True)
    readout.offer(7, "g")  # just shown: waits
    player.playing = False  # (paused without the signal yet) a paused offer replaces it
    readout.offer(8, "h")
    assert shown[-1] == (8, "h") and not readout.waiting
    qtbot.wait(300)
    assert shown[-1] == (8, "h")  # the replaced one never shows


def test_the_docks_frame_counter_is_spaced_while_playing_and_ends_on_the_frame_shown(
    qtbot, actviz_window
):
    win = live_window(actviz_window)
    live = win.live.configure(max_fps=1000)
    dock = win.live.dock
    readout = dock.findChild(SpacedReadout)
    assert readout is not None
    readout.interval_s = 30.0  # nothing is due while the test plays
    frames = random_frames(6, 4)
    live.set_source(TensorFrames(frames, "clip"))
    qtbot.waitUntil(lambda: live.frames_shown >= 1 and live.idle, timeout=RUN_TIMEOUT_MS)
    assert dock.frame_label.text().startswith("frame 1/6")
    labels: list[str] = []
    live.frame_changed.connect(lambda *_: labels.append(dock.frame_label.text()))
    live.set_speed(200)
    live.play()
    qtbot.waitUntil(lambda: len(labels) >= 4, timeout=RUN_TIMEOUT_MS)
    # While playing: the first frame played showed, the others wait (the input preview's
    # caption names every frame).
    assert len(set(labels)) == 1 and readout.waiting
    live.pause()
    qtbot.waitUntil(lambda: live.idle, timeout=RUN_TIMEOUT_MS)
    index = live.last_timing.index  # the frame shown last
    assert not readout.waiting
    assert dock.frame_label.text().startswith(f"frame {index + 1}/6")
    assert dock.frame_slider.value() == index
    # Paused, a step shows at once.
    live.step(1)
    qtbot.waitUntil(lambda: live.idle and live.last_timing.index != index, timeout=RUN_TIMEOUT_MS)
    now = live.last_timing.index
    assert dock.frame_label.text().startswith(f"frame {now + 1}/6")
    assert dock.frame_slider.value() == now


def test_the_pads_picture_is_spaced_while_playing_and_ends_on_the_frame_shown(qtbot, actviz_window):
    win = live_window(actviz_window)
    live = win.live.configure(max_fps=1000)
    dock = win.live.dock
    preview = win.window.model_dock.input_preview
    readout = dock.pad.findChild(SpacedReadout)
    assert readout is not None and readout is not dock.findChild(SpacedReadout)
    readout.interval_s = 30.0  # nothing is due while the test plays
    live.set_source(TensorFrames(random_frames(6, 4), "clip"))
    qtbot.waitUntil(lambda: live.frames_shown >= 1 and live.idle, timeout=RUN_TIMEOUT_MS)
    assert dock.pad.rgb is not None
    np.testing.assert_array_equal(dock.pad.rgb, preview.rgb)
    pictures: list[tuple[np.ndarray, np.ndarray]] = []
    live.frame_changed.connect(lambda *_: pictures.append((dock.pad.rgb, preview.rgb.copy())))
    live.set_speed(200)
    live.play()
    qtbot.waitUntil(lambda: len(pictures) >= 4, timeout=RUN_TIMEOUT_MS)
    # While playing: the pad keeps the first frame played, the preview shows every frame.
    assert all(pad is pictures[0][0] for pad, _ in pictures) and readout.waiting
    assert any(not np.array_equal(shown, pictures[0][1]) for _, shown in pictures)
    live.pause()
    qtbot.waitUntil(lambda: live.idle, timeout=RUN_TIMEOUT_MS)
    assert not readout.waiting
    np.testing.assert_array_equal(dock.pad.rgb, preview.rgb)  # the frame shown last
    # Paused, a step shows at once.
    index = live.last_timing.index
    live.step(1)
    qtbot.waitUntil(lambda: live.idle and live.last_timing.index != index, timeout=RUN_TIMEOUT_MS)
    np.testing.assert_array_equal(dock.pad.rgb, preview.rgb)
