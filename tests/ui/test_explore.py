"""``actviz.explore`` from a script, ``run_app`` for the CLI, and the open-model dialog."""

from __future__ import annotations

import importlib.util
import time

import numpy as np
import pytest
import shiboken6
import torch
from PySide6.QtCore import QSettings, QTimer
from torch import nn

import actviz
from actviz.io.models.demo_model import DEMO_CLASSES, build_demo_model, generate_image
from actviz.testing import RUN_TIMEOUT_MS
from actviz.ui import explore as explore_module
from actviz.ui.explore import run_app
from actviz.ui.window.dialogs import ModelSpec, OpenModelDialog
from actviz.ui.window.main_window import MainWindow
from actviz.ui.window.script import Explorer, MovedWarning, window_of
from actviz.ui.window.settings import AppSettings, split_recent_model

_OPENED: list[MainWindow] = []


class _RecordedWindow(MainWindow):
    """The window explore/run_app build, remembered so a test can find and close it without
    walking ``QApplication.topLevelWidgets()`` (which wraps every top-level widget alive, and
    once crashed the interpreter doing so in a full run)."""

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        _OPENED.append(self)


def _shown_windows() -> list[MainWindow]:
    return [w for w in _OPENED if shiboken6.isValid(w) and w.isVisible()]


@pytest.fixture(autouse=True)
def close_explored_windows(monkeypatch):
    """explore/run_app build their own window (its settings land in the test's own config
    folder: see ``isolated_user_state`` in tests/conftest.py); close what a test left open."""
    monkeypatch.setattr(explore_module, "MainWindow", _RecordedWindow)
    try:
        yield
    finally:
        for window in list(explore_module._OPEN_WINDOWS):
            window.close()
        for window in _shown_windows():
            window.close()
        _OPENED.clear()
    assert explore_module._OPEN_WINDOWS == []


def _conv_classifier() -> nn.Module:
    torch.manual_seed(0)
    return nn.Sequential(
        nn.Conv2d(3, 4, 3, padding=1),
        nn.ReLU(),
        nn.AdaptiveAvgPool2d(1),
        nn.Flatten(),
        nn.Linear(4, 3),
    ).eval()


def test_explore_non_blocking_returns_a_running_window(qtbot):
    model = _conv_classifier()
    x = torch.randn(1, 3, 12, 12)
    shown = actviz.explore(model, x, layers=["0", "4"], block=False, categories=["a", "b", "c"])
    window = window_of(shown)
    qtbot.addWidget(window)
    assert isinstance(shown, Explorer) and isinstance(window, MainWindow)
    assert window.isVisible()
    assert "actviz" in window.windowTitle()
    assert window in explore_module._OPEN_WINDOWS
    qtbot.waitUntil(lambda: shown.result is not None, timeout=RUN_TIMEOUT_MS)
    assert list(window.host.layer_panels) == ["0", "4"]
    assert shown.result.layers["0"].view.data.shape == (4, 12, 12)
    predictions = window.centre.prediction_panel.predictions()
    assert {label for _, label, _ in predictions} == {"a", "b", "c"}
    shown.close()
    assert window not in explore_module._OPEN_WINDOWS
    for module in model.modules():
        assert not module._forward_hooks and not module._forward_pre_hooks


