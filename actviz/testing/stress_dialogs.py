"""Modal dialogs, menus and file pickers answered as a person would, for the stress driver
(``params["answer"]`` accepts or rejects; ``params["items"]`` picks menu items)."""

from __future__ import annotations

import functools
import time
from pathlib import Path
from typing import Any

import numpy as np
import shiboken6
from PySide6 import QtWidgets
from PySide6.QtCore import QMimeData, QPointF, Qt, QTimer, QUrl
from PySide6.QtGui import QDragEnterEvent, QDropEvent
from PySide6.QtTest import QTest
from PySide6.QtWidgets import QApplication, QDialogButtonBox, QMenu, QMessageBox

#: Menu bar entries never triggered (closing the window is an action of its own).
MENU_SKIP = ("Quit",)
#: How long a dialog may stay busy (loading) before it counts as stuck and gets Esc (s).
DIALOG_STUCK_S = 20.0


def _r(p: dict[str, Any], i: int) -> float:
    r = p.get("r") or [0.5]
    return float(r[i % len(r)])


def drop_file(window: Any, path: str | Path) -> None:
    """Drop ``path`` on ``window`` as a file manager does (drag enter, then drop)."""
    mime = QMimeData()
    mime.setUrls([QUrl.fromLocalFile(str(path))])
    centre = window.rect().center()
    action = Qt.DropAction.CopyAction
    buttons, mods = Qt.MouseButton.NoButton, Qt.KeyboardModifier.NoModifier
    enter = QDragEnterEvent(centre, action, mime, buttons, mods)
    QApplication.sendEvent(window, enter)
    if enter.isAccepted():
        QApplication.sendEvent(window, QDropEvent(QPointF(centre), action, mime, buttons, mods))


class DialogAnswerer:
    """Answers modal dialogs and popped-up menus with real clicks and key presses, from a timer
    that also fires inside their own ``exec``; the current action's ``params`` say how."""

    def __init__(self, driver: Any) -> None:
        self.driver = driver
        self.timer = QTimer(interval=15)
        self.timer.timeout.connect(self.answer)
        self._busy = False
        self._seen: dict[int, float] = {}
        self._tried: set[int] = set()
        #: What a busy Open model dialog said last: stuck only when it says nothing new.
        self._said: dict[int, str] = {}

    def answer(self) -> None:
        """Answer the popped-up menu or the modal dialog shown now, if any."""
        if self._busy:
            return
        if (popup := QApplication.activePopupWidget()) is not None and popup.isVisible():
            widget, how = popup, self._answer_menu if isinstance(popup, QMenu) else None
        else:
            widget, how = QApplication.activeModalWidget(), self._answer_dialog
            if widget is None or not widget.isVisible():
                # Forgotten: a later widget may reuse an id (and look open since long ago).
                for kept in (self._seen, self._tried, self._said):
                    kept.clear()
                return
        now = time.perf_counter()  # Shown for a moment first, as a person reads before clicking.
        first = self._seen.setdefault(id(widget), now)
        if len(self._seen) > 200:
            self._seen = {id(widget): first}
        if now - first < 0.03:
            return
        if now - first > DIALOG_STUCK_S + 5:
            # Answered and still there: whatever it waits for, a person would close it.
            self.driver.note_stuck(f"{type(widget).__name__} stayed open: closed")
            self._seen.pop(id(widget), None)
            widget.close()
            return

        def answer() -> None:
            # The flag is down before the click: a dialog it opens is answered from its exec.
            self._busy = False
            if shiboken6.isValid(widget) and widget.isVisible():
                how(widget) if how is not None else widget.close()

        self._busy = True  # The click runs after this timeout returns, never inside it.
        QTimer.singleShot(0, answer)

    def _answer_menu(self, menu: Any) -> None:
        p = self.driver.params
        depth = int(p.get("_depth", 0))
        items = [a for a in menu.actions() if not a.isSeparator() and a.text() and a.isEnabled()]
        items = [a for a in items if a.isVisible() and not a.text().startswith(MENU_SKIP)]
        texts = [a.text() for a in items]
        chosen = list(p.get("items") or [])
        text = None
        if depth < 3 and texts and p.get("answer", "accept") != "reject":
            if depth < len(chosen) and chosen[depth] in texts:
                text = chosen[depth]
            else:
                text = texts[min(len(texts) - 1, int(_r(p, 2 + depth) * len(texts)))]
                p["items"] = [*chosen[:depth], text]
        if text is None:
            QTest.keyClick(menu, Qt.Key.Key_Escape)
            return
        action = items[texts.index(text)]
        p["_depth"] = depth + 1 if action.menu() is not None else 0
        QTest.mouseClick(menu, Qt.MouseButton.LeftButton, pos=menu.actionGeometry(action).center())

    def _answer_dialog(self, dialog: Any) -> None:
        from actviz.ui.dataset.dialog import ScanDialog
        from actviz.ui.window.dialogs import ExportFolderDialog, OpenModelDialog

        d = self.driver
        accept = d.params.get("answer", "accept") == "accept"
        key = id(dialog)
        if isinstance(dialog, OpenModelDialog):
            if not dialog.open_button.isEnabled():  # loading what it was asked to open
                if self._said.get(key) != dialog.message():  # it says what it does now
                    self._said[key] = dialog.message()
                    self._seen[key] = time.perf_counter()
                elif time.perf_counter() - self._seen[key] > DIALOG_STUCK_S:
                    d.note_stuck(f"the Open model dialog stayed busy: {dialog.message()!r}")
                    QTest.keyClick(dialog, Qt.Key.Key_Escape)
                return
            if accept and key not in self._tried:
                self._tried.add(key)
                dialog.tabs.setCurrentIndex(1)  # File
                dialog.file_edit.setText(str(d.checkpoint_path()))
                QTest.mouseClick(dialog.open_button, Qt.MouseButton.LeftButton)
                return
            QTest.keyClick(dialog, Qt.Key.Key_Escape)
            return
        if accept and isinstance(dialog, ScanDialog):
            dialog.folder_edit.setText(str(d.images))
            dialog.k_spin.setValue(2)
            dialog.batch_spin.setValue(4)
        elif accept and isinstance(dialog, ExportFolderDialog):
            dialog.folder_edit.setText(str(d.scratch("exports") / f"e{int(_r(d.params, 1) * 3)}"))
        box = dialog if isinstance(dialog, QMessageBox) else dialog.findChild(QDialogButtonBox)
        if box is not None:
            role = type(box).ButtonRole
            wanted = (role.AcceptRole, role.YesRole) if accept else (role.RejectRole, role.NoRole)
            for button in box.buttons():
                if box.buttonRole(button) in wanted and button.isEnabled():
                    QTest.mouseClick(button, Qt.MouseButton.LeftButton)
                    if dialog.isVisible() and accept:  # refused (says why): give up on it
                        QTest.keyClick(dialog, Qt.Key.Key_Escape)
                    return
        QTest.keyClick(dialog, Qt.Key.Key_Escape)


