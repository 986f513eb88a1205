"""The window's actions, toolbar and menus (built once, like a ``setupUi``).

Each builder creates widgets, stores them on the window under the names its public API
documents (``run_action``, ``target_combo``, ``recent_models_menu``, ...) and connects them to
the window's slots.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from PySide6.QtCore import Qt
from PySide6.QtGui import QAction, QActionGroup, QKeySequence
from PySide6.QtWidgets import QComboBox, QCompleter, QLabel, QMenu, QToolButton

from actviz.ui.session import AUTO_TARGET_TEXT
from actviz.ui.settings import NORMALIZATIONS

if TYPE_CHECKING:  # pragma: no cover
    from actviz.ui.main_window import MainWindow


def build_actions(window: MainWindow) -> None:
    """Create the window's ``QAction``\\ s (open, run, cancel, export, quit, gradients)."""

    def action(text: str, slot: Callable, shortcut: Any = None, tip: str = "") -> QAction:
        act = QAction(text, window)
        if shortcut is not None:
            act.setShortcut(QKeySequence(shortcut))
        act.setToolTip(tip or text)
        act.triggered.connect(slot)
        window.addAction(act)  # shortcuts work even when the menu bar is hidden
        return act

    window.open_model_action = action(
        "Open model…", window._on_open_model_triggered, QKeySequence.StandardKey.Open,
        "Open a torchvision model or a checkpoint / TorchScript / .pt2 / safetensors file (Ctrl+O)",
    )  # fmt: skip
    window.open_input_action = action(
        "Open input…", window._on_open_input_triggered, "Ctrl+I",
        "Open an image or a tensor file (Ctrl+I); you can also drop files on the window",
    )  # fmt: skip
    window.run_action = action("Run", window.run, "Ctrl+R", "Run forward and backward (Ctrl+R)")
    window.cancel_action = action(
        "Cancel", window.cancel, "Esc", "Cancel the running capture, load or export (Esc)"
    )
    window.export_all_action = action(
        "Export everything…", window._on_export_all_triggered, "Ctrl+E",
        "Write every captured array, image and stats file to a folder (Ctrl+E)",
    )  # fmt: skip
    window.export_png_action = action(
        "Export panel as PNG…", window._on_export_png_triggered, "Ctrl+Shift+P",
        "Save the selected layer's panel (or the current tab) as a PNG",
    )  # fmt: skip
    window.export_npy_action = action(
        "Export layer arrays (.npy)…", window._on_export_npy_triggered, "Ctrl+Shift+E",
        "Save the selected layer's activation and gradient as .npy files",
    )  # fmt: skip
    window.quit_action = action("Quit", window.close, "Ctrl+Q", "Quit actviz (Ctrl+Q)")
    window.pin_action = action(
        "Pin this result", window.pin_result, "Ctrl+P",
        "Keep the result shown now (with its capture) beside the newer ones (Ctrl+P)",
    )  # fmt: skip
    window.unpin_action = action(
        "Unpin this result", window.unpin_shown, None, "Let the result shown now go"
    )
    window.unpin_all_action = action(
        "Unpin all", window.unpin_all, None, "Let every pinned result go"
    )
    window.gradients_action = QAction("Gradients", window)
    window.gradients_action.setCheckable(True)
    window.gradients_action.setToolTip("Show the gradient magnitude beside each activation")
    window.gradients_action.toggled.connect(window._on_gradients_toggled)