def test_explore_returns_a_small_facade_and_the_window_s_other_names_warn(qtbot):
    model = _conv_classifier()
    x = torch.randn(1, 3, 8, 8)
    shown = actviz.explore(model, x, layers=["0"], block=False)
    window = window_of(shown)
    qtbot.addWidget(window)
    public = {n for n in dir(Explorer) if not n.startswith("_")}
    assert public == {
        "session", "result", "run", "tick", "untick", "set_model", "set_input", "panel",
        "wait_idle", "close",
    }  # fmt: skip
    assert shown.wait_idle(RUN_TIMEOUT_MS)
    assert shown.session is window.session and shown.result is window.session.result
    assert shown.panel("0") is window.host.layer_panels["0"]
    shown.tick("4")
    assert shown.wait_idle(RUN_TIMEOUT_MS) and list(shown.result.layers) == ["0", "4"]
    with pytest.warns(MovedWarning, match="ticked=False"):
        shown.untick("4")  # the documented name, for one release
    assert shown.wait_idle(RUN_TIMEOUT_MS) and list(shown.result.layers) == ["0"]
    with pytest.warns(MovedWarning, match="'commands' is the window's"):
        assert shown.commands is window.commands  # what explore() returned before: the window
    with pytest.warns(MovedWarning, match="use window.files.open_input_source"):
        assert window.open_input_source == window.files.open_input_source
    with pytest.raises(AttributeError):
        window.no_such_name  # noqa: B018
    assert shown.close() and not window.isVisible()


def test_explore_checks_layer_names(qtbot):
    with pytest.raises(ValueError, match="did you mean"):
        actviz.explore(_conv_classifier(), torch.randn(1, 3, 8, 8), layers=["4x"], block=False)
    assert explore_module._OPEN_WINDOWS == []


def test_explore_without_inputs_waits_for_one(qtbot):
    shown = actviz.explore(_conv_classifier(), block=False)
    window = window_of(shown)
    qtbot.addWidget(window)
    assert window.session.input is None
    assert shown.result is None
    assert not window.commands.run_action.isEnabled()
    assert shown.run() is None
    assert any("input" in t for t in window.centre.banner.texts())


def test_explore_with_an_image_path(qtbot, tmp_path):
    path = tmp_path / "star.png"
    generate_image("star", np.random.default_rng(0)).save(path)
    torch.manual_seed(0)
    shown = actviz.explore(
        build_demo_model().eval(), str(path), block=False, categories=DEMO_CLASSES
    )
    window = window_of(shown)
    qtbot.addWidget(window)
    qtbot.waitUntil(lambda: shown.result is not None, timeout=RUN_TIMEOUT_MS)
    assert shown.result.image.shape == (64, 64, 3)
    assert shown.result.layers["features.block1"].view.data.shape == (16, 64, 64)


def test_explore_blocks_until_the_window_closes(qtbot):
    closed = []

    def close_soon():
        for window in _shown_windows():
            closed.append(window)
            window.close()

    QTimer.singleShot(300, close_soon)
    assert actviz.explore(_conv_classifier(), torch.randn(1, 3, 8, 8)) is None
    assert len(closed) == 1


# It sets the switch interval itself (the suite's own fixture puts the real one back).
@pytest.mark.actviz_allow_leaks("process")
def test_explore_gives_the_process_its_switch_interval_back(qtbot):
    """The window shortens the GIL switch interval while it is open, and only then."""
    import sys

    from actviz.ui.worker import GIL_SWITCH_INTERVAL_S

    sys.setswitchinterval(0.005)  # CPython's default; the autouse fixture restores the real one
    shown = actviz.explore(_conv_classifier(), torch.randn(1, 3, 8, 8), block=False)
    window = window_of(shown)
    qtbot.addWidget(window)
    assert sys.getswitchinterval() == pytest.approx(GIL_SWITCH_INTERVAL_S)
    window.close()
    assert sys.getswitchinterval() == 0.005
    # The blocking call, as from a script: short while the window is open, back on return.
    sys.setswitchinterval(0.004)
    during = []

    def close_when_open():
        shown = _shown_windows()
        if not shown:
            QTimer.singleShot(10, close_when_open)
            return
        during.append(sys.getswitchinterval())
        shown[0].close()

    QTimer.singleShot(0, close_when_open)
    assert actviz.explore(_conv_classifier(), torch.randn(1, 3, 8, 8)) is None
    assert during == [pytest.approx(GIL_SWITCH_INTERVAL_S)]
    assert sys.getswitchinterval() == 0.004


