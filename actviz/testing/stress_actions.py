"""What the stress driver does to the window, as a user does it (real input events only): each
action of :data:`ACTIONS` is an ``act_NAME(params, **given) -> str`` that picks its target from
``params["r"]`` and writes its pick back, so a replay clicks the same thing."""

from __future__ import annotations

import ctypes
import time
from collections.abc import Sequence
from typing import Any

import shiboken6
from PySide6 import QtWidgets
from PySide6.QtCore import QModelIndex, QPersistentModelIndex, QPoint, Qt, QTimer
from PySide6.QtGui import QContextMenuEvent, QKeySequence
from PySide6.QtTest import QTest
from PySide6.QtWidgets import QApplication, QDockWidget

from actviz.testing.stress_dialogs import MENU_SKIP, _r

#: Window sizes the resize action picks from.
SIZES = ((1024, 640), (1280, 720), (1360, 820), (1920, 1080))
#: What the key action presses: on the window, or the channel view's step keys.
KEYS = ("Esc", "Ctrl+R", "Ctrl+P", "[", "]", "PageUp", "PageDown")
#: name: (relative weight, ``act_NAME`` that sends it when not the name's own, what it is given).
ACTIONS: dict[str, tuple[float, str | None, dict[str, Any]]] = {
    "tile_click": (3.0, None, {}),  # left click a tile: the channel view opens on it
    "tile_menu": (3.0, None, {}),  # right click a tile, click an item of its menu (Ablate)
    "tree_menu": (1.5, None, {}),  # right click a module tree row, an item (tick all Conv2d)
    "bar_click": (1.5, None, {}),  # click a bar of "Channels that matter" (opens its channel)
    "sort": (1.0, None, {}),  # click "Sort tiles by effect" (or the mark box)
    "key": (3.0, None, {}),  # Esc, Ctrl+R, Ctrl+P, or a step key in the channel view
    "close_channel": (1.0, None, {}),  # click the channel view's close button
    "menu": (2.0, None, {}),  # trigger an enabled action of the menu bar
    "pin": (1.0, None, {}),  # pin (Ctrl+P), unpin or compare with a pin, from the Run menu
    "live": (1.0, "menu", {"prefixes": ("Live > ",)}),  # open, play / pause, step, reset
    "scan": (0.4, "menu", {"prefixes": ("Data > ",)}),  # answered: the scratch images, k 2
    "visualise": (0.6, None, {}),  # Run > Visualise channels, or the dock's own buttons
    "dock_button": (2.0, None, {}),  # click a button or check box of a shown dock
    "dock": (1.0, None, {}),  # open or close a dock from the View menu
    "combo": (1.5, None, {}),  # step the colour map, normalisation or a dock's combo box
    "resize": (1.0, None, {}),  # resize the window to one of SIZES
    "run": (1.0, "key", {"key": "Ctrl+R"}),
    "esc": (1.0, "key", {"key": "Esc"}),  # cancels what runs
    "wait": (1.5, None, {}),  # do nothing until the window is idle
    "switch_model": (0.3, None, {}),  # open another model (image, text, the checkpoint)
    "reopen": (0.05, None, {}),  # close the window and open a fresh one (rare: costs a second)
    "inject_failure": (0.0, None, {}),  # a synthetic failure (the driver's own tests)
}


def choose(p: dict[str, Any], key: str, items: Sequence[Any], i: int = 0) -> Any:
    """The item ``p[key]`` names when it is among ``items``, else the one ``p["r"][i]`` picks;
    recorded in ``p[key]`` (None when ``items`` is empty)."""
    if not (items := list(items)):
        return None
    if key in p and p[key] in items:
        return p[key]
    p[key] = items[min(len(items) - 1, int(_r(p, i) * len(items)))]
    return p[key]