def build_toolbar(window: MainWindow) -> None:
    """Toolbar: open, sample picker, target selector, run/cancel, colour map, scale, export."""
    bar = window.addToolBar("Main")
    bar.setObjectName("mainToolBar")
    bar.setMovable(False)
    bar.addAction(window.open_model_action)
    bar.addAction(window.open_input_action)
    window.sample_combo = QComboBox()
    window.sample_combo.setToolTip("Pick a bundled sample image")
    window.sample_combo.setMinimumContentsLength(10)
    window.sample_combo.activated.connect(window._on_sample_activated)
    bar.addWidget(window.sample_combo)
    window._fill_samples()
    bar.addSeparator()
    bar.addWidget(QLabel(" Target "))
    window.target_combo = _target_combo(window)
    bar.addWidget(window.target_combo)
    bar.addSeparator()
    bar.addAction(window.run_action)
    bar.addAction(window.cancel_action)
    bar.addSeparator()
    from actviz.ui.panels.colormaps import COLORMAPS

    window.colormap_combo = QComboBox()
    window.colormap_combo.addItems(COLORMAPS)
    window.colormap_combo.setToolTip("Colour map of the feature maps")
    window.colormap_combo.currentTextChanged.connect(window._on_colormap_changed)
    bar.addWidget(window.colormap_combo)
    window.normalize_combo = QComboBox()
    for mode in NORMALIZATIONS:
        window.normalize_combo.addItem("per-channel" if mode == "channel" else "shared scale", mode)
    window.normalize_combo.setToolTip(
        "Per-channel: each map stretched to its own range; shared: one range for the layer"
    )
    window.normalize_combo.currentIndexChanged.connect(window._on_normalize_changed)
    bar.addWidget(window.normalize_combo)
    bar.addAction(window.gradients_action)
    bar.addSeparator()
    window.export_button = QToolButton()
    window.export_button.setText("Export")
    window.export_button.setPopupMode(QToolButton.ToolButtonPopupMode.InstantPopup)
    export_menu = QMenu(window.export_button)
    export_menu.addAction(window.export_all_action)
    export_menu.addAction(window.export_png_action)
    export_menu.addAction(window.export_npy_action)
    window.export_button.setMenu(export_menu)
    bar.addWidget(window.export_button)


def _target_combo(window: MainWindow) -> QComboBox:
    combo = QComboBox()
    combo.setEditable(True)
    combo.setInsertPolicy(QComboBox.InsertPolicy.NoInsert)
    combo.setMinimumContentsLength(18)
    combo.setToolTip(
        "What the gradients are of: auto (top-1 logit), a class index, or a class name"
    )
    combo.addItem(AUTO_TARGET_TEXT)
    # Typing part of a class name ("retriev") offers the matching "207: golden retriever" rows.
    completer = QCompleter(combo.model(), combo)
    completer.setFilterMode(Qt.MatchFlag.MatchContains)
    completer.setCaseSensitivity(Qt.CaseSensitivity.CaseInsensitive)
    completer.setCompletionMode(QCompleter.CompletionMode.PopupCompletion)
    combo.setCompleter(completer)
    combo.activated.connect(window._on_target_activated)
    combo.lineEdit().returnPressed.connect(window._on_target_entered)
    return combo


def build_menus(window: MainWindow) -> None:
    """Menu bar: File (open, recents, export, quit), Run (run, cancel, pins, auto), View."""
    menu = window.menuBar().addMenu("&File")
    menu.addAction(window.open_model_action)
    window.recent_models_menu = menu.addMenu("Recent models")
    menu.addAction(window.open_input_action)
    window.recent_inputs_menu = menu.addMenu("Recent inputs")
    menu.addSeparator()
    menu.addAction(window.export_all_action)
    menu.addAction(window.export_png_action)
    menu.addAction(window.export_npy_action)
    menu.addSeparator()
    menu.addAction(window.quit_action)
    run_menu = window.menuBar().addMenu("&Run")
    run_menu.addAction(window.run_action)
    run_menu.addAction(window.cancel_action)
    run_menu.addSeparator()
    run_menu.addAction(window.pin_action)
    window.pins_menu = run_menu.addMenu("Pinned results")
    window._refresh_pins_menu()
    run_menu.addSeparator()
    window.auto_run_action = run_menu.addAction("Re-run automatically")
    window.auto_run_action.setCheckable(True)
    window.auto_run_action.setChecked(window.auto_run)
    window.auto_run_action.toggled.connect(window._on_auto_run_toggled)
    view_menu = window.menuBar().addMenu("&View")
    view_menu.addAction(window.gradients_action)
    cmap_menu = view_menu.addMenu("Colour map")
    group = QActionGroup(window)
    window._colormap_actions = {}
    combo = window.colormap_combo
    for i in range(combo.count()):
        name = combo.itemText(i)
        act = cmap_menu.addAction(name)
        act.setCheckable(True)
        act.setChecked(name == combo.currentText())
        group.addAction(act)
        window._colormap_actions[name] = act
        act.triggered.connect(lambda _=False, n=name: combo.setCurrentText(n))
    window._refresh_recent_menus()


__all__ = ["build_actions", "build_menus", "build_toolbar"]
