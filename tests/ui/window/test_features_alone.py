"""The host stands on its own: a window with no features, and with each default feature alone,
opens a model, runs it, shows the layers and closes with nothing left behind (a feature is
built from the host alone and needs no other feature)."""

from __future__ import annotations

import pytest
import torch

from actviz.ui.window.main_window import default_features
from tests.ui.conftest import frame

FEATURES = default_features()


def _conv():
    torch.manual_seed(0)
    return torch.nn.Sequential(torch.nn.Conv2d(3, 4, 3), torch.nn.ReLU(), torch.nn.Flatten())


def _own(win) -> dict:
    """The window's features but the plugin host (it hosts the plugins given, here none)."""
    return {k: f for k, f in win.window.features.items() if k != "plugins"}


def _run_alone(actviz_window, features):
    win = actviz_window(_conv(), frame(0), layers=["0", "1"], features=features)
    result = win.run_and_wait()
    assert set(result.layers) >= {"0", "1"}
    assert set(win.window.host.layer_panels) == {"0", "1"}
    assert win.wait_idle()
    return win


def test_a_window_with_no_features(actviz_window):
    win = _run_alone(actviz_window, ())
    assert _own(win) == {}  # the plugin host only, with no plugin given
    win.window.cancel()  # Esc with nothing to cancel
    win.window.reset_layout()


@pytest.mark.parametrize("make", FEATURES, ids=[f.__name__ for f in FEATURES])
def test_each_default_feature_alone(actviz_window, make):
    win = _run_alone(actviz_window, (make,))
    assert len(_own(win)) == 1
    feature = next(iter(_own(win).values()))
    assert not feature.is_busy()
    win.window.cancel()


def test_session_files_are_reached_through_the_part_the_sessions_feature_offers(
    actviz_window, tmp_path
):
    import actviz.session
    from actviz.ui.sessions.feature import SessionsFeature

    bare = _run_alone(actviz_window, ())
    assert bare.window.session_store is None
    with pytest.raises(TypeError, match="cannot save a session"):
        actviz.session.save(bare.window, tmp_path / "none.actviz")
    bare.close()

    win = _run_alone(actviz_window, (SessionsFeature,))
    store = win.window.session_store
    assert isinstance(store, SessionsFeature)
    written = actviz.session.save(win.window, tmp_path / "one.actviz")
    assert (tmp_path / "one.actviz").is_file() and written == []
    state = actviz.session.load(tmp_path / "one.actviz")
    assert tuple(state.ticked) == ("0", "1")


def test_features_get_the_host_and_the_window_looks_none_up_by_name(actviz_window):
    """Every default feature is given the window's ``Host`` (a ``WindowHost``), never the
    window; window code reaches what a feature offers through the host, not by its name."""
    import pathlib
    import re

    import actviz
    from actviz.ui.host import Host, WindowHost

    win = actviz_window(_conv(), frame(0), layers=["0"])
    host = win.window.host
    assert isinstance(host, Host) and isinstance(host, WindowHost)
    assert host.features is win.window.features
    own = _own(win)
    assert len(own) == len(FEATURES)
    assert all(feature.host is host for feature in own.values())
    root = pathlib.Path(actviz.__file__).parent
    window_code = [
        *(root / "ui" / "window").glob("*.py"),
        root / "ui" / "explore.py",
        root / "session.py",
    ]
    by_name = re.compile(r"features(\[|\.get\()\s*[\"']")
    assert [p.name for p in window_code if by_name.search(p.read_text())] == []