def _close_when(ready, seen, timeout_s: float = 30.0):
    """Poll the visible explorer window; once ``ready(window)`` (or after ``timeout_s``, so a
    broken flow fails its assertions instead of hanging the event loop), record and close it."""
    deadline = time.monotonic() + timeout_s

    def check():
        for window in _shown_windows():
            if not ready(window) and time.monotonic() < deadline:
                QTimer.singleShot(50, check)
                return
            seen.append(
                (window.windowTitle(), window.centre.banner.texts(), list(window.host.layer_panels),
                 window.session.input.source if window.session.input else None)
            )  # fmt: skip
            window.close()
            return
        QTimer.singleShot(50, check)

    QTimer.singleShot(50, check)


def test_run_app_opens_a_model_in_the_background_and_returns_the_exit_code(qtbot, tmp_path):
    path = tmp_path / "scripted.pt"
    torch.jit.script(_conv_classifier()).save(str(path))
    seen = []
    # The input waits for the model; the automatic run follows once both are in.
    _close_when(lambda w: w.session.result is not None, seen)
    assert run_app(model=str(path), input="random:1x3x8x8") == 0
    ((title, banner, _, source),) = seen
    assert "actviz" in title and "scripted" in title
    assert any("TorchScript" in t for t in banner)
    assert source == "random:1x3x8x8"


def test_run_app_with_a_broken_model_still_opens_the_window(qtbot, tmp_path):
    seen = []
    _close_when(lambda w: not w.files.is_loading() and bool(w.centre.banner.texts()), seen)
    assert run_app(model=str(tmp_path / "missing.pt")) == 0
    assert any("missing.pt" in t for t in seen[0][1])


@pytest.mark.usefixtures("demo_resources")
def test_run_app_keeps_pythons_collector_off_clicks_in_its_own_process_only(qtbot):
    import gc

    from actviz.ui import worker as memory

    seen, frozen = [], []
    _close_when(lambda w: frozen.append(w.memory.freezes) or w.session.result is not None, seen)
    assert run_app() == 0
    assert frozen and all(frozen)  # the app's window collects when idle and freezes the rest
    assert memory._FREEZE == [False] and gc.get_freeze_count() == 0  # put back at the end


@pytest.mark.usefixtures("demo_resources")
def test_run_app_without_arguments_opens_the_demo_already_run(qtbot):
    seen = []
    # Panels are made a few a display pass: all of them once no pass is due.
    _close_when(lambda w: w.session.result is not None and not w.display.display_pending(), seen)
    assert run_app() == 0
    title, _, panels, source = seen[0]
    assert "actviz" in title and len(panels) == 5
    assert source.endswith(".png")


@pytest.mark.usefixtures("demo_resources")
def test_run_app_demo_with_an_input_uses_that_input(qtbot, tmp_path):
    path = tmp_path / "ring.png"
    generate_image("ring", np.random.default_rng(3)).save(path)
    seen = []
    _close_when(
        lambda w: w.session.result is not None and w.session.input.source == str(path), seen
    )
    assert run_app(input=str(path)) == 0
    assert seen[0][3] == str(path)