class FilePickers:
    """``QFileDialog`` / ``QInputDialog`` static getters replaced, while installed, by a
    person's choice in the scratch folder (or Cancel when the action says ``reject``)."""

    def __init__(self, driver: Any) -> None:
        self.driver = driver
        self._saved: dict[tuple[type, str], Any] = {}

    def install(self) -> None:
        for cls, name, picker, cancelled in (
            (QtWidgets.QFileDialog, "getOpenFileName", self._open, ("", "")),
            (QtWidgets.QFileDialog, "getOpenFileNames", self._open_many, ([], "")),
            (QtWidgets.QFileDialog, "getSaveFileName", self._save, ("", "")),
            (QtWidgets.QFileDialog, "getExistingDirectory", self._folder, ""),
            (QtWidgets.QInputDialog, "getDouble", self._double, (0.0, False)),
        ):
            self._saved[cls, name] = cls.__dict__[name]
            setattr(cls, name, staticmethod(functools.partial(self._pick, picker, cancelled)))

    def uninstall(self) -> None:
        for (cls, name), value in self._saved.items():
            setattr(cls, name, value)
        self._saved.clear()

    def _pick(self, picker: Any, cancelled: Any, *args: Any, **kwargs: Any) -> Any:
        """``picker``'s choice, or what Cancel returns when the action says ``reject``."""
        rejected = self.driver.params.get("answer", "accept") != "accept"
        return cancelled if rejected else picker(*args, **kwargs)

    def _open(self, _parent: Any = None, caption: str = "", *_a: Any, **_k: Any) -> tuple:
        words = caption.casefold()
        d = self.driver
        if "session" in words:
            path = d.scratch("saves") / "session.actviz"
            return (str(path), "") if path.exists() else ("", "")
        if "model" in words or "checkpoint" in words:
            return str(d.checkpoint_path()), ""
        return str(sorted(d.images.iterdir())[int(_r(d.params, 1) * 4)]), ""

    def _open_many(self, *args: Any, **kwargs: Any) -> tuple:
        path, chosen = self._open(*args, **kwargs)
        return ([path] if path else []), chosen

    def _save(
        self, _parent: Any = None, caption: str = "", _start: str = "", filt: str = "", *_a: Any
    ) -> tuple:
        suffix = ""
        if "*." in filt:
            suffix = "." + filt.split("*.", 1)[1].split(")")[0].split()[0].split(";")[0]
        words = caption.casefold()
        name = "session" if "session" in words else f"save{int(_r(self.driver.params, 1) * 3)}"
        return str(self.driver.scratch("saves") / f"{name}{suffix}"), filt

    def _folder(self, _parent: Any = None, caption: str = "", *_a: Any, **_k: Any) -> str:
        if "image" in caption.casefold():
            return str(self.driver.images)
        return str(self.driver.scratch(f"exports/d{int(_r(self.driver.params, 1) * 3)}"))

    def _double(self, *_a: Any) -> tuple[float, bool]:
        return float((0.5, 2.0, 0.0)[int(_r(self.driver.params, 1) * 3)]), True


def write_images(folder: Path, count: int = 8) -> Path:
    """``count`` small random PNG images in ``folder`` (what scans and live mode read)."""
    from PIL import Image

    folder.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(0)
    for i in range(count):
        pixels = rng.integers(0, 256, (24, 24, 3), dtype=np.uint8)
        Image.fromarray(pixels).save(folder / f"img{i:02d}.png")
    return folder
