"""The window's central area (the message banner: load warnings and run errors, never a modal
dialog; Layers and Overview tabs), status bar and first size; and its actions, toolbar and menus
(:class:`WindowActions`), built once like a ``setupUi`` (parts connect them)."""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from typing import Any

from PySide6 import QtWidgets
from PySide6.QtCore import QMargins, QRect, QSize, Qt, Signal
from PySide6.QtGui import QAction, QActionGroup, QKeySequence, QResizeEvent
from PySide6.QtWidgets import QComboBox, QCompleter, QLabel, QMainWindow, QSizePolicy, QWidget

from actviz.core.targets import AUTO_TARGET_TEXT
from actviz.ui.panels import style
from actviz.ui.panels.channel_view import ChannelView
from actviz.ui.panels.overlay import OverlayPanel
from actviz.ui.panels.plot_panel import GradFlowPanel, HistogramPanel
from actviz.ui.panels.prediction import PredictionPanel
from actviz.ui.panels.stats_table import StatsTable
from actviz.ui.panels.style import PAGE_MARGIN, PANEL_SPACING, ElidedLabel, ProgressBar
from actviz.ui.window.settings import NORMALIZATIONS

#: The window never opens larger than this (a 1600x1000 screen keeps room around it).
PREFERRED_SIZE = QSize(1360, 820)
#: The Layers tab's panel column is never narrower than this beside the channel view.
LAYERS_MIN_WIDTH = 180
SCREEN_FRACTION = 0.9  #: Share of the screen's available area the window may take at most.
#: The smallest size the window is laid out for (a first start never opens it smaller).
MINIMUM_SIZE = QSize(1024, 640)
SOURCES = ("action", "model", "run")  #: Message sources in the banner, shown in this order.
ICON_PX = 16  #: Side of the level icon, in pixels.
#: Runs of 24 characters or more without a space (paths, URLs) get break opportunities.
_LONG_RUN = re.compile(r"[^ \n]{24,}")
# After a path separator, a dot, a comma or an underscore inside such a run.
_BREAK_AFTER = re.compile(r"([/\\._,:=&?-])")
_ZERO_WIDTH_SPACE = "\u200b"
_SP = QtWidgets.QStyle.StandardPixmap


def default_window_size(available: QSize | None) -> QSize:
    """The window's first size: :data:`PREFERRED_SIZE`, shrunk to :data:`SCREEN_FRACTION` of a
    smaller ``available`` area but not below :data:`MINIMUM_SIZE` (or the whole area)."""
    if available is None or available.isEmpty():
        return QSize(PREFERRED_SIZE)
    fraction = QSize(
        min(PREFERRED_SIZE.width(), int(available.width() * SCREEN_FRACTION)),
        min(PREFERRED_SIZE.height(), int(available.height() * SCREEN_FRACTION)),
    )
    return fraction.expandedTo(MINIMUM_SIZE.boundedTo(available))