@pytest.mark.usefixtures("demo_resources")
def test_the_command_line_opens_a_model_folder_or_a_picture_as_a_drop_would(qtbot, tmp_path):
    # `actviz ./gpt2-folder` said "Could not open the session: ... is a folder, not a session
    # file": the one positional argument was a session file only.
    pytest.importorskip("transformers")
    from actviz.cli import build_parser
    from actviz.testing.stress_cases import save_tiny_gpt2

    folder = save_tiny_gpt2(tmp_path / "gpt2")
    assert build_parser().parse_args(["gui", str(folder)]).session == str(folder)
    seen = []

    def shown(w) -> bool:  # panels are made a few a display pass: all once no pass is due
        done = w.session.result is not None and not w.files.is_loading()
        return done and not w.display.display_pending()

    _close_when(shown, seen)
    assert run_app(session=str(folder)) == 0
    ((title, banner, panels, source),) = seen
    assert "gpt2" in title and not banner  # no error: the model, and its default prompt
    assert panels == ["transformer.h.0", "transformer.h.1", "lm_head"]
    assert source.startswith("text:")
    # A picture opens on the demo model, as dropped on the window.
    path = tmp_path / "ring.png"
    generate_image("ring", np.random.default_rng(3)).save(path)
    seen.clear()
    _close_when(lambda w: shown(w) and w.session.input.source == str(path), seen)
    assert run_app(session=str(path)) == 0
    ((title, banner, panels, source),) = seen
    assert "demo" in title and not banner and len(panels) == 5
    # A .pt file that holds a model (not a tensor) opens as one, with an input of its own.
    path = tmp_path / "scripted.pt"
    torch.jit.script(_conv_classifier()).save(str(path))
    seen.clear()
    _close_when(shown, seen)
    assert run_app(session=str(path)) == 0
    ((title, banner, panels, source),) = seen
    assert "scripted" in title and source is not None  # was no input: "Open an input (Ctrl+I)"


def test_explore_a_model_by_name_waits_for_the_background_load(qtbot):
    shown = actviz.explore("resnet18", "random:1x3x32x32", layers=["layer1"], block=False)
    window = window_of(shown)
    qtbot.addWidget(window)
    # On return the model and input are there (explore waited for both loads).
    assert type(window.session.model).__name__ == "ResNet"
    assert tuple(window.session.input.value.shape) == (1, 3, 32, 32)
    assert window.session.ticked == ["layer1"]
    qtbot.waitUntil(lambda: shown.result is not None, timeout=RUN_TIMEOUT_MS)
    assert list(window.host.layer_panels) == ["layer1"]
    window.close()


def test_explore_a_missing_file_raises_with_the_reason(qtbot, tmp_path):
    with pytest.raises(ValueError, match="nope.pt"):
        actviz.explore(str(tmp_path / "nope.pt"), block=False)
    assert explore_module._OPEN_WINDOWS == []


# -------------------------------------------------------------------------------- dialog
def test_the_dialog_hears_names_listed_while_it_is_built(qtbot, monkeypatch):
    """The names finish between the dialog asking whether they are ready and listening for
    them: it still fills its lists (it waited for good: 60 s in one CI run)."""
    from PySide6.QtCore import QObject, Signal

    from actviz.ui.window import dialogs

    class JustFinished(QObject):
        loaded = Signal()
        torchvision, timm = ["alexnet", "resnet18"], []

        def ready(self) -> bool:
            self.loaded.emit()  # the listing thread ends now, before anyone connected
            return False

    source = JustFinished()
    monkeypatch.setattr(dialogs, "_MODEL_NAMES", source)
    dialog = OpenModelDialog()
    qtbot.addWidget(dialog)
    assert dialog.names_ready() and dialog.zoo.listed() == ["demo", "alexnet", "resnet18"]


def test_open_model_dialog_search_and_specs(qtbot):
    dialog = OpenModelDialog(recent=["resnet18", "/tmp/w.safetensors|resnet50"])
    qtbot.addWidget(dialog)
    qtbot.waitUntil(dialog.names_ready, timeout=60_000)  # listed off the GUI thread
    assert dialog.tabs.currentIndex() == 2  # recents first when there are some
    dialog.recent_list.setCurrentRow(1)
    spec = dialog.spec()
    assert (spec.source, spec.arch) == ("/tmp/w.safetensors", "resnet50")
    dialog.tabs.setCurrentIndex(0)
    dialog.zoo.search.setText("Wide_ResNet")
    assert dialog.zoo.listed() == ["wide_resnet101_2", "wide_resnet50_2"]
    assert dialog.spec().source == "wide_resnet101_2"  # first match selected
    dialog.zoo.search.setText("resnet1")
    assert {"resnet101", "resnet152", "resnet18", "fcn_resnet101"} <= set(dialog.zoo.listed())
    assert "vgg11" not in dialog.zoo.listed()
    dialog.zoo.list.setCurrentItem(dialog.zoo.list.findItems("resnet18", Qt_MatchExactly())[0])
    dialog.zoo.random_check.setChecked(True)
    spec = dialog.spec()
    assert (spec.source, spec.arch, spec.weights) == ("resnet18", None, None)
    dialog.zoo.search.setText("DEM")
    assert dialog.zoo.listed() == ["demo"]
    dialog.tabs.setCurrentIndex(1)
    assert dialog.spec() is None
    dialog.file_edit.setText("/data/ckpt.pth")
    dialog.arch_combo.setEditText("vit_b_16")
    spec = dialog.spec()
    assert (spec.source, spec.arch) == ("/data/ckpt.pth", "vit_b_16")


