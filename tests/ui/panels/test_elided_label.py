"""An elided label shows the same text for a long text as Qt's own elision of the whole of it,
and measures only what its width can show (a 20,000-word message cost 16-29 ms a paint)."""

from __future__ import annotations

import pytest
from PySide6 import QtCore

from actviz.ui.panels.style import ElidedLabel

MODES = [
    QtCore.Qt.TextElideMode.ElideRight,
    QtCore.Qt.TextElideMode.ElideLeft,
    QtCore.Qt.TextElideMode.ElideMiddle,
]


def _long_text(words: int = 20_000) -> str:
    return " ".join(f"word{i}" for i in range(words))


@pytest.mark.parametrize("mode", MODES)
def test_a_long_text_is_elided_as_qt_elides_the_whole_of_it(qtbot, mode):
    text = _long_text()
    label = ElidedLabel(text, mode=mode)
    qtbot.addWidget(label)
    label.resize(300, 24)
    label.show()
    qtbot.waitExposed(label)
    width = label.contentsRect().width()
    expected = label.fontMetrics().elidedText(text, mode, width)
    assert label.shown_text() == expected
    assert "…" in expected and len(expected) < 200
    assert label.text() == text  # whole, as the tooltip shows it
    label.update()
    qtbot.waitUntil(lambda: label.toolTip() == text, timeout=2000)  # set when painted cut


def test_wrapped_lines_of_a_long_text_end_elided_on_the_last_line(qtbot):
    text = _long_text()
    label = ElidedLabel(text, lines=2)
    qtbot.addWidget(label)
    label.resize(300, 60)
    label.show()
    qtbot.waitExposed(label)
    lines = label.shown_lines()
    metrics, width = label.fontMetrics(), label.contentsRect().width()
    assert len(lines) == 2
    assert lines[0].startswith("word0 word1 ") and "…" not in lines[0]
    # The second line starts where the first ended and is cut to the width with "…".
    first_next = text.split(" ")[len(lines[0].split())]
    assert metrics.horizontalAdvance(f"{lines[0]} {first_next}") > width
    assert lines[1].startswith(first_next) and lines[1].endswith("…")
    assert metrics.horizontalAdvance(lines[1]) <= width


def test_a_short_text_is_shown_whole(qtbot):
    label = ElidedLabel("features.block1", lines=2)
    qtbot.addWidget(label)
    label.resize(300, 60)
    label.show()
    qtbot.waitExposed(label)
    assert label.shown_lines() == ["features.block1"]
    assert label.shown_text() == "features.block1"


class _CountingMetrics:
    """A label's font metrics that note the longest text measured."""

    def __init__(self, metrics, longest: list[int]) -> None:
        self._metrics, self._longest = metrics, longest

    def __getattr__(self, name):
        method = getattr(self._metrics, name)

        def measured(*args):
            if args and isinstance(args[0], str):
                self._longest[0] = max(self._longest[0], len(args[0]))
            return method(*args)

        return measured


@pytest.mark.parametrize("lines", [None, 2])
def test_a_paint_measures_no_more_text_than_the_width_can_show(qtbot, monkeypatch, lines):
    text = _long_text()
    label = ElidedLabel(text, lines=lines)
    qtbot.addWidget(label)
    label.resize(300, 60)
    label.show()
    qtbot.waitExposed(label)
    longest = [0]
    real = ElidedLabel.fontMetrics
    monkeypatch.setattr(
        ElidedLabel, "fontMetrics", lambda self: _CountingMetrics(real(self), longest)
    )
    shown = label.shown_lines()
    assert shown and shown[-1].endswith("…")
    # At most two characters a pixel of the lines' width (and a margin), not 129,000.
    assert 0 < longest[0] <= 2 * 300 * (lines or 1) + 16