class Centre:
    """``window``'s central widget: the banner above the Layers and Overview tabs."""

    def __init__(self, window: QMainWindow) -> None:
        central = QWidget()
        layout = QtWidgets.QVBoxLayout(central, spacing=PAGE_MARGIN)
        layout.setContentsMargins(*[PAGE_MARGIN] * 4)
        self.banner = MessageBanner()
        layout.addWidget(self.banner)
        self.tabs = QtWidgets.QTabWidget()
        layout.addWidget(self.tabs, 1)
        window.setCentralWidget(central)
        self._layers_tab()
        self.tabs.addTab(self.layers_splitter, "Layers")
        self._overview_tab()
        self.tabs.addTab(self.overview_tab, "Overview")

    def _layers_tab(self) -> None:
        splitter = self.layers_splitter = QtWidgets.QSplitter(Qt.Orientation.Horizontal)
        scroll = self.layers_scroll = style.scroll_area(cls=_LayersScroll)
        scroll.setMinimumWidth(LAYERS_MIN_WIDTH)
        # Heights follow widths: a scroll bar that came and went would change the widths.
        scroll.setVerticalScrollBarPolicy(Qt.ScrollBarPolicy.ScrollBarAlwaysOn)
        container = QWidget()
        # Grown by each new row: only the new part paints, not every panel on screen again.
        container.setAttribute(Qt.WidgetAttribute.WA_StaticContents)
        self.layers_grid = scroll.grid = LayersGrid(container, spacing=PANEL_SPACING)
        self.layers_grid.setContentsMargins(*[PAGE_MARGIN] * 4)
        # Its text says what it waits for (PanelGrid).
        self.layers_placeholder = QLabel(alignment=Qt.AlignmentFlag.AlignCenter, wordWrap=True)
        self.layers_grid.addWidget(self.layers_placeholder, 0, 0)
        scroll.setWidget(container)
        splitter.addWidget(scroll)
        box = self.channel_box = QWidget()
        self.channel_view = ChannelView()  # its own title, step buttons and close button
        self.channel_view.close_requested.connect(lambda: box.setVisible(False))
        # Crowded (a scan's top images, "What it wants"), it scrolls: squeezed, rows overlapped.
        area = style.scroll_area(self.channel_view, frameless=True, wrap=True)
        bar = area.verticalScrollBar().sizeHint().width()
        area.setMinimumWidth(self.channel_view.minimumWidth() + bar)
        style.bare_box(box, vertical=True).addWidget(area, 1)
        splitter.addWidget(box)
        splitter.setChildrenCollapsible(False)
        splitter.setStretchFactor(0, 2)
        splitter.setStretchFactor(1, 3)
        box.setVisible(False)

    def _overview_tab(self) -> None:
        # The page scrolls, so the Overview never sets the window's minimum size.
        self.prediction_panel = PredictionPanel()
        self.saliency_panel = OverlayPanel("Saliency |d target / d input|")
        self.gradcam_panel = OverlayPanel("Grad-CAM", with_layer_selector=True)
        self.grad_flow_panel = GradFlowPanel()
        self.histogram_panel = HistogramPanel()
        self.stats_table = StatsTable()
        across = Qt.Orientation.Horizontal
        top = _splitter(across, self.prediction_panel, self.saliency_panel, self.gradcam_panel)
        bottom = _splitter(across, self.grad_flow_panel, self.histogram_panel, self.stats_table)
        rows = _splitter(Qt.Orientation.Vertical, top, bottom)
        #: The Overview's splitters: rows (vertical), top row, bottom row.
        self.overview_splitters = (rows, top, bottom)
        # Shares, not pixels; the ten-column statistics table gets the widest.
        for splitter, shares in ((top, (1, 1, 1)), (bottom, (2, 2, 3)), (rows, (1, 1))):
            splitter.setSizes([1000 * share for share in shares])
            for index, share in enumerate(shares):
                splitter.setStretchFactor(index, share)
        content = QWidget()
        QtWidgets.QVBoxLayout(content, contentsMargins=QMargins(*[PAGE_MARGIN] * 4)).addWidget(rows)
        page = self.overview_tab = style.scroll_area(
            name="overviewPage", frameless=True, cls=_OverviewPage
        )
        page.rows = (top, bottom)
        page.setWidget(content)


class _LayersScroll(QtWidgets.QScrollArea):
    """The Layers tab's scroll area; says when its viewport's width changes (grid columns)."""

    viewport_resized = Signal(int)
    _announced = -1
    grid: LayersGrid | None = None  # arranges its panels for the new width before its pass

    def resizeEvent(self, event: QResizeEvent) -> None:  # noqa: N802 - Qt name
        # The viewport's width changes only here (its bar is always on): columns before layout.
        if (width := self.viewport().width()) != self._announced:
            self._announced = width
            self.viewport_resized.emit(width)
            if self.grid is not None:
                self.grid.arrange(width)
        super().resizeEvent(event)