def Qt_MatchExactly():  # noqa: N802 - reads like the enum it returns
    from PySide6.QtCore import Qt

    return Qt.MatchFlag.MatchExactly


def test_recent_entries_round_trip(tmp_path):
    settings = AppSettings(QSettings(str(tmp_path / "s.ini"), QSettings.Format.IniFormat))
    settings.add_recent_model("a.pt", "resnet18")
    settings.add_recent_model("resnet50")
    settings.add_recent_model("a.pt", "resnet18")  # moves to the front, no duplicate
    assert settings.recent_models() == ["a.pt|resnet18", "resnet50"]
    assert split_recent_model(settings.recent_models()[0]) == ("a.pt", "resnet18")
    assert split_recent_model("resnet50") == ("resnet50", None)
    for i in range(15):
        settings.add_recent_input(f"img{i}.png")
    assert len(settings.recent_inputs()) == 10 and settings.recent_inputs()[0] == "img14.png"
    with pytest.raises(ValueError):
        settings.normalize = "bogus"


def test_open_model_dialog_lists_timm_models_in_their_own_tab(qtbot, monkeypatch):
    timm = pytest.importorskip("timm")
    dialog = OpenModelDialog()
    qtbot.addWidget(dialog)
    assert dialog.tabs.tabText(3) == "timm"
    qtbot.waitUntil(dialog.names_ready, timeout=60_000)  # listed off the GUI thread
    dialog.tabs.setCurrentIndex(3)
    assert dialog.timm.listed() == sorted(timm.list_models())
    dialog.timm.search.setText("ResNet18D")
    visible = [
        n for i, n in enumerate(dialog.timm.listed()) if not dialog.timm.list.item(i).isHidden()
    ]
    assert visible and all("resnet18d" in n for n in visible) and "resnet18d" in visible
    dialog.timm.list.setCurrentItem(dialog.timm.list.findItems("resnet18d", Qt_MatchExactly())[0])
    assert dialog.spec() == ModelSpec("timm:resnet18d", None, "DEFAULT")
    dialog.timm.random_check.setChecked(True)
    assert dialog.spec() == ModelSpec("timm:resnet18d", None, None)
    dialog.timm.search.setText("no such model")
    assert dialog.spec() is None

    # Without timm there is no such tab.
    real = importlib.util.find_spec
    monkeypatch.setattr(
        importlib.util, "find_spec", lambda n, *a: None if n == "timm" else real(n, *a)
    )
    plain = OpenModelDialog()
    qtbot.addWidget(plain)
    assert [plain.tabs.tabText(i) for i in range(plain.tabs.count())] == [
        "torchvision",
        "File",
        "Recent",
    ]


def _config_files() -> list[str]:
    import os
    from pathlib import Path

    root = Path(os.environ["XDG_CONFIG_HOME"])  # where the user's QSettings file lives
    return sorted(str(p.relative_to(root)) for p in root.rglob("*") if p.is_file())


