"""A Session that outlives its window does not keep the window alive (features let go)."""

from __future__ import annotations

import gc
import weakref

import torch

from tests.ui.tiny_models import TinyCNN


def test_a_closed_window_is_freed_while_its_session_lives_on(actviz_window):
    torch.manual_seed(0)
    win = actviz_window(TinyCNN().eval(), torch.randn(1, 3, 16, 16), ["conv1"])
    win.run_and_wait()
    session = win.window.session
    ref = weakref.ref(win.window)
    features = [weakref.ref(f) for f in win.window.features.values()]
    win.delete()
    gc.collect()
    assert ref() is None
    assert [f() for f in features] == [None] * len(features)
    # Every feature let go of the session's events.
    for event in (session.model_changed, session.input_changed, session.result_changed):
        assert event._callbacks == []