class LayersGrid(QtWidgets.QGridLayout):
    """The Layers tab's panel grid, whose container takes the rows' height before they are
    placed: Qt lays a grid out at once, before the scroll area grows it (rows squeezed)."""

    #: Run after each pass; True: it changed heights (pages re-made for the panels' widths).
    after_pass: Callable[[], bool] | None = None

    def arrange(self, width: int) -> None:
        """Each panel's sides stacked or side by side for its column's width in ``width`` before
        its height is asked (arranged after its resize, every panel was laid out twice)."""
        columns = 1 + max((self.getItemPosition(i)[1] for i in range(self.count())), default=0)
        room = (width - 2 * PAGE_MARGIN + PANEL_SPACING) // columns - PANEL_SPACING
        for panel in (self.itemAt(i).widget() for i in range(self.count())):
            if (arrange_for := getattr(panel, "arrange_for", None)) is not None:
                arrange_for(room)

    def setGeometry(self, rect: QRect) -> None:  # noqa: N802 - Qt name
        container = self.parentWidget()
        # Token panels have no height for width: their least heights must fit all the same.
        hfw = self.totalHeightForWidth(rect.width()) if self.hasHeightForWidth() else -1
        need = max(hfw, self.totalMinimumSize().height())
        if container is not None and container.height() < need:
            container.resize(container.width(), need)  # lays the grid out at that height
            return
        super().setGeometry(rect)
        if self.after_pass is not None and self.after_pass():
            self.setGeometry(rect)  # at the new pages' heights, before a paint at the old ones


class _OverviewPage(QtWidgets.QScrollArea):
    """The Overview's page: rows turn into columns when too narrow, so it scrolls only down."""

    rows: tuple[QtWidgets.QSplitter, ...] = ()  #: The splitters whose panels go across or down.

    def resizeEvent(self, event: QResizeEvent) -> None:  # noqa: N802 - Qt name
        super().resizeEvent(event)
        self.fit_rows(event.size().width())

    def fit_rows(self, width: int) -> None:
        """Lay each row across when ``width`` holds its panels' least widths, else down."""
        spare = 2 * PAGE_MARGIN + self.verticalScrollBar().sizeHint().width() + 2
        for row in self.rows:
            needed = sum(
                max(row.widget(i).minimumSizeHint().width(), row.widget(i).minimumWidth())
                for i in range(row.count())
            )
            needed += row.handleWidth() * max(0, row.count() - 1) + spare
            wanted = Qt.Orientation.Horizontal if width >= needed else Qt.Orientation.Vertical
            if row.orientation() != wanted:
                row.setOrientation(wanted)


def _splitter(orientation: Qt.Orientation, *widgets: QWidget) -> QtWidgets.QSplitter:
    splitter = QtWidgets.QSplitter(orientation, handleWidth=PANEL_SPACING)
    splitter.setChildrenCollapsible(False)  # a dragged handle never makes a panel vanish
    for widget in widgets:
        splitter.addWidget(widget)
    return splitter


class StatusWidgets:
    """The status bar of ``window``: its text, a busy bar and the last run's timing."""

    def __init__(self, window: QMainWindow) -> None:
        status = window.statusBar()
        self.status_label = ElidedLabel("Ready", steady=True)  # a live frame's: no window relayout
        status.addWidget(self.status_label, 1)
        # A busy indicator: a capture has no fraction to report.
        self.progress_bar = ProgressBar(maximum=0, maximumWidth=140, visible=False)
        status.addPermanentWidget(self.progress_bar)
        self.timing_label = ElidedLabel(grow=True)  #: The last run's timing and the memory held.
        status.addPermanentWidget(self.timing_label)


def breakable(text: str) -> str:
    """``text`` with zero-width breaks in long runs, so a long path cannot widen a wrapped label."""
    return _LONG_RUN.sub(lambda run: _BREAK_AFTER.sub(r"\1" + _ZERO_WIDTH_SPACE, run.group()), text)


