"""The "Model" dock: the module tree (a Qt model over :func:`actviz.module_tree`, its check
boxes the session's ticks), the module's details (parameters and buffers: shape, dtype, norm,
mode), the input preview."""

from __future__ import annotations

from operator import attrgetter
from typing import TYPE_CHECKING, Any

from PySide6 import QtCore, QtGui, QtWidgets
from PySide6.QtCore import QEvent, QModelIndex, QObject, Qt
from PySide6.QtWidgets import QWidget

from actviz.display.text import format_count, format_shape
from actviz.ui.panels import style
from actviz.ui.panels.deferred import DeferredCall
from actviz.ui.panels.overlay import InputPreview

if TYPE_CHECKING:  # pragma: no cover
    from actviz.core.tree import ModuleNode, ModuleTree
    from actviz.workspace.session_state import Session

COLUMNS = ("Name", "Type", "Output shape", "Params")
NAME, TYPE, SHAPE, PARAMS = range(4)
#: Role returning a row's qualified module name ("" for the model itself).
NameRole = Qt.ItemDataRole.UserRole + 1
#: The Name column may take at most this share of the tree's width after fitting its contents.
NAME_COLUMN_MAX_FRACTION = 0.6
NAME_COLUMN_MIN_PX = 140  #: ... and at least this many pixels.
#: Type is shortened first, down to this many pixels, when Name and Type do not both fit.
TYPE_COLUMN_MIN_PX = 100
#: Width the dock asks for on first start (a torchvision model's Name and Type columns).
PREFERRED_WIDTH = 300
MIN_WIDTH = 200  #: The dock never forces the window wider than this (a laptop screen must fit).
#: Trees up to this many modules open two levels deep; bigger ones show only the top level.
EXPAND_LIMIT = 400
MIN_COLUMN_PX = 36  #: A column of the details table is never shortened below this width.

_Index = QModelIndex | QtCore.QPersistentModelIndex


class ModuleTreeModel(QtCore.QAbstractItemModel):
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
        self._bold = QtGui.QFont()
        self._bold.setBold(True)
        self._reload()
        session.model_changed.connect(self._on_session_model_changed)
        session.ticks_changed.connect(self._on_session_ticks_changed)

    def detach(self) -> None:
        """Stop listening to the session (the window calls this before it goes away)."""
        self._session.model_changed.disconnect(self._on_session_model_changed)
        self._session.ticks_changed.disconnect(self._on_session_ticks_changed)

    def _reload(self) -> None:
        self.tree, self._inside = self._session.tree, None
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
        if (node := self._node(index)) is None:
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
            lines = [f"{node.name or '(the model itself)'} · {node.type_name}"]
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
        # A row repaints when what SHAPE and PARAMS show changed (all: changed in place).
        shown = attrgetter("output_shape", "calls", "total_params")
        pairs = zip(old.nodes, tree.nodes, strict=True)
        changed = [new for before, new in pairs if tree is old or shown(before) != shown(new)]
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
        if (tree := self.tree) is None:
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


class ModuleFilterProxy(QtCore.QSortFilterProxyModel):
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
            self.endFilterChange(QtCore.QSortFilterProxyModel.Direction.Rows)
        else:  # pragma: no cover - Qt < 6.10
            self._text = text.strip().lower()
            self.invalidateFilter()

    def filterAcceptsRow(self, source_row: int, source_parent: _Index) -> bool:  # noqa: N802
        if not self._text:
            return True
        index = self.sourceModel().index(source_row, NAME, source_parent)
        name = str(index.data(NameRole) or "").lower()
        type_name = str(index.siblingAtColumn(TYPE).data() or "").lower()
        return self._text in name or self._text in type_name


