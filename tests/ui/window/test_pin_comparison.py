"""Run > Pinned results offers a comparison only where the Compare feature is built: the
window asks no feature by name, the feature offers itself through the host."""

from __future__ import annotations

import pytest

pytest.importorskip("pytestqt")


def _compare_entries(window) -> list[str]:
    menu = window.pins_ui.pins_menu
    subs = [a.menu() for a in menu.actions() if a.menu() is not None]
    return [a.text() for sub in subs for a in sub.actions()]


@pytest.mark.parametrize("features", [None, ()])
def test_the_pinned_results_menu_compares_only_with_the_compare_feature(actviz_window, features):
    kwargs = {} if features is None else {"features": features}
    win = actviz_window(**kwargs)
    window = win.window
    assert window.files.load_demo()
    win.wait_idle()
    window.runs.run()
    win.wait_idle()
    pin = window.pins_ui.pin_result()
    assert pin is not None
    if features is None:
        assert _compare_entries(window) == [pin.label]
        assert window.pins_ui.compare_with_pin(pin)
        win.wait_idle()
        assert win.compare.feature.outcome is not None
    else:
        assert "compare" not in window.features
        assert _compare_entries(window) == []
        assert not window.pins_ui.compare_with_pin(pin)
