"""Test-wide settings: Qt offscreen, small torch thread pool, a hook-leak guard, isolation, and
garbage collection kept out of Qt's event processing.

Every test runs with its own home, config folder and QSettings location (the
``isolated_user_state`` fixture below), so no test reads or writes the user's real
configuration, and whatever a test changes in the process (environment, QSettings paths, the
interpreter's switch interval) is put back before the next one starts.
"""

from __future__ import annotations

import os
import sys

# Run from the checkout, pytest finds actviz.egg-info here and marks every module of actviz
# for assertion rewriting: 270 modules parsed and rewritten at each worker's start (4 s), for
# asserts that are not tests. Only the pytest plugin's package keeps it. (pytest's private
# state: where it differs, nothing changes.)
for _hook in sys.meta_path:
    if "actviz" in getattr(_hook, "_must_rewrite", ()):
        _hook._must_rewrite.discard("actviz")  # noqa: SLF001
        _hook.mark_rewrite("actviz.testing")

os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")
# Tests never reach the network: torchvision names fall back to random init at once.
os.environ.setdefault("ACTVIZ_OFFLINE", "1")

import gc  # noqa: E402
import tempfile  # noqa: E402

import pytest  # noqa: E402
import torch  # noqa: E402
from PySide6.QtCore import QCoreApplication, QSettings, QStandardPaths  # noqa: E402

from actviz.testing import assert_no_hooks  # noqa: E402

torch.set_num_threads(2)
#: torch's threads in a test without Qt: the worker's share of the cores (two workers on two
#: cores: one each). More busy threads than cores make OpenMP's threads wait for each other by
#: spinning: the bench, visualisation and core tests took 132 s on two workers at two threads
#: each, 86 s at one. A window's tests keep two (its features plan for them: live mode's second
#: lane), and every test starts at its count whatever the one before it set.
_PLAIN_TEST_THREADS = max(
    1, min(2, (os.cpu_count() or 1) // int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "1")))
)

# Where Qt puts user settings before any test moves it, to put it back afterwards.
_QT_USER_CONFIG = QStandardPaths.writableLocation(
    QStandardPaths.StandardLocation.GenericConfigLocation
)
#: Variables that change what the app does; a test sets them itself when it wants them.
ACTVIZ_BEHAVIOUR_VARS = (
    "ACTVIZ_MEMORY_BUDGET",
    "ACTVIZ_EXIT_AFTER_SHOW",
    "ACTVIZ_MALLOC_TUNING",
    "ACTVIZ_TUNE_ALLOCATOR",
    "ACTVIZ_NO_PLUGINS",
)


#: Fixtures of the tests that build Qt objects (pytest-qt's).
_QT_FIXTURES = frozenset({"qtbot", "qapp"})
#: Tests between two full collections once Qt is up (a full one scans half a million objects:
#: some 300 ms).
_FULL_COLLECTION_EVERY = 25
_tests_since_full = 0


def pytest_collection_finish(session):
    """What the imports made lives to the end: frozen out of every collection.

    A worker holds some 430,000 objects once torch, Qt, pyqtgraph and the test modules are in;
    a full collection walks them all (0.1-0.3 s), and the suite makes hundreds (every
    :data:`_FULL_COLLECTION_EVERY` tests, and the leak checks' second pass). Frozen, a full
    collection walks only what the tests made. ``gc.get_objects()`` leaves frozen objects out,
    so counts of what a test made are unchanged; a window of the app's own process unfreezes
    them when it closes (``IdleMemory.stop``), which only makes later collections slower.
    """
    gc.collect()
    gc.freeze()


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item, nextitem):
    """Once Qt is up, garbage is collected between tests only, never inside Qt's event handling.

    pytest-qt processes Qt's events after every test body once an application exists. Windows
    and their pyqtgraph items are held by reference cycles (slots that capture their owners), so
    only the cyclic collector frees them, and it fires whenever allocations add up: inside that
    event processing it can destroy items Qt is painting. Two CI runs lost a worker that way
    (a segfault, "Garbage-collecting" under ``ViewBox.boundingRect`` in pytest-qt's
    ``_process_events``). So from the first Qt test on, automatic collection stays off; after
    each test the young generations are collected (everything the test made: a few ms), and
    every :data:`_FULL_COLLECTION_EVERY` tests all of them, with no Qt code on the stack. Tests
    that check that something was freed call ``gc.collect()`` themselves, which works with the
    collector off.
    """
    global _tests_since_full
    from actviz.core.threads import torch_threads

    threads = 2 if _QT_FIXTURES.intersection(item.fixturenames) else _PLAIN_TEST_THREADS
    qt = QCoreApplication.instance() is not None or _QT_FIXTURES.intersection(item.fixturenames)
    if not qt:
        with torch_threads(threads):
            yield
        return
    gc.disable()
    with torch_threads(threads):
        yield
    _tests_since_full += 1
    if _tests_since_full >= _FULL_COLLECTION_EVERY:
        _tests_since_full = 0
        gc.collect()
    else:
        gc.collect(1)


@pytest.fixture
def no_hooks_left():
    """:func:`actviz.testing.assert_no_hooks`, as a fixture."""
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


@pytest.fixture(scope="module")
def resnet() -> torch.nn.Module:
    """ResNet-18 with random weights (seed 0), in eval mode, shared by a test module."""
    from tests.helpers import seeded_resnet18

    return seeded_resnet18()


@pytest.fixture(scope="module")
def image() -> torch.Tensor:
    """A 1x3x64x64 normal input (seed 1), shared by a test module."""
    torch.manual_seed(1)
    return torch.randn(1, 3, 64, 64)


@pytest.fixture
def fresh_signatures(monkeypatch, tmp_path):
    """A new session of the architecture guesser at each call: a signature store of its own in
    ``tmp_path`` and its in-process cache emptied (emptied again after the test)."""
    from actviz.io.models import arch_guess
    from actviz.io.models.arch_guess import SignatureStore

    stores = []

    def new_session() -> SignatureStore:
        arch_guess._signature.cache_clear()
        stores.append(SignatureStore(tmp_path / "arch-signatures.json", {"torch": "2.14.1"}))
        monkeypatch.setattr(arch_guess, "signature_store", lambda: stores[-1])
        return stores[-1]

    yield new_session
    arch_guess._signature.cache_clear()
