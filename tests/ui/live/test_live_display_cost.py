"""What a live frame costs the GUI thread beside its capture (issue 39: the display's CPU per
frame bounds live_small_ratio on two cores): nothing is repainted that did not change."""

from __future__ import annotations

import time

from PySide6.QtCore import QEvent, QObject
from PySide6.QtWidgets import QApplication

from actviz.ui.panels.style import ElidedLabel


class _Paints(QObject):
    def __init__(self) -> None:
        super().__init__()
        self.count = 0

    def eventFilter(self, _obj: QObject, event: QEvent) -> bool:  # noqa: N802 - Qt name
        if event.type() == QEvent.Type.Paint:
            self.count += 1
        return False


def _paint_count(qtbot, label: ElidedLabel, change) -> int:
    paints = _Paints()
    label.installEventFilter(paints)
    try:
        change()
        qtbot.wait(30)
        QApplication.processEvents()
    finally:
        label.removeEventFilter(paints)
    return paints.count


def test_an_elided_label_set_to_the_same_text_is_not_repainted(qtbot):
    # A layer panel's title is set again with every live frame: ~8 repaints a frame of a
    # 5-layer window, each repainting the panel beneath the label, for nothing.
    label = ElidedLabel()
    qtbot.addWidget(label)
    label.resize(120, 20)
    label.set_text("features.block2 · ConvBlock · 32×32×32", ("features.block2 · …",))
    label.show()
    qtbot.waitExposed(label)
    QApplication.processEvents()
    same = ("features.block2 · ConvBlock · 32×32×32", ("features.block2 · …",))
    assert _paint_count(qtbot, label, lambda: label.set_text(*same)) == 0
    assert label.shown_text() == "features.block2 · …"
    assert _paint_count(qtbot, label, lambda: label.set_text("conv1", ("c…",))) >= 1
    assert label.shown_text() == "conv1"
    # setText: the same text, no repaint; after set_text's fallbacks, the text is drawn whole.
    assert _paint_count(qtbot, label, lambda: label.setText("conv1")) >= 1  # fallbacks forgotten
    assert _paint_count(qtbot, label, lambda: label.setText("conv1")) == 0
    label.set_text("a long title that does not fit here", ("short",))
    QApplication.processEvents()
    assert label.shown_text() == "short"
    label.setText("a long title that does not fit here")
    QApplication.processEvents()
    assert label.shown_text().endswith("…") and label.shown_text() != "short"


class _Events(QObject):
    """Counts the events of some types sent to the objects it watches."""

    def __init__(self, *types: QEvent.Type) -> None:
        super().__init__()
        self.types = set(types)
        self.count = 0

    def eventFilter(self, _obj: QObject, event: QEvent) -> bool:  # noqa: N802 - Qt name
        if event.type() in self.types:
            self.count += 1
        return False


def test_the_play_clock_holds_and_counts_the_ticks_it_missed(qtbot):
    from actviz.ui.live.playback import PlayClock

    owner = QObject()
    ticks: list[float] = []
    clock = PlayClock(owner, lambda: ticks.append(time.perf_counter()))
    clock.start(10)
    qtbot.waitUntil(lambda: len(ticks) >= 2, timeout=10_000)
    clock.hold()
    assert clock.held and clock.running
    held_at, before = time.perf_counter(), len(ticks)
    qtbot.wait(80)
    assert len(ticks) == before  # no tick while held
    missed = clock.resume()
    elapsed_ms = (time.perf_counter() - held_at) * 1000
    assert int(elapsed_ms / 10) - 1 <= missed <= int(elapsed_ms / 10)
    assert not clock.held and clock.running
    qtbot.waitUntil(lambda: len(ticks) > before, timeout=10_000)  # ticking again
    clock.stop()
    assert not clock.running and clock.resume() == 0