def _shrink_to(wanted: list[int], room: int, floor: int) -> list[int]:
    """Widths of columns wanting ``wanted`` pixels in ``room``, the widest shortened first."""
    widths = list(wanted)
    excess = sum(widths) - room
    while excess > 0:
        widest = max(range(len(widths)), key=lambda c: widths[c])
        others = [w for c, w in enumerate(widths) if c != widest]
        target = max(floor, max(others, default=floor), widths[widest] - excess)
        if target >= widths[widest]:  # every column at the floor or equal: shorten evenly
            step = max(1, excess // len(widths))
            if not (shrinkable := [c for c in range(len(widths)) if widths[c] > floor]):
                break
            for c in shrinkable:
                cut = min(step, widths[c] - floor, excess)
                widths[c] -= cut
                excess -= cut
            continue
        excess -= widths[widest] - target
        widths[widest] = target
    return widths


class ModuleDetails(QWidget):
    """Parameters and buffers (shape, dtype, norm) of the selected module, and its mode."""

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        layout = style.bare_box(self, vertical=True)
        self.header = QtWidgets.QLabel("Select a module to see its parameters.", wordWrap=True)
        # At the top of the pane also when the table under it is hidden.
        self.header.setAlignment(Qt.AlignmentFlag.AlignLeft | Qt.AlignmentFlag.AlignTop)
        self.header.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        layout.addWidget(self.header)
        self.table = QtWidgets.QTableWidget(0, 5)
        self.table.setHorizontalHeaderLabels(["Name", "Kind", "Shape", "dtype", "L2 norm"])
        self.table.verticalHeader().setVisible(False)
        self.table.setEditTriggers(QtWidgets.QAbstractItemView.EditTrigger.NoEditTriggers)
        # Columns fit the table's width (fit_columns); a shortened cell has its text as tooltip.
        self.table.setTextElideMode(Qt.TextElideMode.ElideMiddle)
        self.table.horizontalHeader().setMinimumSectionSize(MIN_COLUMN_PX)
        self.table.viewport().installEventFilter(self)  # its width: columns follow it
        layout.addWidget(self.table, 1)

    def eventFilter(self, watched: QObject, event: QEvent) -> bool:  # noqa: N802 - Qt name
        if watched is self.table.viewport() and event.type() == QEvent.Type.Resize:
            self.fit_columns()
        return super().eventFilter(watched, event)

    def resizeEvent(self, event: QtGui.QResizeEvent) -> None:  # noqa: N802 - Qt name
        super().resizeEvent(event)
        self._fit_header()

    def _fit_header(self) -> None:
        # A wrapped label's height at its width, or a short pane cuts the summary's last line.
        needed = self.header.heightForWidth(max(1, self.header.width()))
        if needed > 0 and needed != self.header.minimumHeight():
            self.header.setMinimumHeight(needed)

    def fit_columns(self) -> None:
        """Give each column its contents' width, shortening the widest (never scroll sideways)."""
        table, header = self.table, self.table.horizontalHeader()
        room, count = table.viewport().width(), table.columnCount()
        if room <= 0 or count == 0:
            return
        wanted = [max(table.sizeHintForColumn(c), header.sectionSizeHint(c)) for c in range(count)]
        widths = _shrink_to(wanted, room, MIN_COLUMN_PX)
        widths[-1] = max(MIN_COLUMN_PX, room - sum(widths[:-1]))
        for c, width in enumerate(widths):
            header.resizeSection(c, width)

    def show_node(self, node: Any | None) -> None:
        """Show a :class:`~actviz.core.tree.ModuleNode` (None clears)."""
        self.table.setRowCount(0)
        if node is None:
            self.header.setText("Select a module to see its parameters.")
            self.table.setVisible(False)
            return
        mode = "train mode" if node.training else "eval mode"
        lines = [
            f"<b>{node.name or '(model)'}</b> · {node.type_name} · {mode}",
            f"{node.own_params:,} own parameters · {node.total_params:,} in total",
        ]
        if node.output_shape is not None:
            calls = f" · called {node.calls}×" if node.calls > 1 else ""
            lines.append(f"output {format_shape(node.output_shape)}{calls}")
        if node.extra_repr:
            lines.append(f"<span style='color:#5f6368'>{node.extra_repr}</span>")
        self.header.setText("<br>".join(lines))
        self._fit_header()
        rows = [("parameter", p) for p in node.parameters] + [("buffer", b) for b in node.buffers]
        # No parameters of its own: no empty table under the summary.
        self.table.setVisible(bool(rows))
        self.table.setRowCount(len(rows))
        for r, (kind, info) in enumerate(rows):
            frozen = "" if kind == "buffer" or info.requires_grad else " (frozen)"
            values = [info.name, kind + frozen, format_shape(info.shape) or "scalar", info.dtype,
                      f"{info.norm:.4g}"]  # fmt: skip
            for c, text in enumerate(values):
                item = QtWidgets.QTableWidgetItem(text)
                item.setToolTip(text)
                self.table.setItem(r, c, item)
        self.fit_columns()

    def row_texts(self) -> list[list[str]]:
        """The table's cells (tests and accessibility)."""
        t = self.table
        return [[t.item(r, c).text() for c in range(t.columnCount())] for r in range(t.rowCount())]


class ModelDock(QtWidgets.QDockWidget):
    """Module tree, details and input preview; ``module_selected(name)`` ("" for the model)."""

    module_selected = QtCore.Signal(str)

    def __init__(self, session: Session, parent: QWidget | None = None) -> None:
        super().__init__("Model", parent, objectName="modelDock", minimumWidth=MIN_WIDTH)
        self.session = session
        panel = _WidePanel()
        layout = QtWidgets.QVBoxLayout(panel, contentsMargins=QtCore.QMargins(4, 4, 4, 4))
        self.filter_edit = QtWidgets.QLineEdit(clearButtonEnabled=True)
        self.filter_edit.setPlaceholderText("Filter modules by name or type, e.g. Conv2d")
        self.filter_edit.textChanged.connect(self._on_filter_changed)
        layout.addWidget(self.filter_edit)
        self.tree_model, self.tree_proxy = ModuleTreeModel(session, self), ModuleFilterProxy(self)
        self.tree_proxy.setSourceModel(self.tree_model)
        self.tree_view = QtWidgets.QTreeView(uniformRowHeights=True, alternatingRowColors=True)
        self.tree_view.setModel(self.tree_proxy)
        self.tree_view.setContextMenuPolicy(Qt.ContextMenuPolicy.CustomContextMenu)
        self.tree_view.customContextMenuRequested.connect(self._on_tree_context_menu)
        self.tree_view.selectionModel().currentChanged.connect(self._on_tree_current_changed)
        # Long names are shortened in the middle: start and end tell modules apart.
        self.tree_view.setTextElideMode(Qt.TextElideMode.ElideMiddle)
        header = self.tree_view.header()
        header.setMinimumSectionSize(24)
        for column, width in enumerate((170, 110, 90)):
            header.resizeSection(column, width)
        self.details, self.input_preview, preview_box = ModuleDetails(), InputPreview(), QWidget()
        style.bare_box(preview_box, vertical=True).addWidget(self.input_preview)
        splitter = QtWidgets.QSplitter(Qt.Orientation.Vertical)
        for widget, stretch in ((self.tree_view, 5), (self.details, 2), (preview_box, 2)):
            splitter.addWidget(widget)
            splitter.setStretchFactor(splitter.indexOf(widget), stretch)
        layout.addWidget(splitter, 1)
        self.setWidget(panel)
        # A model set before the window is shown is fitted once the tree has its real width.
        self._fit_pending = False
        # Measured once per change of the rows shown, not per resize (it asks every cell).
        self._wanted: dict[int, int] | None = None
        p, t = self.tree_proxy, self.tree_view
        changes = (p.modelReset, p.layoutChanged, p.rowsInserted, p.rowsRemoved, p.dataChanged)
        for signal in (*changes, t.expanded, t.collapsed):
            signal.connect(lambda *_: setattr(self, "_wanted", None))
        self._fit_soon = DeferredCall(self, self._fit)
        self.tree_view.installEventFilter(self)
        # The viewport narrows when the vertical scroll bar comes: the columns follow.
        self.tree_view.viewport().installEventFilter(self)

    def show_model(self) -> None:
        """After a new model: expand the tree, fit the Name column, show the model's details."""
        tree = self.session.tree
        self.tree_view.expandToDepth(1 if tree is not None and len(tree) < EXPAND_LIMIT else 0)
        self._fit_pending = True
        self._fit_soon.request()
        self.details.show_node(tree[""] if tree is not None else None)

    def update_tree(self, tree: ModuleTree) -> None:
        """A run's tree (output shapes, call counts): refresh the rows and the details."""
        self.tree_model.update_tree(tree)
        self.show_current_details()
        if self.tree_view.isVisible():
            self.fit_columns()  # output shapes and call counts widen their column

    def fit_name_column(self, max_fraction: float = NAME_COLUMN_MAX_FRACTION) -> int:
        """Widen Name to its visible contents (at most ``max_fraction``); the new width."""
        view = self.tree_view
        width = view.viewport().width() or view.width()
        cap = max(NAME_COLUMN_MIN_PX, int(width * max_fraction))
        wanted = max(view.sizeHintForColumn(0), view.header().sectionSizeHint(0))
        view.header().resizeSection(0, min(max(wanted, NAME_COLUMN_MIN_PX), cap))
        self._fit_pending = False
        self.fit_columns()
        return view.header().sectionSize(0)

    def fit_columns(self) -> None:
        """Fit the columns to the tree's width: hide Params, then Output shape; shrink the rest."""
        view, header = self.tree_view, self.tree_view.header()
        if (room := view.viewport().width()) <= 0 or header.count() < 4:
            return
        name = header.sectionSize(0)
        wanted = self._wanted_widths()
        shown = [1, 2, 3]
        while len(shown) > 1 and name + sum(wanted[c] for c in shown) > room:
            shown.pop()
        for c in (2, 3):
            header.setSectionHidden(c, c not in shown)
        if name + sum(wanted[c] for c in shown) > room:
            # Type gives way first: the names matter more.
            name = max(min(name, NAME_COLUMN_MIN_PX), min(name, room - TYPE_COLUMN_MIN_PX))
            header.resizeSection(0, min(name, room - 24))
        for c in shown[:-1]:
            header.resizeSection(c, wanted[c])
        used = header.sectionSize(0) + sum(header.sectionSize(c) for c in shown[:-1])
        header.resizeSection(shown[-1], max(24, room - used))

    def _wanted_widths(self) -> dict[int, int]:
        """Columns 1-3: the widest text of the rows shown (or the header's) plus margins."""
        if self._wanted is None:
            view, header = self.tree_view, self.tree_view.header()
            metrics = view.fontMetrics()
            widest = {c: 0 for c in (1, 2, 3)}
            index = view.model().index(0, 0)
            while index.isValid():
                for c in widest:
                    if text := index.siblingAtColumn(c).data():
                        widest[c] = max(widest[c], metrics.horizontalAdvance(str(text)))
                index = view.indexBelow(index)
            margin = 2 * (
                view.style().pixelMetric(QtWidgets.QStyle.PixelMetric.PM_FocusFrameHMargin) + 1
            )
            self._wanted = {
                c: max(w + margin, header.sectionSizeHint(c)) + 6 for c, w in widest.items()
            }
        return self._wanted

    def tree_context_menu(self, name: str | None) -> QtWidgets.QMenu:
        """The module tree's context menu for row ``name`` (built, not shown)."""
        menu = QtWidgets.QMenu(self)
        session, tree = self.session, self.session.tree
        if name is not None and tree is not None and name in tree:
            node, label, below = tree[name], name or "the model", [name, *tree.descendants(name)]
            for text, act in (
                (f"Tick all leaves below {label}", lambda: session.tick_leaves_below(name)),
                (f"Tick all {node.type_name} modules", lambda: session.tick_type(node.type_name)),
                (f"Untick {label} and below", lambda: session.set_ticked(below, False)),
            ):
                menu.addAction(text, act)
            menu.addSeparator()
        menu.addAction("Untick all", session.untick_all)
        return menu

    def show_current_details(self) -> None:
        """Show the current row's parameters (nothing changes when no row is current)."""
        tree, name = self.tree_model.tree, self.tree_view.currentIndex().data(NameRole)
        if tree is not None and name is not None and name in tree:
            self.details.show_node(tree[name])

    def detach(self) -> None:
        """Stop listening to the session (the window calls this before it goes away)."""
        self.tree_model.detach()
        # A filter left on the view can be called while the dock's Python side is torn down.
        self.tree_view.removeEventFilter(self)
        self.tree_view.viewport().removeEventFilter(self)

    def eventFilter(self, watched: QObject, event: QEvent) -> bool:  # noqa: N802
        if (
            watched in (self.tree_view, self.tree_view.viewport())
            and event.type() in (QEvent.Type.Show, QEvent.Type.Resize)
            and self.tree_view.isVisible()
        ):
            # Once per turn: restoring a layout resizes the view many times, each fit asks rows.
            self._fit_soon.request()
        return super().eventFilter(watched, event)

    def _fit(self) -> None:
        if self.tree_view.isVisible():
            (self.fit_name_column if self._fit_pending else self.fit_columns)()

    def _on_filter_changed(self, text: str) -> None:
        self.tree_proxy.set_text(text)
        if text:
            self.tree_view.expandAll()

    def _on_tree_current_changed(self, current: QModelIndex, _previous: QModelIndex) -> None:
        self.show_current_details()
        if (name := current.data(NameRole)) is not None:
            self.module_selected.emit(name)

    def _on_tree_context_menu(self, pos: QtCore.QPoint) -> None:
        menu = self.tree_context_menu(self.tree_view.indexAt(pos).data(NameRole))
        try:
            menu.exec(self.tree_view.viewport().mapToGlobal(pos))
        finally:
            menu.deleteLater()  # a child of the dock: one kept per right click otherwise


class _WidePanel(QWidget):
    # The dock area sizes a new dock from its contents' size hint; a restored layout wins.
    def sizeHint(self) -> QtCore.QSize:  # noqa: N802
        hint = super().sizeHint()
        return QtCore.QSize(max(hint.width(), PREFERRED_WIDTH), hint.height())