class MessageBanner(QtWidgets.QFrame):
    """Warnings and errors under the toolbar until dismissed or replaced, grouped by source
    ("action", "model", "run") so a new run replaces only its own."""

    #: Each level's background, text colour and the style's icon (a glyph like "⛔" needs a
    #: font that may lack it).
    _LOOKS = {
        "error": (style.ROW_BAD_BACKGROUND, style.ERROR_TEXT, _SP.SP_MessageBoxCritical),
        "warning": ("#fff3cd", "#664d03", _SP.SP_MessageBoxWarning),
        "info": ("#e8f0fe", "#174ea6", _SP.SP_MessageBoxInformation),
    }

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setObjectName("messageBanner")
        self._messages: dict[str, list[tuple[str, str]]] = {}
        #: The technical details of a source's messages (a traceback), behind "Details".
        self._details: dict[str, str] = {}
        self.level = ""  #: The level whose icon is shown ("" while hidden).
        layout = QtWidgets.QHBoxLayout(self, spacing=6, contentsMargins=QMargins(6, 4, 4, 4))
        self.icon_label = QLabel()
        self.icon_label.setFixedSize(ICON_PX, ICON_PX)
        layout.addWidget(self.icon_label, 0, Qt.AlignmentFlag.AlignTop)
        self.label = QLabel(wordWrap=True, textFormat=Qt.TextFormat.PlainText)
        self.label.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        # Ignored: the label's minimum width (its longest word) must not set the window's.
        policy = QSizePolicy(QSizePolicy.Policy.Ignored, QSizePolicy.Policy.Preferred)
        policy.setHeightForWidth(True)
        self.label.setSizePolicy(policy)
        layout.addWidget(self.label, 1)
        # The message is one readable sentence; the traceback is one click away, not in it.
        self.details_button = QtWidgets.QToolButton(autoRaise=True, text="Details", visible=False)
        self.details_button.setToolTip("The technical details (traceback) of this message")
        self.details_button.clicked.connect(self.show_details)
        layout.addWidget(self.details_button, 0, Qt.AlignmentFlag.AlignTop)
        self.close_button = close = QtWidgets.QToolButton(autoRaise=True, toolTip="Dismiss")
        close.setIcon(close.style().standardIcon(_SP.SP_TitleBarCloseButton))
        close.setIconSize(QSize(12, 12))
        # Not connected to clear() directly: clicked(bool) would pass False as the source.
        close.clicked.connect(lambda _=False: self.clear())
        layout.addWidget(close, 0, Qt.AlignmentFlag.AlignTop)
        self.setVisible(False)

    def set_messages(
        self, source: str, messages: Sequence[tuple[str, str]], *, details: str = ""
    ) -> None:
        """Replace the ``(level, text)`` messages of ``source`` ("error", "warning" or
        "info"); ``details`` (a traceback) is shown by the Details button."""
        messages = list(messages)
        if self._messages.get(source, []) == messages and self._details.get(source, "") == details:
            return  # as shown (every live frame sets its run's messages again)
        self._messages[source], self._details[source] = messages, details
        self._refresh()

    def details(self) -> str:
        """The details of the messages shown (tracebacks), "" when there are none."""
        return "\n\n".join(d for s, d in self._details.items() if d and self._messages.get(s))

    def show_details(self) -> QtWidgets.QMessageBox:
        """Open the details in a window-modal box (not blocking)."""
        box = QtWidgets.QMessageBox(self.window(), icon=QtWidgets.QMessageBox.Icon.Information)
        box.setWindowTitle("Details — actviz")
        box.setText("\n".join(self.texts()))
        box.setDetailedText(self.details())
        box.setAttribute(Qt.WidgetAttribute.WA_DeleteOnClose)
        box.open()
        return box

    def clear(self, source: str | None = None) -> None:
        """Remove the messages of ``source`` (all of them when None)."""
        for kept in (self._messages, self._details):
            kept.clear() if source is None else kept.pop(source, None)
        self._refresh()

    def messages(self) -> list[tuple[str, str]]:
        """All ``(level, text)`` shown, in order; a text two sources say shows once."""
        order = [s for s in SOURCES if s in self._messages]
        order += [s for s in self._messages if s not in SOURCES]
        first: dict[str, str] = {}  # text: level, the first source's
        for s in order:
            for level, text in self._messages[s]:
                first.setdefault(text, level)
        return [(level, text) for text, level in first.items()]

    def texts(self) -> list[str]:
        """The texts shown, without their levels."""
        return [text for _, text in self.messages()]

    def _refresh(self) -> None:
        messages = self.messages()
        levels = {lv for lv, _ in messages}
        level = "error" if "error" in levels else "warning" if levels - {"info"} else "info"
        level = level if messages else ""  # hidden
        self.details_button.setVisible(bool(self.details()))
        if level and level != self.level:
            bg, fg, icon = self._LOOKS[level]
            self.setStyleSheet(
                f"#messageBanner {{ background: {bg}; border: 1px solid {fg}; "
                f"border-radius: 3px; }} #messageBanner QLabel {{ color: {fg}; }}"
            )
            self.icon_label.setPixmap(self.style().standardIcon(icon).pixmap(ICON_PX, ICON_PX))
        self.level = level
        mixed = len(levels) > 1
        names = {"error": "Error", "warning": "Warning", "info": "Note"}
        lines = [
            f"{names.get(lv, lv.capitalize())}: {text}" if mixed else text for lv, text in messages
        ]
        if len(lines) > 1 and not mixed:
            lines = [f"• {line}" for line in lines]
        full = "\n".join(lines)
        self.label.setText(breakable(full))
        self.label.setToolTip(full if len(full) > 200 else "")
        self.setVisible(bool(messages))


