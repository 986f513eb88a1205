"""What live frames leave for a read (statistics, histograms, Grad-CAM while the Overview is
hidden) is made off the GUI thread when the Overview shows or another layer is selected: the
stress run saw 84 ms of the GUI's CPU in one histogram (#37)."""

from __future__ import annotations

import threading

import numpy as np
from PySide6.QtCore import Qt
from PySide6.QtTest import QTest

from actviz.display import stats
from actviz.testing import RUN_TIMEOUT_MS
from actviz.ui.live.frames import TensorFrames
from tests.helpers import random_frames
from tests.ui.live.live_windows import live_window


def _table_means(table) -> dict[str, float]:
    """The statistics table's mean per layer, as shown."""
    model = table.model
    return {model.row_dict(r)["name"]: model.row_dict(r)["mean"] for r in range(model.rowCount())}


def _frames_behind_the_layers_tab(actviz_window, frames):
    """The live window after ``frames`` played with the Overview hidden (idle)."""
    win = live_window(actviz_window)
    window = win.window
    window.centre.tabs.setCurrentWidget(window.centre.layers_splitter)
    live = win.live.configure(max_fps=1000)
    live.set_source(TensorFrames(frames, "clip"))
    win.qtbot.waitUntil(
        lambda: live.frames_shown >= 1 and live.idle and not window.is_busy(),
        timeout=RUN_TIMEOUT_MS,
    )
    return win


def test_the_overview_of_live_frames_is_computed_off_the_gui_thread(actviz_window, monkeypatch):
    win = _frames_behind_the_layers_tab(actviz_window, random_frames(3, 4))
    window, gui = win.window, threading.get_ident()
    centre = window.centre
    result = window.session.result
    assert result.origin and not result.overview_ready(window.display.selected_layer)

    where: list[int] = []
    for name in ("histogram", "tensor_stats"):
        real = getattr(stats, name)

        def spy(*args, real=real, **kwargs):
            where.append(threading.get_ident())
            return real(*args, **kwargs)

        monkeypatch.setattr(stats, name, spy)
    # The user opens the Overview: it fills once its parts are made on a worker's thread.
    bar = centre.tabs.tabBar()
    tab = next(i for i in range(bar.count()) if centre.tabs.widget(i) is centre.overview_tab)
    QTest.mouseClick(bar, Qt.MouseButton.LeftButton, pos=bar.tabRect(tab).center())
    assert centre.tabs.currentWidget() is centre.overview_tab
    win.wait_idle()
    assert where and gui not in where
    assert result.overview_ready(window.display.selected_layer)
    counts, _edges = result.layers[window.display.selected_layer].hist
    assert np.array_equal(centre.histogram_panel.counts, counts)
    assert _table_means(centre.stats_table) == {
        n: result.layers[n].stats["mean"] for n in result.layers
    }

    # Another layer selected: its histogram too, off the GUI thread, then shown.
    where.clear()
    other = next(n for n in result.layers if n != window.display.selected_layer)
    window.display.select_layer(other)
    win.wait_idle()
    assert gui not in where
    assert np.array_equal(centre.histogram_panel.counts, result.layers[other].hist[0])


def test_a_layer_selected_while_the_overview_waits_fills_both(actviz_window):
    """The Overview's fill and a histogram asked for before it came are both shown."""
    win = _frames_behind_the_layers_tab(actviz_window, random_frames(2, 7))
    window = win.window
    centre = window.centre
    result = window.session.result
    first = window.display.selected_layer
    other = next(n for n in result.layers if n != first and result.layers[n].view.kind == "maps")
    centre.tabs.setCurrentWidget(centre.overview_tab)  # the fill waits for its parts ...
    window.display.select_layer(other)  # ... and a histogram is asked for meanwhile
    win.wait_idle()
    assert result.overview_ready(other)
    assert np.array_equal(centre.histogram_panel.counts, result.layers[other].hist[0])
    assert _table_means(centre.stats_table) == {
        n: result.layers[n].stats["mean"] for n in result.layers
    }
