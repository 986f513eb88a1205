"""The window's actions, toolbar and menus, built once like a ``setupUi`` (parts connect them)."""

from __future__ import annotations

from typing import Any

from PySide6.QtCore import Qt
from PySide6.QtGui import QAction, QActionGroup, QKeySequence
from PySide6.QtWidgets import QComboBox, QCompleter, QLabel, QMainWindow, QMenu, QToolButton

from actviz.core.targets import AUTO_TARGET_TEXT
from actviz.ui.window.settings import NORMALIZATIONS


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
        completer = QCompleter(combo.model(), combo)
        completer.setFilterMode(Qt.MatchFlag.MatchContains)
        completer.setCaseSensitivity(Qt.CaseSensitivity.CaseInsensitive)
        completer.setCompletionMode(QCompleter.CompletionMode.PopupCompletion)
        combo.setCompleter(completer)
        bar.addWidget(self.target_combo)
        bar.addSeparator()
        bar.addActions([self.run_action, self.cancel_action])
        bar.addSeparator()
        from actviz.display.colormaps import AUTO, COLORMAPS

        self.colormap_combo = QComboBox()
        self.colormap_combo.addItems([AUTO, *COLORMAPS])
        self.colormap_combo.setToolTip(
            "Colour map of the feature maps; auto: diverging about 0 for signed layers, "
            "sequential for non-negative ones and |gradient|"
        )
        bar.addWidget(self.colormap_combo)
        #: Per-channel or shared scale (the mode is the item's data).
        self.normalize_combo = combo = QComboBox()
        for mode in NORMALIZATIONS:
            combo.addItem("per-channel" if mode == "channel" else "shared scale", mode)
        combo.setToolTip(
            "Per-channel: each map stretched to its own range; shared: one range for the layer"
        )
        bar.addWidget(self.normalize_combo)
        bar.addAction(self.gradients_action)
        bar.addSeparator()
        self.export_button = QToolButton(popupMode=QToolButton.ToolButtonPopupMode.InstantPopup)
        self.export_button.setText("Export")
        export_menu = QMenu(self.export_button)
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
