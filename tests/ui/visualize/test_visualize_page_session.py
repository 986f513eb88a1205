"""What channels want in session files: the page (layer, position, settings, the dock open)
comes back in a fresh window with its pictures from the visualisation cache; a page the cache
does not hold says so and its Visualise button makes it."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from PySide6.QtCore import QSettings

import actviz
from actviz.analysis.visualize.feature_vis import VisualizeSettings, visualize
from actviz.ui.visualize.page import STATE_KEY
from tests.ui.qt_helpers import wait_not_busy

LAYER = "features.block1"
SETTINGS = {"objective": "neuron", "steps": 3, "size": 16}


def _window_with_settings(actviz_window, tmp_path, name):
    win = actviz_window(settings=QSettings(str(tmp_path / name), QSettings.Format.IniFormat))
    return win


@pytest.mark.usefixtures("demo_resources")
def test_a_saved_page_opens_again_in_a_fresh_window(actviz_window, tmp_path):
    win = _window_with_settings(actviz_window, tmp_path, "a.ini")
    assert win.window.files.open_model_source("demo", wait=True)
    win.set_input(torch.rand(1, 3, 32, 32, generator=torch.Generator().manual_seed(1)))
    win.run_and_wait()
    feature = win.visualize.feature
    page = feature.page
    assert feature.session_part() == {}  # no page and the dock closed: nothing kept
    feature.section.set_settings(VisualizeSettings(**SETTINGS))
    assert feature.section.settings() == VisualizeSettings(**SETTINGS)
    win.window.session.set_page_channels(LAYER, 4)
    assert feature.visualise_page(LAYER, 4)
    wait_not_busy(win.qtbot, page)
    channels = page.channels
    assert len(channels) >= 2 and channels[0] == 4 and page.dock.mosaic.filled() == channels
    made = page.result()
    saved = feature.session_part()[STATE_KEY]
    assert saved["open"] is True and saved["layer"] == LAYER and saved["first"] == 4
    assert saved["settings"] == SETTINGS and saved["size"] == len(channels)
    path = tmp_path / "page.actviz"
    win.sessions.save(path)
    assert actviz.session.load(path).settings[STATE_KEY] == saved

    # A fresh window with other settings: the session puts the page and its settings back.
    other = _window_with_settings(actviz_window, tmp_path, "b.ini")
    again = other.feature("visualize")
    again.section.set_settings(VisualizeSettings(objective="channel", steps=9, size=32))
    assert not again.page.dock.isVisible()
    other.sessions.open(path)
    other.wait_idle()
    wait_not_busy(other.qtbot, again.page)
    restored = again.page
    assert restored.dock.isVisible()
    assert restored.layer == LAYER and restored.channels == channels
    assert again.section.settings() == VisualizeSettings(**SETTINGS)
    assert again.session_part()[STATE_KEY] == saved
    # Its pictures come from the cache, bit for bit, without a synthesis.
    assert restored.dock.mosaic.filled() == channels
    got = restored.result()
    assert got.channels == channels and all(got.from_cache)
    np.testing.assert_array_equal(got.images, made.images)
    assert restored.dock.message.text() == (
        f"{len(channels)} channels at {SETTINGS['steps']} steps, {SETTINGS['size']} px "
        "(saved before); click one to open it."
    )
    title = restored.dock.title_label.text()
    assert title.startswith(f"{LAYER} · ch 4-{channels[-1]} of "), title
    assert restored.dock.prev_button.isEnabled()

    # A page the cache does not hold (other steps): grey tiles, a message and the button.
    fresh = {**saved, "settings": {**SETTINGS, "steps": 2}}
    other.window.host.restore_session_parts({STATE_KEY: fresh})
    wait_not_busy(other.qtbot, restored)
    assert restored.channels == channels and restored.dock.mosaic.filled() == ()
    assert restored.result() is None
    assert restored.dock.message.text() == (
        "Not synthesised yet: press Visualise to synthesise what these "
        f"{len(channels)} channels want."
    )
    button = restored.dock.visualise_button
    assert button.isVisibleTo(restored.dock) and button.isEnabled()
    button.click()
    assert restored.is_busy()
    wait_not_busy(other.qtbot, restored)
    done = restored.result()
    assert done.channels == channels and not any(done.from_cache)
    assert done.settings["steps"] == 2
    want = visualize(other.window.session.loaded_model, LAYER, list(channels), **fresh["settings"])
    np.testing.assert_array_equal(done.images, want.images)

    # A saved page naming a layer the model lacks changes nothing but the dock's visibility.
    assert not restored.restore({**saved, "layer": "no.such.layer"})
    assert restored.layer == LAYER and restored.result() is not None
    assert not restored.restore({**saved, "settings": {"objective": "x", "steps": 1, "size": 8}})
    assert restored.channels == channels
    # Saved with the dock closed: the page comes back behind a closed dock.
    assert restored.restore({**saved, "open": False})
    assert not restored.dock.isVisible() and restored.layer == LAYER
    wait_not_busy(other.qtbot, restored)
    assert restored.dock.mosaic.filled() == channels
