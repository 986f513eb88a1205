"""The module tree's names stay readable in the default Model dock at 1280x720: a long type
(a Hugging Face model's root row) is shortened before the names under it are."""

from __future__ import annotations

import pytest

pytest.importorskip("transformers")

from tests.display.seq_models import tiny_bert  # noqa: E402


def test_a_long_root_type_does_not_cut_the_names_below(actviz_window):
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
