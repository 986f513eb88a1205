"""The effects view refills its sections for new layers instead of deleting and making them
(issue #37: the view rebuilt at once held the GUI thread 105 ms): the same widgets, renamed,
their buttons and bars speaking for their new layer, spare ones hidden."""

from __future__ import annotations

from PySide6.QtCore import QPoint, Qt

from actviz.ui.effects.view import BarRow, EffectsSection, EffectsView


def test_sections_are_reused_for_new_layers(qtbot):
    view = EffectsView(8)
    qtbot.addWidget(view)
    view.show()
    view.set_sections(["a", "b", "c"])
    made = set(map(id, view.findChildren(EffectsSection)))
    assert len(made) == 3
    kept_b = view.sections["b"]
    view.set_sections(["b", "d"])
    assert view.sections["b"] is kept_b  # a layer shown before keeps its section
    assert set(map(id, view.findChildren(EffectsSection))) == made  # none made
    d = view.sections["d"]
    assert d.layer == d.bars.layer == "d" and "d" in d.title.text()
    assert d.bars.rows == ()  # the old layer's bars are not shown under the new name
    shown = [s for s in view.findChildren(EffectsSection) if s.isVisible()]
    assert sorted(s.layer for s in shown) == ["b", "d"]
    order = [view.sections_box.itemAt(i).widget() for i in range(view.sections_box.count())]
    assert order == [kept_b, d]
    with qtbot.waitSignal(view.ablate_requested) as ablate:
        qtbot.mouseClick(d.ablate_button, Qt.MouseButton.LeftButton)
    assert ablate.args == ["d"]
    d.set_rows([BarRow(5, -0.2, None)], "2 channels", 1)
    with qtbot.waitSignal(view.channel_clicked) as clicked:
        qtbot.mouseClick(d.bars, Qt.MouseButton.LeftButton, pos=QPoint(20, 10))
    assert clicked.args == ["d", 5]
    # More layers than ever: only the missing ones are made; none: all hidden, none deleted.
    view.set_sections(["e", "f", "g", "h"])
    assert len(view.findChildren(EffectsSection)) == 4
    view.set_sections([])
    assert view.sections == {} and not any(s.isVisible() for s in view.findChildren(EffectsSection))
