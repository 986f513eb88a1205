"""PySide6-Essentials 6.12.0 aborts Python 3.11 after a few thousand Signal.emit calls
(bool_dealloc); the pin <6.12 keeps us off it. This proves 20k cross-thread emits exit cleanly."""

from __future__ import annotations

import subprocess
import sys

SCRIPT = r"""
import os, sys
os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")
from PySide6.QtCore import QCoreApplication, QObject, QThread, Signal, Slot, QTimer

N = 20_000

class Emitter(QObject):
    ticked = Signal(object, bool)
    done = Signal()

    @Slot()
    def run(self):
        for i in range(N):
            self.ticked.emit(i, i % 2 == 0)
        self.done.emit()

app = QCoreApplication(sys.argv)
thread = QThread()
emitter = Emitter()
emitter.moveToThread(thread)
got = []
emitter.ticked.connect(lambda i, flag: got.append(flag))
emitter.done.connect(lambda: QTimer.singleShot(0, app.quit))
thread.started.connect(emitter.run)
thread.start()
QTimer.singleShot(120_000, lambda: app.exit(3))
rc = app.exec()
thread.quit(); thread.wait()
print(len(got), sum(got), rc)
sys.exit(0 if (len(got) == N and sum(got) == N // 2 and rc == 0) else 1)
"""


def test_twenty_thousand_cross_thread_emits_exit_cleanly():
    proc = subprocess.run(
        [sys.executable, "-c", SCRIPT], capture_output=True, text=True, timeout=180
    )
    assert proc.returncode == 0, (proc.returncode, proc.stdout, proc.stderr[-2000:])
    assert proc.stdout.split() == ["20000", "10000", "0"]


def test_installed_pyside6_is_below_6_12():
    from importlib.metadata import version

    major, minor = (int(p) for p in version("PySide6-Essentials").split(".")[:2])
    assert (major, minor) < (6, 12)
