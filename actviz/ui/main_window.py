"""The explorer window: a thin Qt layer over a :class:`~actviz.ui.session.Session` and a worker.

Widgets change the session (model, input, ticks, target); the session's events schedule a
debounced run; the :class:`~actviz.ui.worker.Worker` runs :func:`~actviz.ui.session.run_job` off
the GUI thread; the finished :class:`~actviz.ui.session.RunResult` (numpy only) is pushed into
passive panels through their typed ``set_`` methods. Nothing here blocks on a modal dialog in a
path the tests drive: errors and warnings go to the banner under the toolbar, and the untrusted
pickle confirmation is an injectable callable.
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np
from PySide6.QtCore import QModelIndex, QPoint, QSettings, Qt, QTimer, Signal
from PySide6.QtGui import (
    QAction,
    QActionGroup,
    QCloseEvent,
    QDragEnterEvent,
    QDropEvent,
    QKeySequence,
)
from PySide6.QtWidgets import (
    QAbstractItemView,
    QApplication,
    QComboBox,
    QCompleter,
    QDockWidget,
    QFileDialog,
    QFrame,
    QGridLayout,
    QHBoxLayout,
    QHeaderView,
    QLabel,
    QLineEdit,
    QMainWindow,
    QMenu,
    QProgressBar,
    QScrollArea,
    QSplitter,
    QTableWidget,
    QTableWidgetItem,
    QTabWidget,
    QToolButton,
    QTreeView,
    QVBoxLayout,
    QWidget,
)

from actviz.io.export import safe_name
from actviz.ui.panels.channel_view import ChannelView
from actviz.ui.panels.feature_map import LayerPanel
from actviz.ui.panels.grad_flow import GradFlowPanel
from actviz.ui.panels.histogram import HistogramPanel
from actviz.ui.panels.input_preview import InputPreview
from actviz.ui.panels.overlay import OverlayPanel
from actviz.ui.panels.prediction import PredictionPanel
from actviz.ui.panels.stats_table import StatsTable
from actviz.ui.session import (
    AUTO_TARGET_TEXT,
    RunRequest,
    RunResult,
    Session,
    prepare_result,
    run_job,
    target_choices,
)
from actviz.ui.settings import NORMALIZATIONS, AppSettings, split_recent_model
from actviz.ui.tree_model import (
    ModuleFilterProxy,
    ModuleTreeModel,
    NameRole,
    format_count,
    format_shape,
)
from actviz.ui.worker import Worker

log = logging.getLogger(__name__)

#: Files dropped with these suffixes open as models; anything else opens as an input.
MODEL_SUFFIXES = {".pt2", ".safetensors", ".pth", ".ckpt", ".ts", ".torchscript"}
IMAGE_FILTER = "Images (*.png *.jpg *.jpeg *.bmp *.gif *.tif *.tiff *.webp)"
TENSOR_FILTER = "Tensors (*.pt *.pth *.npy *.npz *.safetensors)"
MODEL_FILTER = "Models (*.pt *.pth *.ckpt *.pt2 *.safetensors *.ts *.torchscript *.bin)"
DEFAULT_DEBOUNCE_MS = 300
#: Minimum height of a layer panel showing a mosaic or heatmap, in pixels.
MAPS_PANEL_MIN_HEIGHT = 300
#: Message sources in the banner, shown in this order.
_SOURCES = ("action", "model", "run")

#: ``confirm_untrusted(parent, path, message) -> bool``: may the file be unpickled?
ConfirmUntrusted = Callable[[QWidget, str, str], bool]


def ask_untrusted(parent: QWidget, path: str, message: str) -> bool:
    """Default untrusted-pickle confirmation: a Yes/No question, No by default."""
    from actviz.ui.dialogs import confirm_untrusted_file

    return confirm_untrusted_file(parent, path, message)


# --------------------------------------------------------------------------------------------
# Small widgets
# --------------------------------------------------------------------------------------------


class MessageBanner(QFrame):
    """Warnings and errors under the toolbar; visible until dismissed or replaced.

    Messages are grouped by source ("action": the last thing the user did, "model": load
    warnings, "run": the last run's warnings and errors), so a new run replaces only its own.
    """

    _COLOURS = {"error": ("#f8d7da", "#842029"), "warning": ("#fff3cd", "#664d03")}

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setObjectName("messageBanner")
        self._messages: dict[str, list[tuple[str, str]]] = {}
        layout = QHBoxLayout(self)
        layout.setContentsMargins(8, 4, 4, 4)
        self.label = QLabel()
        self.label.setWordWrap(True)
        self.label.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        layout.addWidget(self.label, 1)
        close = QToolButton()
        close.setText("✕")
        close.setToolTip("Dismiss")
        close.setAutoRaise(True)
        close.clicked.connect(self.clear)
        layout.addWidget(close, 0, Qt.AlignmentFlag.AlignTop)
        self.setVisible(False)

    def set_messages(self, source: str, messages: Sequence[tuple[str, str]]) -> None:
        """Replace the ``(level, text)`` messages of ``source`` ("error" or "warning")."""
        self._messages[source] = list(messages)
        self._refresh()

    def add_message(self, source: str, level: str, text: str) -> None:
        self._messages.setdefault(source, []).append((level, text))
        self._refresh()

    def clear(self, source: str | None = None) -> None:
        if source is None:
            self._messages.clear()
        else:
            self._messages.pop(source, None)
        self._refresh()

    def messages(self) -> list[tuple[str, str]]:
        """All ``(level, text)`` shown, in display order."""
        order = [s for s in _SOURCES if s in self._messages]
        order += [s for s in self._messages if s not in _SOURCES]
        return [m for s in order for m in self._messages[s]]

    def texts(self) -> list[str]:
        return [text for _, text in self.messages()]

    def _refresh(self) -> None:
        messages = self.messages()
        if not messages:
            self.setVisible(False)
            self.label.clear()
            return
        level = "error" if any(lv == "error" for lv, _ in messages) else "warning"
        bg, fg = self._COLOURS[level]
        self.setStyleSheet(
            f"#messageBanner {{ background: {bg}; border: 1px solid {fg}; border-radius: 3px; }}"
            f" #messageBanner QLabel {{ color: {fg}; }}"
        )
        icons = {"error": "⛔", "warning": "⚠"}
        self.label.setText("\n".join(f"{icons.get(lv, '•')} {text}" for lv, text in messages))
        self.setVisible(True)


class ModuleDetails(QWidget):
    """Parameters and buffers (shape, dtype, norm) of the selected module, and its mode."""

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        layout = QVBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        self.header = QLabel("Select a module to see its parameters.")
        self.header.setWordWrap(True)
        self.header.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        layout.addWidget(self.header)
        self.table = QTableWidget(0, 5)
        self.table.setHorizontalHeaderLabels(["Name", "Kind", "Shape", "dtype", "L2 norm"])
        self.table.verticalHeader().setVisible(False)
        self.table.setEditTriggers(QAbstractItemView.EditTrigger.NoEditTriggers)
        self.table.horizontalHeader().setSectionResizeMode(QHeaderView.ResizeMode.ResizeToContents)
        self.table.horizontalHeader().setStretchLastSection(True)
        layout.addWidget(self.table, 1)

    def show_node(self, node: Any | None) -> None:
        """Show a :class:`~actviz.core.tree.ModuleNode` (None clears)."""
        self.table.setRowCount(0)
        if node is None:
            self.header.setText("Select a module to see its parameters.")
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
        rows = [("parameter", p) for p in node.parameters] + [("buffer", b) for b in node.buffers]
        self.table.setRowCount(len(rows))
        for r, (kind, info) in enumerate(rows):
            frozen = "" if kind == "buffer" or info.requires_grad else " (frozen)"
            values = [info.name, kind + frozen, format_shape(info.shape) or "scalar", info.dtype,
                      f"{info.norm:.4g}"]  # fmt: skip
            for c, text in enumerate(values):
                self.table.setItem(r, c, QTableWidgetItem(text))

    def row_texts(self) -> list[list[str]]:
        """The table's cells (tests and accessibility)."""
        return [
            [self.table.item(r, c).text() for c in range(self.table.columnCount())]
            for r in range(self.table.rowCount())
        ]


# --------------------------------------------------------------------------------------------
# Main window
# --------------------------------------------------------------------------------------------


class MainWindow(QMainWindow):
    """The actviz explorer.

    Parameters
    ----------
    session
        State to show; a new empty :class:`Session` when None.
    settings
        Persistent settings: an :class:`AppSettings`, a ``QSettings`` (tests point one at a
        temporary file) or None for the user's settings.
    confirm_untrusted
        ``(parent, path, message) -> bool`` asked before a full pickle is unpickled; the default
        shows a Yes/No question (No by default).
    debounce_ms
        Delay between the last change (input, ticks, target) and the automatic re-run.
    auto_run
        Re-run automatically after changes.

    Signals
    -------
    run_started()
        A capture was submitted to the worker.
    run_finished()
        A result reached the panels.
    run_failed(str)
        A run raised; the message is also in the banner and the previous panels stay.
    run_cancelled()
        The current run was cancelled.
    closed()
        The window closed and released its worker.
    """

    run_started = Signal()
    run_finished = Signal()
    run_failed = Signal(str)
    run_cancelled = Signal()
    closed = Signal()

    def __init__(
        self,
        session: Session | None = None,
        settings: AppSettings | QSettings | None = None,
        *,
        confirm_untrusted: ConfirmUntrusted | None = None,
        debounce_ms: int = DEFAULT_DEBOUNCE_MS,
        auto_run: bool = True,
        parent: QWidget | None = None,
    ) -> None:
        super().__init__(parent)
        self.session = session or Session()
        if not isinstance(settings, AppSettings):
            settings = AppSettings(settings)
        self.settings = settings
        self.confirm_untrusted: ConfirmUntrusted = confirm_untrusted or ask_untrusted
        self.auto_run = auto_run
        self.session.normalize = settings.normalize
        self.worker = Worker(self)
        self.layer_panels: dict[str, LayerPanel] = {}
        self._selected_layer: str | None = None
        self._open_channel: tuple[str, int] | None = None
        self._last_request: RunRequest | None = None
        self._run_kind = "run"
        self._closed = False
        self._samples: list[Path] = []
        self.setWindowTitle("actviz")
        self.setAcceptDrops(True)
        self.resize(1400, 900)

        self._debounce = QTimer(self)
        self._debounce.setSingleShot(True)
        self._debounce.setInterval(debounce_ms)
        self._debounce.timeout.connect(self._on_debounce_timeout)

        self._build_actions()
        self._build_toolbar()
        self._build_menus()
        self._build_centre()
        self._build_dock()
        self._build_status()
        self._apply_view_settings()

        self.worker.signals.started.connect(self._on_worker_started)
        self.worker.signals.progress.connect(self._on_worker_progress)
        self.worker.signals.finished.connect(self._on_worker_finished)
        self.worker.signals.errored.connect(self._on_worker_errored)
        self.worker.signals.cancelled.connect(self._on_worker_cancelled)

        self.session.model_changed.connect(self._on_session_model_changed)
        self.session.input_changed.connect(self._on_session_input_changed)
        self.session.ticks_changed.connect(self._on_session_ticks_changed)
        self.session.target_changed.connect(self._on_session_target_changed)

        geometry = settings.geometry
        if geometry is not None:
            self.restoreGeometry(geometry)
        state = settings.window_state
        if state is not None:
            self.restoreState(state)
        if self.session.model is not None:
            self._on_session_model_changed()
        if self.session.input is not None:
            self._on_session_input_changed()
        self._update_enabled()

    # ========================================================================== construction
    def _build_actions(self) -> None:
        def action(text: str, slot: Callable, shortcut: Any = None, tip: str = "") -> QAction:
            act = QAction(text, self)
            if shortcut is not None:
                act.setShortcut(QKeySequence(shortcut))
            act.setToolTip(tip or text)
            act.triggered.connect(slot)
            self.addAction(act)  # shortcuts work even when the menu bar is hidden
            return act

        self.open_model_action = action(
            "Open model…", self._on_open_model_triggered, QKeySequence.StandardKey.Open,
            "Open a torchvision model or a checkpoint / TorchScript / .pt2 / safetensors file (Ctrl+O)",
        )  # fmt: skip
        self.open_input_action = action(
            "Open input…", self._on_open_input_triggered, "Ctrl+I",
            "Open an image or a tensor file (Ctrl+I); you can also drop files on the window",
        )  # fmt: skip
        self.run_action = action("Run", self.run, "Ctrl+R", "Run forward and backward (Ctrl+R)")
        self.cancel_action = action("Cancel", self.cancel, "Esc", "Cancel the running capture")
        self.export_all_action = action(
            "Export everything…", self._on_export_all_triggered, "Ctrl+E",
            "Write every captured array, image and stats file to a folder (Ctrl+E)",
        )  # fmt: skip
        self.export_png_action = action(
            "Export panel as PNG…", self._on_export_png_triggered, "Ctrl+Shift+P",
            "Save the selected layer's panel (or the current tab) as a PNG",
        )  # fmt: skip
        self.export_npy_action = action(
            "Export layer arrays (.npy)…", self._on_export_npy_triggered, "Ctrl+Shift+E",
            "Save the selected layer's activation and gradient as .npy files",
        )  # fmt: skip
        self.quit_action = action("Quit", self.close, "Ctrl+Q", "Quit actviz (Ctrl+Q)")
        self.gradients_action = QAction("Gradients", self)
        self.gradients_action.setCheckable(True)
        self.gradients_action.setToolTip("Show the gradient magnitude beside each activation")
        self.gradients_action.toggled.connect(self._on_gradients_toggled)

    def _build_toolbar(self) -> None:
        bar = self.addToolBar("Main")
        bar.setObjectName("mainToolBar")
        bar.setMovable(False)
        bar.addAction(self.open_model_action)
        bar.addAction(self.open_input_action)
        self.sample_combo = QComboBox()
        self.sample_combo.setToolTip("Pick a bundled sample image")
        self.sample_combo.setMinimumContentsLength(10)
        self.sample_combo.activated.connect(self._on_sample_activated)
        bar.addWidget(self.sample_combo)
        self._fill_samples()
        bar.addSeparator()
        bar.addWidget(QLabel(" Target "))
        self.target_combo = QComboBox()
        self.target_combo.setEditable(True)
        self.target_combo.setInsertPolicy(QComboBox.InsertPolicy.NoInsert)
        self.target_combo.setMinimumContentsLength(18)
        self.target_combo.setToolTip(
            "What the gradients are of: auto (top-1 logit), a class index, or a class name"
        )
        self.target_combo.addItem(AUTO_TARGET_TEXT)
        completer = QCompleter(self.target_combo.model(), self.target_combo)
        completer.setFilterMode(Qt.MatchFlag.MatchContains)
        completer.setCaseSensitivity(Qt.CaseSensitivity.CaseInsensitive)
        completer.setCompletionMode(QCompleter.CompletionMode.PopupCompletion)
        self.target_combo.setCompleter(completer)
        self.target_combo.activated.connect(self._on_target_activated)
        self.target_combo.lineEdit().returnPressed.connect(self._on_target_entered)
        bar.addWidget(self.target_combo)
        bar.addSeparator()
        bar.addAction(self.run_action)
        bar.addAction(self.cancel_action)
        bar.addSeparator()
        from actviz.ui.panels.colormaps import COLORMAPS

        self.colormap_combo = QComboBox()
        self.colormap_combo.addItems(COLORMAPS)
        self.colormap_combo.setToolTip("Colour map of the feature maps")
        self.colormap_combo.currentTextChanged.connect(self._on_colormap_changed)
        bar.addWidget(self.colormap_combo)
        self.normalize_combo = QComboBox()
        for mode in NORMALIZATIONS:
            self.normalize_combo.addItem(
                "per-channel" if mode == "channel" else "shared scale", mode
            )
        self.normalize_combo.setToolTip(
            "Per-channel: each map stretched to its own range; shared: one range for the layer"
        )
        self.normalize_combo.currentIndexChanged.connect(self._on_normalize_changed)
        bar.addWidget(self.normalize_combo)
        bar.addAction(self.gradients_action)
        bar.addSeparator()
        self.export_button = QToolButton()
        self.export_button.setText("Export")
        self.export_button.setPopupMode(QToolButton.ToolButtonPopupMode.InstantPopup)
        export_menu = QMenu(self.export_button)
        export_menu.addAction(self.export_all_action)
        export_menu.addAction(self.export_png_action)
        export_menu.addAction(self.export_npy_action)
        self.export_button.setMenu(export_menu)
        bar.addWidget(self.export_button)

    def _build_menus(self) -> None:
        menu = self.menuBar().addMenu("&File")
        menu.addAction(self.open_model_action)
        self.recent_models_menu = menu.addMenu("Recent models")
        menu.addAction(self.open_input_action)
        self.recent_inputs_menu = menu.addMenu("Recent inputs")
        menu.addSeparator()
        menu.addAction(self.export_all_action)
        menu.addAction(self.export_png_action)
        menu.addAction(self.export_npy_action)
        menu.addSeparator()
        menu.addAction(self.quit_action)
        run_menu = self.menuBar().addMenu("&Run")
        run_menu.addAction(self.run_action)
        run_menu.addAction(self.cancel_action)
        self.auto_run_action = run_menu.addAction("Re-run automatically")
        self.auto_run_action.setCheckable(True)
        self.auto_run_action.setChecked(self.auto_run)
        self.auto_run_action.toggled.connect(self._on_auto_run_toggled)
        view_menu = self.menuBar().addMenu("&View")
        view_menu.addAction(self.gradients_action)
        cmap_menu = view_menu.addMenu("Colour map")
        group = QActionGroup(self)
        self._colormap_actions: dict[str, QAction] = {}
        for i in range(self.colormap_combo.count()):
            name = self.colormap_combo.itemText(i)
            act = cmap_menu.addAction(name)
            act.setCheckable(True)
            act.setChecked(name == self.colormap_combo.currentText())
            group.addAction(act)
            self._colormap_actions[name] = act
            act.triggered.connect(lambda _=False, n=name: self.colormap_combo.setCurrentText(n))
        self._refresh_recent_menus()

    def _build_centre(self) -> None:
        central = QWidget()
        layout = QVBoxLayout(central)
        layout.setContentsMargins(4, 4, 4, 4)
        layout.setSpacing(4)
        self.banner = MessageBanner()
        layout.addWidget(self.banner)
        self.tabs = QTabWidget()
        layout.addWidget(self.tabs, 1)
        self.setCentralWidget(central)

        # Layers tab: scrollable grid of LayerPanels | the clicked channel, large.
        self.layers_splitter = QSplitter(Qt.Orientation.Horizontal)
        self.layers_scroll = QScrollArea()
        self.layers_scroll.setWidgetResizable(True)
        self.layers_container = QWidget()
        self.layers_grid = QGridLayout(self.layers_container)
        self.layers_grid.setContentsMargins(2, 2, 2, 2)
        self.layers_grid.setSpacing(6)
        self.layers_placeholder = QLabel(
            "Tick layers in the module tree and press Run (Ctrl+R) to see their feature maps."
        )
        self.layers_placeholder.setAlignment(Qt.AlignmentFlag.AlignCenter)
        self.layers_placeholder.setWordWrap(True)
        self.layers_grid.addWidget(self.layers_placeholder, 0, 0)
        self.layers_scroll.setWidget(self.layers_container)
        self.layers_splitter.addWidget(self.layers_scroll)
        self.channel_box = QWidget()
        box_layout = QVBoxLayout(self.channel_box)
        box_layout.setContentsMargins(0, 0, 0, 0)
        head = QHBoxLayout()
        head.addWidget(QLabel("Channel"), 1)
        close_channel = QToolButton()
        close_channel.setText("✕")
        close_channel.setAutoRaise(True)
        close_channel.setToolTip("Close the channel view")
        close_channel.clicked.connect(lambda: self.channel_box.setVisible(False))
        head.addWidget(close_channel)
        box_layout.addLayout(head)
        self.channel_view = ChannelView()
        box_layout.addWidget(self.channel_view, 1)
        self.layers_splitter.addWidget(self.channel_box)
        self.layers_splitter.setStretchFactor(0, 3)
        self.layers_splitter.setStretchFactor(1, 2)
        self.channel_box.setVisible(False)
        self.tabs.addTab(self.layers_splitter, "Layers")

        # Overview tab.
        overview = QWidget()
        grid = QGridLayout(overview)
        grid.setContentsMargins(2, 2, 2, 2)
        grid.setSpacing(6)
        self.prediction_panel = PredictionPanel()
        self.saliency_panel = OverlayPanel("Saliency |d target / d input|")
        self.gradcam_panel = OverlayPanel("Grad-CAM", with_layer_selector=True)
        self.gradcam_panel.layer_changed.connect(self._on_gradcam_layer_changed)
        self.grad_flow_panel = GradFlowPanel()
        self.stats_table = StatsTable()
        self.stats_table.layer_selected.connect(self._on_stats_layer_selected)
        self.histogram_panel = HistogramPanel()
        grid.addWidget(self.prediction_panel, 0, 0)
        grid.addWidget(self.saliency_panel, 0, 1)
        grid.addWidget(self.gradcam_panel, 0, 2)
        grid.addWidget(self.grad_flow_panel, 1, 0)
        grid.addWidget(self.histogram_panel, 1, 1)
        grid.addWidget(self.stats_table, 1, 2)
        for c in range(3):
            grid.setColumnStretch(c, 1)
        grid.setRowStretch(0, 1)
        grid.setRowStretch(1, 1)
        self.overview_tab = overview
        self.tabs.addTab(overview, "Overview")

    def _build_dock(self) -> None:
        dock = QDockWidget("Model", self)
        dock.setObjectName("modelDock")
        dock.setFeatures(
            QDockWidget.DockWidgetFeature.DockWidgetMovable
            | QDockWidget.DockWidgetFeature.DockWidgetFloatable
        )
        panel = QWidget()
        layout = QVBoxLayout(panel)
        layout.setContentsMargins(4, 4, 4, 4)
        self.filter_edit = QLineEdit()
        self.filter_edit.setPlaceholderText("Filter modules by name or type, e.g. Conv2d")
        self.filter_edit.setClearButtonEnabled(True)
        self.filter_edit.textChanged.connect(self._on_filter_changed)
        layout.addWidget(self.filter_edit)
        self.tree_model = ModuleTreeModel(self.session, self)
        self.tree_proxy = ModuleFilterProxy(self)
        self.tree_proxy.setSourceModel(self.tree_model)
        self.tree_view = QTreeView()
        self.tree_view.setModel(self.tree_proxy)
        self.tree_view.setUniformRowHeights(True)
        self.tree_view.setAlternatingRowColors(True)
        self.tree_view.setContextMenuPolicy(Qt.ContextMenuPolicy.CustomContextMenu)
        self.tree_view.customContextMenuRequested.connect(self._on_tree_context_menu)
        self.tree_view.selectionModel().currentChanged.connect(self._on_tree_current_changed)
        header = self.tree_view.header()
        header.setSectionResizeMode(0, QHeaderView.ResizeMode.Interactive)
        header.resizeSection(0, 170)
        header.resizeSection(1, 110)
        header.resizeSection(2, 90)
        splitter = QSplitter(Qt.Orientation.Vertical)
        splitter.addWidget(self.tree_view)
        self.details = ModuleDetails()
        splitter.addWidget(self.details)
        preview_box = QWidget()
        preview_layout = QVBoxLayout(preview_box)
        preview_layout.setContentsMargins(0, 0, 0, 0)
        self.input_preview = InputPreview()
        preview_layout.addWidget(self.input_preview)
        splitter.addWidget(preview_box)
        splitter.setStretchFactor(0, 5)
        splitter.setStretchFactor(1, 2)
        splitter.setStretchFactor(2, 2)
        layout.addWidget(splitter, 1)
        dock.setWidget(panel)
        dock.setMinimumWidth(380)
        self.addDockWidget(Qt.DockWidgetArea.LeftDockWidgetArea, dock)
        self.model_dock = dock

    def _build_status(self) -> None:
        status = self.statusBar()
        self.status_label = QLabel("Ready")
        status.addWidget(self.status_label, 1)
        self.progress_bar = QProgressBar()
        self.progress_bar.setRange(0, 0)  # busy indicator: capture has no fraction to report
        self.progress_bar.setMaximumWidth(140)
        self.progress_bar.setVisible(False)
        status.addPermanentWidget(self.progress_bar)
        self.timing_label = QLabel("")
        status.addPermanentWidget(self.timing_label)

    def _apply_view_settings(self) -> None:
        s = self.settings
        for widget in (self.colormap_combo, self.normalize_combo):
            widget.blockSignals(True)
        if self.colormap_combo.findText(s.colormap) >= 0:
            self.colormap_combo.setCurrentText(s.colormap)
        self.normalize_combo.setCurrentIndex(max(0, self.normalize_combo.findData(s.normalize)))
        for widget in (self.colormap_combo, self.normalize_combo):
            widget.blockSignals(False)
        self.gradients_action.blockSignals(True)
        self.gradients_action.setChecked(s.show_gradients)
        self.gradients_action.blockSignals(False)
        current = self._colormap_actions.get(self.colormap_combo.currentText())
        if current is not None:
            current.setChecked(True)

    # ========================================================================== public API
    @property
    def colormap(self) -> str:
        return self.colormap_combo.currentText()

    @property
    def gradients_visible(self) -> bool:
        return self.gradients_action.isChecked()

    @property
    def result(self) -> RunResult | None:
        return self.session.result

    @property
    def selected_layer(self) -> str | None:
        return self._selected_layer

    def show_error(self, text: str, source: str = "action") -> None:
        """Show ``text`` as an error in the banner (never a blocking dialog)."""
        log.warning("%s", text)
        self.banner.set_messages(source, [("error", text)])

    def show_warning(self, text: str, source: str = "action") -> None:
        self.banner.set_messages(source, [("warning", text)])

    def load_demo(self, sample: str | None = None) -> bool:
        """Open the bundled demo model and one of its samples (the first when None)."""
        try:
            loaded = _open_model("demo")
        except Exception as exc:  # noqa: BLE001 - shown in the banner; the window stays usable
            self.show_error(f"Could not open the demo model: {_describe(exc)}")
            return False
        self._adopt_model(loaded)
        from actviz.io.demo import demo_samples

        samples = demo_samples()
        if samples:
            path = samples[0]
            if sample is not None:
                path = next((p for p in samples if sample in (p.name, p.stem)), path)
            self.open_input_source(str(path), remember=False)
        return True

    def open_default_input(self) -> bool:
        """Open the first bundled sample for the current model, quietly (used at start-up
        when no input was given); a hint is shown when it does not fit the model."""
        if not self._samples or self.session.model is None:
            return False
        try:
            loaded = _open_input(str(self._samples[0]), self.session)
        except Exception as exc:  # noqa: BLE001 - the model may simply not take images
            log.info("no default input: %s", exc)
            self.show_warning(
                "Open an input (Ctrl+I), drop a file on the window, or pick a sample."
            )
            return False
        self.session.set_loaded_input(loaded)
        return True

    def open_model_source(
        self,
        source: str,
        *,
        arch: str | None = None,
        weights: str | None = "DEFAULT",
        trust: bool = False,
    ) -> bool:
        """Open a model (zoo name, file, ``module:attr`` or "demo"); False if it failed.

        A full pickle asks :attr:`confirm_untrusted` first. On failure the banner says why and
        the previous model stays.
        """
        from actviz.io.errors import UntrustedFileError

        QApplication.setOverrideCursor(Qt.CursorShape.WaitCursor)
        try:
            try:
                loaded = _open_model(source, arch=arch, weights=weights, trust=trust)
            except UntrustedFileError as exc:
                if not self.confirm_untrusted(self, exc.path, str(exc)):
                    self.show_warning(f"Not opened: {exc.path} was not trusted.")
                    return False
                loaded = _open_model(source, arch=arch, weights=weights, trust=True)
        except Exception as exc:  # noqa: BLE001 - any failure keeps the previous model
            self.show_error(f"Could not open model {source!r}: {_describe(exc)}")
            return False
        finally:
            QApplication.restoreOverrideCursor()
        self._adopt_model(loaded)
        if source != "demo":
            self.settings.add_recent_model(str(source), arch)
            self._refresh_recent_menus()
        return True

    def set_model(
        self,
        model: Any,
        *,
        name: str | None = None,
        categories: Sequence[str] | None = None,
        layers: Sequence[str] | None = None,
    ) -> None:
        """Show an in-memory ``nn.Module`` (``explore``); ``layers`` are ticked (None: defaults)."""
        self._stop_current_run()
        self.banner.clear()
        self.session.set_model(model, name=name, categories=categories, ticks=layers)

    def open_input_source(self, source: str, *, remember: bool = True) -> bool:
        """Open an image or tensor file (or any source ``open_input`` knows); False on failure."""
        try:
            loaded = _open_input(source, self.session)
        except Exception as exc:  # noqa: BLE001 - shown in the banner; the old input stays
            self.show_error(f"Could not open input {str(source)!r}: {_describe(exc)}")
            return False
        self.banner.clear("action")
        self.session.set_loaded_input(loaded)
        if remember:
            self.settings.add_recent_input(str(source))
            self._refresh_recent_menus()
        return True

    def set_input(
        self, value: Any, *, image: np.ndarray | None = None, description: str = ""
    ) -> None:
        """Use an in-memory tensor (or tuple/dict of tensors) as the input."""
        self.session.set_input(
            value, source="", kind="tensor", image=image, description=description
        )

    def set_target_text(self, text: str) -> bool:
        """Set the target from text like the selector's ("auto", "3", "3: star", "star")."""
        try:
            self.session.set_target_text(text)
        except ValueError as exc:
            self.show_error(f"Target: {exc}")
            return False
        self.banner.clear("action")
        self._sync_target_combo()
        return True

    def tick(self, names: Sequence[str], ticked: bool = True) -> None:
        """Tick (or untick) layers by name."""
        self.session.set_ticked(names, ticked)

    def run(self) -> int | None:
        """Start a run now (Ctrl+R); returns its generation, or None when it cannot run."""
        self._debounce.stop()
        if self._closed:
            return None
        if not self.session.can_run():
            what = "a model" if self.session.model is None else "an input"
            self.show_warning(f"Open {what} first, then press Run.", source="run")
            return None
        request = self.session.make_request()
        self._last_request = request
        self._run_kind = "run"
        gen = self.worker.submit(lambda stop, progress: run_job(request, stop, progress))
        self._set_busy(True, "Running…")
        self.run_started.emit()
        return gen

    def cancel(self) -> None:
        """Cancel the running capture (Esc); the panels keep the previous result."""
        self._debounce.stop()
        if self.worker.cancel():
            self.status_label.setText("Cancelling…")

    def schedule_run(self) -> None:
        """Re-run after the debounce delay (restarted by every further change)."""
        if self.auto_run and not self._closed and self.session.can_run():
            self._debounce.start()

    def select_layer(self, name: str | None) -> None:
        """Make ``name`` the selected layer: histogram, export target, tree selection."""
        self._selected_layer = name
        for panel_name, panel in self.layer_panels.items():
            panel.setProperty("selected", panel_name == name)
            panel.setStyleSheet(
                "LayerPanel { border: 2px solid #3b6ea5; }" if panel_name == name else ""
            )
        self._update_histogram()
        if name is not None and name in self.layer_panels:
            self.layers_scroll.ensureWidgetVisible(self.layer_panels[name])

    def open_channel(self, name: str, channel: int) -> bool:
        """Show channel ``channel`` of layer ``name`` large, beside its gradient magnitude."""
        result = self.session.result
        if result is None or name not in result.layers:
            return False
        layer = result.layers[name]
        view = layer.view
        if view is None or view.kind != "maps" or not 0 <= channel < view.data.shape[0]:
            return False
        grad = None
        if layer.grad_view is not None and layer.grad_view.kind == "maps":
            grad = layer.grad_view.data[channel]
        self.channel_view.set_channel(name, channel, view.data[channel], grad)
        self._open_channel = (name, channel)
        if not self.channel_box.isVisible():
            self.channel_box.setVisible(True)
            width = max(self.layers_splitter.width(), 600)
            self.layers_splitter.setSizes([width * 3 // 5, width * 2 // 5])
        self.select_layer(name)
        return True

    def export_all(self, out_dir: str | Path) -> list[Path]:
        """Write everything the CLI's ``export`` writes for the current result to ``out_dir``."""
        result = self.session.result
        if result is None or result.capture is None:
            self.show_warning("Nothing to export yet: run first (Ctrl+R).")
            return []
        try:
            from actviz.io.export import export_capture
        except ImportError:
            self.show_error("Export is not available in this build (actviz.io.export missing).")
            return []
        out = Path(out_dir)
        inp = self.session.input
        gradcam = self.gradcam_panel.current_layer() or result.gradcam_default
        QApplication.setOverrideCursor(Qt.CursorShape.WaitCursor)
        try:
            paths = export_capture(
                result.capture,
                out,
                image=result.image,
                categories=self.session.categories,
                model_name=self.session.model_name,
                input_name=(Path(inp.source).name if inp and inp.source else "tensor"),
                cmap=self.colormap,
                gradcam_layer=gradcam if gradcam in result.grad_cams else None,
            )
        except Exception as exc:  # noqa: BLE001
            self.show_error(f"Export failed: {_describe(exc)}")
            return []
        finally:
            QApplication.restoreOverrideCursor()
        self.status_label.setText(f"Exported {len(paths)} files to {out}")
        return [Path(p) for p in paths]

    def export_panel_png(self, path: str | Path, panel: QWidget | None = None) -> Path | None:
        """Save ``panel`` (default: the selected layer's panel, else the current tab) as PNG."""
        if panel is None:
            panel = self._selected_panel()
        path = Path(path)
        try:
            if hasattr(panel, "export_png"):
                panel.export_png(path)
            else:
                pixmap = panel.grab()
                if pixmap.isNull() or not pixmap.save(str(path), "PNG"):
                    raise OSError(f"could not write {path}")
        except Exception as exc:  # noqa: BLE001
            self.show_error(f"PNG export failed: {_describe(exc)}")
            return None
        self.status_label.setText(f"Saved {path}")
        return path

    def export_layer_npy(self, out_dir: str | Path, name: str | None = None) -> list[Path]:
        """Save layer ``name``'s (default: the selected layer's) activation and gradient
        (full batch, as captured) as ``<name>.activation.npy`` / ``<name>.gradient.npy``."""
        result = self.session.result
        name = name if name is not None else self._selected_layer
        if result is None or result.capture is None or name is None or name not in result.capture:
            self.show_warning("Select a captured layer first (click it in the tree or a panel).")
            return []
        out = Path(out_dir)
        out.mkdir(parents=True, exist_ok=True)
        rec = result.capture[name]
        stem = safe_name(name)
        written = []
        for kind, tensor in (("activation", rec.tensor), ("gradient", rec.grad)):
            if tensor is None:
                continue
            path = out / f"{stem}.{kind}.npy"
            np.save(path, tensor.detach().cpu().numpy())
            written.append(path)
        self.status_label.setText(f"Saved {len(written)} arrays of {name} to {out}")
        return written

    # ========================================================================== session events
    def _on_session_model_changed(self) -> None:
        s = self.session
        self.setWindowTitle(f"actviz — {s.model_name}" if s.model_name else "actviz")
        self.tree_view.expandToDepth(1 if s.tree is not None and len(s.tree) < 400 else 0)
        self._clear_panels()
        self._sync_target_combo(rebuild=True)
        warnings = [("warning", w) for w in s.model_warnings]
        self.banner.set_messages("model", warnings)
        self.banner.clear("run")
        self.details.show_node(s.tree[""] if s.tree is not None else None)
        self._update_enabled()
        self.schedule_run()

    def _on_session_input_changed(self) -> None:
        inp = self.session.input
        if inp is not None:
            caption = inp.description or inp.source
            if inp.source and Path(inp.source).name not in caption:
                caption = f"{Path(inp.source).name} · {caption}"
            self.input_preview.set_image(inp.image, caption)
        self._update_enabled()
        self.schedule_run()

    def _on_session_ticks_changed(self, names: set[str]) -> None:
        self.schedule_run()

    def _on_session_target_changed(self) -> None:
        self.schedule_run()

    # ========================================================================== worker events
    def _on_debounce_timeout(self) -> None:
        if self.auto_run and self.session.can_run():
            self.run()

    def _on_worker_started(self, gen: int) -> None:
        self._set_busy(True, "Running…")

    def _on_worker_progress(self, gen: int, message: str) -> None:
        self.status_label.setText(message)

    def _on_worker_finished(self, gen: int, result: RunResult) -> None:
        self._set_busy(False)
        try:
            self._apply_result(result)
        except Exception as exc:  # noqa: BLE001 - a display bug must not take the window down
            log.exception("could not display the result")
            self.show_error(f"Could not display the result: {_describe(exc)}", source="run")
            self.run_failed.emit(str(exc))
            return
        self.run_finished.emit()

    def _on_worker_errored(self, gen: int, error: BaseException) -> None:
        self._set_busy(False)
        log.error("run failed", exc_info=(type(error), error, error.__traceback__))
        what = "Run failed" if self._run_kind == "run" else "Could not update the views"
        text = f"{what}: {_describe(error)}. The panels still show the previous result."
        self.show_error(text, source="run")
        self.status_label.setText(what)
        self.run_failed.emit(text)

    def _on_worker_cancelled(self, gen: int) -> None:
        self._set_busy(False)
        self.status_label.setText("Cancelled; the panels show the previous result.")
        self.run_cancelled.emit()

    # ========================================================================== results
    def _apply_result(self, result: RunResult) -> None:
        self.session.set_result(result)
        messages = [("error", e) for e in result.errors]
        messages += [("warning", w) for w in result.warnings]
        self.banner.set_messages("run", messages)
        if result.tree is not None:
            self.tree_model.update_tree(result.tree)
            self._show_current_details()

        # Layer panels: exactly the ticked layers that ran, in execution order.
        for name in [n for n in self.layer_panels if n not in result.layers]:
            panel = self.layer_panels.pop(name)
            self.layers_grid.removeWidget(panel)
            panel.setParent(None)
            panel.deleteLater()
        for name in result.shown:
            layer = result.layers[name]
            panel = self.layer_panels.get(name)
            if panel is None:
                panel = LayerPanel(name, module_type=layer.module_type)
                panel.channel_clicked.connect(self._on_panel_channel_clicked)
                self.layer_panels[name] = panel
            else:
                panel.set_module_type(layer.module_type)
            panel.set_colormap(self.colormap)
            # Mosaics need room to read; bars and numbers are fine at the panel's own minimum.
            if layer.view is not None and layer.view.kind in ("maps", "heatmap"):
                panel.setMinimumHeight(MAPS_PANEL_MIN_HEIGHT)
            if layer.view is not None:
                panel.set_activation(layer.view, layer.mosaic)
                panel.set_gradient(layer.grad_view, layer.grad_mosaic)
            else:
                panel.clear()
            panel.set_gradients_visible(self.gradients_visible)
        self.layer_panels = {name: self.layer_panels[name] for name in result.shown}
        self._layout_panels(result.shown)

        # Overview.
        self.prediction_panel.set_predictions(result.predictions)
        self.prediction_panel.set_target_text(f"Gradients of: {result.target_text}")
        for panel in (self.saliency_panel, self.gradcam_panel):
            if result.image is not None:
                panel.set_image(result.image)
            else:
                panel.clear()  # no stale picture from an earlier image input
        inp = self.session.input
        if inp is not None and inp.image is None and result.image is not None:
            # A tensor input that looks like an image: preview it as the overlays show it.
            self.input_preview.set_image(result.image, inp.description or "tensor input")
        if result.saliency is not None:
            self.saliency_panel.set_heat(result.saliency)
        else:
            self.saliency_panel.set_heat(None)
            self.saliency_panel.set_message(result.saliency_message)
        self.gradcam_panel.set_layers(list(result.grad_cams), result.gradcam_default)
        self._show_gradcam(result.gradcam_default)
        self.grad_flow_panel.set_norms(result.grad_norm_names, result.grad_norms)
        self.stats_table.set_rows(result.stats_rows())
        if self._selected_layer not in result.layers:
            self._selected_layer = result.shown[-1] if result.shown else None
        self.select_layer(self._selected_layer)
        if self.channel_box.isVisible() and self._open_channel is not None:
            # Keep the opened channel in step with the new values (or close it if it is gone).
            if not self.open_channel(*self._open_channel):
                self.channel_box.setVisible(False)
                self._open_channel = None

        took = (
            f"ran in {result.elapsed_s * 1000:.0f} ms"
            if result.elapsed_s < 10
            else (f"ran in {result.elapsed_s:.1f} s")
        )
        self.timing_label.setText(f"{took} · {_fmt_bytes(result.nbytes)} held")
        self.status_label.setText(f"{len(result.shown)} layer(s) · target {result.target_text}")

    def _layout_panels(self, order: Sequence[str]) -> None:
        while self.layers_grid.count():
            self.layers_grid.takeAt(0)
        self.layers_placeholder.setVisible(not order)
        if not order:
            self.layers_grid.addWidget(self.layers_placeholder, 0, 0)
            return
        columns = 2 if self.layers_scroll.viewport().width() >= 1300 else 1
        for i, name in enumerate(order):
            self.layers_grid.addWidget(self.layer_panels[name], i // columns, i % columns)
            self.layer_panels[name].setVisible(True)

    def _clear_panels(self) -> None:
        for panel in self.layer_panels.values():
            self.layers_grid.removeWidget(panel)
            panel.setParent(None)
            panel.deleteLater()
        self.layer_panels.clear()
        self._layout_panels([])
        self.channel_box.setVisible(False)
        self._selected_layer = None
        for panel in (
            self.prediction_panel,
            self.saliency_panel,
            self.gradcam_panel,
            self.grad_flow_panel,
            self.stats_table,
            self.histogram_panel,
        ):
            panel.clear()
        self.timing_label.clear()

    def _show_gradcam(self, name: str | None) -> None:
        result = self.session.result
        if result is None:
            return
        if name is None or name not in result.grad_cams:
            self.gradcam_panel.set_heat(None)
            self.gradcam_panel.set_message(
                "Grad-CAM needs a ticked layer with a spatial (N, C, H, W) output and an image input."
            )
            return
        self.gradcam_panel.set_heat(result.grad_cams[name])

    def _update_histogram(self) -> None:
        result = self.session.result
        name = self._selected_layer
        if result is None or name is None or name not in result.layers:
            self.histogram_panel.clear()
            return
        layer = result.layers[name]
        if layer.hist is None:
            self.histogram_panel.clear()
            return
        counts, edges = layer.hist
        self.histogram_panel.set_histogram(f"{name} · values", counts, edges)

    def _selected_panel(self) -> QWidget:
        if self.tabs.currentWidget() is self.layers_splitter:
            if self._selected_layer in self.layer_panels:
                return self.layer_panels[self._selected_layer]
            return self.layers_scroll.widget()
        return self.tabs.currentWidget()

    # ========================================================================== widget slots
    def _on_panel_channel_clicked(self, name: str, channel: int) -> None:
        self.open_channel(name, channel)

    def _on_stats_layer_selected(self, name: str) -> None:
        self.select_layer(name)

    def _on_gradcam_layer_changed(self, name: str) -> None:
        if name:
            self.session.gradcam_layer = name
            self._show_gradcam(name)

    def _on_filter_changed(self, text: str) -> None:
        self.tree_proxy.set_text(text)
        if text:
            self.tree_view.expandAll()

    def _on_tree_current_changed(self, current: QModelIndex, _previous: QModelIndex) -> None:
        self._show_current_details()
        name = current.data(NameRole) if current.isValid() else None
        result = self.session.result
        if name is not None and result is not None and name in result.layers:
            self.select_layer(name)

    def _show_current_details(self) -> None:
        index = self.tree_view.currentIndex()
        tree = self.tree_model.tree
        name = index.data(NameRole) if index.isValid() else None
        if tree is None or name is None or name not in tree:
            return
        self.details.show_node(tree[name])

    def _on_tree_context_menu(self, pos: QPoint) -> None:
        index = self.tree_view.indexAt(pos)
        menu = self.tree_context_menu(index.data(NameRole) if index.isValid() else None)
        menu.exec(self.tree_view.viewport().mapToGlobal(pos))

    def tree_context_menu(self, name: str | None) -> QMenu:
        """The module tree's context menu for row ``name`` (built, not shown)."""
        menu = QMenu(self)
        tree = self.session.tree
        if name is not None and tree is not None and name in tree:
            node = tree[name]
            label = name or "the model"
            menu.addAction(
                f"Tick all leaves below {label}", lambda: self.session.tick_leaves_below(name)
            )
            menu.addAction(
                f"Tick all {node.type_name} modules", lambda: self.session.tick_type(node.type_name)
            )
            below = [name, *tree.descendants(name)]
            menu.addAction(
                f"Untick {label} and below", lambda: self.session.set_ticked(below, False)
            )
            menu.addSeparator()
        menu.addAction("Untick all", self.session.untick_all)
        return menu

    def _on_target_activated(self, index: int) -> None:
        self.set_target_text(self.target_combo.itemText(index))

    def _on_target_entered(self) -> None:
        self.set_target_text(self.target_combo.currentText())

    def _on_sample_activated(self, index: int) -> None:
        if index <= 0 or index > len(self._samples):
            return
        self.open_input_source(str(self._samples[index - 1]), remember=False)
        self.sample_combo.setCurrentIndex(0)

    def _on_colormap_changed(self, name: str) -> None:
        self.settings.colormap = name
        if name in self._colormap_actions:
            self._colormap_actions[name].setChecked(True)
        for panel in self.layer_panels.values():
            panel.set_colormap(name)
        if hasattr(self.channel_view, "set_colormap"):
            self.channel_view.set_colormap(name)

    def _on_normalize_changed(self, _index: int) -> None:
        mode = self.normalize_combo.currentData()
        self.settings.normalize = mode
        self.session.normalize = mode
        result, request = self.session.result, self._last_request
        if self.worker.is_busy() and self._run_kind == "run":
            self.run()  # a newer capture is on its way: redo it with the new setting
            return
        if result is None or result.capture is None or request is None:
            return
        # Re-prepare the mosaics from the stored capture: no new forward pass needed.
        request = dataclasses.replace(request, normalize=mode)
        self._last_request = request
        self._run_kind = "prepare"
        cap = result.capture
        self.worker.submit(
            lambda stop, progress: prepare_result(cap, request, should_stop=stop, progress=progress)
        )
        self._set_busy(True, "Updating views…")

    def _on_gradients_toggled(self, visible: bool) -> None:
        self.settings.show_gradients = visible
        for panel in self.layer_panels.values():
            panel.set_gradients_visible(visible)

    def _on_auto_run_toggled(self, on: bool) -> None:
        self.auto_run = on

    # ========================================================================== file actions
    def _on_open_model_triggered(self) -> None:
        from actviz.ui.dialogs import OpenModelDialog

        dialog = OpenModelDialog(self, recent=self.settings.recent_models())
        if dialog.exec() != OpenModelDialog.DialogCode.Accepted:
            return
        spec = dialog.spec()
        if spec is not None:
            self.open_model_source(spec.source, arch=spec.arch, weights=spec.weights)

    def _on_open_input_triggered(self) -> None:
        start = self.settings.recent_inputs()[0] if self.settings.recent_inputs() else ""
        path, _ = QFileDialog.getOpenFileName(
            self,
            "Open input",
            str(Path(start).parent) if start else "",
            ";;".join([IMAGE_FILTER, TENSOR_FILTER, "All files (*)"]),
        )
        if path:
            self.open_input_source(path)

    def _on_export_all_triggered(self) -> None:
        out = QFileDialog.getExistingDirectory(self, "Export everything to folder")
        if out:
            self.export_all(out)

    def _on_export_png_triggered(self) -> None:
        name = safe_name(self._selected_layer or "panel")
        path, _ = QFileDialog.getSaveFileName(
            self, "Save panel as PNG", f"{name}.png", "PNG (*.png)"
        )
        if path:
            self.export_panel_png(path)

    def _on_export_npy_triggered(self) -> None:
        out = QFileDialog.getExistingDirectory(self, "Save layer arrays to folder")
        if out:
            self.export_layer_npy(out)

    def _refresh_recent_menus(self) -> None:
        self.recent_models_menu.clear()
        for entry in self.settings.recent_models():
            source, arch = split_recent_model(entry)
            text = f"{source}  (arch {arch})" if arch else source
            self.recent_models_menu.addAction(
                text, lambda s=source, a=arch: self.open_model_source(s, arch=a)
            )
        self.recent_models_menu.setEnabled(not self.recent_models_menu.isEmpty())
        self.recent_inputs_menu.clear()
        for source in self.settings.recent_inputs():
            self.recent_inputs_menu.addAction(source, lambda s=source: self.open_input_source(s))
        self.recent_inputs_menu.setEnabled(not self.recent_inputs_menu.isEmpty())

    def _fill_samples(self) -> None:
        try:
            from actviz.io.demo import demo_samples

            self._samples = demo_samples()
        except Exception:  # noqa: BLE001 - no samples is fine
            self._samples = []
        self.sample_combo.clear()
        self.sample_combo.addItem("Sample…")
        for path in self._samples:
            self.sample_combo.addItem(path.stem)
        self.sample_combo.setEnabled(bool(self._samples))

    # ========================================================================== drag and drop
    def dragEnterEvent(self, event: QDragEnterEvent) -> None:  # noqa: N802
        if _local_files(event.mimeData()):
            event.acceptProposedAction()
        else:
            event.ignore()

    def dragMoveEvent(self, event: Any) -> None:  # noqa: N802
        if _local_files(event.mimeData()):
            event.acceptProposedAction()

    def dropEvent(self, event: QDropEvent) -> None:  # noqa: N802
        files = _local_files(event.mimeData())
        if not files:
            event.ignore()
            return
        event.acceptProposedAction()
        # Defer: opening a model can take a moment and the drag source waits for this return.
        QTimer.singleShot(0, lambda: self.open_dropped(files[0]))

    def open_dropped(self, path: str | Path) -> bool:
        """Open a dropped file: models by suffix, anything else as an input."""
        path = Path(path)
        if path.suffix.lower() in MODEL_SUFFIXES:
            return self.open_model_source(str(path))
        return self.open_input_source(str(path))

    # ========================================================================== helpers
    def _set_busy(self, busy: bool, text: str = "") -> None:
        busy = busy and self.worker.is_busy()
        self.progress_bar.setVisible(busy)
        self.cancel_action.setEnabled(busy)
        if text:
            self.status_label.setText(text)

    def _update_enabled(self) -> None:
        can_run = self.session.can_run()
        self.run_action.setEnabled(can_run)
        self.cancel_action.setEnabled(self.worker.is_busy())

    def _stop_current_run(self) -> None:
        self._debounce.stop()
        self.worker.cancel()

    def _adopt_model(self, loaded: Any) -> None:
        self._stop_current_run()
        self.banner.clear()
        gradcam = None
        if loaded.source == "demo" or loaded.kind == "demo":
            from actviz.io.demo import DEMO_GRADCAM_LAYER

            gradcam = DEMO_GRADCAM_LAYER
        old_input = self.session.input_path
        self.session.set_loaded_model(loaded, gradcam_layer=gradcam)
        if old_input is not None:
            # The input is re-read so the new model's transforms (size, normalisation) apply.
            self.open_input_source(str(old_input), remember=False)

    def _sync_target_combo(self, rebuild: bool = False) -> None:
        combo = self.target_combo
        combo.blockSignals(True)
        if rebuild:
            combo.clear()
            combo.addItems(target_choices(self.session.categories))
        target = self.session.target
        if target is None:
            combo.setCurrentIndex(0)
        elif self.session.categories and 0 <= target < len(self.session.categories):
            combo.setCurrentIndex(target + 1)
        else:
            combo.setEditText(str(target))
        combo.blockSignals(False)

    def closeEvent(self, event: QCloseEvent) -> None:  # noqa: N802
        if not self._closed:
            self.shutdown()
        super().closeEvent(event)

    def shutdown(self) -> None:
        """Stop the worker (waiting for it, so no hook outlives the window) and save settings."""
        if self._closed:
            return
        self._closed = True
        self._debounce.stop()
        self.worker.shutdown()
        try:
            self.settings.geometry = self.saveGeometry()
            self.settings.window_state = self.saveState()
            self.settings.sync()
        except Exception:  # noqa: BLE001 - settings must never block closing
            log.exception("could not save settings")
        for event, slot in (
            (self.session.model_changed, self._on_session_model_changed),
            (self.session.input_changed, self._on_session_input_changed),
            (self.session.ticks_changed, self._on_session_ticks_changed),
            (self.session.target_changed, self._on_session_target_changed),
        ):
            event.disconnect(slot)
        self.tree_model.detach()
        self.closed.emit()


# --------------------------------------------------------------------------------------------
# module helpers
# --------------------------------------------------------------------------------------------


def _open_model(
    source: str, *, arch: str | None = None, weights: str | None = "DEFAULT", trust: bool = False
) -> Any:
    from actviz.io.models import open_model

    return open_model(source, arch=arch, weights=weights, trust=trust)


def _open_input(source: str, session: Session) -> Any:
    from actviz.io.inputs import open_input

    return open_input(source, model=session.model, loaded_model=session.loaded_model)


def _describe(exc: BaseException) -> str:
    from actviz.io.errors import ActvizError

    text = str(exc).strip() or type(exc).__name__
    if isinstance(exc, ActvizError):
        return text
    return f"{type(exc).__name__}: {text}"


def _local_files(mime: Any) -> list[str]:
    if mime is None or not mime.hasUrls():
        return []
    return [url.toLocalFile() for url in mime.urls() if url.isLocalFile() and url.toLocalFile()]


def _fmt_bytes(n: float) -> str:
    for unit in ("B", "KiB", "MiB", "GiB"):
        if n < 1024 or unit == "GiB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    return f"{n:.1f} GiB"


__all__ = ["MainWindow", "MessageBanner", "ModuleDetails", "format_count"]
