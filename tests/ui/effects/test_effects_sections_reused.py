"""The effects view refills its sections for new layers instead of deleting and making them
(issue #37: the view rebuilt at once held the GUI thread 105 ms): the same widgets, renamed,
their buttons and bars speaking for their new layer, spare ones hidden."""

from __future__ import annotations

from PySide6.QtCore import QPoint, Qt

from actviz.ui.effects.view import SECTIONS_PER_TURN, BarRow, EffectsSection, EffectsView


def test_sections_are_reused_for_new_layers(qtbot):
    view = EffectsView(8)
    qtbot.addWidget(view)
    view.show()
    view.set_sections(["a", "b", "c"])
    qtbot.waitUntil(lambda: not view.building())
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


def test_a_first_build_makes_a_few_sections_per_turn_and_fills_them(qtbot):
    # Tiny GPT-2's 27 leaves made at once held the GUI thread 67-106 ms (issue #37).
    view = EffectsView(8)
    qtbot.addWidget(view)
    view.show()
    layers = [f"h.{i}" for i in range(12)]
    view.set_sections(layers)
    for i, layer in enumerate(layers):
        view.fill(layer, [BarRow(i, -0.5, None)], f"{i + 1} channels", 1)
    assert len(view.findChildren(EffectsSection)) == SECTIONS_PER_TURN < len(layers)
    assert view.building()
    qtbot.waitUntil(lambda: not view.building())
    assert list(view.sections) == layers and len(view.findChildren(EffectsSection)) == 12
    order = [view.sections_box.itemAt(i).widget() for i in range(view.sections_box.count())]
    assert order == list(view.sections.values())
    last = view.sections["h.11"]  # made turns after it was filled
    assert last.bars.rows == (BarRow(11, -0.5, None),) and last.info.text() == "12 channels"
    # Asked for others meanwhile: the waiting ones are not made for nothing.
    view.set_sections(["x"] + layers[:3])
    view.set_sections(layers[:2])
    assert list(view.sections) == layers[:2] and not view.building()
