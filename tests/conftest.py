"""Test-wide settings: Qt offscreen, small torch thread pool, a hook-leak guard, and isolation.

Every test runs with its own home, config folder and QSettings location (the
``isolated_user_state`` fixture below), so no test reads or writes the user's real
configuration, and whatever a test changes in the process (environment, QSettings paths, the
interpreter's switch interval) is put back before the next one starts.
"""

from __future__ import annotations

import os

os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")
# Tests never reach the network: torchvision names fall back to random init at once.
os.environ.setdefault("ACTVIZ_OFFLINE", "1")

import sys  # noqa: E402
import tempfile  # noqa: E402

import pytest  # noqa: E402
import torch  # noqa: E402
from PySide6.QtCore import QSettings, QStandardPaths  # noqa: E402

torch.set_num_threads(2)

# Where Qt puts user settings before any test moves it, to put it back afterwards.
_QT_USER_CONFIG = QStandardPaths.writableLocation(
    QStandardPaths.StandardLocation.GenericConfigLocation
)
#: Variables that change what the app does; a test sets them itself when it wants them.
ACTVIZ_BEHAVIOUR_VARS = ("ACTVIZ_MEMORY_BUDGET", "ACTVIZ_EXIT_AFTER_SHOW", "ACTVIZ_MALLOC_TUNING")


def assert_no_hooks(model: torch.nn.Module) -> None:
    """Fail if any module of ``model`` still holds a hook."""
    for name, mod in model.named_modules():
        for attr in (
            "_forward_hooks",
            "_forward_pre_hooks",
            "_backward_hooks",
            "_backward_pre_hooks",
            "_forward_hooks_with_kwargs",
            "_forward_pre_hooks_with_kwargs",
        ):
            hooks = getattr(mod, attr, None)
            assert not hooks, f"{name or '(model)'} still has {attr}: {hooks}"


@pytest.fixture
def no_hooks_left():
    """The helper above, as a fixture."""
    return assert_no_hooks


@pytest.fixture
def four_threads():
    """torch at 4 threads on this thread for the test (back to what it was after)."""
    from actviz.core.threads import torch_threads

    with torch_threads(4):
        yield


@pytest.fixture(autouse=True)
def isolated_user_state(tmp_path_factory):
    """Give the test its own home, config folder and QSettings location; restore all after.

    ``HOME``, the XDG folders and ``TMPDIR`` (and :mod:`tempfile`'s folder) point into a fresh
    temporary folder (so do subprocesses the test starts, which inherit the environment),
    ``QSettings()`` reads and writes an INI file there, and the environment, QSettings' default
    format and paths, tempfile's folder and ``sys.getswitchinterval()`` are put back when the
    test ends, whatever it changed.

    Yields
    ------
    pathlib.Path
        The test's home folder.
    """
    home = tmp_path_factory.mktemp("home")
    config = home / ".config"
    scratch = home / "tmp"  # tempfile's folder too, so no temporary file lands outside
    scratch.mkdir()
    environ = dict(os.environ)
    tempdir = tempfile.tempdir
    switch_interval = sys.getswitchinterval()
    settings_format = QSettings.defaultFormat()
    for var in ACTVIZ_BEHAVIOUR_VARS:
        os.environ.pop(var, None)
    os.environ.update(
        HOME=str(home),
        XDG_CONFIG_HOME=str(config),
        XDG_CACHE_HOME=str(home / ".cache"),
        XDG_DATA_HOME=str(home / ".local" / "share"),
        TMPDIR=str(scratch),
    )
    tempfile.tempdir = str(scratch)
    QSettings.setDefaultFormat(QSettings.Format.IniFormat)
    for fmt in (QSettings.Format.NativeFormat, QSettings.Format.IniFormat):
        QSettings.setPath(fmt, QSettings.Scope.UserScope, str(config))
    try:
        yield home
    finally:
        for fmt in (QSettings.Format.NativeFormat, QSettings.Format.IniFormat):
            QSettings.setPath(fmt, QSettings.Scope.UserScope, _QT_USER_CONFIG)
        QSettings.setDefaultFormat(settings_format)
        sys.setswitchinterval(switch_interval)
        tempfile.tempdir = tempdir
        os.environ.clear()
        os.environ.update(environ)
