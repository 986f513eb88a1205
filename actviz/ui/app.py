"""``actviz`` (no sub-command): the desktop explorer's entry point for the CLI."""

from __future__ import annotations

import logging

from actviz.ui.explore import ensure_app
from actviz.ui.live.dock import install_live_mode
from actviz.ui.window.main_window import MainWindow

log = logging.getLogger(__name__)


def run_app(
    model: str | None = None,
    arch: str | None = None,
    input: str | None = None,  # noqa: A002 - mirrors the --input flag
    trust: bool = False,
) -> int:
    """Open the explorer window and run the Qt event loop until it is closed.

    Parameters
    ----------
    model
        A model source for ``open_model`` (torchvision name, file, ``file.py:Class``);
        None opens the bundled demo model on its first sample, already run.
    arch
        Architecture for weight-only files (state_dict, safetensors).
    input
        An image / tensor file or ``random:...`` spec; None keeps the demo sample (demo) or
        waits for the user (other models).
    trust
        Allow unpickling a file that runs code (``--trust``); without it the window asks.

    Returns
    -------
    int
        The event loop's exit code (0 on a normal close). A model or input that fails to
        open does not stop the window: the banner says why.
    """
    app = ensure_app()
    window = MainWindow()
    install_live_mode(window)
    # Everything opens in the background while the window is already on screen; an input
    # waits for the model being opened, and the automatic run starts once both are in.
    if model is None:
        window.load_demo()
    else:
        window.open_model_source(model, arch=arch, trust=trust)
    if input is not None:
        window.open_input_source(input)  # replaces the demo's own sample
    elif model is not None:
        window.open_default_input()
    window.show()
    code = app.exec()
    window.shutdown()
    return int(code)