class UserActions:
    """The actions (see the module): each ``act_NAME(params, **given) -> str``; mixed into the
    stress driver, whose window, params, waits and restarts they use."""

    def _click(self, widget: Any, pos: Any = None, button: Any = Qt.MouseButton.LeftButton) -> None:
        point = QPoint(pos) if pos is not None else None
        QTest.mouseClick(widget, button, pos=point if point is not None else QPoint())  # centre
        if button == Qt.MouseButton.RightButton:
            self._context_menu_event(widget, point)

    def _context_menu_event(self, widget: Any, pos: Any) -> None:
        """The context-menu event the platform sends after a right click that popped no menu."""
        self.spin(0.02)
        # A menu is up, or the widget went meanwhile with its panel (a model switch's steps).
        if QApplication.activePopupWidget() is not None or not shiboken6.isValid(widget):
            return
        pos = widget.rect().center() if pos is None else pos
        event = QContextMenuEvent(QContextMenuEvent.Reason.Mouse, pos, widget.mapToGlobal(pos))
        QApplication.sendEvent(widget, event)

    def _key(self, widget: Any, name: str) -> None:
        widget.activateWindow()
        QTest.keySequence(widget, QKeySequence(name.replace("Page", "Pg")))  # Qt says PgUp

    def _menu_actions(self) -> list[tuple[str, Any]]:
        """The menu bar's leaf actions, enabled, as ``("File > Open model…", action)``."""
        out: list[tuple[str, Any]] = []

        def walk(menu: Any, prefix: str) -> None:
            for a in menu.actions():
                if a.isSeparator() or not a.text() or not a.isEnabled():
                    continue
                text = a.text().replace("&", "")
                if a.menu() is not None:
                    walk(a.menu(), f"{prefix}{text} > ")
                elif not text.startswith(MENU_SKIP):
                    out.append((prefix + text, a))

        walk(self.window.menuBar(), "")
        return out

    def act_menu(self, p: dict[str, Any], prefixes: Sequence[str] = ("",)) -> str:
        entries = [(t, a) for t, a in self._menu_actions() if t.startswith(tuple(prefixes))]
        if (text := choose(p, "menu", [t for t, _ in entries])) is None:
            return f"menu {prefixes[0]} (not there)"
        dict(entries)[text].trigger()
        return f"menu {text}"

    def _docks(self, visible: bool | None = None) -> list[Any]:
        docks = sorted(self.window.findChildren(QDockWidget), key=lambda d: d.objectName())
        return [d for d in docks if visible is None or d.isVisible() == visible]

    def _show_dock(self, name: str) -> Any:
        dock = next((d for d in self._docks() if name in (d.objectName(), d.windowTitle())), None)
        if dock is not None and not dock.isVisible():
            dock.toggleViewAction().trigger()  # View > NAME
        return dock

    def _tile_point(self, p: dict[str, Any]) -> tuple[Any, Any] | None:
        """Scroll a chosen tile into view; its canvas viewport and the point on it."""
        maps = [
            name
            for name, panel in self.window.host.layer_panels.items()
            if (slot := panel.activation_slot).view is not None
            and slot.view.kind == "maps"
            and slot.mosaic is not None
            and slot.image_canvas is not None
        ]
        if (name := choose(p, "layer", maps, 0)) is None:
            return None
        panel = self.window.host.layer_panels[name]
        mosaic, canvas = panel.activation_slot.mosaic, panel.activation_slot.image_canvas
        if (channel := choose(p, "channel", [int(c) for c in mosaic.tile_channels], 1)) is None:
            return None
        self.window.centre.layers_scroll.ensureWidgetVisible(panel)
        try:
            y0, x0 = mosaic.tile_origin(channel)
        except (IndexError, KeyError, ValueError):
            return None
        return canvas.viewport(), canvas.image_to_widget(x0 + 1.5, y0 + 1.5)

    def act_tile_click(self, p: dict[str, Any]) -> str:
        if (hit := self._tile_point(p)) is None:
            return "tile click (no tiles)"
        self._click(*hit)
        return f"click tile {p['layer']}:{p['channel']}"

    def act_tile_menu(self, p: dict[str, Any]) -> str:
        if _r(p, 3) < 0.5 and "items" not in p:
            p["items"] = ["Ablate"]  # replaced by the real "Ablate ch N" text when shown
        if (hit := self._tile_point(p)) is None:
            return "tile menu (no tiles)"
        if p.get("items") == ["Ablate"]:  # the item starting so; the answerer records its text
            p["_prefix"] = "Ablate"
            del p["items"]
        return self._menu_at(*hit, f"tile menu {p['layer']}:{p['channel']}")

    def _menu_at(self, widget: Any, pos: Any, what: str) -> str:
        """Right click ``widget`` at ``pos``; the answerer clicks items of the menu it pops."""
        self._click(widget, pos, Qt.MouseButton.RightButton)
        self._spin_while_popup()
        return f"{what} > {' > '.join(self.params.get('items') or [])}"

    def _spin_while_popup(self) -> None:
        p = self.params
        prefix = p.pop("_prefix", None)
        deadline = time.perf_counter() + 3.0
        while time.perf_counter() < deadline:
            if (popup := QApplication.activePopupWidget()) is None:
                break
            if prefix is not None:
                if texts := [a.text() for a in popup.actions() if a.text().startswith(prefix)]:
                    p["items"] = [texts[0]]
                prefix = None
            self.spin(0.02)
        p.pop("_depth", None)

    def act_tree_menu(self, p: dict[str, Any]) -> str:
        dock = self._show_dock("modelDock")
        views = dock.findChildren(QtWidgets.QTreeView) if dock is not None else []
        view = views[0] if views else None
        if view is None or view.model() is None or view.model().rowCount() == 0:
            return "tree menu (no tree)"
        rows = []
        index = view.model().index(0, 0)
        while index.isValid() and len(rows) < 200:
            rows.append(index)
            index = view.indexBelow(index)
        texts = [str(i.data()) for i in rows]
        text = choose(p, "row", texts, 0)
        # Persistent: a plain index goes stale if a model switch resets the tree during the spin.
        index = QPersistentModelIndex(rows[texts.index(text)])
        view.scrollTo(QModelIndex(index))
        self.spin(0.01)
        if not index.isValid():
            return f"tree menu {text} (the tree changed meanwhile)"
        pos = view.visualRect(QModelIndex(index)).center()
        return self._menu_at(view.viewport(), pos, f"tree menu {text}")

    def act_bar_click(self, p: dict[str, Any]) -> str:
        from actviz.ui.effects.view import MARGIN, ROW_HEIGHT, EffectBars

        if (dock := self._show_dock("ChannelsThatMatterDock")) is None:
            return "bar click (no dock)"
        bars = [b for b in dock.findChildren(EffectBars) if b.rows and b.isVisible()]
        if (layer := choose(p, "layer", sorted({b.layer for b in bars}), 0)) is None:
            return "bar click (no bars)"
        widget = next(b for b in bars if b.layer == layer)
        row = choose(p, "row", list(range(len(widget.rows))), 1)
        scroll = widget.parent()
        while scroll is not None and not hasattr(scroll, "ensureWidgetVisible"):
            scroll = scroll.parent()
        if scroll is not None:
            scroll.ensureWidgetVisible(widget)
        y = MARGIN + row * ROW_HEIGHT + ROW_HEIGHT // 2
        self._click(widget, QPoint(widget.width() // 2, y))
        return f"click bar {layer} row {row} (ch {widget.rows[row].channel})"

    def act_sort(self, p: dict[str, Any]) -> str:
        if (dock := self._show_dock("ChannelsThatMatterDock")) is None:
            return "sort (no dock)"
        boxes = {b.text(): b for b in dock.findChildren(QtWidgets.QCheckBox) if b.isEnabled()}
        sort = "Sort tiles by effect"
        if sort in boxes and "box" not in p and _r(p, 1) < 0.7:
            p["box"] = sort  # the one that reorders every panel: most of the time
        if (text := choose(p, "box", sorted(boxes), 0)) is None:
            return "sort (no check box)"
        box = boxes[text]
        self._click(box)
        return f"click {text!r} ({'on' if box.isChecked() else 'off'})"

    def act_key(self, p: dict[str, Any], key: str | None = None) -> str:
        if key is not None:
            p["key"] = key
        name = choose(p, "key", KEYS, 0)
        if name in KEYS[3:]:  # the channel view's step keys
            if not self.window.centre.channel_box.isVisible():
                return f"key {name} (no channel view)"
            self.window.centre.channel_view.setFocus()
        self._key(self.window, name)
        return f"key {name}"

    def act_close_channel(self, p: dict[str, Any]) -> str:
        if not self.window.centre.channel_box.isVisible():
            return "close channel view (none open)"
        self._click(self.window.centre.channel_view.close_button)
        return "close channel view"

    def act_pin(self, p: dict[str, Any]) -> str:
        menu = "Run > Pin this result" if _r(p, 0) < 0.4 else "Run > Pinned results"
        return self.act_menu(p, (menu,))

    def act_visualise(self, p: dict[str, Any]) -> str:
        if _r(p, 0) < 0.5:
            return self.act_menu(p, ("Run > Visualise",))
        return self._dock_button(p, "WhatChannelsWantDock")

    def act_dock_button(self, p: dict[str, Any]) -> str:
        docks = [d.objectName() for d in self._docks(visible=True)]
        if (name := choose(p, "dock", docks, 0)) is None:
            return "dock button (no dock shown)"
        return self._dock_button(p, name)

    def _dock_button(self, p: dict[str, Any], name: str) -> str:
        if (dock := self._show_dock(name)) is None:
            return f"button of {name} (no dock)"
        buttons = [
            b
            for b in dock.findChildren(QtWidgets.QAbstractButton)
            if b.isEnabled() and b.isVisible() and b.objectName() != "qt_dockwidget_floatbutton"
        ]
        labels = [b.text() or b.toolTip() or b.objectName() or type(b).__name__ for b in buttons]
        if (label := choose(p, "button", labels, 1)) is None:
            return f"button of {name} (none enabled)"
        self._click(buttons[labels.index(label)])
        self._spin_while_popup()
        return f"click {label!r} in {dock.windowTitle()}"

    def act_dock(self, p: dict[str, Any]) -> str:
        return self.act_menu(p, tuple(f"View > {d.windowTitle()}" for d in self._docks()))

    def act_combo(self, p: dict[str, Any]) -> str:
        combos = {
            "colour map": self.window.commands.colormap_combo,
            "normalisation": self.window.commands.normalize_combo,
        }
        for dock in self._docks(visible=True):
            for i, combo in enumerate(dock.findChildren(QtWidgets.QComboBox)):
                if combo.isVisible() and combo.isEnabled() and combo.count() > 1:
                    combos[f"{dock.windowTitle()} combo {i}"] = combo
        name = choose(p, "combo", sorted(combos), 0)
        combo = combos[name]
        combo.setFocus()
        self._key(combo, "Down" if _r(p, 1) < 0.6 else "Up")
        return f"{name} -> {combo.currentText()!r}"

    def act_resize(self, p: dict[str, Any]) -> str:
        size = choose(p, "size", [f"{w}x{h}" for w, h in SIZES], 0)
        w, h = (int(v) for v in size.split("x"))
        self.window.resize(w, h)
        return f"resize {size}"

    def act_wait(self, p: dict[str, Any]) -> str:
        self.settle()
        return "wait idle"

    def act_switch_model(self, p: dict[str, Any]) -> str:
        if (name := choose(p, "model", sorted(self.switches), 0)) is None:
            return "switch model (none)"
        self.ready(self.switches[name]).open(self.window)
        return f"switch to {name}"

    def act_reopen(self, p: dict[str, Any]) -> str:
        with self.untimed():  # the start-up bench's time, not a block
            self.close_window()
            self.open_window()
        return "close and reopen the window"

    def act_inject_failure(self, p: dict[str, Any]) -> str:
        """A synthetic failure (tests of the driver): an exception raised in a Qt slot
        (``kind`` "exception"), a segfault ("crash"), a GUI that never returns ("hang") or a
        failed run the window reports ("shown")."""
        if (kind := p.get("kind", "exception")) == "crash":
            ctypes.string_at(0)
        while kind == "hang":
            time.sleep(0.1)
        if kind == "shown":
            self.window.run_failed.emit("injected run failure")
        else:
            QTimer.singleShot(0, _raise_injected)
        return f"inject {kind}"


def _raise_injected() -> None:
    raise RuntimeError("injected failure")
