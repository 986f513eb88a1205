"""The module tree's names stay readable in the default Model dock at 1280x720: a long type
(a Hugging Face model's root row) is shortened before the names under it are; its columns are
fitted once per turn, however often it is resized."""

from __future__ import annotations

import pytest


def test_a_long_root_type_does_not_cut_the_names_below(actviz_window):
    pytest.importorskip("transformers")
    from tests.display.seq_models import tiny_bert

    win = actviz_window(size=(1280, 720))
    w = win.window
    w.script.set_model(tiny_bert(), layers=["classifier"])
    win.settle()
    dock = w.model_dock
    view, header = dock.tree_view, dock.tree_view.header()
    for name in ("bert.embeddings", "bert.encoder", "bert.pooler"):
        index = dock.tree_proxy.mapFromSource(dock.tree_model.index_of(name))
        assert index.isValid() and not view.isRowHidden(index.row(), index.parent())
        needed = view.sizeHintForIndex(index).width()
        assert view.visualRect(index).width() >= needed, (name, header.sectionSize(0))
    # The type column still reads its short types whole and keeps a useful width.
    assert header.sectionSize(1) >= 100
    bert = dock.tree_proxy.mapFromSource(dock.tree_model.index_of("bert"))
    type_cell = bert.siblingAtColumn(1)
    assert view.visualRect(type_cell).width() >= view.sizeHintForIndex(type_cell).width()


def test_resizing_the_tree_many_times_in_one_turn_fits_its_columns_once(
    actviz_window, resnet, monkeypatch
):
    # Restoring a layout resizes the tree several times in one turn; each fit asks every row.
    win = actviz_window(size=(1280, 720))
    w = win.window
    w.script.set_model(resnet, layers=["layer1"])
    win.settle()
    dock = w.model_dock
    fits: list[int] = []
    real = type(dock).fit_columns
    monkeypatch.setattr(type(dock), "fit_columns", lambda self: fits.append(1) or real(self))
    for width in range(300, 400, 10):
        dock.tree_view.resize(width, 400)
    assert fits == []  # none inside the turn that resized it
    win.settle()
    assert fits == [1]
    header = dock.tree_view.header()
    # The fit saw the last width: the columns fill the viewport, no wider.
    shown = [c for c in range(header.count()) if not header.isSectionHidden(c)]
    assert sum(header.sectionSize(c) for c in shown) == dock.tree_view.viewport().width()
