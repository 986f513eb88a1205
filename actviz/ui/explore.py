"""``actviz.explore(model, inputs)``: open the explorer on an in-memory model from a script; and
``actviz`` (no sub-command), the desktop explorer's entry point for the CLI (:func:`run_app`)."""

from __future__ import annotations

import os
import sys
import tempfile
from collections.abc import Sequence
from typing import Any

from PySide6.QtCore import QCoreApplication, QEventLoop, QSettings, QTimer
from PySide6.QtWidgets import QApplication

from actviz.core.allocator import tune_allocator
from actviz.core.threads import parallel_in_workers_only
from actviz.ui.background_loads import names_a_model
from actviz.ui.window.main_window import MainWindow
from actviz.ui.window.script import Explorer
from actviz.ui.window.settings import AppSettings, ensure_app_identity, user_settings
from actviz.ui.worker import keep_collector_off_clicks
from actviz.workspace.session_file import SUFFIX

# block=False windows stay referenced until closed, or a dropped return value collects them.
_OPEN_WINDOWS: list[MainWindow] = []
#: Set to 1, the window exits on its own once its first result is painted (CI, smoke tests).
EXIT_AFTER_SHOW_ENV = "ACTVIZ_EXIT_AFTER_SHOW"
EXIT_AFTER_SHOW_TIMEOUT_MS = 300_000


def ensure_app() -> QApplication:
    """Return the running QApplication, creating one (named "actviz") if there is none."""
    app = QApplication.instance() or QApplication(sys.argv[:1] or ["actviz"])
    ensure_app_identity()
    return app  # type: ignore[return-value]


def explore(
    model: Any,
    inputs: Any = None,
    layers: Sequence[str] | None = None,
    *,
    block: bool = True,
    categories: Sequence[str] | None = None,
    settings: AppSettings | QSettings | bool | None = None,
) -> Explorer | None:
    """Open the actviz explorer on ``model``.

    Parameters
    ----------
    model
        An ``nn.Module``, or any source ``open_model`` accepts (``"resnet18"``, a checkpoint).
    inputs
        A tensor, a tuple/list or dict of tensors, or a path / ``"random:..."`` spec. None: no
        input yet.
    layers
        Module names (from ``named_modules()``) to tick; None ticks a few block outputs.
    block
        True: run the Qt event loop until the window is closed, like ``plt.show()``. False:
        show the window and return it at once (notebooks with ``%gui qt``, tests).
    categories
        Class names of the output logits, for the prediction panel and the target selector.
    settings
        None: read the user's settings, write nothing back; True: the user's, written back; a
        ``QSettings`` or :class:`~actviz.ui.window.settings.AppSettings`: that store.

    Returns
    -------
    Explorer or None
        The window's script façade when ``block`` is False; None after a blocking call.

    Raises
    ------
    ValueError
        A name in ``layers`` is not in ``model.named_modules()`` (with suggestions)."""
    import torch

    ensure_app()
    scratch = None
    if settings is None or settings is False:
        scratch = tempfile.TemporaryDirectory(prefix="actviz-explore-")
        # A settings file of the window's own, holding a copy of the user's.
        ini = os.path.join(scratch.name, "settings.ini")
        store: AppSettings | QSettings | None = QSettings(ini, QSettings.Format.IniFormat)
        user = user_settings()
        for key in user.allKeys():
            store.setValue(key, user.value(key))  # type: ignore[union-attr]
    else:
        store = None if settings is True else settings
    window = MainWindow(settings=store)
    if scratch is not None:
        # Removed with the window (its close writes geometry there), or when collected.
        window.closed.connect(scratch.cleanup)
        window._explore_scratch = scratch  # type: ignore[attr-defined]
    try:
        if isinstance(model, torch.nn.Module):
            window.script.set_model(model, categories=categories, layers=layers)
        else:
            # Scripts expect the model to be there on return: wait for the background load.
            if not window.files.open_model_source(os.fspath(model), wait=True):
                raise ValueError((window.centre.banner.texts() or [model])[-1])
            if categories:
                window.session.set_categories(categories)
            if layers is not None:
                from actviz.core.capture import resolve_layers

                window.session.replace_ticked(resolve_layers(window.session.model, list(layers)))
        if isinstance(inputs, (str, os.PathLike)):
            if not window.files.open_input_source(os.fspath(inputs), remember=False, wait=True):
                raise ValueError(window.centre.banner.texts()[-1])
        elif isinstance(inputs, (torch.Tensor, tuple, list, dict)):
            window.script.set_input(inputs)
        elif inputs is not None:  # numpy arrays, PIL images: open_input adapts them to the model
            from actviz.io.input_files import open_input

            s = window.session
            s.set_loaded_input(open_input(inputs, model=s.model, loaded_model=s.loaded_model))
    except Exception:
        window.shutdown()
        window.deleteLater()
        raise
    window.show()
    window.raise_()
    if window.session.can_run():
        window.runs.run()
    if not block:
        _OPEN_WINDOWS.append(window)
        window.closed.connect(lambda: window in _OPEN_WINDOWS and _OPEN_WINDOWS.remove(window))
        return window.script
    # A local loop ends with this window, and works inside a running loop (IPython's %gui qt).
    loop = QEventLoop()
    window.closed.connect(loop.quit)
    loop.exec()
    window.deleteLater()  # closed and not returned: nothing can use it any more
    return None


def run_app(
    model: str | None = None,
    arch: str | None = None,
    input: str | None = None,  # noqa: A002 - mirrors the --input flag
    trust: bool = False,
    session: str | None = None,
    plugins: bool = True,
) -> int:
    """Open the explorer window and run the Qt event loop until it is closed; its exit code.

    The arguments are the ``actviz`` command's ``--model`` (None: the demo on its first sample),
    ``--arch``, ``--input``, ``--trust`` (else the window asks before unpickling code),
    ``--session`` (without one, the last session is offered) and the installed plugins' use.
    ``ACTVIZ_EXIT_AFTER_SHOW=1`` closes after the first result (0) or a failure (1)."""
    tune_allocator()  # the app's own process captures again and again: keep freed memory
    # Torch in parallel on the worker threads only (core/threads.py), until the window closes.
    undo_threads = parallel_in_workers_only()
    keep_collector_off_clicks()  # Python's full collections at idle moments, not mid-click
    try:
        app = ensure_app()
        window = MainWindow(plugins="installed" if plugins else None)
        # Everything opens in the background while the window is already on screen.
        if (sessions := window.session_store) is not None:
            sessions.autosave = True
        # `actviz resnet.pt`, a model folder or a picture: opened as if dropped on the window.
        dropped = session if session and not session.lower().endswith(SUFFIX) else None
        session, dropped_model = (None, names_a_model(dropped)) if dropped else (session, False)
        offer = model is None and input is None and not dropped
        offer = offer and os.environ.get(EXIT_AFTER_SHOW_ENV) != "1"
        if session is not None and sessions is not None:
            sessions.open_session(session)
        elif offer and sessions is not None and sessions.can_offer_restore():
            # Asked over the window once it is on screen; declined, the demo opens as usual.
            QTimer.singleShot(0, lambda: sessions.offer_restore() or window.files.load_demo())
        elif model is None and not dropped_model:
            window.files.load_demo()
        elif model is not None:
            window.files.open_model_source(model, arch=arch, trust=trust)
        if dropped:
            window.files.open_dropped(dropped)
        if session is None and input is not None:
            window.files.open_input_source(input)  # replaces the demo's own sample
        elif session is None and (model is not None or dropped_model):
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
