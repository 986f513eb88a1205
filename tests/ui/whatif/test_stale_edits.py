"""Edits belong to the model they were made on (issue 37, stress run of 11-30).

The 20,000-action stress run showed "Run failed: cannot edit unknown layer 'features.block3'"
on ResNet-18 and on a tiny GPT-2: a tile menu built for the demo's panel stayed open while a
model being opened arrived, and its "Ablate ch N" then put the demo's edit on the next model's
board; every run after failed. Shrunk, the steps were: open a model (it loads in the
background), right-click a tile of the model still shown, the load ends, click "Ablate".
These tests do that with real events (a right click, a menu click, File > Recent models) and
a model loader held at a gate, so the load ends while the menu (or its question) is up.
"""

from __future__ import annotations

import threading

import pytest
import shiboken6
import torch
from PySide6.QtCore import Qt

from actviz.edits import ablate
from actviz.io.models.loaded_model import LoadedModel
from tests.ui.conftest import LOAD_TIMEOUT_MS, frame
from tests.ui.tiny_models import seeded_tiny_cnn

LAYERS = ["conv1", "conv2", "fc"]
LEFT = Qt.MouseButton.LeftButton


def _other_names_model() -> torch.nn.Module:
    """An image classifier whose layers are named otherwise ("0", "1", ...): the demo and
    ResNet-18 of the stress run."""
    torch.manual_seed(1)
    return torch.nn.Sequential(
        torch.nn.Conv2d(3, 4, 3, padding=1),
        torch.nn.ReLU(),
        torch.nn.AdaptiveAvgPool2d(1),
        torch.nn.Flatten(),
        torch.nn.Linear(4, 10),
    ).eval()


class _HeldLoader:
    """A model loader that opens ``model`` once ``gate`` is set (a slow checkpoint)."""

    def __init__(self, model: torch.nn.Module) -> None:
        self.model = model
        self.gate = threading.Event()
        self.started = threading.Event()

    def __call__(self, source: str, *, arch=None, weights=None, trust=False) -> LoadedModel:
        self.started.set()
        assert self.gate.wait(10), "the load was never released"
        return LoadedModel(self.model, "next model", source, "module")


def _start_load_from_recent_models(window, model: torch.nn.Module) -> _HeldLoader:
    """File > Recent models > my_model.pt, with the load held until released."""
    loader = _HeldLoader(model)
    window.model_loader = loader
    window.settings.add_recent_model("my_model.pt", None)
    window.files.menus.refresh_recent()
    menu = window.files.menus.recent_models_menu
    (entry,) = [a for a in menu.actions() if a.text() == "my_model.pt"]
    entry.trigger()
    assert loader.started.wait(10)
    return loader


def _click(qtbot, menu, prefix: str) -> None:
    action = next(a for a in menu.actions() if a.text().startswith(prefix))
    qtbot.mouseClick(menu, LEFT, pos=menu.actionGeometry(action).center())


def _window(actviz_window):
    win = actviz_window(seeded_tiny_cnn(0), frame(1), LAYERS, size=(1400, 900), auto_run=True)
    win.run_and_wait()
    failed: list[str] = []
    win.window.run_failed.connect(failed.append)
    return win, failed


def _assert_next_model_runs_unedited(win, model, failed) -> None:
    session = win.window.session
    assert session.model is model
    assert list(session.edits) == [], [e.describe() for e in session.edits]
    win.run_and_wait()
    assert failed == []
    result = session.result
    assert result is not None and result.capture is not None
    assert not result.capture.edits and result.baseline is None
    assert not any("cannot edit" in t for t in win.banner_messages())


@pytest.mark.parametrize("next_model", ["same layer names", "other layer names"])
def test_a_tile_menu_of_the_previous_model_makes_no_edit_on_the_next(
    qtbot, actviz_window, next_model
):
    win, failed = _window(actviz_window)
    window = win.window
    model = seeded_tiny_cnn(1) if next_model == "same layer names" else _other_names_model()
    loader = _start_load_from_recent_models(window, model)
    menu = win.tile_menu("conv2", 1)  # a right click on a tile of the model still shown
    assert menu.isVisible()
    with qtbot.waitSignal(window.model_loaded, timeout=LOAD_TIMEOUT_MS):
        loader.gate.set()
    # The menu was of the previous model's panel: it goes with that model. Were it still up,
    # its click must not edit the model shown now (today it ablated conv2 of the next model,
    # or, with other names, made every run fail with "cannot edit unknown layer").
    if shiboken6.isValid(menu) and menu.isVisible():
        _click(qtbot, menu, "Ablate")
    qtbot.waitUntil(lambda: not shiboken6.isValid(menu), timeout=30_000)  # deleted with it
    _assert_next_model_runs_unedited(win, model, failed)


