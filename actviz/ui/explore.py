"""``actviz.explore(model, inputs)``: open the explorer on an in-memory model from a script."""

from __future__ import annotations

import logging
import os
import sys
import tempfile
from collections.abc import Sequence
from typing import Any

from PySide6.QtCore import QEventLoop, QSettings
from PySide6.QtWidgets import QApplication

from actviz.ui.window.main_window import MainWindow
from actviz.ui.window.script import Explorer
from actviz.ui.window.settings import AppSettings, ensure_app_identity, user_settings

log = logging.getLogger(__name__)

# block=False windows stay referenced until closed, or a dropped return value collects them.
_OPEN_WINDOWS: list[MainWindow] = []


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
        A name in ``layers`` is not in ``model.named_modules()`` (with suggestions).
    """
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
                raise ValueError(
                    window.centre.banner.texts()[-1] if window.centre.banner.texts() else model
                )
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
