"""Errors in the banner are one readable sentence; the traceback is behind "Details"."""

from __future__ import annotations

import pytest
import torch

from actviz.ui.background_loads import MAX_ERROR_CHARS, describe_error
from tests.ui.tiny_models import TinyCNN

#: The core window is what these tests drive: built without the features.
pytestmark = pytest.mark.window_features()


def test_a_failing_run_says_one_line_and_keeps_the_traceback_for_details(actviz_window):
    torch.manual_seed(0)
    model = TinyCNN().eval()
    win = actviz_window(model, torch.randn(1, 3, 16, 16), ["conv1"])
    win.run_and_wait()
    model.fail = True
    with win.qtbot.waitSignal(win.window.run_failed, timeout=60_000):
        win.window.runs.run()
    banner = win.window.centre.banner
    (text,) = banner.texts()
    assert "kaputt" in text and "\n" not in text and "Traceback" not in text
    assert banner.details_button.isVisible()
    assert "Traceback (most recent call last)" in banner.details()
    assert "kaputt" in banner.details()
    box = banner.show_details()
    assert "Traceback" in box.detailedText()
    box.close()
    banner.clear("run")
    assert not banner.details_button.isVisible()


def test_describe_error_keeps_the_first_line_and_cuts_it():
    long = RuntimeError("x" * 1000 + "\nsecond line")
    text = describe_error(long)
    assert text.startswith("RuntimeError: xxx") and "second" not in text
    assert len(text) <= len("RuntimeError: ") + MAX_ERROR_CHARS and text.endswith("…")


def test_describe_error_says_value_and_file_errors_without_their_type():
    # "Scan failed: ValueError: unknown layer ..." read like a crash; the text says it all.
    assert describe_error(ValueError("unknown layer 'x'")) == "unknown layer 'x'"
    missing = FileNotFoundError(2, "No such file or directory", "/tmp/gone.png")
    assert describe_error(missing) == "[Errno 2] No such file or directory: '/tmp/gone.png'"
    assert describe_error(TypeError("bad")) == "TypeError: bad"
