"""A window with concepts opened on a tiny CNN, which the concepts tests and the effects dock's
concept tests start from."""

from __future__ import annotations

import torch

import actviz
from tests.helpers import frame
from tests.ui.tiny_models import TinyCNN

LAYER = "conv2"  # 6 channels of 8x8 on a 16x16 input


def trained_dictionary(tmp_path):
    """A 12-concept TopK dictionary (k = 2) of conv2's 6-value vectors, trained on random
    vectors (fast) and written as a SAELens folder."""
    vectors = torch.randn(3000, 6, generator=torch.Generator().manual_seed(1)).abs()
    c = actviz.concepts.train(vectors, LAYER, n_concepts=12, k=2, epochs=2, batch_size=256)
    folder = c.save(tmp_path / "concepts-conv2")
    return actviz.concepts.load(folder), folder


def menu_action(win, menu: str, text: str):
    """The action ``text`` of the window's ``menu`` (AssertionError when there is none)."""
    for action in win.window.host.menu(menu).actions():
        if action.text().replace("&", "") == text:
            return action
    raise AssertionError(f"no {text!r} in the {menu} menu")


def concepts_opened(actviz_window, tmp_path):
    """A window on a seeded TinyCNN (auto-run) with a trained dictionary opened on LAYER through
    Data > Open concepts…; returns the driver, the model, the concepts feature, the dictionary
    and its folder."""
    torch.manual_seed(0)
    model = TinyCNN().eval()
    # Auto-run on: an edit re-runs as it does for a user.
    win = actviz_window(model, frame(0), ["conv1", LAYER], auto_run=True)
    win.run_and_wait()
    c, folder = trained_dictionary(tmp_path)
    feature = win.concepts.feature
    feature.ask_folder = lambda *_a: str(folder)
    menu_action(win, "Data", "Open concepts…").trigger()  # the result shown has conv2
    win.window.display.flush_panel_updates()
    return win, model, feature, c, folder
