"""What a live frame costs the GUI thread beside its capture (issue 39: the display's CPU per
frame bounds live_small_ratio on two cores): nothing is repainted that did not change."""

from __future__ import annotations

from PySide6.QtCore import QEvent, QObject
from PySide6.QtWidgets import QApplication

from actviz.ui.panels.style import ElidedLabel


class _Paints(QObject):
    def __init__(self) -> None:
        super().__init__()
        self.count = 0

    def eventFilter(self, _obj: QObject, event: QEvent) -> bool:  # noqa: N802 - Qt name
        if event.type() == QEvent.Type.Paint:
            self.count += 1
        return False


def _painted(qtbot, label: ElidedLabel, change) -> int:
    paints = _Paints()
    label.installEventFilter(paints)
    try:
        change()
        qtbot.wait(30)
        QApplication.processEvents()
    finally:
        label.removeEventFilter(paints)
    return paints.count


def test_an_elided_label_set_to_the_same_text_is_not_repainted(qtbot):
    # A layer panel's title is set again with every live frame: ~8 repaints a frame of a
    # 5-layer window, each repainting the panel beneath the label, for nothing.
    label = ElidedLabel()
    qtbot.addWidget(label)
    label.resize(120, 20)
    label.set_text("features.block2 · ConvBlock · 32×32×32", ("features.block2 · …",))
    label.show()
    qtbot.waitExposed(label)
    QApplication.processEvents()
    same = ("features.block2 · ConvBlock · 32×32×32", ("features.block2 · …",))
    assert _painted(qtbot, label, lambda: label.set_text(*same)) == 0
    assert label.shown_text() == "features.block2 · …"
    assert _painted(qtbot, label, lambda: label.set_text("conv1", ("c…",))) >= 1
    assert label.shown_text() == "conv1"
    # setText: the same text, no repaint; after set_text's fallbacks, the text is drawn whole.
    assert _painted(qtbot, label, lambda: label.setText("conv1")) >= 1  # fallbacks forgotten
    assert _painted(qtbot, label, lambda: label.setText("conv1")) == 0
    label.set_text("a long title that does not fit here", ("short",))
    QApplication.processEvents()
    assert label.shown_text() == "short"
    label.setText("a long title that does not fit here")
    QApplication.processEvents()
    assert label.shown_text().endswith("…") and label.shown_text() != "short"