class WindowActions:
    """The window's actions, its toolbar's widgets and its menus, made for ``window``
    (``auto_run``: whether "Re-run automatically" starts checked)."""

    def __init__(self, window: QMainWindow, *, auto_run: bool = True) -> None:
        self._actions(window)
        self._toolbar(window)
        self._menus(window, auto_run)

    @property
    def colormap(self) -> str:
        """The colour map chosen in the toolbar."""
        return self.colormap_combo.currentText()

    def _actions(self, window: QMainWindow) -> None:
        def action(text: str, shortcut: Any = "", tip: str = "") -> QAction:
            act = QAction(text, window, shortcut=QKeySequence(shortcut), toolTip=tip or text)
            window.addAction(act)  # shortcuts work even when the menu bar is hidden
            return act

        self.open_model_action = action(
            "Open model…",
            QKeySequence.StandardKey.Open,
            "Open a torchvision model or a checkpoint / TorchScript / .pt2 / safetensors file (Ctrl+O)",
        )
        self.open_input_action = action(
            "Open input…",
            "Ctrl+I",
            "Open an image or a tensor file (Ctrl+I); you can also drop files on the window",
        )
        self.run_action = action("Run", "Ctrl+R", "Run forward and backward (Ctrl+R)")
        self.cancel_action = action(
            "Cancel", "Esc", "Cancel the running capture, load, export or dataset scan (Esc)"
        )
        self.export_all_action = action(
            "Export everything…",
            "Ctrl+E",
            "Write every captured array, image and stats file to a folder (Ctrl+E)",
        )
        self.export_png_action = action(
            "Export panel as PNG…",
            "Ctrl+Shift+P",
            "Save the selected layer's panel (or the current tab) as a PNG",
        )
        self.export_npy_action = action(
            "Export layer arrays (.npy)…",
            "Ctrl+Shift+E",
            "Save the selected layer's activation and gradient as .npy files",
        )
        self.quit_action = action("Quit", "Ctrl+Q", "Quit actviz (Ctrl+Q)")
        self.pin_action = action(
            "Pin this result",
            "Ctrl+P",
            "Keep the result shown now (with its capture) beside the newer ones (Ctrl+P)",
        )
        self.unpin_action = action("Unpin this result", "", "Let the result shown now go")
        self.unpin_all_action = action("Unpin all", "", "Let every pinned result go")
        #: Checkable: gradient magnitudes beside the activations.
        self.gradients_action = QAction("Gradients", window, checkable=True)
        self.gradients_action.setToolTip("Show the gradient magnitude beside each activation")
        #: The Export actions, in the File menu and the toolbar's Export button.
        self.exports = [self.export_all_action, self.export_png_action, self.export_npy_action]

    def _toolbar(self, window: QMainWindow) -> None:
        """Toolbar: open, sample picker, target selector, run/cancel, colour map, scale, export."""
        bar = window.addToolBar("Main")
        bar.setObjectName("mainToolBar")
        bar.setMovable(False)
        bar.addActions([self.open_model_action, self.open_input_action])
        #: Bundled sample images ("Sample…" first).
        self.sample_combo = QComboBox(minimumContentsLength=10)
        self.sample_combo.setToolTip("Pick a bundled sample image")
        bar.addWidget(self.sample_combo)
        bar.addSeparator()
        bar.addWidget(QLabel(" Target "))
        #: What the gradients are of (editable, completes class names).
        self.target_combo = combo = QComboBox(editable=True, minimumContentsLength=18)
        combo.setInsertPolicy(QComboBox.InsertPolicy.NoInsert)
        combo.setToolTip(
            "What the gradients are of: auto (top-1 logit), a class index, or a class name"
        )
        combo.addItem(AUTO_TARGET_TEXT)
        completer = QCompleter(combo.model(), combo, filterMode=Qt.MatchFlag.MatchContains)
        completer.setCaseSensitivity(Qt.CaseSensitivity.CaseInsensitive)
        completer.setCompletionMode(QCompleter.CompletionMode.PopupCompletion)
        combo.setCompleter(completer)
        bar.addWidget(self.target_combo)
        bar.addSeparator()
        bar.addActions([self.run_action, self.cancel_action])
        bar.addSeparator()
        from actviz.display.colormaps import AUTO, COLORMAPS

        self.colormap_combo = QComboBox(
            toolTip="Colour map of the feature maps; auto: diverging about 0 for signed layers, "
            "sequential for non-negative ones and |gradient|"
        )
        self.colormap_combo.addItems([AUTO, *COLORMAPS])
        bar.addWidget(self.colormap_combo)
        #: Per-channel or shared scale (the mode is the item's data).
        self.normalize_combo = combo = QComboBox(
            toolTip="Per-channel: each map stretched to its own range; shared: one range for the layer"
        )
        for mode in NORMALIZATIONS:
            combo.addItem("per-channel" if mode == "channel" else "shared scale", mode)
        bar.addWidget(self.normalize_combo)
        bar.addAction(self.gradients_action)
        bar.addSeparator()
        instant = QtWidgets.QToolButton.ToolButtonPopupMode.InstantPopup
        self.export_button = QtWidgets.QToolButton(popupMode=instant, text="Export")
        export_menu = QtWidgets.QMenu(self.export_button)
        export_menu.addActions(self.exports)
        self.export_button.setMenu(export_menu)
        bar.addWidget(self.export_button)

    def _menus(self, window: QMainWindow, auto_run: bool) -> None:
        """Menu bar: File, Run, Data, View."""
        menu = window.menuBar().addMenu("&File")
        menu.addAction(self.open_model_action)
        self.recent_models_menu = menu.addMenu("Recent models")
        menu.addAction(self.open_input_action)
        self.recent_inputs_menu = menu.addMenu("Recent inputs")
        menu.addSeparator()
        menu.addActions(self.exports)
        menu.addSeparator()
        menu.addAction(self.quit_action)
        run_menu = window.menuBar().addMenu("&Run")
        run_menu.addActions([self.run_action, self.cancel_action])
        run_menu.addSeparator()
        run_menu.addAction(self.pin_action)
        self.pins_menu = run_menu.addMenu("Pinned results")
        run_menu.addSeparator()
        #: Checkable: re-run automatically after changes.
        self.auto_run_action = run_menu.addAction("Re-run automatically")
        self.auto_run_action.setCheckable(True)
        self.auto_run_action.setChecked(auto_run)
        #: Checkable: the input goes to the model as one list of images (detectors).
        self.input_list_action = run_menu.addAction("Feed the input as a list of images")
        self.input_list_action.setCheckable(True)
        self.input_list_action.setToolTip(
            "Detection models take a list of (C, H, W) images; checked for models whose forward "
            "says so"
        )
        window.menuBar().addMenu("&Data")  # the dataset features add their entries
        #: View: the docks' show/hide actions are added to it as the docks are made.
        self.view_menu = window.menuBar().addMenu("&View")
        self.view_menu.addAction(self.gradients_action)
        cmap_menu = self.view_menu.addMenu("Colour map")
        group = QActionGroup(window)
        #: View > Colour map: one checkable action per colour map, by name.
        self.colormap_actions: dict[str, QAction] = {}
        combo = self.colormap_combo
        for i in range(combo.count()):
            name = combo.itemText(i)
            act = QAction(name, group, checkable=True, checked=name == combo.currentText())
            cmap_menu.addAction(act)
            self.colormap_actions[name] = act
            act.triggered.connect(lambda _=False, n=name: combo.setCurrentText(n))
        #: View > Reset window layout: docks back where a first start puts them.
        self.reset_layout_action = self.view_menu.addAction("Reset window layout")
        self.reset_layout_action.setToolTip(
            "Put the docks back where a first start puts them (Model on the left, Live closed)"
        )
        self.view_menu.addSeparator()  # the docks' show/hide entries follow
