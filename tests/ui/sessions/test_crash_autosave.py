"""Crash safety: a window killed with SIGKILL in the middle of a job reopens at its last
autosave, with nothing lost but that job (the layers ticked and the edit made before it)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap

import pytest
from PySide6.QtCore import QSettings

CHILD = textwrap.dedent(
    """
    import os, sys, time
    from PySide6.QtCore import QSettings
    from actviz.ui.explore import ensure_app
    from actviz.ui.window.main_window import MainWindow
    from actviz.edits import ablate

    app = ensure_app()
    window = MainWindow(settings=QSettings(sys.argv[1], QSettings.Format.IniFormat))
    sessions = window.session_store
    sessions.autosave = True  # as the app does

    def wait(cond, seconds=60):
        end = time.monotonic() + seconds
        while not cond():
            app.processEvents()
            time.sleep(0.01)
            assert time.monotonic() < end, "timed out"

    assert window.files.load_demo()
    wait(lambda: window.session.model is not None and window.session.input is not None)
    wait(lambda: window.script.wait_idle())
    window.session.set_ticked(["features.block2"], True)
    window.session.edits.add("features.block1", ablate([0, 3]))
    wait(lambda: not window.is_busy())
    done = sessions.kept.writes
    wait(lambda: sessions.kept.writes > done)  # kept a few seconds after the last change
    window.session.edits.add("features.block2", ablate([1]))  # the job that is lost
    window.runs.run()
    print("killing", flush=True)
    os.kill(os.getpid(), 9)
    """
)


@pytest.mark.skipif(not hasattr(signal, "SIGKILL"), reason="needs SIGKILL")
def test_a_killed_window_reopens_at_its_last_autosave(actviz_window, tmp_path):
    ini = tmp_path / "config" / "actviz.ini"
    ini.parent.mkdir()
    env = dict(os.environ, QT_QPA_PLATFORM="offscreen")
    child = subprocess.run(
        [sys.executable, "-c", CHILD, str(ini)],
        capture_output=True, text=True, timeout=240, env=env,
    )  # fmt: skip
    assert child.returncode == -signal.SIGKILL, child.stderr[-3000:]
    assert "killing" in child.stdout

    store = QSettings(str(ini), QSettings.Format.IniFormat)
    win = actviz_window(settings=store)
    sessions = win.sessions.feature
    assert sessions.kept.path.is_file() and sessions.can_offer_restore()
    sessions.ask_restore = lambda *_: True
    assert sessions.offer_restore()
    win.wait_idle(120_000)
    session = win.window.session
    assert session.model_name.startswith("demo")
    assert "features.block2" in session.ticked
    assert [(e.layer, e.edit.channels) for e in session.edits.entries] == [
        ("features.block1", (0, 3))
    ]