def test_explore_writes_no_settings_unless_asked(qtbot):
    import os
    from pathlib import Path

    model, x = _conv_classifier(), torch.randn(1, 3, 12, 12)
    # The user's settings are read (their colour map), never written: not by a view change,
    # not by the geometry saved on close.
    AppSettings().colormap = "gray"
    AppSettings().sync()
    written = _config_files()
    assert written and all(f.startswith("actviz") for f in written)
    before = {f: (Path(os.environ["XDG_CONFIG_HOME"]) / f).read_bytes() for f in written}
    shown = actviz.explore(model, x, layers=["0"], block=False)
    window = window_of(shown)
    qtbot.addWidget(window)
    assert window.commands.colormap == "gray"
    assert shown.wait_idle()
    window.host.set_view_settings(colormap="magma", normalize="shared")
    assert window.settings.colormap == "magma"
    window.resize(700, 500)
    window.close()
    assert _config_files() == written
    after = {f: (Path(os.environ["XDG_CONFIG_HOME"]) / f).read_bytes() for f in written}
    assert after == before
    assert not list(Path(os.environ["TMPDIR"]).glob("actviz-explore-*"))  # its own file too
    # Asked for, the user's settings are the window's, as in the app.
    shown = actviz.explore(model, x, layers=["0"], block=False, settings=True)
    window = window_of(shown)
    qtbot.addWidget(window)
    window.host.set_view_settings(colormap="magma")
    window.close()
    assert AppSettings().colormap == "magma"


def test_a_driver_wraps_an_explore_window_without_qtbot():
    from actviz.testing import WindowDriver

    model, x = _conv_classifier(), torch.randn(1, 3, 12, 12)
    win = WindowDriver(actviz.explore(model, x, layers=["0"], block=False, categories=list("abc")))
    try:
        assert win.wait_idle()
        assert win.channels("0") == 4
        with torch.no_grad():
            probs = torch.softmax(model(x)[0], 0)
        assert win.prediction().index == int(probs.argmax())
        assert win.prediction().probability == pytest.approx(float(probs.max()), abs=1e-6)
        win.tick("4")
        result = win.run_and_wait()
        assert list(result.layers) == ["0", "4"] and win.channels("4") == 3
        assert win.resize(800, 600) is True
        assert win.shown_pixels("0").shape[-1] == 4
        win.close()
        assert win.window.is_closed()
    finally:
        win.delete()  # closed and deleted now: a plain test has no qtbot to delete it


def test_a_driver_without_qtbot_lets_the_workers_run_while_it_waits():
    # PySide6's QTest.qWait holds the GIL while it sleeps: a driver waiting with it stopped every
    # worker thread, so an explore() window's live mode showed no frame in a second's wait.
    import threading

    from actviz.testing import WindowDriver
    from actviz.testing.driver import EventBot
    from actviz.ui.live.frames import TensorFrames

    steps, stop = [0], threading.Event()

    def count() -> None:
        while not stop.is_set():
            steps[0] += 1
            time.sleep(0)

    counter = threading.Thread(target=count)
    counter.start()
    try:
        EventBot().wait(50)  # the thread under way
        before = steps[0]
        EventBot().wait(300)
        assert steps[0] - before > 100  # was 0-2 (one GIL hand-over at most)
    finally:
        stop.set()
        counter.join()

    model, x = _conv_classifier(), torch.randn(1, 3, 12, 12)
    win = WindowDriver(actviz.explore(model, x, layers=["0"], block=False))
    try:
        assert win.wait_idle()
        live = win.live.controller
        live.set_source(TensorFrames(torch.randn(4, 3, 12, 12), "clip"))
        live.set_speed(20.0)
        live.play()
        win.qtbot.wait(1500)
        assert live.frames_shown >= 5  # was 0 or 1
        live.pause()
        assert win.live.wait_idle() is True  # a bool, as the window's wait_idle (was None)
    finally:
        win.delete()
    # A feature driver's wait that runs out says False (it raised TimeoutError).
    from types import SimpleNamespace

    from actviz.testing.feature_drivers import _member

    never = SimpleNamespace(feature=SimpleNamespace(busy=True), driver=win)
    assert _member("until", "not busy", "")(never, timeout_ms=20) is False
