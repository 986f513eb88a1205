"""What the stress driver does to the window, as a user does it: real input events only.

Each ``act_NAME(params) -> str`` picks its target from uniform numbers in ``params["r"]`` and
writes its pick back, so a replay clicks the same thing. Modal dialogs and file pickers are
answered without blocking.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import Any

from actviz.testing.stress_dialogs import MENU_SKIP, _r, drop_file

#: Window sizes the resize action picks from.
SIZES = ((1024, 640), (1280, 720), (1360, 820), (1920, 1080))


def choose(p: dict[str, Any], key: str, items: Sequence[Any], i: int = 0) -> Any:
    """The item ``p[key]`` names when it is among ``items``, else the one ``p["r"][i]`` picks;
    recorded in ``p[key]`` (None when ``items`` is empty)."""
    items = list(items)
    if not items:
        return None
    if key in p and p[key] in items:
        return p[key]
    chosen = items[min(len(items) - 1, int(_r(p, i) * len(items)))]
    p[key] = chosen
    return chosen


class UserActions:
    """The actions (see the module): each ``act_NAME(params) -> str``."""

    window: Any
    params: dict[str, Any]
    restart_window: Any

    # ------------------------------------------------------------------ shared pieces
    def _click(self, widget: Any, pos: Any = None, button: Any = None) -> None:
        from PySide6.QtCore import QPoint, Qt
        from PySide6.QtTest import QTest

        button = Qt.MouseButton.LeftButton if button is None else button
        if pos is None:
            QTest.mouseClick(widget, button)
        else:
            QTest.mouseClick(widget, button, pos=QPoint(pos))
        if button == Qt.MouseButton.RightButton:
            self._context_menu_event(widget, QPoint(pos) if pos is not None else None)

    def _context_menu_event(self, widget: Any, pos: Any) -> None:
        """The context-menu event the platform sends after a right click that popped no menu."""
        import shiboken6
        from PySide6.QtGui import QContextMenuEvent
        from PySide6.QtWidgets import QApplication

        self.spin(0.02)
        # A menu is up, or the widget went meanwhile with its panel (a model switch's steps).
        if QApplication.activePopupWidget() is not None or not shiboken6.isValid(widget):
            return
        pos = widget.rect().center() if pos is None else pos
        event = QContextMenuEvent(QContextMenuEvent.Reason.Mouse, pos, widget.mapToGlobal(pos))
        QApplication.sendEvent(widget, event)

    def _key(self, widget: Any, key: Any, modifier: Any = None) -> None:
        from PySide6.QtCore import Qt
        from PySide6.QtTest import QTest

        if modifier is None:
            modifier = Qt.KeyboardModifier.NoModifier
        widget.activateWindow()
        QTest.keyClick(widget, key, modifier)

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

        for top in self.window.menuBar().actions():
            if top.menu() is not None:
                walk(top.menu(), top.text().replace("&", "") + " > ")
        return out

    def _trigger(self, p: dict[str, Any], prefixes: Sequence[str] = ("",)) -> str:
        entries = [(t, a) for t, a in self._menu_actions() if t.startswith(tuple(prefixes))]
        text = choose(p, "menu", [t for t, _ in entries])
        if text is None:
            return f"menu {prefixes[0]} (not there)"
        dict(entries)[text].trigger()
        return f"menu {text}"

    def _docks(self, visible: bool | None = None) -> list[Any]:
        from PySide6.QtWidgets import QDockWidget

        docks = sorted(self.window.findChildren(QDockWidget), key=lambda d: d.objectName())
        return [d for d in docks if visible is None or d.isVisible() == visible]

    def _dock(self, name: str) -> Any:
        for dock in self._docks():
            if name in (dock.objectName(), dock.windowTitle()):
                return dock
        return None

    def _show_dock(self, name: str) -> Any:
        dock = self._dock(name)
        if dock is not None and not dock.isVisible():
            dock.toggleViewAction().trigger()  # View > NAME
        return dock

    def _maps(self) -> list[str]:
        """Layers whose panel shows a mosaic of tiles now."""
        out = []
        for name, panel in self.window.host.layer_panels.items():
            slot = panel.activation_slot
            view = slot.view
            if view is not None and view.kind == "maps" and slot.mosaic is not None:
                if slot.image_canvas is not None:
                    out.append(name)
        return out

    def _tile_point(self, p: dict[str, Any]) -> tuple[Any, Any] | None:
        """Scroll a chosen tile into view; its canvas viewport and the point on it."""
        name = choose(p, "layer", self._maps(), 0)
        if name is None:
            return None
        panel = self.window.host.layer_panels[name]
        slot = panel.activation_slot
        mosaic, canvas = slot.mosaic, slot.image_canvas
        channel = choose(p, "channel", [int(c) for c in mosaic.tile_channels], 1)
        if channel is None:
            return None
        self.window.centre.layers_scroll.ensureWidgetVisible(panel)
        try:
            y0, x0 = mosaic.tile_origin(channel)
        except (IndexError, KeyError, ValueError):
            return None
        pos = canvas.image_to_widget(x0 + 1.5, y0 + 1.5)
        return canvas.viewport(), pos

    # ------------------------------------------------------------------ the actions
    def act_tile_click(self, p: dict[str, Any]) -> str:
        """Left click a tile: the channel view opens on it."""
        hit = self._tile_point(p)
        if hit is None:
            return "tile click (no tiles)"
        self._click(*hit)
        return f"click tile {p['layer']}:{p['channel']}"

    def act_tile_menu(self, p: dict[str, Any]) -> str:
        """Right click a tile; the answerer clicks an item of its menu (often Ablate)."""
        if _r(p, 3) < 0.5 and "items" not in p:
            p["items"] = ["Ablate"]  # replaced by the real "Ablate ch N" text when shown
        hit = self._tile_point(p)
        if hit is None:
            return "tile menu (no tiles)"
        self._fix_prefix(p)
        from PySide6.QtCore import Qt

        self._click(*hit, button=Qt.MouseButton.RightButton)
        self._spin_while_popup()
        return f"tile menu {p['layer']}:{p['channel']} > {' > '.join(p.get('items') or [])}"

    def _fix_prefix(self, p: dict[str, Any]) -> None:
        # "Ablate" asks for the item starting so; the answerer records its full text.
        items = p.get("items")
        if items == ["Ablate"]:
            p["_prefix"] = "Ablate"
            del p["items"]

    def _spin_while_popup(self) -> None:
        from PySide6.QtWidgets import QApplication

        p = self.params
        prefix = p.pop("_prefix", None)
        deadline = time.perf_counter() + 3.0
        while time.perf_counter() < deadline:
            popup = QApplication.activePopupWidget()
            if popup is None:
                break
            if prefix is not None:
                texts = [a.text() for a in popup.actions() if a.text().startswith(prefix)]
                if texts:
                    p["items"] = [texts[0]]
                prefix = None
            self.spin(0.02)
        p.pop("_depth", None)

    def act_tree_menu(self, p: dict[str, Any]) -> str:
        """Right click a row of the module tree and click an item of its menu (tick all
        Conv2d modules, untick all, ...)."""
        from PySide6.QtCore import QModelIndex, QPersistentModelIndex, Qt
        from PySide6.QtWidgets import QTreeView

        dock = self._show_dock("modelDock")
        views = dock.findChildren(QTreeView) if dock is not None else []
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
        # A persistent index across the spin: a plain one used after a model switch reset the
        # tree pointed at freed rows (the driver segfaulted its process in visualRect).
        index = QPersistentModelIndex(rows[texts.index(text)])
        view.scrollTo(QModelIndex(index))
        self.spin(0.01)
        if not index.isValid():
            return f"tree menu {text} (the tree changed meanwhile)"
        pos = view.visualRect(QModelIndex(index)).center()
        self._click(view.viewport(), pos, Qt.MouseButton.RightButton)
        self._spin_while_popup()
        return f"tree menu {text} > {' > '.join(p.get('items') or [])}"

    def act_bar_click(self, p: dict[str, Any]) -> str:
        """Click a bar of "Channels that matter" (opens its channel)."""
        from actviz.ui.effects.view import MARGIN, ROW_HEIGHT, EffectBars

        dock = self._show_dock("ChannelsThatMatterDock")
        if dock is None:
            return "bar click (no dock)"
        bars = [b for b in dock.findChildren(EffectBars) if b.rows and b.isVisible()]
        layer = choose(p, "layer", sorted({b.layer for b in bars}), 0)
        if layer is None:
            return "bar click (no bars)"
        widget = next(b for b in bars if b.layer == layer)
        row = choose(p, "row", list(range(len(widget.rows))), 1)
        scroll = widget.parent()
        while scroll is not None and not hasattr(scroll, "ensureWidgetVisible"):
            scroll = scroll.parent()
        if scroll is not None:
            scroll.ensureWidgetVisible(widget)
        from PySide6.QtCore import QPoint

        y = MARGIN + row * ROW_HEIGHT + ROW_HEIGHT // 2
        self._click(widget, QPoint(widget.width() // 2, y))
        return f"click bar {layer} row {row} (ch {widget.rows[row].channel})"

    def act_sort(self, p: dict[str, Any]) -> str:
        """Click "Sort the panels' tiles by effect" (or the mark box) in Channels that matter."""
        from PySide6.QtWidgets import QCheckBox

        dock = self._show_dock("ChannelsThatMatterDock")
        if dock is None:
            return "sort (no dock)"
        boxes = {b.text(): b for b in dock.findChildren(QCheckBox) if b.isEnabled()}
        sort = "Sort the panels' tiles by effect"
        if sort in boxes and "box" not in p and _r(p, 1) < 0.7:
            p["box"] = sort  # the one that reorders every panel: most of the time
        text = choose(p, "box", sorted(boxes), 0)
        if text is None:
            return "sort (no check box)"
        box = boxes[text]
        self._click(box)
        return f"click {text!r} ({'on' if box.isChecked() else 'off'})"

    def act_key(self, p: dict[str, Any]) -> str:
        """Esc, Ctrl+R or Ctrl+P on the window, or a step key in the channel view."""
        from PySide6.QtCore import Qt

        keys = {
            "Esc": (Qt.Key.Key_Escape, None),
            "Ctrl+R": (Qt.Key.Key_R, Qt.KeyboardModifier.ControlModifier),
            "Ctrl+P": (Qt.Key.Key_P, Qt.KeyboardModifier.ControlModifier),
            "[": (Qt.Key.Key_BracketLeft, None),
            "]": (Qt.Key.Key_BracketRight, None),
            "PageUp": (Qt.Key.Key_PageUp, None),
            "PageDown": (Qt.Key.Key_PageDown, None),
        }
        name = choose(p, "key", list(keys), 0)
        key, modifier = keys[name]
        view = self.window.centre.channel_view
        target = self.window
        if name in ("[", "]", "PageUp", "PageDown"):
            if not self.window.centre.channel_box.isVisible():
                return f"key {name} (no channel view)"
            view.setFocus()
            target = view
        self._key(target, key, modifier)
        return f"key {name}"

    def act_close_channel(self, p: dict[str, Any]) -> str:
        """Click the channel view's close button."""
        if not self.window.centre.channel_box.isVisible():
            return "close channel view (none open)"
        self._click(self.window.centre.channel_view.close_button)
        return "close channel view"

    def act_menu(self, p: dict[str, Any]) -> str:
        """Trigger an enabled action of the menu bar (File, Run, Data, View, Live)."""
        return self._trigger(p)

    def act_pin(self, p: dict[str, Any]) -> str:
        """Pin (Ctrl+P), unpin or compare with a pin, from the Run menu."""
        if _r(p, 0) < 0.4:
            return self._trigger(p, ("Run > Pin this result",))
        return self._trigger(p, ("Run > Pinned results",))

    def act_live(self, p: dict[str, Any]) -> str:
        """Live mode from its menu: open it, play / pause, step, reset the perturbation."""
        return self._trigger(p, ("Live > ",))

    def act_scan(self, p: dict[str, Any]) -> str:
        """Data > Scan a dataset… (the dialog is answered: the scratch images, k 2)."""
        return self._trigger(p, ("Data > ",))

    def act_visualise(self, p: dict[str, Any]) -> str:
        """Run > Visualise channels of the selected layer, or the dock's own buttons."""
        if _r(p, 0) < 0.5:
            return self._trigger(p, ("Run > Visualise",))
        return self._dock_button(p, "WhatChannelsWantDock")

    def act_dock_button(self, p: dict[str, Any]) -> str:
        """Click an enabled button or check box of a visible dock (its close button too)."""
        docks = [d.objectName() for d in self._docks(visible=True)]
        name = choose(p, "dock", docks, 0)
        if name is None:
            return "dock button (no dock shown)"
        return self._dock_button(p, name)

    def _dock_button(self, p: dict[str, Any], name: str) -> str:
        from PySide6.QtWidgets import QAbstractButton

        dock = self._show_dock(name)
        if dock is None:
            return f"button of {name} (no dock)"
        buttons = [
            b
            for b in dock.findChildren(QAbstractButton)
            if b.isEnabled() and b.isVisible() and b.objectName() != "qt_dockwidget_floatbutton"
        ]
        labels = [b.text() or b.toolTip() or b.objectName() or type(b).__name__ for b in buttons]
        label = choose(p, "button", labels, 1)
        if label is None:
            return f"button of {name} (none enabled)"
        button = buttons[labels.index(label)]
        self._click(button)
        self._spin_while_popup()
        return f"click {label!r} in {dock.windowTitle()}"

    def act_dock(self, p: dict[str, Any]) -> str:
        """Open or close a dock from the View menu."""
        return self._trigger(p, tuple(f"View > {d.windowTitle()}" for d in self._docks()))

    def act_combo(self, p: dict[str, Any]) -> str:
        """Step the colour map, the normalisation or a dock's combo box with an arrow key."""
        from PySide6.QtCore import Qt
        from PySide6.QtWidgets import QComboBox

        combos = {
            "colour map": self.window.commands.colormap_combo,
            "normalisation": self.window.commands.normalize_combo,
        }
        for dock in self._docks(visible=True):
            for i, combo in enumerate(dock.findChildren(QComboBox)):
                if combo.isVisible() and combo.isEnabled() and combo.count() > 1:
                    combos[f"{dock.windowTitle()} combo {i}"] = combo
        name = choose(p, "combo", sorted(combos), 0)
        down = _r(p, 1) < 0.6
        combo = combos[name]
        combo.setFocus()
        self._key(combo, Qt.Key.Key_Down if down else Qt.Key.Key_Up)
        return f"{name} -> {combo.currentText()!r}"

    def act_resize(self, p: dict[str, Any]) -> str:
        """Resize the window to one of :data:`SIZES`."""
        size = choose(p, "size", [f"{w}x{h}" for w, h in SIZES], 0)
        w, h = (int(v) for v in size.split("x"))
        self.window.resize(w, h)
        return f"resize {size}"

    def act_run(self, p: dict[str, Any]) -> str:
        """Ctrl+R."""
        p["key"] = "Ctrl+R"
        return self.act_key(p)

    def act_esc(self, p: dict[str, Any]) -> str:
        """Esc (cancels what runs)."""
        p["key"] = "Esc"
        return self.act_key(p)

    def act_wait(self, p: dict[str, Any]) -> str:
        """Do nothing until the window is idle."""
        self.settle()
        return "wait idle"

    def act_switch_model(self, p: dict[str, Any]) -> str:
        """Open another model: the image model, the text model or the checkpoint."""
        names = sorted(self.switches)
        name = choose(p, "model", names, 0)
        if name is None:
            return "switch model (none)"
        self.switches[name].open(self.window)
        return f"switch to {name}"

    def act_reopen(self, p: dict[str, Any]) -> str:
        """Close the window and open a fresh one on the case's model."""
        self.restart_window()
        return "close and reopen the window"

    def act_inject_failure(self, p: dict[str, Any]) -> str:
        """A synthetic failure (tests of the driver): an exception raised in a Qt slot
        (``kind`` "exception"), a segfault ("crash"), a GUI that never returns ("hang") or a
        failed run the window reports ("shown")."""
        import ctypes

        from PySide6.QtCore import QTimer

        kind = p.get("kind", "exception")
        if kind == "crash":
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


__all__ = ["SIZES", "UserActions", "choose", "drop_file"]
