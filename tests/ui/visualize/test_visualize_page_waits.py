"""The What channels want dock while the model is busy: a page asked for during a run waits
for it (its copy of the model is made on the capture worker between two jobs), and the dock
says so instead of "Synthesising…" over grey tiles that do not move."""

from __future__ import annotations

import threading

from tests.ui.conftest import frame


def test_a_page_asked_for_during_a_run_says_it_waits_then_synthesises(actviz_window, tiny_cnn):
    win = actviz_window(tiny_cnn, frame(3), ["conv1", "conv2"])
    win.run_and_wait()
    feature = win.visualize.feature
    win.visualize.configure(size=16, steps=2)
    dock = feature.page.dock
    # A run that holds the capture worker until the gate opens (a slow model's run).
    gate = threading.Event()
    handle = tiny_cnn.conv1.register_forward_pre_hook(lambda _m, _a: gate.wait(30) and None)
    try:
        win.window.runs.run()
        win.qtbot.waitUntil(win.window.worker.is_busy, timeout=10_000)
        assert feature.visualise_page("conv2", 0)
        text = dock.message.text()
        assert "Waiting" in text and "run" in text and "Synthesising" not in text, text
        assert dock.cancel_button.isVisible()  # the wait can be cancelled as the work can
        # Another feature's Cancel on the capture worker cancels every current job there,
        # the page's copy queued behind the run too: the page asks again (it waited for ever).
        win.window.worker.cancel()
        gate.set()
        win.qtbot.waitUntil(lambda: feature.page.job.running, timeout=30_000)
        assert dock.message.text().startswith("Synthesising what"), dock.message.text()
        win.qtbot.waitUntil(lambda: not feature.is_busy(), timeout=60_000)
        assert dock.mosaic.filled() == feature.page.channels
    finally:
        gate.set()
        handle.remove()


def test_what_it_wants_cancel_button_leaves_the_page_running(actviz_window, tiny_cnn):
    # The channel view's Cancel stopped the What channels want page too (Esc stops both).
    win = actviz_window(tiny_cnn, frame(3), ["conv1", "conv2"])
    win.run_and_wait()
    feature = win.visualize.feature
    page = feature.page
    section = win.visualize.configure(size=16, steps=4096)
    assert feature.visualise_page("conv2", 0)
    win.qtbot.waitUntil(lambda: page.job.progress[0] >= 1, timeout=60_000)
    assert win.window.display.open_channel("conv2", 1)
    win.qtbot.waitUntil(lambda: not feature.looking_up(), timeout=30_000)
    section.button.click()
    win.qtbot.waitUntil(lambda: feature.job.progress[0] >= 1, timeout=60_000)
    section.cancel_button.click()
    win.qtbot.waitUntil(lambda: not feature.job.running, timeout=60_000)
    assert "Cancelled" in section.message.text()
    assert page.is_busy() and page.dock.cancel_button.isVisible()
    assert "Cancelled" not in page.dock.message.text()
    page.dock.cancel_button.click()
    win.qtbot.waitUntil(lambda: not feature.is_busy(), timeout=60_000)
    assert "Cancelled" in page.dock.message.text()


def test_closing_the_dock_stops_its_synthesis_and_keeps_the_tiles_done(actviz_window, tiny_cnn):
    # Closed, the dock's page went on synthesising unseen (a busy bar and Cancel in the
    # window with nothing on screen saying what ran), as live mode's dock does not.
    win = actviz_window(tiny_cnn, frame(3), ["conv1", "conv2"])
    win.run_and_wait()
    feature = win.visualize.feature
    win.visualize.configure(size=16, steps=4096)
    page = feature.page
    assert feature.visualise_page("conv2", 0)
    win.qtbot.waitUntil(lambda: page.job.progress[0] >= 1, timeout=60_000)
    page.dock.close()
    win.qtbot.waitUntil(lambda: not feature.is_busy(), timeout=60_000)
    assert not win.window.is_busy() and not win.window.commands.cancel_action.isEnabled()
    page.dock.show()
    assert page.dock.message.text().startswith("Cancelled"), page.dock.message.text()
    assert page.dock.visualise_button.isEnabled()  # Visualise goes on from there


