"""``actviz`` (no sub-command): the desktop explorer's entry point for the CLI."""

from __future__ import annotations

import logging
import os

from PySide6.QtCore import QCoreApplication, QTimer

from actviz.core.allocator import tune_allocator
from actviz.core.threads import parallel_in_workers_only
from actviz.ui.explore import ensure_app
from actviz.ui.window.main_window import MainWindow
from actviz.ui.window.memory import keep_collector_off_clicks

log = logging.getLogger(__name__)

#: Set to 1, the window exits on its own once its first result is painted (CI, smoke tests).
EXIT_AFTER_SHOW_ENV = "ACTVIZ_EXIT_AFTER_SHOW"
EXIT_AFTER_SHOW_TIMEOUT_MS = 300_000


def run_app(
    model: str | None = None,
    arch: str | None = None,
    input: str | None = None,  # noqa: A002 - mirrors the --input flag
    trust: bool = False,
    session: str | None = None,
    plugins: bool = True,
) -> int:
    """Open the explorer window and run the Qt event loop until it is closed.

    Parameters
    ----------
    model
        A model source for ``open_model``; None opens the demo model on its first sample.
    arch
        Architecture for weight-only files (state_dict, safetensors).
    input
        An image / tensor file or ``random:...`` spec; None: the demo's sample, or none.
    trust
        Allow unpickling a file that runs code (``--trust``); without it the window asks.
    session
        A session file (``.actviz``) to open instead; without any, the last one is offered.
    plugins
        Load the installed plugins (``actviz.plugins`` entry points).

    Returns
    -------
    int
        The event loop's exit code; ``ACTVIZ_EXIT_AFTER_SHOW=1`` closes after the first
        result (0) or failure (1).
    """
    tune_allocator()  # the app's own process captures again and again: keep freed memory
    # Torch in parallel on the worker threads only (core/threads.py), until the window closes.
    undo_threads = parallel_in_workers_only()
    keep_collector_off_clicks()  # Python's full collections at idle moments, not mid-click
    try:
        app = ensure_app()
        window = MainWindow(plugins="installed" if plugins else None)
        # Everything opens in the background while the window is already on screen.
        sessions = window.session_store
        if sessions is not None:
            sessions.autosave = True
        offer = model is None and input is None and os.environ.get(EXIT_AFTER_SHOW_ENV) != "1"
        if session is not None and sessions is not None:
            sessions.open_session(session)
        elif offer and sessions is not None and sessions.can_offer_restore():
            # Asked over the window once it is on screen; declined, the demo opens as usual.
            QTimer.singleShot(0, lambda: sessions.offer_restore() or window.files.load_demo())
        elif model is None:
            window.files.load_demo()
        else:
            window.files.open_model_source(model, arch=arch, trust=trust)
        if session is None and input is not None:
            window.files.open_input_source(input)  # replaces the demo's own sample
        elif session is None and model is not None:
            window.files.open_default_input()
        if os.environ.get(EXIT_AFTER_SHOW_ENV) == "1":
            _exit_after_first_result(app, window)
        window.show()
        code = app.exec()
        window.shutdown()
        window.deleteLater()  # done with: its widgets (and pyqtgraph's menus) go with it
        return int(code)
    finally:
        keep_collector_off_clicks(False)
        undo_threads()


def _exit_after_first_result(app: QCoreApplication, window: MainWindow) -> None:
    """Quit ``app`` after ``window`` painted its first result (0) or after a failure (1)."""
    ended: list[int] = []

    def end(code: int, message: str = "") -> None:
        if ended:
            return
        ended.append(code)
        if code == 0:
            window.display.flush_panel_updates()
            window.repaint()  # synchronous: the panels are drawn before the loop ends
            message = f"painted {len(window.host.layer_panels)} layer panels"
        print(f"actviz: {message}; exiting ({EXIT_AFTER_SHOW_ENV}=1)")
        app.exit(code)

    # After the result is applied and the loop has had a pass to lay the panels out.
    window.run_finished.connect(lambda: QTimer.singleShot(0, lambda: end(0)))
    for signal in (window.run_failed, window.model_load_failed, window.input_load_failed):
        signal.connect(lambda message: end(1, message))
    # Never hang a headless machine: no result at all is a failure too.
    QTimer.singleShot(EXIT_AFTER_SHOW_TIMEOUT_MS, window, lambda: end(1, "no result in 5 minutes"))
