"""The window's actions, toolbar and menus, built once like a ``setupUi``; each part of the
window connects the actions it drives.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from PySide6.QtCore import Qt
from PySide6.QtGui import QAction, QActionGroup, QKeySequence
from PySide6.QtWidgets import QComboBox, QCompleter, QLabel, QMainWindow, QMenu, QToolButton

from actviz.core.targets import AUTO_TARGET_TEXT
from actviz.ui.window.settings import NORMALIZATIONS


@dataclass(eq=False)
class WindowActions:
    """The window's actions, its toolbar's widgets and its menus."""

    open_model_action: QAction
    open_input_action: QAction
    run_action: QAction
    cancel_action: QAction
    export_all_action: QAction
    export_png_action: QAction
    export_npy_action: QAction
    quit_action: QAction
    pin_action: QAction
    unpin_action: QAction
    unpin_all_action: QAction
    #: Checkable: gradient magnitudes beside the activations.
    gradients_action: QAction
    #: Toolbar: bundled sample images ("Sample…" first).
    sample_combo: QComboBox
    #: Toolbar: what the gradients are of (editable, completes class names).
    target_combo: QComboBox
    colormap_combo: QComboBox
    #: Toolbar: per-channel or shared scale (the mode is the item's data).
    normalize_combo: QComboBox
    export_button: QToolButton
    recent_models_menu: QMenu
    recent_inputs_menu: QMenu
    pins_menu: QMenu
    #: Checkable: re-run automatically after changes.
    auto_run_action: QAction
    #: Checkable: the input goes to the model as one list of images (detectors).
    input_list_action: QAction
    #: View > Colour map: one checkable action per colour map, by name.
    colormap_actions: dict[str, QAction]
    #: View menu: the docks' show/hide actions are added to it as the docks are made.
    view_menu: QMenu
    #: View > Reset window layout: docks back where a first start puts them.
    reset_layout_action: QAction
    #: Data: the dataset features add their entries.
    data_menu: QMenu

    @property
    def colormap(self) -> str:
        """The colour map chosen in the toolbar."""
        return self.colormap_combo.currentText()


def build_actions(window: QMainWindow, *, auto_run: bool = True) -> WindowActions:
    """Create the actions, the toolbar and the menu bar of ``window`` (``auto_run``: whether
    "Re-run automatically" starts checked)."""
    actions = _actions(window)
    bar = _toolbar(window, actions)
    menus = _menus(window, actions, bar["colormap_combo"], auto_run)
    return WindowActions(**actions, **bar, **menus)


def _actions(window: QMainWindow) -> dict[str, QAction]:
    def action(text: str, shortcut: Any = None, tip: str = "") -> QAction:
        act = QAction(text, window)
        if shortcut is not None:
            act.setShortcut(QKeySequence(shortcut))
        act.setToolTip(tip or text)
        window.addAction(act)  # shortcuts work even when the menu bar is hidden
        return act

    gradients = QAction("Gradients", window)
    gradients.setCheckable(True)
    gradients.setToolTip("Show the gradient magnitude beside each activation")
    return dict(
        open_model_action=action(
            "Open model…", QKeySequence.StandardKey.Open,
            "Open a torchvision model or a checkpoint / TorchScript / .pt2 / safetensors file (Ctrl+O)",
        ),
        open_input_action=action(
            "Open input…", "Ctrl+I",
            "Open an image or a tensor file (Ctrl+I); you can also drop files on the window",
        ),
        run_action=action("Run", "Ctrl+R", "Run forward and backward (Ctrl+R)"),
        cancel_action=action(
            "Cancel", "Esc", "Cancel the running capture, load, export or dataset scan (Esc)"
        ),
        export_all_action=action(
            "Export everything…", "Ctrl+E",
            "Write every captured array, image and stats file to a folder (Ctrl+E)",
        ),
        export_png_action=action(
            "Export panel as PNG…", "Ctrl+Shift+P",
            "Save the selected layer's panel (or the current tab) as a PNG",
        ),
        export_npy_action=action(
            "Export layer arrays (.npy)…", "Ctrl+Shift+E",
            "Save the selected layer's activation and gradient as .npy files",
        ),
        quit_action=action("Quit", "Ctrl+Q", "Quit actviz (Ctrl+Q)"),
        pin_action=action(
            "Pin this result", "Ctrl+P",
            "Keep the result shown now (with its capture) beside the newer ones (Ctrl+P)",
        ),
        unpin_action=action("Unpin this result", None, "Let the result shown now go"),
        unpin_all_action=action("Unpin all", None, "Let every pinned result go"),
        gradients_action=gradients,
    )  # fmt: skip


#: The Export actions, in the File menu and the toolbar's Export button.
_EXPORTS = ("export_all_action", "export_png_action", "export_npy_action")


def _toolbar(window: QMainWindow, actions: dict[str, QAction]) -> dict[str, Any]:
    """Toolbar: open, sample picker, target selector, run/cancel, colour map, scale, export."""
    bar = window.addToolBar("Main")
    bar.setObjectName("mainToolBar")
    bar.setMovable(False)
    bar.addActions([actions["open_model_action"], actions["open_input_action"]])
    sample_combo = QComboBox()
    sample_combo.setToolTip("Pick a bundled sample image")
    sample_combo.setMinimumContentsLength(10)
    bar.addWidget(sample_combo)
    bar.addSeparator()
    bar.addWidget(QLabel(" Target "))
    target_combo = _target_combo()
    bar.addWidget(target_combo)
    bar.addSeparator()
    bar.addActions([actions["run_action"], actions["cancel_action"]])
    bar.addSeparator()
    from actviz.display.colormaps import AUTO
    from actviz.ui.panels.colormap_views import COLORMAPS

    colormap_combo = QComboBox()
    colormap_combo.addItems([AUTO, *COLORMAPS])
    colormap_combo.setToolTip(
        "Colour map of the feature maps; auto: diverging about 0 for signed layers, "
        "sequential for non-negative ones and |gradient|"
    )
    bar.addWidget(colormap_combo)
    normalize_combo = QComboBox()
    for mode in NORMALIZATIONS:
        normalize_combo.addItem("per-channel" if mode == "channel" else "shared scale", mode)
    normalize_combo.setToolTip(
        "Per-channel: each map stretched to its own range; shared: one range for the layer"
    )
    bar.addWidget(normalize_combo)
    bar.addAction(actions["gradients_action"])
    bar.addSeparator()
    export_button = QToolButton()
    export_button.setText("Export")
    export_button.setPopupMode(QToolButton.ToolButtonPopupMode.InstantPopup)
    export_menu = QMenu(export_button)
    export_menu.addActions([actions[name] for name in _EXPORTS])
    export_button.setMenu(export_menu)
    bar.addWidget(export_button)
    return dict(
        sample_combo=sample_combo,
        target_combo=target_combo,
        colormap_combo=colormap_combo,
        normalize_combo=normalize_combo,
        export_button=export_button,
    )


def _target_combo() -> QComboBox:
    combo = QComboBox()
    combo.setEditable(True)
    combo.setInsertPolicy(QComboBox.InsertPolicy.NoInsert)
    combo.setMinimumContentsLength(18)
    combo.setToolTip(
        "What the gradients are of: auto (top-1 logit), a class index, or a class name"
    )
    combo.addItem(AUTO_TARGET_TEXT)
    completer = QCompleter(combo.model(), combo)
    completer.setFilterMode(Qt.MatchFlag.MatchContains)
    completer.setCaseSensitivity(Qt.CaseSensitivity.CaseInsensitive)
    completer.setCompletionMode(QCompleter.CompletionMode.PopupCompletion)
    combo.setCompleter(completer)
    return combo


def _menus(
    window: QMainWindow, actions: dict[str, QAction], colormap_combo: QComboBox, auto_run: bool
) -> dict[str, Any]:
    """Menu bar: File (open, recents, export, quit), Run (run, cancel, pins, auto), Data, View."""
    menu = window.menuBar().addMenu("&File")
    menu.addAction(actions["open_model_action"])
    recent_models_menu = menu.addMenu("Recent models")
    menu.addAction(actions["open_input_action"])
    recent_inputs_menu = menu.addMenu("Recent inputs")
    menu.addSeparator()
    menu.addActions([actions[name] for name in _EXPORTS])
    menu.addSeparator()
    menu.addAction(actions["quit_action"])
    run_menu = window.menuBar().addMenu("&Run")
    run_menu.addActions([actions["run_action"], actions["cancel_action"]])
    run_menu.addSeparator()
    run_menu.addAction(actions["pin_action"])
    pins_menu = run_menu.addMenu("Pinned results")
    run_menu.addSeparator()
    auto_run_action = run_menu.addAction("Re-run automatically")
    auto_run_action.setCheckable(True)
    auto_run_action.setChecked(auto_run)
    input_list_action = run_menu.addAction("Feed the input as a list of images")
    input_list_action.setCheckable(True)
    input_list_action.setToolTip(
        "Detection models take a list of (C, H, W) images; checked for models whose forward says so"
    )
    data_menu = window.menuBar().addMenu("&Data")
    view_menu = window.menuBar().addMenu("&View")
    view_menu.addAction(actions["gradients_action"])
    cmap_menu = view_menu.addMenu("Colour map")
    group = QActionGroup(window)
    colormap_actions: dict[str, QAction] = {}
    for i in range(colormap_combo.count()):
        name = colormap_combo.itemText(i)
        act = cmap_menu.addAction(name)
        act.setCheckable(True)
        act.setChecked(name == colormap_combo.currentText())
        group.addAction(act)
        colormap_actions[name] = act
        act.triggered.connect(lambda _=False, n=name: colormap_combo.setCurrentText(n))
    reset_layout_action = view_menu.addAction("Reset window layout")
    reset_layout_action.setToolTip(
        "Put the docks back where a first start puts them (Model on the left, Live closed)"
    )
    view_menu.addSeparator()  # the docks' show/hide entries follow
    return dict(
        recent_models_menu=recent_models_menu,
        recent_inputs_menu=recent_inputs_menu,
        pins_menu=pins_menu,
        auto_run_action=auto_run_action,
        input_list_action=input_list_action,
        colormap_actions=colormap_actions,
        view_menu=view_menu,
        reset_layout_action=reset_layout_action,
        data_menu=data_menu,
    )


__all__ = ["WindowActions", "build_actions"]