def test_the_page_runs_at_what_it_wants_priority_and_gives_way_to_runs(
    actviz_window, tiny_cnn, monkeypatch
):
    """Issue 39 #10 (vis_page_ratio): the page ran 10 nice steps below the channel view's
    picture, so on a shared machine it lost every time slice to other processes. It runs at
    the channel view's priority, CAPTURE_NICE below the GUI thread as captures do (at the
    GUI's, a paint beside a synthesis waited for its time slice: issue 37's blocks), and the
    window's runs come first: a step waits while one runs."""
    import os
    import time

    import actviz.ui.visualize.page as page_module
    from actviz.ui.visualize.page import YIELD_S
    from actviz.ui.worker import CAPTURE_NICE

    win = actviz_window(tiny_cnn, frame(3), ["conv1", "conv2"])
    win.run_and_wait()
    feature = win.visualize.feature
    win.visualize.configure(size=16, steps=4096)
    page = feature.page
    gui = os.getpriority(os.PRIO_PROCESS, threading.get_native_id())
    seen: list[int] = []
    real = page_module.visualize

    def watching(*args, **kwargs):
        seen.append(os.getpriority(os.PRIO_PROCESS, threading.get_native_id()))
        return real(*args, **kwargs)

    monkeypatch.setattr(page_module, "visualize", watching)
    assert feature.visualise_page("conv2", 0)
    win.qtbot.waitUntil(lambda: page.job.progress[0] >= 2, timeout=60_000)
    assert seen and set(seen) == {min(19, gui + CAPTURE_NICE)}
    assert feature.synth_worker.nice == page.worker.nice == CAPTURE_NICE  # the channel view's
    # A run holding the capture worker (on the window's model, not the page's copy).
    gate = threading.Event()
    handle = tiny_cnn.conv1.register_forward_pre_hook(lambda _m, _a: gate.wait(30) and None)
    try:
        win.window.runs.run()
        win.qtbot.waitUntil(win.window.worker.is_busy, timeout=10_000)
        win.qtbot.wait(50)  # the step in flight ends
        before = page.job.progress[0]
        t0 = time.monotonic()
        win.qtbot.wait(int(YIELD_S * 1000 * 0.6))
        if time.monotonic() - t0 < YIELD_S:  # a loaded machine may sleep past the bound
            assert page.job.progress[0] - before <= 1
        gate.set()
        win.qtbot.waitUntil(lambda: page.job.progress[0] >= before + 3, timeout=60_000)
    finally:
        gate.set()
        handle.remove()
    page.cancel()
    win.qtbot.waitUntil(lambda: not feature.is_busy(), timeout=60_000)


def test_a_page_asked_for_twice_while_its_copy_waits_runs_once_and_ends(actviz_window, tiny_cnn):
    # The stress run's "stuck: visualize busy": Visualise, a run, Visualise again before the
    # model's copy was made: the page's start was queued twice and the page never ended.
    win = actviz_window(tiny_cnn, frame(3), ["conv1", "conv2"])
    win.run_and_wait()
    feature = win.visualize.feature
    win.visualize.configure(size=4, steps=2)
    gate = threading.Event()
    handle = tiny_cnn.conv1.register_forward_pre_hook(lambda _m, _a: gate.wait(30) and None)
    starts: list[int] = []
    real = feature.page._run  # noqa: SLF001
    feature.page._run = lambda *a, **k: (starts.append(1), real(*a, **k))  # noqa: SLF001
    try:
        win.window.runs.run()
        win.qtbot.waitUntil(win.window.worker.is_busy, timeout=10_000)
        assert feature.visualise_page("conv2", 0)
        assert feature.visualise_page("conv2", 0)  # asked again while the copy waits
        gate.set()
        win.qtbot.waitUntil(lambda: not feature.is_busy(), timeout=60_000)
        assert starts == [1]
        assert win.wait_idle()
        assert feature.page.dock.mosaic.filled() == feature.page.channels
    finally:
        gate.set()
        handle.remove()
