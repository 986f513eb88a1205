"""The pytest plugin as a user meets it: found through its ``pytest11`` entry point (no
conftest), its ``actviz_window`` fixture drives a tiny model, and its teardown fails the tests
that leave a widget, a hook or a changed process setting behind."""

from __future__ import annotations

import os

USER_TESTS = """
import sys

import pytest
import torch
from PySide6.QtWidgets import QDialog
from torch import nn


def tiny():
    torch.manual_seed(0)
    return nn.Sequential(
        nn.Conv2d(3, 4, 3, padding=1), nn.ReLU(), nn.Conv2d(4, 2, 3, padding=1)
    ).eval()


def test_tick_run_and_read_a_panel(actviz_window):
    win = actviz_window(tiny(), torch.randn(1, 3, 8, 8), ["0"])
    win.tick("2")
    result = win.run_and_wait()
    assert list(result.layers) == ["0", "2"]
    pixels = win.shown_pixels("2")
    mosaic = result.layers["2"].mosaic
    assert pixels.shape == mosaic.image.shape + (4,)
    # Tiles in colour (opaque), the 1-pixel gaps between them left clear.
    assert pixels[..., 3].max() == 255 and len({tuple(p) for p in pixels.reshape(-1, 4)}) > 3


def test_leaves_a_dialog(actviz_window):
    actviz_window()
    test_leaves_a_dialog.dialog = QDialog()


@pytest.mark.actviz_allow_leaks("widgets")
def test_leaves_a_dialog_on_purpose(actviz_window):
    actviz_window()
    test_leaves_a_dialog_on_purpose.dialog = QDialog()


def test_leaves_a_hook(actviz_window):
    model = tiny()
    actviz_window(model)
    model[2].register_forward_hook(lambda m, i, o: None)


def test_changes_the_switch_interval(actviz_window):
    actviz_window()
    sys.setswitchinterval(sys.getswitchinterval() * 3)


def test_a_panel_built_by_hand_leaves_its_dialog(actviz_leak_check, qtbot):
    panel = QDialog()
    qtbot.addWidget(panel)  # closed and deleted at the end: not a leak
    test_a_panel_built_by_hand_leaves_its_dialog.dialog = QDialog()
    test_a_panel_built_by_hand_leaves_its_dialog.dialog.setObjectName("forgotten")
"""


def test_a_user_project_drives_the_window_and_is_told_what_it_left(pytester):
    pytester.makepyfile(test_user=USER_TESTS)
    env = {"QT_QPA_PLATFORM": "offscreen", "ACTVIZ_OFFLINE": "1", "OMP_NUM_THREADS": "1"}
    for name, value in env.items():
        pytester._monkeypatch.setenv(name, os.environ.get(name, value))
    # No conftest, no -p: the plugin comes from actviz's entry point, pytest-qt from its own.
    result = pytester.runpytest_subprocess("-p", "no:randomly", "-p", "no:xdist", "-rA")
    result.assert_outcomes(passed=6, errors=4)
    result.stdout.fnmatch_lines_random(
        [
            "PASSED test_user.py::test_tick_run_and_read_a_panel",
            "PASSED test_user.py::test_leaves_a_dialog_on_purpose",
            "ERROR test_user.py::test_leaves_a_dialog - Failed: the test left*",
            "*top-level widget left: QDialog hidden*",
            "*hook left: 2 still has _forward_hooks*",
            "*sys.getswitchinterval() changed from*",
            "ERROR test_user.py::test_a_panel_built_by_hand_leaves_its_dialog - Failed*",
            "*top-level widget left: QDialog objectName='forgotten' hidden*",
        ]
    )


def test_actviz_itself_loads_as_written_in_its_own_suite():
    """Run from a checkout, pytest finds ``actviz.egg-info`` there and marks every module of
    actviz for assertion rewriting (some 270 modules parsed and rewritten, 4 s of each
    worker's start); the suite's conftest keeps the rewriting to the plugin's package."""
    from pathlib import Path

    import pytest

    import actviz.core.capture

    root = Path(actviz.__file__).resolve().parents[1]
    if not (root / "actviz.egg-info").is_dir():
        pytest.skip("no actviz.egg-info in the checkout: pytest marks nothing of actviz")
    rewriting = "AssertionRewritingHook"
    assert type(actviz.core.capture.__loader__).__name__ != rewriting