def test_a_scale_asked_while_the_model_changes_is_not_made_on_the_next(qtbot, actviz_window):
    win, failed = _window(actviz_window)
    window = win.window
    model = _other_names_model()
    loader = _start_load_from_recent_models(window, model)
    asked: list[str] = []

    def ask_factor(_parent, prompt: str) -> float:
        # The user reads the question while the load ends, then answers 0.5.
        asked.append(prompt)
        loader.gate.set()
        qtbot.waitUntil(lambda: window.session.model is model, timeout=LOAD_TIMEOUT_MS)
        return 0.5

    win.feature("whatif").ask_factor = ask_factor
    menu = win.tile_menu("conv2", 1)
    _click(qtbot, menu, "Scale ch 1")
    qtbot.waitUntil(lambda: bool(asked), timeout=30_000)
    assert asked == ["Multiply ch 1 of conv2 by:"]
    _assert_next_model_runs_unedited(win, model, failed)
    assert any("Edit not made" in t for t in win.banner_messages()), win.banner_messages()


def test_the_board_takes_edits_of_its_model_and_layers_only():
    from actviz.workspace.edits_board import EditBoard, StaleEditError

    first, second = seeded_tiny_cnn(0), seeded_tiny_cnn(1)
    board = EditBoard()
    board.reset(first, {"conv1", "conv2", "fc"})
    entry = board.add("conv2", ablate([1]), model=first)
    assert [e.layer for e in board] == ["conv2"] and entry.edit == ablate([1])
    board.reset(second, {"conv1", "conv2", "fc"})
    assert list(board) == []
    with pytest.raises(StaleEditError, match="model changed"):
        board.add("conv2", ablate([1]), model=first)  # offered for the first model
    with pytest.raises(StaleEditError, match="no layer 'features.block3'"):
        board.add("features.block3", ablate([1]))
    assert list(board) == []
    board.add("conv1", ablate([0]))  # the model shown
    assert board.request_edits() == {"conv1": (ablate([0]),)}


def test_tile_menus_let_go_of_the_model_and_the_pins_they_offered(qtbot, actviz_window):
    """Each right click on a tile made a menu parented to the window that was never deleted;
    its actions' closures held the model and the pinned captures offered for patching, so every
    model shown and every pin unpinned stayed alive with the window (the stress run's ResNet-18
    process: +45 MiB of weights a model switch, tensors 45 -> 469 MiB in 2,500 actions, #37)."""
    import gc
    import weakref

    from PySide6.QtWidgets import QMenu

    win, _failed = _window(actviz_window)
    window = win.window
    pins = window.pins_ui
    model = seeded_tiny_cnn(1)
    shown = weakref.ref(model)
    win.set_model(model, LAYERS)
    win.models.remove(model)  # the driver's list of models it checks for hooks at the end
    win.run_and_wait()
    window.commands.pin_action.trigger()  # Run > Pin this result
    assert len(window.session.pins) == 1
    pinned = weakref.ref(window.session.result.capture)
    for channel in (0, 1, 2):  # right clicks, each menu closed with Esc
        menu = win.tile_menu("conv2", channel)
        assert any(a.text() == "Patch from pin" and a.menu() for a in menu.actions())
        qtbot.keyClick(menu, Qt.Key.Key_Escape)
        qtbot.waitUntil(lambda menu=menu: not menu.isVisible(), timeout=30_000)
    pins.unpin_all_action.trigger()  # Run > Pinned results > Unpin all
    win.set_model(seeded_tiny_cnn(2), LAYERS)
    win.run_and_wait()
    del model, menu
    qtbot.wait(50)  # the menus' deferred deletes
    gc.collect()
    assert shown() is None, "a tile menu keeps the previous model"
    assert pinned() is None, "a tile menu keeps an unpinned capture"
    menus = [
        m
        for m in window.findChildren(QMenu)
        if "conv2 ·" in " ".join(a.text() for a in m.actions())
    ]
    assert len(menus) <= 1
