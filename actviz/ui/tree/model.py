"""A thin Qt item model over :func:`actviz.module_tree`, its check boxes the session's ticks."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from PySide6.QtCore import (
    QAbstractItemModel,
    QModelIndex,
    QObject,
    QPersistentModelIndex,
    QSortFilterProxyModel,
    Qt,
)
from PySide6.QtGui import QFont

from actviz.display.text import format_count as format_count
from actviz.display.text import format_shape as format_shape

if TYPE_CHECKING:  # pragma: no cover
    from actviz.core.tree import ModuleNode, ModuleTree
    from actviz.workspace.session_state import Session

COLUMNS = ("Name", "Type", "Output shape", "Params")
NAME, TYPE, SHAPE, PARAMS = range(4)
#: Role returning a row's qualified module name ("" for the model itself).
NameRole = Qt.ItemDataRole.UserRole + 1
#: Role returning a row's module class name.
TypeRole = Qt.ItemDataRole.UserRole + 2

_Index = QModelIndex | QPersistentModelIndex


class ModuleTreeModel(QAbstractItemModel):
    """Tree of ``session.tree``: one row per module, root (the model itself) on top."""

    def __init__(self, session: Session, parent: QObject | None = None) -> None:
        super().__init__(parent)
        self._session = session
        #: The tree shown (the session's, or a run's with output shapes).
        self.tree: ModuleTree | None = None
        self._row_of: dict[str, int] = {}
        self._id_of: dict[str, int] = {}
        #: Ticked layers inside each module (a collapsed row still says it holds ticks).
        self._inside: dict[str, int] | None = None
        self._bold = QFont()
        self._bold.setBold(True)
        self._reload()
        session.model_changed.connect(self._on_session_model_changed)
        session.ticks_changed.connect(self._on_session_ticks_changed)

    def detach(self) -> None:
        """Stop listening to the session (the window calls this before it goes away)."""
        self._session.model_changed.disconnect(self._on_session_model_changed)
        self._session.ticks_changed.disconnect(self._on_session_ticks_changed)

    def _reload(self) -> None:
        self.tree = self._session.tree
        self._inside = None
        self._row_of.clear()
        self._id_of.clear()
        if self.tree is None:
            return
        for i, node in enumerate(self.tree.nodes):
            self._id_of[node.name] = i
            siblings = self.tree[node.parent].children if node.parent is not None else [""]
            self._row_of[node.name] = siblings.index(node.name) if node.name in siblings else 0

    def _node(self, index: _Index) -> ModuleNode | None:
        if not index.isValid() or self.tree is None:
            return None
        return self.tree.nodes[index.internalId()]

    def index_of(self, name: str, column: int = 0) -> QModelIndex:
        """The index of module ``name`` (invalid if unknown)."""
        if self.tree is None or name not in self._id_of:
            return QModelIndex()
        return self.createIndex(self._row_of[name], column, self._id_of[name])

    def index(self, row: int, column: int, parent: _Index = QModelIndex()) -> QModelIndex:  # noqa: B008
        if self.tree is None or not (0 <= column < len(COLUMNS)):
            return QModelIndex()
        node = self._node(parent)  # None: the root's parent (or an index gone)
        names = node.children if node is not None else [] if parent.isValid() else [""]
        if not 0 <= row < len(names):
            return QModelIndex()
        return self.createIndex(row, column, self._id_of[names[row]])

    def parent(self, index: _Index = QModelIndex()) -> QModelIndex:  # type: ignore[override]  # noqa: B008
        node = self._node(index)
        return QModelIndex() if node is None or node.parent is None else self.index_of(node.parent)

    def rowCount(self, parent: _Index = QModelIndex()) -> int:  # noqa: B008, N802
        if self.tree is None or parent.column() > 0:  # only the Name column has children
            return 0
        if not parent.isValid():
            return 1
        node = self._node(parent)
        return len(node.children) if node is not None else 0

    def columnCount(self, parent: _Index = QModelIndex()) -> int:  # noqa: B008, N802
        return len(COLUMNS)

    def headerData(self, section: int, orientation: Qt.Orientation, role: int = 0) -> Any:  # noqa: N802
        if orientation == Qt.Orientation.Horizontal and role == Qt.ItemDataRole.DisplayRole:
            return COLUMNS[section]
        return None

    def data(self, index: _Index, role: int = Qt.ItemDataRole.DisplayRole) -> Any:
        node = self._node(index)
        if node is None:
            return None
        column = index.column()
        if role == Qt.ItemDataRole.DisplayRole:
            if column == NAME:
                if not node.name:
                    return f"(model) {self._session.model_name or node.type_name}"
                return node.short_name
            if column == TYPE:
                return node.type_name
            if column == SHAPE:
                text = format_shape(node.output_shape)
                return f"{text}  ({node.calls} calls)" if node.calls > 1 else text
            if column == PARAMS:
                return format_count(node.total_params) if node.total_params else ""
        elif role == Qt.ItemDataRole.CheckStateRole and column == NAME:
            ticked = self._session.is_ticked(node.name)
            return Qt.CheckState.Checked if ticked else Qt.CheckState.Unchecked
        elif role == Qt.ItemDataRole.FontRole and column == NAME:
            # (The model itself holds every tick: its row says nothing by being bold.)
            return self._bold if node.name and self._ticked_inside(node.name) else None
        elif role == Qt.ItemDataRole.ToolTipRole:
            label = node.name or "(the model itself)"
            lines = [f"{label} · {node.type_name}"]
            if inside := self._ticked_inside(node.name):
                lines.append(f"{inside} ticked layer{'s' if inside > 1 else ''} inside")
            if node.extra_repr:
                lines.append(node.extra_repr)
            lines.append(f"{node.own_params:,} own parameters, {node.total_params:,} in total")
            if node.output_shape is not None:
                lines.append(f"output {format_shape(node.output_shape)}")
            return "\n".join(lines)
        elif role == NameRole:
            return node.name
        elif role == TypeRole:
            return node.type_name
        elif role == Qt.ItemDataRole.TextAlignmentRole and column == PARAMS:
            return int(Qt.AlignmentFlag.AlignRight | Qt.AlignmentFlag.AlignVCenter)
        return None

    def setData(self, index: _Index, value: Any, role: int = Qt.ItemDataRole.EditRole) -> bool:  # noqa: N802
        node = self._node(index)
        if node is None or role != Qt.ItemDataRole.CheckStateRole or index.column() != NAME:
            return False
        # The session emits ticks_changed, which repaints this row (and any other view).
        self._session.set_ticked([node.name], Qt.CheckState(value) == Qt.CheckState.Checked)
        return True

    def flags(self, index: _Index) -> Qt.ItemFlag:
        if not index.isValid():
            return Qt.ItemFlag.NoItemFlags
        flags = Qt.ItemFlag.ItemIsEnabled | Qt.ItemFlag.ItemIsSelectable
        if index.column() == NAME:
            flags |= Qt.ItemFlag.ItemIsUserCheckable
        return flags

    def update_tree(self, tree: ModuleTree) -> None:
        """Adopt a tree with output shapes without a view reset (unless the names differ)."""
        old = self.tree
        if old is None or [n.name for n in old.nodes] != [n.name for n in tree.nodes]:
            return self._on_session_model_changed()  # the session's tree, rows reset
        self.tree = tree
        if tree is old:
            changed = list(tree.nodes)  # changed in place: nothing to compare against
        else:
            changed = [
                new
                for before, new in zip(old.nodes, tree.nodes, strict=True)
                if _shown_fields(before) != _shown_fields(new)
            ]
        self._rows_changed(changed, SHAPE, PARAMS)

    def _on_session_model_changed(self) -> None:
        self.beginResetModel()
        self._reload()
        self.endResetModel()

    def _ticked_inside(self, name: str) -> int:
        """How many ticked layers ``name`` holds below itself (its name shows in bold)."""
        if self._inside is None:
            self._inside = {}
            tree = self.tree
            for ticked in self._session.ticked if tree is not None else ():
                parent = tree[ticked].parent if ticked in tree else None  # type: ignore[index, operator]
                while parent is not None:
                    self._inside[parent] = self._inside.get(parent, 0) + 1
                    parent = tree[parent].parent  # type: ignore[index]
        return self._inside.get(name, 0)

    def _on_session_ticks_changed(self, names: set[str]) -> None:
        self._inside = None
        rows = set(names)
        tree = self.tree
        if tree is None:
            return
        for name in names:  # and the modules that hold them (their bold name)
            parent = tree[name].parent if name in tree else None
            while parent is not None and parent not in rows:
                rows.add(parent)
                parent = tree[parent].parent  # type: ignore[index]
        self._rows_changed([tree[n] for n in rows if n in tree], NAME, NAME)

    def _rows_changed(self, nodes: list[ModuleNode], first_column: int, last_column: int) -> None:
        """One dataChanged per parent over its rows among ``nodes`` (one per module is slow)."""
        rows_by_parent: dict[str | None, list[int]] = {}
        for node in nodes:
            rows_by_parent.setdefault(node.parent, []).append(self._row_of[node.name])
        for parent, rows in rows_by_parent.items():
            first, last = min(rows), max(rows)
            siblings = [""] if parent is None else self.tree[parent].children  # type: ignore[index]
            self.dataChanged.emit(
                self.createIndex(first, first_column, self._id_of[siblings[first]]),
                self.createIndex(last, last_column, self._id_of[siblings[last]]),
            )


def _shown_fields(node: ModuleNode) -> tuple:
    """What the SHAPE and PARAMS columns show of ``node`` (a row repaints when this changes)."""
    return (node.output_shape, node.calls, node.total_params)


class ModuleFilterProxy(QSortFilterProxyModel):
    """Keeps rows whose name or type contains the filter text, with their ancestors."""

    def __init__(self, parent: QObject | None = None) -> None:
        # Ticks and shapes never change which rows pass (re-filtering is slow): set_text does.
        super().__init__(parent, recursiveFilteringEnabled=True, dynamicSortFilter=False)
        self._text = ""

    def set_text(self, text: str) -> None:
        # Qt 6.10 deprecates invalidateFilter() in favour of begin/endFilterChange.
        if hasattr(self, "beginFilterChange"):
            self.beginFilterChange()
            self._text = text.strip().lower()
            self.endFilterChange(QSortFilterProxyModel.Direction.Rows)
        else:  # pragma: no cover - Qt < 6.10
            self._text = text.strip().lower()
            self.invalidateFilter()

    def filterAcceptsRow(self, source_row: int, source_parent: _Index) -> bool:  # noqa: N802
        if not self._text:
            return True
        model = self.sourceModel()
        index = model.index(source_row, 0, source_parent)
        name = str(model.data(index, NameRole) or "").lower()
        type_name = str(model.data(index, TypeRole) or "").lower()
        return self._text in name or self._text in type_name
