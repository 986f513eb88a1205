"""No stale display: a control changed on one tab reaches every panel showing that data."""

from __future__ import annotations

from tests.ui import test_main_window as base
from tests.ui.test_main_window import RUN_TIMEOUT_MS

settings = base.settings
make_window = base.make_window
tiny_window = base.tiny_window


def _normalisations(window) -> dict[str, str]:
    return {
        name: panel.activation_slot.mosaic.normalize
        for name, panel in window.layer_panels.items()
        if panel.activation_slot.mosaic is not None
    }


def test_scale_changed_on_the_overview_reaches_the_layer_panels_without_a_run(qtbot, tiny_window):
    window, _ = tiny_window
    assert _normalisations(window) == {"conv1": "channel", "conv2": "channel"}
    with qtbot.waitSignal(window.run_finished, timeout=RUN_TIMEOUT_MS):
        window.tabs.setCurrentWidget(window.overview_tab)  # re-runs for the saliency
    captures = []
    window.run_started.connect(lambda: captures.append(1))
    with qtbot.waitSignal(window.run_finished, timeout=RUN_TIMEOUT_MS):
        window.normalize_combo.setCurrentIndex(window.normalize_combo.findData("shared"))
    qtbot.waitUntil(lambda: not window.display_pending(), timeout=5000)
    window.tabs.setCurrentWidget(window.layers_splitter)
    qtbot.waitUntil(
        lambda: _normalisations(window) == {"conv1": "shared", "conv2": "shared"}, timeout=5000
    )
    for name, panel in window.layer_panels.items():
        if panel.activation_slot.mosaic is not None:
            assert panel.activation_slot.mosaic is window.result.layers[name].mosaic
    assert captures == []  # no new capture: the result's views were re-normalised