def test_a_slow_capture_holds_the_play_timer_and_every_frame_is_shown_or_dropped(
    qtbot, actviz_window, monkeypatch
):
    """Frames slower than the playback speed: the play timer waits for room instead of ticking
    five or six times a frame shown, and the frames shown and dropped still add up to the
    clip played through, in order, to its last frame."""
    import torch

    import actviz.core.capture as core_capture
    from actviz.ui.live.frames import TensorFrames
    from tests.ui.tiny_models import TinyCNN

    real_capture = core_capture.capture

    captures: list[int] = []

    def slow_capture(*args, **kwargs):
        captures.append(1)
        time.sleep(0.06)
        return real_capture(*args, **kwargs)

    torch.manual_seed(0)
    frames = torch.randn(40, 3, 16, 16, generator=torch.Generator().manual_seed(3))
    win = actviz_window(TinyCNN().eval(), frames[:1], ["conv1", "conv2"], size=(1200, 800))
    win.run_and_wait(flush=False)
    live = win.live.configure(max_fps=1000)
    live.set_source(TensorFrames(frames, "clip"))
    qtbot.waitUntil(lambda: live.frames_shown >= 1 and live.idle, timeout=30_000)
    monkeypatch.setattr(core_capture, "capture", slow_capture)
    ticks: list[int] = []
    live._clock._timer.timeout.connect(lambda: ticks.append(1))  # noqa: SLF001
    shown: list[int] = []
    live.frame_changed.connect(lambda i, n, label: shown.append(i))
    dropped0 = live.coalescer.dropped
    live.set_loop(False)
    live.set_speed(100)  # a tick every 10 ms; a capture takes 60 ms or more
    live.play()
    qtbot.waitUntil(lambda: not live.playing, timeout=60_000)
    qtbot.waitUntil(lambda: live.idle, timeout=30_000)
    played = [i for i in shown if i > 0]
    assert played == sorted(played) and played[-1] == len(frames) - 1
    # Each of the 39 steps of the clip is shown or counted as dropped (a frame made again
    # for the off-screen panels once settled may come on top).
    steps = len(set(played)) + live.coalescer.dropped - dropped0
    assert len(frames) - 1 <= steps <= len(frames), (len(played), live.coalescer.dropped)
    # Ticking on while no frame could start: ~6 ticks a capture (39 ticks in all). Counted
    # against the captures, not the frames shown: a loaded machine drops more frames at the
    # display (under two busy processes: 33 ticks, 18 captures, 11 frames shown).
    assert len(ticks) <= 2 * len(captures) + 4, (len(ticks), len(captures), len(played))


def test_a_frame_whose_display_pass_a_newer_frame_overtook_counts_as_dropped(qtbot, actviz_window):
    """Two frames reach the window in one event-loop turn (the GUI was busy painting): only
    the newer one is announced, and the older one, never painted, counts as dropped, so the
    read-out's shown and dropped still add up to the frames played."""
    import torch

    from actviz.ui.live.frame_runner import FrameSpec, FrameTiming
    from actviz.ui.live.frames import TensorFrames
    from tests.ui.tiny_models import TinyCNN

    frames = torch.randn(6, 3, 16, 16, generator=torch.Generator().manual_seed(3))
    win = actviz_window(TinyCNN().eval(), frames[:1], ["conv1"], size=(1000, 700))
    win.run_and_wait(flush=False)
    live = win.live.configure()
    live.set_source(TensorFrames(frames, "clip"))
    qtbot.waitUntil(lambda: live.frames_shown >= 1 and live.idle, timeout=30_000)
    announced: list[int] = []
    live.frame_changed.connect(lambda i, n, label: announced.append(i))
    dropped0 = live.coalescer.dropped
    for index in (3, 4):
        live.frame_shown(FrameSpec(index, live.perturbation), FrameTiming(index), 1.0)
    qtbot.waitUntil(lambda: bool(announced), timeout=10_000)
    win.settle()
    assert announced[:1] == [4] and 3 not in announced
    assert live.coalescer.dropped - dropped0 == 1


def test_playing_relays_out_neither_the_status_bar_nor_the_model_dock(qtbot, actviz_window):
    """The run time and the live rate in the status bar and the input's caption change while
    frames play: each repaints itself, without relaying out the status bar (and the window)
    or repainting the Model dock under the caption."""
    import torch

    from actviz.ui.live.frames import TensorFrames
    from tests.ui.tiny_models import TinyCNN

    torch.manual_seed(0)
    frames = torch.randn(8, 3, 16, 16, generator=torch.Generator().manual_seed(4))
    win = actviz_window(TinyCNN().eval(), frames[:1], ["conv1", "conv2"], size=(1200, 800))
    win.run_and_wait(flush=False)
    window = win.window
    live = win.live.configure(max_fps=1000)
    live.set_source(TensorFrames(frames, "clip"))
    qtbot.waitUntil(lambda: live.frames_shown >= 1 and live.idle, timeout=30_000)
    timing, rate = window.status.timing_label, win.live.feature.status_label
    layouts = _Events(QEvent.Type.LayoutRequest)
    window.statusBar().installEventFilter(layouts)
    dock_paints = _Events(QEvent.Type.Paint)
    window.model_dock.installEventFilter(dock_paints)
    texts: set[tuple[str, str]] = set()
    live.frame_changed.connect(lambda *a: texts.add((timing.text(), rate.text())))
    live.set_loop(True)
    live.set_speed(60)
    t0, start = time.perf_counter(), live.frames_shown
    live.play()
    # Until the read-outs changed (they change at most every READOUT_INTERVAL_S: a loaded
    # machine plays fewer frames in the same time, not fewer read-outs).
    qtbot.waitUntil(
        lambda: (
            time.perf_counter() - t0 > 1.5 and live.frames_shown >= start + 20 and len(texts) >= 4
        ),
        timeout=60_000,
    )
    live.pause()
    qtbot.waitUntil(lambda: live.idle, timeout=30_000)
    window.statusBar().removeEventFilter(layouts)
    window.model_dock.removeEventFilter(dock_paints)
    assert len(texts) >= 4  # the read-outs did change while playing
    assert rate.text() == "live paused" and timing.text().startswith("ran in")
    # A text wider than any before widens its read-out once; the rest fit.
    assert layouts.count <= 4, layouts.count
    assert dock_paints.count <= 2, dock_paints.count


