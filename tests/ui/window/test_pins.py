"""Pinned results: kept beside the latest capture, shown again, counted in the memory held."""

from __future__ import annotations

import gc
import threading
import weakref

import numpy as np
import pytest
import torch

from actviz.core.capture import capture
from actviz.testing import RUN_TIMEOUT_MS
from actviz.ui.live.frames import TensorFrames
from actviz.ui.window.main_window import MainWindow
from actviz.workspace.pins import PinBoard, PinRefused, result_bytes
from tests.ui.conftest import frame
from tests.ui.tiny_models import TinyCNN


class _Result:
    """Just what PinBoard reads of a RunResult."""

    def __init__(self, nbytes: int) -> None:
        self.nbytes = nbytes


def test_pin_board_counts_each_capture_once_and_refuses_over_budget():
    changes = []
    board = PinBoard(lambda: changes.append(len(board)))
    a, b, c = _Result(100), _Result(250), _Result(700)
    pin_a = board.pin(a, "a", budget=4000)  # pins may hold a quarter: 1000 B
    assert board.pin(a, "again", budget=4000) is pin_a  # pinning twice keeps one pin
    board.pin(b, "b", budget=4000)
    assert board.nbytes == 350 and changes == [1, 2]
    assert board.held_bytes(a) == 350  # the shown result is pinned: counted once
    assert board.held_bytes(c) == 1050
    with pytest.raises(PinRefused, match=r"over their 1000 B \(a quarter of the 3.9 KiB memory"):
        board.pin(c, "c", budget=4000)
    assert len(board) == 2
    board.unpin(pin_a)
    assert [p.label for p in board] == ["b"] and board.find(a) is None
    board.clear()
    assert len(board) == 0 and changes == [1, 2, 1, 0]


LAYERS = ["conv1", "conv2", "fc"]


def _press_ctrl_p(qtbot, window: MainWindow) -> None:
    """A real key press, as a user types it: the shortcut must reach the pin action."""
    from PySide6.QtCore import Qt

    window.activateWindow()
    qtbot.waitUntil(window.isActiveWindow, timeout=10_000)
    qtbot.keyClick(window, Qt.Key.Key_P, Qt.KeyboardModifier.ControlModifier)


def _pop_up_and_click(qtbot, menu, text: str) -> None:
    """Open ``menu`` and click its item ``text`` with the mouse."""
    from PySide6.QtCore import QPoint, Qt

    action = next(a for a in menu.actions() if a.text() == text)
    assert action.isEnabled(), f"{text!r} is disabled"
    menu.popup(QPoint(0, 0))
    qtbot.waitUntil(menu.isVisible, timeout=10_000)
    qtbot.mouseClick(menu, Qt.MouseButton.LeftButton, pos=menu.actionGeometry(action).center())
    qtbot.waitUntil(lambda: not menu.isVisible(), timeout=10_000)


def _run_menu(window: MainWindow):
    return next(a.menu() for a in window.menuBar().actions() if a.text().replace("&", "") == "Run")


def test_a_pinned_capture_stays_while_unpinned_ones_go(qtbot, actviz_window, tiny_cnn):
    win = actviz_window(tiny_cnn, None, LAYERS, size=(1200, 800))
    window = win.window
    window.script.set_input(frame(1))
    win.run_and_wait()
    pinned_result = window.session.result
    _press_ctrl_p(qtbot, window)
    assert len(window.session.pins) == 1
    assert window.session.pins.find(pinned_result) is not None
    assert "(1 pinned)" in window.status.timing_label.text()
    assert window.commands.pins_menu.title() == "Pinned results (1)"
    window.script.set_input(frame(2))
    win.run_and_wait()
    unpinned = weakref.ref(window.session.result.capture)
    window.script.set_input(frame(3))
    win.run_and_wait()
    gc.collect()
    assert unpinned() is None  # the run in between was freed
    assert window.session.pins.find(pinned_result) is not None
    held = window.session.held_bytes()
    # Counted at what each result keeps: gradients and the mosaics' indices beside the outputs
    # (float images and |gradient| maps are made from the layer's values when read).
    assert held == result_bytes(pinned_result) + result_bytes(window.session.result)
    assert held > 2 * (pinned_result.nbytes + window.session.result.nbytes)
    assert window.status.timing_label.text().endswith("held (1 pinned)")
    # Shown again: the panels read the pinned values, not the latest run's.
    [pin] = list(window.session.pins)
    show = next(a for a in window.commands.pins_menu.actions() if a.text().startswith(pin.label))
    show.trigger()
    window.display.flush_panel_updates()
    assert window.session.result is pinned_result
    expected = capture(window.session.model, frame(1), ["conv1"])["conv1"].tensor[0]
    np.testing.assert_allclose(
        window.host.layer_panels["conv1"].activation_slot.view.data, expected.numpy(), rtol=1e-5
    )
    assert window.commands.unpin_action.isEnabled()
    # Unpinning the result on screen keeps it on screen until the next run, then frees it.
    kept = weakref.ref(pinned_result.capture)
    del pinned_result, pin, show
    window.commands.unpin_action.trigger()
    assert len(window.session.pins) == 0 and "pinned" not in window.status.timing_label.text()
    window.script.set_input(frame(4))
    win.run_and_wait()
    gc.collect()
    assert kept() is None


