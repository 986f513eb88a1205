"""StatsTable: per-layer statistics in a sortable table; NaN/Inf rows stand out in red."""

from __future__ import annotations

import math
from collections import namedtuple
from typing import Any

from PySide6 import QtCore, QtGui, QtWidgets

from actviz.ui.panels import style
from actviz.ui.panels.base import PanelBase

_Qt = QtCore.Qt
_Column = namedtuple("_Column", "key header numeric tooltip")
COLUMNS: list[_Column] = [
    _Column("name", "layer", False, "qualified module name"),
    _Column("shape", "shape", False, "output shape"),
    _Column("mean", "mean", True, "mean of the output"),
    _Column("std", "std", True, "standard deviation of the output"),
    _Column("min", "min", True, "minimum of the output"),
    _Column("max", "max", True, "maximum of the output"),
    _Column("zero_frac", "zero frac", True, "fraction of exact zeros (dead units after ReLU)"),
    _Column("nan", "NaN", True, "number of NaN values"),
    _Column("inf", "Inf", True, "number of infinite values"),
    _Column("grad_norm", "‖grad‖", True, "L2 norm of the gradient at the output"),
]


def _as_float(value: Any) -> float | None:
    try:
        return float(value)
    except (TypeError, ValueError):
        return None


def _is_bad(row: dict) -> bool:
    return bool((_as_float(row.get("nan")) or 0) > 0 or (_as_float(row.get("inf")) or 0) > 0)


def _display(key: str, value: Any) -> str:
    if value is None:
        return "—"
    if key == "shape":
        return style.format_shape(value) if isinstance(value, (tuple, list)) else str(value)
    if key == "name":
        return str(value) or "(model)"
    number = _as_float(value)
    if key in ("nan", "inf"):
        return str(int(number)) if number is not None and math.isfinite(number) else str(value)
    if number is None:
        return str(value)
    return f"{100.0 * number:.1f} %" if key == "zero_frac" else style.format_value(number)


class StatsModel(QtCore.QAbstractTableModel):
    """Table model over a list of row dicts (keys as in ``actviz.display.stats.layer_stats``)."""

    def __init__(self, parent: QtCore.QObject | None = None) -> None:
        super().__init__(parent)
        self._rows: list[dict] = []
        self._bad_brush = QtGui.QBrush(QtGui.QColor(style.ROW_BAD_BACKGROUND))

    def set_rows(self, rows: list[dict]) -> None:
        self.beginResetModel()
        self._rows = [dict(row) for row in rows]
        self.endResetModel()

    def row_dict(self, row: int) -> dict:
        return self._rows[row]

    def rowCount(self, parent: QtCore.QModelIndex = QtCore.QModelIndex()) -> int:  # noqa: B008, N802
        return 0 if parent.isValid() else len(self._rows)

    def columnCount(self, parent: QtCore.QModelIndex = QtCore.QModelIndex()) -> int:  # noqa: B008, N802
        return 0 if parent.isValid() else len(COLUMNS)

    def data(self, index: QtCore.QModelIndex, role: int = _Qt.ItemDataRole.DisplayRole) -> Any:
        if not index.isValid():
            return None
        row, column = self._rows[index.row()], COLUMNS[index.column()]
        value = row.get(column.key)
        if role == _Qt.ItemDataRole.DisplayRole:
            return _display(column.key, value)
        if role == _Qt.ItemDataRole.UserRole:
            return value
        if role == _Qt.ItemDataRole.BackgroundRole:
            return self._bad_brush if _is_bad(row) else None
        if role == _Qt.ItemDataRole.ForegroundRole:
            return QtGui.QBrush(QtGui.QColor(style.TEXT)) if _is_bad(row) else None
        if role == _Qt.ItemDataRole.TextAlignmentRole:
            side = _Qt.AlignmentFlag.AlignRight if column.numeric else _Qt.AlignmentFlag.AlignLeft
            return int(side | _Qt.AlignmentFlag.AlignVCenter)
        if role == _Qt.ItemDataRole.ToolTipRole:
            if column.key == "name":
                return str(row.get("name", ""))
            if column.numeric and value is not None:
                return repr(value)
        return None

    def headerData(
        self, section: int, orientation: _Qt.Orientation, role: int = _Qt.ItemDataRole.DisplayRole
    ) -> Any:  # noqa: N802
        if orientation != _Qt.Orientation.Horizontal or not 0 <= section < len(COLUMNS):
            return None
        if role == _Qt.ItemDataRole.DisplayRole:
            return COLUMNS[section].header
        return COLUMNS[section].tooltip if role == _Qt.ItemDataRole.ToolTipRole else None

    def sort(self, column: int, order: _Qt.SortOrder = _Qt.SortOrder.AscendingOrder) -> None:
        """Sort rows by ``column``; missing and NaN values always go last."""
        if not 0 <= column < len(COLUMNS):
            return
        key, numeric = COLUMNS[column].key, COLUMNS[column].numeric
        present, missing = [], []
        for row in self._rows:
            number = _as_float(row.get(key)) if numeric else 0.0
            (missing if number is None or math.isnan(number) else present).append(row)
        if numeric:
            present.sort(key=lambda r: _as_float(r.get(key)))
        else:
            present.sort(key=lambda r: _display(key, r.get(key)).lower())
        if order == _Qt.SortOrder.DescendingOrder:
            present.reverse()
        self.layoutAboutToBeChanged.emit()
        self._rows = present + missing
        self.layoutChanged.emit()


