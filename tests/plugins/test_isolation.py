"""A plugin that fails at import, at construction or inside a slot is reported once,
disabled, and the window keeps working; one written for another API is refused with a
sentence; ``--no-plugins`` and ``ACTVIZ_NO_PLUGINS=1`` start without any."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest
import torch

from actviz.plugins import API_VERSION, LayerView, Plugin, WindowFeature
from tests.plugins.nets import TinyConvNet


def write_module(folder: Path, name: str, source: str) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{name}.py"
    path.write_text(textwrap.dedent(source))
    return folder


def window_with(actviz_window, **kwargs):
    torch.manual_seed(0)
    model, x = TinyConvNet().eval(), torch.randn(1, 3, 16, 16)
    return actviz_window(model, x, ["conv1", "conv2"], **kwargs)


def banner_about(win, name: str) -> list[str]:
    return [m for m in win.banner_messages() if f"Plugin {name}" in m]


def assert_keeps_working(win) -> None:
    """A run still reaches the panels, and the example plugin beside the broken one works."""
    before = win.window.session.result
    win.run_and_wait()
    assert win.window.session.result is not before and "conv1" in win.window.session.result.layers
    dock = win.window.plugins.open_view("conv1", "correlation")
    assert dock is not None and dock.last_data.matrix.shape == (6, 6)


def test_a_plugin_that_raises_at_import_is_reported_once_and_skipped(
    actviz_window, install_plugin, installed_examples, tmp_path
):
    src = write_module(tmp_path / "src", "broken_import", "raise RuntimeError('boom at import')\n")
    install_plugin("broken-import", {"broken": "broken_import:plugin"}, src)
    win = window_with(actviz_window, plugins="installed")
    plugins = win.window.plugins
    record = next(r for r in plugins.registry.records if r.name == "broken")
    assert (record.status, record.failed_in) == ("failed", "import")
    assert "RuntimeError: boom at import" in record.details
    assert plugins.reports == [("broken", "import")]
    (message,) = banner_about(win, "broken")
    assert message.startswith("Plugin broken failed (import) and is disabled for this session")
    assert "boom at import" in win.window.centre.banner.details()
    assert_keeps_working(win)
    assert plugins.reports == [("broken", "import")]  # once


def test_a_plugin_that_raises_at_construction_is_reported_once_and_skipped(
    actviz_window, install_plugin, installed_examples, tmp_path
):
    src = write_module(
        tmp_path / "src",
        "broken_construct",
        """
        from actviz.plugins import Plugin, WindowFeature

        def plugin():
            raise ValueError("boom at construction")

        def _feature(host):
            raise KeyError("boom in the feature's constructor")

        feature_plugin = Plugin("feature-plugin", "1.0", contributions=[WindowFeature("f", _feature)])
        """,
    )
    install_plugin(
        "broken-construct",
        {"broken": "broken_construct:plugin", "feature": "broken_construct:feature_plugin"},
        src,
    )
    win = window_with(actviz_window, plugins="installed")
    plugins = win.window.plugins
    records = {r.name: r for r in plugins.registry.records}
    assert (records["broken"].status, records["broken"].failed_in) == ("failed", "construction")
    # Installed plugins go by their entry point's name (what Help > Plugins disables).
    assert records["feature"].status == "failed"
    assert records["feature"].failed_in == "construction of f"
    assert "boom in the feature's constructor" in records["feature"].details
    assert sorted(plugins.reports) == [("broken", "construction"), ("feature", "construction of f")]
    assert len(banner_about(win, "broken")) == 1 and len(banner_about(win, "feature")) == 1
    assert not any(k.startswith("plugin:feature") for k in win.window.features)
    assert_keeps_working(win)
    assert len(plugins.reports) == 2


class _RaisingFeature:
    """A feature whose slot raises on every run; it adds a dock and a menu action."""

    name = "raiser"

    def __init__(self, host) -> None:
        from PySide6.QtGui import QAction
        from PySide6.QtWidgets import QDockWidget, QLabel

        self.calls = 0
        self.dock = QDockWidget("Raiser")
        self.dock.setWidget(QLabel("raiser"))
        host.add_dock(self.dock, hidden=False)
        self.action = QAction("Raise", host.dialog_parent())
        host.add_menu_action("Tools", self.action)
        host.run_finished.connect(self._on_run_finished)
        host.session.ticks_changed.connect(self._on_ticks)
        self.ticks_seen = 0

    def _on_run_finished(self) -> None:
        self.calls += 1
        raise ZeroDivisionError("boom in a slot")

    def _on_ticks(self, names) -> None:
        self.ticks_seen += 1

    def cancel(self) -> bool:
        return False

    def is_busy(self) -> bool:
        return False

    def reset_layout(self) -> None:
        pass

    def shutdown(self) -> None:
        pass


def test_a_plugin_that_raises_in_a_slot_is_reported_once_and_disabled(
    actviz_window, installed_examples
):
    made: list[_RaisingFeature] = []

    def make(host):
        made.append(_RaisingFeature(host))
        return made[-1]

    raiser = Plugin("raiser", "2.0", contributions=[WindowFeature("raiser", make)])
    win = window_with(actviz_window, plugins=["installed", raiser])
    feature = made[0]
    assert feature.dock.isVisible() and "plugin:raiser:raiser" in win.window.features
    win.run_and_wait()
    record = next(r for r in win.window.plugins.registry.records if r.name == "raiser")
    assert record.status == "failed" and record.failed_in.startswith("slot ")
    assert "ZeroDivisionError: boom in a slot" in record.details
    assert win.window.plugins.reports == [("raiser", record.failed_in)]
    assert len(banner_about(win, "raiser")) == 1
    # Disabled: what it added is gone, its slots are not called again.
    assert not feature.dock.isVisible() and not feature.action.isVisible()
    win.tick("fc")
    assert_keeps_working(win)
    assert feature.calls == 1 and feature.ticks_seen == 0
    assert len(win.window.plugins.reports) == 1


class _ButtonFeature(_RaisingFeature):
    """A feature with a button of its own whose slot (connected by the plugin itself, not
    through the host) raises; its run_finished slot does not."""

    def __init__(self, host) -> None:
        from PySide6.QtWidgets import QPushButton

        super().__init__(host)
        self.button = QPushButton("Divide")
        self.button.clicked.connect(self._on_clicked)
        self.dock.setWidget(self.button)
        self.clicks = 0

    def _on_run_finished(self) -> None:
        self.calls += 1

    def _on_clicked(self) -> None:
        self.clicks += 1
        raise ZeroDivisionError("boom in its own button")


def test_a_slot_of_the_plugins_own_widget_that_raises_is_reported_once_and_disabled(
    actviz_window, installed_examples
):
    from PySide6.QtCore import Qt
    from PySide6.QtTest import QTest

    made: list[_ButtonFeature] = []
    plugin = Plugin(
        "buttons",
        "1.0",
        contributions=[
            WindowFeature("buttons", lambda h: made.append(_ButtonFeature(h)) or made[-1])
        ],
    )
    win = window_with(actviz_window, plugins=["installed", plugin])
    feature = made[0]
    win.run_and_wait()
    assert feature.calls == 1
    win.qtbot.waitUntil(feature.button.isVisible)
    QTest.mouseClick(feature.button, Qt.MouseButton.LeftButton)
    record = next(r for r in win.window.plugins.registry.records if r.name == "buttons")
    assert (record.status, record.failed_in) == ("failed", "slot _ButtonFeature._on_clicked")
    assert "ZeroDivisionError: boom in its own button" in record.details
    assert win.window.plugins.reports == [("buttons", record.failed_in)]
    assert len(banner_about(win, "buttons")) == 1
    assert feature.clicks == 1 and not feature.dock.isVisible()
    assert_keeps_working(win)
    assert feature.calls == 1  # disabled: its host slots are not called again
    assert len(win.window.plugins.reports) == 1


def test_an_exception_that_is_not_a_plugins_still_reaches_the_previous_hook(
    actviz_window, installed_examples, monkeypatch
):
    import sys

    seen = []
    monkeypatch.setattr(sys, "excepthook", lambda *args: seen.append(args[1]))
    win = window_with(actviz_window, plugins="installed")
    try:
        raise KeyError("the app's own")
    except KeyError as exc:
        sys.excepthook(type(exc), exc, exc.__traceback__)
        raised = exc
    assert seen == [raised]
    assert all(r.status == "active" for r in win.window.plugins.registry.records)
    win.close()
    assert sys.excepthook is not None and sys.excepthook.__name__ == "<lambda>"


def test_a_hook_put_over_the_plugins_hook_keeps_no_closed_window_alive(
    actviz_window, installed_examples, monkeypatch
):
    import gc
    import sys
    import weakref

    below = []
    monkeypatch.setattr(sys, "excepthook", lambda kind, exc, tb: below.append(exc))
    win = window_with(actviz_window, plugins="installed")
    ours = sys.excepthook
    seen = []
    # Another tool (a test runner, a stress driver) puts its hook over ours and keeps ours.
    sys.excepthook = lambda kind, exc, tb: (seen.append(exc), ours(kind, exc, tb))
    window = weakref.ref(win.window)
    win.delete()
    gc.collect()
    assert window() is None
    try:
        raise KeyError("after the window closed")
    except KeyError as exc:
        sys.excepthook(type(exc), exc, exc.__traceback__)  # passes through ours, no window
    assert [str(e) for e in seen] == [str(e) for e in below] == ["'after the window closed'"]


def test_a_layer_view_that_raises_is_disabled_and_the_panels_go_on(actviz_window):
    def prepare(layer, settings):
        raise RuntimeError("boom in prepare")

    view = LayerView("bad", "Bad view", prepare, widget=lambda context: _label())
    win = window_with(actviz_window, plugins=[Plugin("bad-view", contributions=[view])])
    win.run_and_wait()
    assert win.window.plugins.open_view("conv1", "bad") is not None
    record = win.window.plugins.registry.records[0]
    assert record.status == "failed" and record.failed_in == "layer view bad"
    assert not win.window.plugins.docks  # its dock went with it
    assert win.window.plugins.open_view("conv1", "bad") is None
    win.run_and_wait()
    assert len(win.window.plugins.reports) == 1


def _label():
    from PySide6.QtWidgets import QLabel

    label = QLabel()
    label.set_data = lambda data: None
    return label


def test_a_plugin_for_another_api_version_is_refused_with_a_sentence(actviz_window):
    future = Plugin(
        "future",
        "3.0",
        api_version=API_VERSION + 1,
        contributions=[WindowFeature("f", lambda host: pytest.fail("constructed"))],
    )
    win = window_with(actviz_window, plugins=[future])
    record = win.window.plugins.registry.records[0]
    assert record.status == "refused"
    assert record.error == (
        f"Plugin future 3.0 was written for actviz plugin API {API_VERSION + 1}, and this "
        f"actviz has API {API_VERSION}: it is not loaded; update actviz."
    )
    assert record.error in win.banner_messages()
    assert not win.window.plugins.registry.window_features()


def test_no_plugins_start_without_any(actviz_window, installed_examples, monkeypatch):
    from actviz.ui.plugins import build_registry

    assert [r.name for r in build_registry("installed").records] == ["correlation", "wav"]
    monkeypatch.setenv("ACTVIZ_NO_PLUGINS", "1")
    win = window_with(actviz_window, plugins="installed")
    assert win.window.plugins.registry.records == []
    assert win.window.files.menus.extra_input_filters == []
    monkeypatch.delenv("ACTVIZ_NO_PLUGINS")
    # `actviz --no-plugins` starts the window with none.
    import actviz.ui.explore as app
    from actviz.cli import main

    run_app = app.run_app  # the real one, for the window it builds (below)

    seen: list = []
    monkeypatch.setattr(app, "run_app", lambda **kwargs: seen.append(kwargs["plugins"]) or 0)
    assert main(["--no-plugins"]) == 0 and main([]) == 0
    assert seen == [False, True]

    class Built(Exception):
        pass

    def window(**kwargs):
        raise Built(kwargs["plugins"])

    monkeypatch.setattr(app, "MainWindow", window)
    for plugins, expected in ((False, None), (True, "installed")):
        with pytest.raises(Built) as built:
            run_app(plugins=plugins)
        assert built.value.args == (expected,)


def test_library_calls_never_load_a_plugin(installed_examples, examples_site):
    """``actviz.capture``, ``actviz.compare`` and ``actviz.scan`` in a fresh process with both
    examples installed: neither example's module is imported (only the window and the
    commands that use a contribution load plugins)."""
    import os
    import subprocess
    import sys

    script = textwrap.dedent(
        """
        import sys, torch, actviz
        from tests.plugins.nets import TinyConvNet
        torch.manual_seed(0)
        model, x = TinyConvNet().eval(), torch.randn(2, 3, 16, 16)
        cap = actviz.capture(model, x, ["conv1", "conv2"])
        actviz.compare(cap, actviz.capture(model, x + 0.1, ["conv1", "conv2"]))
        actviz.scan(model, x, ["conv2"], k=2, cache=False, num_workers=0)
        assert cap["conv1"].output.shape == (2, 6, 16, 16)
        print(sorted(m for m in sys.modules if m.startswith(("actviz_correlation", "actviz_wav"))))
        """
    )
    env = dict(os.environ)
    if examples_site is not None:
        env["PYTHONPATH"] = os.pathsep.join(
            filter(None, [str(examples_site), env.get("PYTHONPATH")])
        )
    root = Path(__file__).resolve().parents[2]
    out = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, env=env, cwd=root,
        timeout=300,
    )  # fmt: skip
    assert out.returncode == 0, out.stderr[-3000:]
    assert out.stdout.strip().splitlines()[-1] == "[]"
    # The same process can see them: they are installed, just not loaded.
    probe = "from importlib.metadata import entry_points as e; print(sorted(p.name for p in e(group='actviz.plugins')))"
    seen = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, env=env, cwd=root
    )
    assert "'correlation'" in seen.stdout and "'wav'" in seen.stdout
