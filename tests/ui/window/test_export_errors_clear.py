"""Exports from the window: a failure's message goes when the next export succeeds (it stayed in
the banner under "Exported 30 files to ..."), and saving a layer's arrays where they cannot go
says so in the banner instead of raising out of the action."""

from __future__ import annotations

from tests.ui.conftest import small_conv_window


def test_a_successful_export_clears_the_last_failure(actviz_window, tmp_path):
    win = small_conv_window(actviz_window)
    exports = win.window.exports
    blocker = tmp_path / "notes.txt"
    blocker.write_text("a file, not a folder")
    assert not exports.export_all(blocker, wait=True)
    assert any(t.startswith("Export failed:") for t in win.banner_messages())
    win.window.host.show_warning("a session note", "session")
    assert exports.export_all(tmp_path / "out", wait=True)
    assert not any(t.startswith("Export failed:") for t in win.banner_messages())
    assert "a session note" in win.banner_messages()


def test_layer_arrays_where_they_cannot_go(actviz_window, tmp_path):
    win = small_conv_window(actviz_window)
    exports = win.window.exports
    blocker = tmp_path / "notes.txt"
    blocker.write_text("a file, not a folder")
    assert exports.export_layer_npy(blocker, "0") == []
    text = win.banner_messages()[-1]
    assert text.startswith("Could not save the arrays of 0:") and "notes.txt" in text
    written = exports.export_layer_npy(tmp_path / "arrays", "0")
    assert [p.name for p in written] == ["0.activation.npy", "0.gradient.npy"]
    assert not any(t.startswith("Could not save") for t in win.banner_messages())