def test_a_runs_bytes_are_counted_on_the_worker_not_the_gui_thread(
    qtbot, actviz_window, tiny_cnn, monkeypatch
):
    """Ctrl+R's result is counted for the memory read-outs before it reaches the GUI thread:
    walking a text model's result took ~10 ms of the turn that shows it (#37's blocks)."""
    from PySide6.QtCore import Qt

    from actviz.workspace import pins

    walked_on_gui: list[bool] = []
    real = pins._owned_arrays

    def spy(obj, roots, seen, depth=0):
        if depth == 0:
            walked_on_gui.append(threading.current_thread() is threading.main_thread())
        return real(obj, roots, seen, depth)

    monkeypatch.setattr(pins, "_owned_arrays", spy)
    win = actviz_window(tiny_cnn, frame(1), LAYERS, size=(1200, 800))
    window = win.window
    win.wait_idle()
    walked_on_gui.clear()
    before = window.session.result
    window.activateWindow()
    qtbot.waitUntil(window.isActiveWindow, timeout=10_000)
    qtbot.keyClick(window, Qt.Key.Key_R, Qt.KeyboardModifier.ControlModifier)
    qtbot.waitUntil(lambda: window.session.result is not before, timeout=RUN_TIMEOUT_MS)
    win.wait_idle()
    result = window.session.result
    held = window.session.held_bytes()
    assert walked_on_gui == [False]  # once, on the worker
    assert held == result_bytes(result) > 2 * result.nbytes
    assert window.status.timing_label.text().endswith("held")
    assert walked_on_gui == [False]  # read again from what the worker counted


def test_pins_are_let_go_from_the_run_menu(qtbot, actviz_window, tiny_cnn):
    """Run > Pinned results > Unpin this result / Unpin all, clicked, free the captures."""
    win = actviz_window(tiny_cnn, None, LAYERS, size=(1200, 800))
    window = win.window
    pinned = []
    for seed in (1, 2, 3):
        window.script.set_input(frame(seed))
        win.run_and_wait()
        _press_ctrl_p(qtbot, window)
        pinned.append(weakref.ref(window.session.result.capture))
    assert len(window.session.pins) == 3
    run_menu = _run_menu(window)
    assert window.commands.pins_menu in [a.menu() for a in run_menu.actions()]
    assert window.commands.pins_menu.title() == "Pinned results (3)"
    # The result on screen (seed 3) is pinned: "Unpin this result" lets that one go.
    _pop_up_and_click(qtbot, window.commands.pins_menu, "Unpin this result")
    assert (
        len(window.session.pins) == 2 and window.commands.pins_menu.title() == "Pinned results (2)"
    )
    assert window.session.pins.find(window.session.result) is None
    assert not window.commands.unpin_action.isEnabled()
    # "Unpin all" lets the other two go: once nothing else holds them, their captures are freed.
    _pop_up_and_click(qtbot, window.commands.pins_menu, "Unpin all")
    assert len(window.session.pins) == 0 and window.commands.pins_menu.title() == "Pinned results"
    assert not window.commands.unpin_all_action.isEnabled()
    assert "pinned" not in window.status.timing_label.text()
    window.script.set_input(frame(4))
    win.run_and_wait()
    gc.collect()
    assert [ref() is None for ref in pinned] == [True, True, True]
    assert window.session.held_bytes() == result_bytes(window.session.result)


def test_pins_over_the_budget_are_refused_with_a_message(qtbot, actviz_window, tiny_cnn):
    win = actviz_window(tiny_cnn, None, LAYERS, size=(1200, 800))
    window = win.window
    window.script.set_input(frame(1))
    win.run_and_wait()
    window.session.set_memory_budget(window.session.result.nbytes // 2)
    assert window.pins_ui.pin_result() is None
    assert len(window.session.pins) == 0
    assert "over the" in " ".join(window.centre.banner.texts()) and "memory budget" in " ".join(
        window.centre.banner.texts()
    )


def test_pins_go_with_the_model_they_were_captured_on(qtbot, actviz_window, tiny_cnn):
    win = actviz_window(tiny_cnn, None, LAYERS, size=(1200, 800))
    window = win.window
    window.script.set_input(frame(1))
    win.run_and_wait()
    window.pins_ui.pin_result()
    torch.manual_seed(1)
    window.script.set_model(TinyCNN().eval(), layers=["conv1"])
    assert len(window.session.pins) == 0
    assert window.commands.pins_menu.title() == "Pinned results"


def test_nothing_to_pin_before_a_run(qtbot, actviz_window, tiny_cnn):
    win = actviz_window(tiny_cnn, None, LAYERS, size=(1200, 800))
    window = win.window
    assert window.pins_ui.pin_result() is None
    assert "run the model first" in " ".join(window.centre.banner.texts())


def test_showing_a_pin_pauses_live_playback(qtbot, actviz_window, tiny_cnn):
    win = actviz_window(tiny_cnn, None, LAYERS, size=(1200, 800))
    window = win.window
    window.script.set_input(frame(1))
    win.run_and_wait()
    pin = window.pins_ui.pin_result()
    live = win.live.controller
    live.set_source(TensorFrames(torch.cat([frame(s) for s in range(4)]), "clip"))
    qtbot.waitUntil(lambda: live.frames_shown >= 1, timeout=RUN_TIMEOUT_MS)
    live.set_speed(30)
    live.play()
    assert live.playing
    window.pins_ui.show_pinned(pin)
    assert not live.playing
    qtbot.waitUntil(lambda: live.idle, timeout=RUN_TIMEOUT_MS)
    # The memory the live dock reports includes the pin.
    assert live.status().held_bytes == window.session.held_bytes()
    assert live.status().held_bytes >= pin.nbytes
