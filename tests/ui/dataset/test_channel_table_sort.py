"""The channel table sorts itself with numpy: filling a scan's 1,000-channel layer asks the
model for the cells it shows, not once per comparison of a proxy's sort (issue #37: 150 ms on
the GUI thread when a scan's table filled), and its rows, the sort and the selection read as
before."""

from __future__ import annotations

import numpy as np
from PySide6.QtCore import QSortFilterProxyModel, Qt

from actviz.ui.dataset.dock import ChannelTable, ChannelTableModel, LayerFigures


def _figures(n: int, layer: str = "fc") -> LayerFigures:
    rng = np.random.default_rng(3)
    mean = rng.normal(size=n)
    best = rng.normal(size=n)
    best[::7] = np.nan  # channels without a top entry
    return LayerFigures(layer, mean, rng.random(n), rng.random(n), best, rng.random(n) < 0.1)


def test_filling_a_large_layer_asks_only_for_the_shown_cells(qtbot, monkeypatch):
    calls = []
    original = ChannelTableModel.data

    def counted(self, index, role=Qt.ItemDataRole.DisplayRole):
        calls.append(index.row())
        return original(self, index, role)

    monkeypatch.setattr(ChannelTableModel, "data", counted)
    table = ChannelTable()
    qtbot.addWidget(table)
    table.resize(300, 400)
    table.show()
    qtbot.waitExposed(table)
    calls.clear()
    table.set_figures(_figures(1000))
    qtbot.wait(10)  # the view's paint
    # A proxy's sort asked about every row (~20,000 calls, one per comparison); the view asks
    # about the rows it shows only (however many times it paints them).
    assert calls and len(set(calls)) < 100
    assert not table.findChildren(QSortFilterProxyModel)
    assert table.model() is table.table_model


def test_rows_sort_by_each_column_stably_with_nan_as_the_lowest(qtbot):
    table = ChannelTable()
    qtbot.addWidget(table)
    figures = LayerFigures(
        "l",
        np.array([1.0, 3.0, 3.0, -2.0, 0.5]),
        np.zeros(5),
        np.array([0.1, 0.2, 0.2, 0.0, 0.9]),
        np.array([np.nan, 2.0, np.nan, 5.0, 1.0]),
        np.array([False, False, False, True, False]),
    )
    table.set_figures(figures)
    order = [table.channel_at(r) for r in range(table.model().rowCount())]
    assert order == [1, 2, 0, 4, 3]  # mean descending, ties in channel order
    assert table.model().index(0, 1).data() == "3.000"
    table.sortByColumn(4, Qt.SortOrder.DescendingOrder)
    assert [table.channel_at(r) for r in range(5)] == [3, 1, 4, 0, 2]
    table.sortByColumn(4, Qt.SortOrder.AscendingOrder)
    assert [table.channel_at(r) for r in range(5)] == [0, 2, 4, 1, 3]
    assert table.row_of(3) == 4 and table.row_of(0) == 0
    # The selection follows its channel through a sort; a new layer keeps the sort.
    table.selectRow(table.row_of(4))
    table.sortByColumn(3, Qt.SortOrder.DescendingOrder)
    selected = table.selectionModel().selectedRows()
    assert [table.channel_at(i.row()) for i in selected] == [4]
    table.set_figures(figures)
    assert [table.channel_at(r) for r in range(5)] == [4, 1, 2, 0, 3]
    assert table.model().index(table.row_of(3), 5).data() == "dead"
    table.set_figures(None)
    assert table.model().rowCount() == 0
