"""The actviz pytest plugin: the ``actviz_window`` fixture and its leak checks. At teardown
windows are closed, and the test errors if it left a top-level widget, a hook on a shown model, a
new global hook, or a changed switch interval or thread count (``@pytest.mark.actviz_allow_leaks``,
optionally ``"widgets"``, ``"hooks"``, ``"process"``, turns checks off)."""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

import pytest

#: What ``@pytest.mark.actviz_allow_leaks(...)`` can name.
LEAK_CHECKS = ("widgets", "hooks", "process")
_CALL_FAILED, _DRIVERS = pytest.StashKey[bool](), pytest.StashKey[list]()


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers",
        "actviz_allow_leaks(*checks): the test leaves widgets, model hooks or process state "
        'behind on purpose; actviz_window does not check those ("widgets", "hooks", '
        '"process"; none named: all)',
    )


@pytest.hookimpl(wrapper=True, tryfirst=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo) -> Any:
    report = yield
    if report.when == "call" and report.failed:
        item.stash[_CALL_FAILED] = True
    return report


@pytest.hookimpl(wrapper=True, tryfirst=True)
def pytest_runtest_teardown(item: pytest.Item, nextitem: pytest.Item | None) -> Any:
    # The test's windows close before any fixture is torn down, as pytest-qt's do.
    for driver in item.stash.get(_DRIVERS, []):
        driver.close()
    return (yield)


def window_factory(qtbot: Any, tmp_path: Path, drivers: list) -> Callable[..., Any]:
    """The ``actviz_window`` factory: builds drivers of shown windows, appended to ``drivers``."""
    from PySide6.QtCore import QSettings

    from actviz.testing.driver import WindowDriver
    from actviz.ui.file_dialogs import forget
    from actviz.ui.window.main_window import MainWindow

    def make(
        model: Any = None,
        inputs: Any = None,
        layers: Sequence[str] | None = None,
        *,
        size: tuple[int, int] | None = (1280, 720),
        settings: Any = None,
        show: bool = True,
        features: Sequence[Any] | None = None,
        **window_kwargs: Any,  # to MainWindow: debounce_ms=20, auto_run=False unless given
    ) -> WindowDriver:
        if settings is None:  # one file per test: a second window reads what the first wrote
            settings = QSettings(str(tmp_path / "actviz.ini"), QSettings.Format.IniFormat)
            forget()  # the folders an earlier test's dialogs chose
        window = MainWindow(
            settings=settings,
            features=None if features is None else feature_classes(features),
            **{"debounce_ms": 20, "auto_run": False, **window_kwargs},
        )
        # Not given to qtbot.addWidget: a test may delete its window itself.
        driver = WindowDriver(window, qtbot)
        drivers.append(driver)
        if size is not None:
            window.resize(*size)
        if show:
            window.show()
            qtbot.waitExposed(window)
        if model is not None:
            driver.set_model(model, list(layers) if layers is not None else None)
        elif layers is not None:
            driver.tick(*layers)
        if inputs is not None:
            driver.set_input(inputs)
        return driver

    return make


def feature_classes(features: Sequence[Any]) -> list[Any]:
    """The feature classes ``features`` names (names or classes), in order; ``ValueError`` for an
    unknown name."""
    from actviz.ui.window.main_window import default_features

    by_name = {make.name: make for make in default_features()}
    if unknown := [f for f in features if isinstance(f, str) and f not in by_name]:
        raise ValueError(f"no feature {unknown[0]!r}; the features are {sorted(by_name)}")
    return [by_name[f] if isinstance(f, str) else f for f in features]


@contextlib.contextmanager
def _left_behind(request: pytest.FixtureRequest, drivers: list, allowed: set[str]) -> Iterator:
    """Around a test: close and delete the drivers' windows after it, then fail it (unless its
    call failed) for hooks left on their models, changed process state or top-level widgets."""
    from actviz.testing import checks

    state_before, widgets_before = checks.ProcessState.now(), checks.top_level_widgets()
    yield
    for marker in request.node.iter_markers("actviz_allow_leaks"):  # the checks it turns off
        names = set(marker.args) or set(LEAK_CHECKS)
        if unknown := names - set(LEAK_CHECKS):
            raise ValueError(f"actviz_allow_leaks: unknown checks {sorted(unknown)}")
        allowed = allowed | names
    models: list[Any] = []
    while drivers:
        # Popped: a deleted window's Python side still holds what Python made for it.
        driver = drivers.pop()
        driver.delete()
        models.extend(driver.models)
        del driver
    problems: list[str] = []
    if "hooks" not in allowed:
        shown = {id(m): m for m in models if hasattr(m, "named_modules")}  # each model once
        for model in shown.values():
            problems.extend(f"hook left: {line}" for line in checks.hooks_left(model))
    if "process" not in allowed:
        problems.extend(checks.ProcessState.now().changes_since(state_before))
    if "widgets" not in allowed:
        leaked = checks.leaked_widgets(widgets_before)
        problems.extend(f"top-level widget left: {checks.describe_widget(w)}" for w in leaked)
    if problems and not request.node.stash.get(_CALL_FAILED, False):
        said = "the test left things behind (mark it actviz_allow_leaks if on purpose):\n  "
        pytest.fail(said + "\n  ".join(problems), pytrace=False)


@pytest.fixture
def actviz_window(request: pytest.FixtureRequest, qtbot: Any, tmp_path: Path) -> Any:
    """A factory of :class:`~actviz.testing.WindowDriver` s over shown actviz windows.

    ``actviz_window(model=None, inputs=None, layers=None, *, size=(1280, 720), debounce_ms=20,
    auto_run=False, settings=None, show=True, plugins=None, features=None, **window_kwargs)``
    builds a window with only ``features`` (None: all) on scratch settings. Nothing runs until
    :meth:`~actviz.testing.WindowDriver.run_and_wait`."""
    drivers: list = []
    request.node.stash[_DRIVERS] = drivers
    with _left_behind(request, drivers, set()):
        yield window_factory(qtbot, tmp_path, drivers)


@pytest.fixture
def actviz_leak_check(request: pytest.FixtureRequest, qapp: Any) -> Any:
    """Fail a test that builds its own widgets and leaks top-level widgets or changes process
    settings (``actviz_window``'s checks less hooks); opt out with ``actviz_allow_leaks``."""
    with _left_behind(request, [], {"hooks"}):
        yield