class StatsTable(PanelBase):
    """Per-layer statistics, sortable; a row selected emits ``layer_selected``. ``name_view``
    keeps the names over ``view``'s left edge (Qt's frozen column)."""

    layer_selected = QtCore.Signal(str)

    NAME_MIN_PX = 80  #: Bounds of the name column (pixels, share of the table's width).
    NAME_MAX_FRACTION = 0.45

    def __init__(self, parent: QtWidgets.QWidget | None = None) -> None:
        super().__init__("Layer statistics", parent)
        self.model = StatsModel(self)
        self.view = QtWidgets.QTableView()
        self.name_view = QtWidgets.QTableView(self.view)
        for view in (self.view, self.name_view):
            view.setModel(self.model)
            view.setSortingEnabled(True)
            view.setSelectionBehavior(QtWidgets.QAbstractItemView.SelectionBehavior.SelectRows)
            view.setSelectionMode(QtWidgets.QAbstractItemView.SelectionMode.SingleSelection)
            view.setEditTriggers(QtWidgets.QAbstractItemView.EditTrigger.NoEditTriggers)
            view.setAlternatingRowColors(True)
            # The block number at the end tells rows apart ("transformer…h.3.mlp").
            view.setTextElideMode(_Qt.TextElideMode.ElideMiddle)
            view.verticalHeader().setVisible(False)
            view.verticalHeader().setDefaultSectionSize(view.fontMetrics().height() + 6)
            view.setHorizontalScrollMode(QtWidgets.QAbstractItemView.ScrollMode.ScrollPerPixel)
            view.setVerticalScrollMode(QtWidgets.QAbstractItemView.ScrollMode.ScrollPerPixel)
            # Start unsorted (execution order) until the user clicks a header.
            view.horizontalHeader().setSortIndicator(-1, _Qt.SortOrder.AscendingOrder)
        header, frozen = self.view.horizontalHeader(), self.name_view
        header.setSectionResizeMode(0, QtWidgets.QHeaderView.ResizeMode.Interactive)
        for column in range(1, len(COLUMNS)):
            header.setSectionResizeMode(column, QtWidgets.QHeaderView.ResizeMode.ResizeToContents)
            frozen.setColumnHidden(column, True)
        header.resizeSection(0, self.NAME_MIN_PX)
        # The frozen name column: no scroll bars or frame of its own, one selection.
        frozen.setFocusPolicy(_Qt.FocusPolicy.NoFocus)
        frozen.setFrameShape(QtWidgets.QFrame.Shape.NoFrame)
        frozen.setHorizontalScrollBarPolicy(_Qt.ScrollBarPolicy.ScrollBarAlwaysOff)
        frozen.setVerticalScrollBarPolicy(_Qt.ScrollBarPolicy.ScrollBarAlwaysOff)
        frozen.horizontalHeader().setSectionResizeMode(QtWidgets.QHeaderView.ResizeMode.Fixed)
        frozen.setSelectionModel(self.view.selectionModel())
        frozen.setStyleSheet("QTableView { border-right: 1px solid palette(mid); }")
        frozen.verticalScrollBar().valueChanged.connect(self.view.verticalScrollBar().setValue)
        self.view.verticalScrollBar().valueChanged.connect(frozen.verticalScrollBar().setValue)
        header.sectionResized.connect(lambda section, *_: section == 0 and self._place_name_view())
        header.sortIndicatorChanged.connect(self._on_sort_changed)
        frozen.horizontalHeader().sortIndicatorChanged.connect(
            lambda section, order: section >= 0 and header.setSortIndicator(section, order)
        )
        self.view.installEventFilter(self)
        self.view.selectionModel().selectionChanged.connect(self._on_selection_changed)
        self.content.addWidget(self.view, 1)
        self.summary_label = style.caption_label()
        self.content.addWidget(self.summary_label)
        self._emit_selection = True
        #: The names the name column was last fitted to; None: fit when next shown.
        self._fitted_names: tuple[str, ...] | None = ()
        self._place_name_view()

    def fit_name_column(self) -> int:
        """Fit the name column to the names shown, within its bounds; returns its width."""
        fitted = max(self.view.sizeHintForColumn(0), self.NAME_MIN_PX)
        width = min(fitted, max(self.NAME_MIN_PX, int(self.view.width() * self.NAME_MAX_FRACTION)))
        self.view.horizontalHeader().resizeSection(0, width)
        return width

    def eventFilter(self, watched: QtCore.QObject, event: QtCore.QEvent) -> bool:  # noqa: N802
        if watched is self.view and event.type() == QtCore.QEvent.Type.Resize:
            self._place_name_view()
        return super().eventFilter(watched, event)

    def showEvent(self, event: QtGui.QShowEvent) -> None:  # noqa: N802 - Qt name
        super().showEvent(event)
        self._fit_if_needed()

    def _fit_if_needed(self) -> None:
        # Measuring asks the model for every cell: only for new names on screen.
        names = tuple(self.names())
        if names == self._fitted_names or not self.isVisible():
            return
        self._fitted_names = names
        self.fit_name_column()
        self._place_name_view()

    def _place_name_view(self) -> None:
        view, frame, width = self.view, self.view.frameWidth(), self.view.columnWidth(0)
        header = view.horizontalHeader().height()
        self.name_view.setColumnWidth(0, width)
        self.name_view.horizontalHeader().setFixedHeight(header)
        self.name_view.setGeometry(frame, frame, width, view.viewport().height() + header)

    def _on_sort_changed(self, section: int, order: _Qt.SortOrder) -> None:
        # The frozen header shows the indicator only when the names are the sort column.
        frozen = self.name_view.horizontalHeader()
        with QtCore.QSignalBlocker(frozen):
            frozen.setSortIndicator(section if section == 0 else -1, order)

    def set_rows(self, rows: list[dict]) -> None:
        """Show ``rows`` (dicts keyed as :data:`COLUMNS`), in the user's sort order if any."""
        self.model.set_rows(rows)
        header = self.view.horizontalHeader()
        if header.sortIndicatorSection() >= 0:
            self.model.sort(header.sortIndicatorSection(), header.sortIndicatorOrder())
        self._fit_if_needed()
        bad = sum(1 for row in rows if _is_bad(row))
        self.summary_label.setText(
            f"{len(rows)} layers" + (f" · {bad} with NaN/Inf" if bad else "")
        )

    def names(self) -> list[str]:
        """Layer names in the order the table shows them."""
        return [str(self.model.row_dict(r).get("name", "")) for r in range(self.model.rowCount())]

    def select_layer(self, name: str) -> None:
        """Select ``name``'s row without emitting ``layer_selected`` (to follow other views)."""
        names = self.names()
        if name not in names:
            self.view.clearSelection()
            return
        self._emit_selection = False
        try:
            self.view.selectRow(names.index(name))
        finally:
            self._emit_selection = True

    def clear(self) -> None:
        """Show an empty table."""
        self.set_rows([])
        self.summary_label.setText("no capture")

    def _on_selection_changed(self, *_args: object) -> None:
        if (rows := self.view.selectionModel().selectedRows()) and self._emit_selection:
            self.layer_selected.emit(str(self.model.row_dict(rows[0].row()).get("name", "")))
