"""The Live dock says in words why the webcam is unavailable when Qt's camera support fails to
load: it showed the loader's "libpulse.so.0: cannot open shared object file: No such file or
directory" under the source list."""

from __future__ import annotations

import sys
import types

import pytest


class _BrokenMultimedia(types.ModuleType):
    def __getattr__(self, name: str):
        raise ImportError(
            "libpulse.so.0: cannot open shared object file: No such file or directory"
        )


@pytest.fixture
def broken_multimedia(monkeypatch):
    import importlib.util

    module = _BrokenMultimedia("PySide6.QtMultimedia")
    monkeypatch.setitem(sys.modules, "PySide6.QtMultimedia", module)
    real = importlib.util.find_spec
    monkeypatch.setattr(
        importlib.util,
        "find_spec",
        lambda name, *a: object() if name == "PySide6.QtMultimedia" else real(name, *a),
    )


def test_a_missing_system_library_is_named_in_words(broken_multimedia, actviz_window):
    want = "webcam unavailable: Qt's camera support needs libpulse.so.0, which is not installed"
    dock = actviz_window().live.dock
    assert dock.webcam_label.text() == want
    assert "cannot open shared object file" not in dock.source_combo.itemText(3)
