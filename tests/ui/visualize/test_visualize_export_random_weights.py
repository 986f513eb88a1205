"""Exported visualisations of a model with random weights (a torchvision name opened without
weights): visualize.json must not offer a command line that reopens the name, which gives
other weights (the pretrained ones, or another random draw) and so other pictures."""

from __future__ import annotations

import json


def test_random_weights_get_no_reopening_command_line_and_say_why(actviz_window, tmp_path):
    win = actviz_window()
    window = win.window
    assert window.files.open_model_source("squeezenet1_1", weights="none", wait=True)
    win.models.append(window.session.model)
    feature = win.visualize.feature
    feature.section.steps_spin.setValue(1)
    feature.section.size_spin.setValue(16)
    window.session.set_page_channels("features.0", 2)
    assert feature.visualise_page("features.0", 0)
    win.qtbot.waitUntil(lambda: not feature.is_busy(), timeout=60_000)
    assert feature.page.result() is not None, feature.page.dock.message.text()
    feature.export_to(tmp_path)
    meta = json.loads((tmp_path / "page" / "visualize.json").read_text())
    assert meta["source"] == "squeezenet1_1"
    again = meta["reproduce"]
    assert "cli" not in again, again["cli"]  # it said: actviz visualize --model squeezenet1_1
    assert "random" in again["note"] and "weights" in again["note"]
    assert again["kwargs"]["steps"] == 1  # the call with these weights still makes them