def test_a_readout_relays_out_only_for_a_wider_text(qtbot):
    from PySide6.QtWidgets import QMainWindow

    window = QMainWindow()
    qtbot.addWidget(window)
    readout = ElidedLabel("ran in 120 ms", grow=True)
    window.statusBar().addPermanentWidget(readout)
    window.resize(800, 300)
    window.show()
    qtbot.waitExposed(window)
    QApplication.processEvents()
    layouts = _Events(QEvent.Type.LayoutRequest)
    window.statusBar().installEventFilter(layouts)
    paints = _Events(QEvent.Type.Paint)
    readout.installEventFilter(paints)
    width = readout.width()
    for text in ("ran in 98 ms", "ran in 131 ms", "ran in 7 ms"):
        readout.setText(text)
        QApplication.processEvents()
        assert readout.text() == text
    assert layouts.count == 0 and paints.count >= 3 and readout.width() == width
    readout.setText("ran in 131 ms · 1.2 MiB held (2 pinned)")
    QApplication.processEvents()
    assert layouts.count >= 1
    wide = readout.fontMetrics().horizontalAdvance(readout.text())
    qtbot.waitUntil(lambda: readout.width() >= wide > width, timeout=10_000)
    readout.clear()
    assert readout.text() == ""


def test_the_same_run_messages_set_again_change_nothing(qtbot):
    from actviz.ui.window.central import MessageBanner

    banner = MessageBanner()
    qtbot.addWidget(banner)
    tips = _Events(QEvent.Type.ToolTipChange)
    banner.label.installEventFilter(tips)
    for _ in range(3):  # every live frame sets its run's messages
        banner.set_messages("run", [])
    assert tips.count == 0 and not banner.isVisible()
    banner.set_messages("run", [("warning", "w")])
    banner.set_messages("run", [("warning", "w")])
    assert banner.texts() == ["w"]
    banner.set_messages("run", [])
    assert banner.texts() == [] and tips.count >= 1


def test_the_status_message_changes_without_relaying_out_the_window(qtbot):
    """A live frame's target changes the status message: the bar keeps its layout (a QLabel's
    text rebuilt the bar's layout and relaid out the main window and its docks)."""
    from PySide6.QtWidgets import QMainWindow

    window = QMainWindow()
    qtbot.addWidget(window)
    label = ElidedLabel("Ready", steady=True)
    window.statusBar().addWidget(label, 1)
    window.resize(400, 300)
    window.show()
    qtbot.waitExposed(window)
    QApplication.processEvents()
    height = label.height()
    layouts = _Events(QEvent.Type.LayoutRequest)
    window.statusBar().installEventFilter(layouts)
    window.installEventFilter(layouts)
    for i in range(5):
        label.setText(f"5 layer(s) · target top-1 logit (class {i * 37})")
        QApplication.processEvents()
        assert label.text() == f"5 layer(s) · target top-1 logit (class {i * 37})"
    assert layouts.count == 0 and label.height() == height
    long = "Opened " + "/a/long/folder" * 30
    label.setText(long)
    QApplication.processEvents()
    assert label.shown_text().endswith("…") and label.toolTip() == long
    label.set_text("conv1 · Conv2d · 8x8", ("conv1 · …",))
    assert label.text() == "conv1 · Conv2d · 8x8"
    label.clear()
    QApplication.processEvents()
    assert label.text() == "" and label.shown_text() == "" and layouts.count == 0
