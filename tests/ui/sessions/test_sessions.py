"""Session files in the window: save, then open in a fresh window, the same view; a changed or
missing checkpoint; refused files leave the window as it was; the session kept on quit; the
HTML report of File > Export report.

The model is the demo's architecture saved as a state dict
(``arch=actviz.io.models.demo_model:DemoNet``): a checkpoint file, so its SHA-256 is kept and
checked, small enough for a few seconds a test.
"""

from __future__ import annotations

import io
import json
import shutil
import zipfile

import numpy as np
import pytest
import torch

import actviz
from actviz.core.edit_kinds import ablate, patch, scale
from actviz.io.models.demo_model import DemoNet
from tests.helpers import rewrite_zip

ARCH = "actviz.io.models.demo_model:DemoNet"
LAYERS = ["features.block1", "features.block3", "fc"]


@pytest.fixture
def checkpoint(tmp_path):
    torch.manual_seed(0)
    path = tmp_path / "demo_weights.pt"
    torch.save(DemoNet().eval().state_dict(), path)
    return path


def _inputs():
    g = torch.Generator().manual_seed(5)
    x = torch.rand(1, 3, 32, 32, generator=g)
    image = (x[0].permute(1, 2, 0).numpy() * 255).astype(np.uint8)
    return x, image


def _sessions(win):
    return win.sessions.feature


def _open_model(win, path):
    assert win.window.files.open_model_source(str(path), arch=ARCH, wait=True)
    win.wait_idle()


def _investigation(win, checkpoint):
    """A model from a checkpoint, an input, ticks, target, view settings, a pin, edits (one
    patch from the pin), a page turned, a result."""
    w, s = win.window, win.session
    _open_model(win, checkpoint)
    x, image = _inputs()
    win.set_input(x, image=image, description="the test input")
    s.replace_ticked(LAYERS)
    assert w.host.set_target_text("2")
    w.host.set_view_settings(colormap="magma", normalize="shared")
    first = win.run_and_wait()
    pin = w.pins_ui.pin_result()
    assert pin is not None
    s.edits.add("features.block3", ablate([1, 3]))
    s.edits.add("features.block3", scale(0, 0.5))
    s.edits.add("features.block1", patch(first.capture, [0, 2]), "pin")
    s.set_channel_page("features.block3", 16)
    result = win.run_and_wait()
    compare = win.compare.feature
    compare.view.set_source("input")
    compare.view.input_combo.setEditText("random:1x3x32x32:7")
    return result


def _same_tensors(a, b):
    assert a.names == b.names
    for name in a.names:
        for ra, rb in zip(a.records[name], b.records[name], strict=True):
            assert torch.equal(ra.output, rb.output), name
            if ra.grad_output is not None:
                assert torch.equal(ra.grad_output, rb.grad_output), name
    assert torch.equal(a.output, b.output)


def test_saved_session_opens_in_a_fresh_window_with_the_same_view(
    actviz_window, checkpoint, tmp_path
):
    win = actviz_window()
    result = _investigation(win, checkpoint)
    s = win.session
    win.open_dock("Dataset")
    assert win.window.display.open_channel("features.block3", 17)
    path = tmp_path / "study.actviz"
    sessions = _sessions(win)
    asked = []
    sessions.ask_pin_captures = lambda _parent, text: asked.append(text) or True
    assert sessions.save_session(path, wait=True)
    assert path.is_file() and asked and "KiB" in asked[0]
    assert sessions.path == path

    other = actviz_window()
    assert not _dock(other, "Dataset").isVisible()
    ran, edit_changes = [], []
    other.window.run_started.connect(lambda: ran.append(1))
    other.session.edits_changed.connect(lambda: edit_changes.append(len(other.session.edits)))
    assert _sessions(other).open_session(path, wait=True)
    # The three edits came as one change: the Edits dock was rebuilt once, not per edit.
    assert edit_changes[-1:] == [3] and 2 not in edit_changes and 1 not in edit_changes
    other.wait_idle()
    o = other.session
    assert not ran, "opening a session showed the saved run, not a new one"
    # The same arrays, bit for bit: the capture and every panel's pictures.
    _same_tensors(result.capture, other.window.session.result.capture)
    assert list(other.window.session.result.layers) == list(result.layers)
    for name, layer in result.layers.items():
        shown = other.window.session.result.layers[name]
        if layer.view is not None:
            assert np.array_equal(layer.view.data, shown.view.data), name
    assert o.ticked == s.ticked and o.target == 2
    assert (o.colormap, o.normalize) == ("magma", "shared")
    assert other.window.commands.colormap_combo.currentText() == "magma"
    assert o.channel_pages == s.channel_pages
    assert o.model_source == str(checkpoint.resolve()) and o.model_open_args["arch"] == ARCH
    assert torch.equal(o.input.value, s.input.value)
    assert np.array_equal(o.input.image, s.input.image)
    # The same edits, in order; the patch's source is the restored pin's capture.
    assert [(e.layer, e.edit.describe()) for e in o.edits] == [
        (e.layer, e.edit.describe()) for e in s.edits
    ]
    pins = list(o.pins)
    assert [p.label for p in pins] == [p.label for p in s.pins]
    assert pins[0].pinned_at == list(s.pins)[0].pinned_at
    _same_tensors(list(s.pins)[0].result.capture, pins[0].result.capture)
    patch_edit = [e for e in o.edits if e.edit.kind == "patch"][0].edit
    assert patch_edit.source is pins[0].result.capture
    assert _dock(other, "Dataset").isVisible()  # the window layout
    channel_view = other.window.host.channel_view
    assert (channel_view.name, channel_view.channel) == ("features.block3", 17)
    assert channel_view.isVisibleTo(other.window)
    # The comparison set-up: run B was another input.
    view = other.compare.view
    assert view.source == "input" and view.input_combo.currentText() == "random:1x3x32x32:7"
    assert not [m for m in other.banner_messages() if "rror" in m]
    # The scripting path: actviz.session.save takes the window itself.
    again = tmp_path / "again.actviz"
    actviz.session.save(other.window, again)
    state = actviz.session.load(again)
    assert state.target == 2 and state.ticked == tuple(s.ticked) and len(state.pins) == 1


def test_a_changed_checkpoint_is_named_and_the_user_chooses(actviz_window, checkpoint, tmp_path):
    win = actviz_window()
    _investigation(win, checkpoint)
    path = tmp_path / "study.actviz"
    _sessions(win).ask_pin_captures = lambda *_: False  # pins without captures
    assert _sessions(win).save_session(path, wait=True)
    torch.manual_seed(1)
    torch.save(DemoNet().eval().state_dict(), checkpoint)  # other weights, same file

    other = actviz_window()
    sessions = _sessions(other)
    asked = []
    sessions.confirm_changed = lambda _parent, text: asked.append(text) or False
    assert not sessions.open_session(path, wait=True)
    assert asked and str(checkpoint.resolve()) in asked[0] and "changed" in asked[0]
    assert other.session.model is None  # declined: nothing changed
    assert any("changed" in m for m in other.banner_messages())

    sessions.confirm_changed = lambda *_: True
    assert sessions.open_session(path, wait=True)
    other.wait_idle()
    assert other.session.model is not None and other.window.session.result is not None
    assert any("changed" in m for m in other.banner_messages())
    # Pins saved without captures cannot be shown again: said, not restored.
    assert not len(other.session.pins)
    assert any("without its capture" in m for m in other.banner_messages())


def _saved_study(actviz_window, checkpoint, tmp_path, *, pins: bool, dock: str | None = None):
    """A session of :func:`_investigation` saved to a file (``pins``: their captures too, and
    so the saved run; ``dock`` opened first); the file's path."""
    win = actviz_window()
    _investigation(win, checkpoint)
    if dock is not None:
        win.open_dock(dock)
    path = tmp_path / "study.actviz"
    _sessions(win).ask_pin_captures = lambda *_: pins
    assert _sessions(win).save_session(path, wait=True)
    return path


def _marking_turns(order: list, label: str, call):
    """``call`` that first notes ``label`` in ``order``, then "next turn" once that turn ends."""
    from PySide6.QtCore import QTimer

    def marked(*args):
        order.append(label)
        QTimer.singleShot(0, lambda: order.append("next turn"))
        return call(*args)

    return marked


def test_a_sessions_layout_is_put_back_on_a_turn_of_its_own(actviz_window, checkpoint, tmp_path):
    """The window's layout (docks, panel sizes) is restored after the model is adopted, not in
    the same event-loop turn: the two together blocked the GUI 74 ms in the stress run."""
    import sys

    win = actviz_window()
    _investigation(win, checkpoint)
    win.open_dock("Dataset")
    path = tmp_path / "study.actviz"
    _sessions(win).ask_pin_captures = lambda *_: False
    assert _sessions(win).save_session(path, wait=True)

    other = actviz_window()
    host, called_from = other.window.host, []
    restore = host.restore_layout_state

    def watched(data: bytes) -> bool:
        frame, names = sys._getframe(1), set()
        while frame is not None:
            names.add(frame.f_code.co_name)
            frame = frame.f_back
        called_from.append("_adopt" in names)
        return restore(data)

    host.restore_layout_state = watched
    assert _sessions(other).open_session(path, wait=True)
    other.wait_idle()
    assert called_from == [False]
    assert _dock(other, "Dataset").isVisible() and other.session.model is not None


def test_a_saved_run_ready_before_the_layouts_turn_is_shown_a_turn_after_it(
    actviz_window, checkpoint, tmp_path
):
    """When the saved run is prepared before the layout's display pass comes, the layout is put
    back first and the run shown on the next turn: not both in one block."""
    from PySide6.QtCore import QTimer

    path = _saved_study(actviz_window, checkpoint, tmp_path, pins=True, dock="Dataset")
    other = actviz_window()
    sessions, host, order = _sessions(other), other.window.host, []
    later = sessions._later  # noqa: SLF001 - the layout's pass comes late, after the saved run
    sessions._later = lambda opening, step: QTimer.singleShot(300, lambda: later(opening, step))  # noqa: SLF001
    show = host.show_result
    host.restore_layout_state = _marking_turns(order, "layout", host.restore_layout_state)
    host.show_result = lambda *args: (order.append("run"), show(*args))[1]
    assert sessions.open_session(path, wait=True)
    other.wait_idle()
    assert order == ["layout", "next turn", "run"]
    assert _dock(other, "Dataset").isVisible() and other.session.result is not None


def test_a_sessions_parts_are_restored_a_turn_after_its_run_is_shown(
    actviz_window, checkpoint, tmp_path
):
    """The saved run is shown on one turn, the session's other parts (comparison, scan, docks'
    settings) put back on a later one, and only then is the session opened."""
    path = _saved_study(actviz_window, checkpoint, tmp_path, pins=True)
    other = actviz_window()
    sessions, host, order = _sessions(other), other.window.host, []
    parts = host.restore_session_parts
    host.show_result = _marking_turns(order, "run", host.show_result)
    host.restore_session_parts = lambda saved: (order.append("parts"), parts(saved))[1]
    sessions.session_opened.connect(lambda _path: order.append("opened"))
    assert sessions.open_session(path, wait=True)
    other.wait_idle()
    assert order == ["run", "next turn", "parts", "opened"]
    assert other.session.result is not None


def test_a_step_of_an_opening_asked_for_inside_a_display_pass_waits_for_a_later_turn(
    actviz_window,
):
    """An opening's steps each get a turn of their own, even when one is asked for from inside
    a display pass with time left (the saved run shown there, its parts restored in the same
    pass: the two blocks of one turn the stress run measured)."""
    from PySide6.QtCore import QTimer

    win = actviz_window()
    sessions, order = _sessions(win), []
    opening = sessions._opening = object()  # an opening under way

    def in_a_pass():
        order.append("pass")
        sessions._later(opening, lambda: order.append("step"))
        QTimer.singleShot(0, lambda: order.append("next turn"))

    win.window.host.defer_display(in_a_pass)
    win.qtbot.waitUntil(lambda: "step" in order)
    sessions._opening = None
    assert order == ["pass", "next turn", "step"]


def test_a_missing_checkpoint_asks_where_it_is(actviz_window, checkpoint, tmp_path):
    win = actviz_window()
    _investigation(win, checkpoint)
    path = tmp_path / "study.actviz"
    _sessions(win).ask_pin_captures = lambda *_: True
    assert _sessions(win).save_session(path, wait=True)
    moved = tmp_path / "moved" / checkpoint.name
    moved.parent.mkdir()
    shutil.move(checkpoint, moved)

    other = actviz_window()
    sessions = _sessions(other)
    asked = []
    sessions.locate_checkpoint = lambda _parent, text: asked.append(text)
    assert not sessions.open_session(path, wait=True)
    assert asked and str(checkpoint.resolve()) in asked[0]
    assert any(str(checkpoint.resolve()) in m for m in other.banner_messages())
    assert other.session.model is None

    sessions.locate_checkpoint = lambda *_: str(moved)
    assert sessions.open_session(path, wait=True)
    other.wait_idle()
    assert other.session.model_source == str(moved)
    assert other.window.session.result is not None and len(other.session.pins) == 1


def _future(members):
    manifest = json.loads(members["manifest.json"])
    manifest["format"] = 99
    members["manifest.json"] = json.dumps(manifest).encode()


def _pickle_inside(members):
    buf = io.BytesIO()
    np.save(buf, np.array([{"a": 1}], dtype=object), allow_pickle=True)
    members["input.npz"] = _npz_with(buf.getvalue())


def _npz_with(npy: bytes) -> bytes:
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w") as zf:
        zf.writestr("value0.npy", npy)
    return out.getvalue()


@pytest.mark.parametrize(
    ("damage", "said"),
    [("future", "newer actviz"), ("pickle", "pickle"), ("truncated", "damaged")],
)
def test_a_refused_session_file_leaves_the_window_as_it_was(
    actviz_window, checkpoint, tmp_path, damage, said
):
    win = actviz_window()
    _investigation(win, checkpoint)
    path = tmp_path / "study.actviz"
    _sessions(win).ask_pin_captures = lambda *_: False
    assert _sessions(win).save_session(path, wait=True)
    bad = tmp_path / f"{damage}.actviz"
    if damage == "future":
        rewrite_zip(path, bad, _future)
    elif damage == "pickle":
        rewrite_zip(path, bad, _pickle_inside)
    else:
        bad.write_bytes(path.read_bytes()[: path.stat().st_size // 2])

    s = win.session
    before = (s.model, s.input, s.result, s.ticked, s.target, len(s.edits), len(s.pins))
    assert not _sessions(win).open_session(bad, wait=True)
    after = (s.model, s.input, s.result, s.ticked, s.target, len(s.edits), len(s.pins))
    assert all(a is b or a == b for a, b in zip(before, after, strict=True))
    errors = [m for m in win.banner_messages() if str(bad) in m]
    assert len(errors) == 1 and said in errors[0] and "\n" not in errors[0]


def test_the_session_is_kept_on_quit_and_offered_at_the_next_start(
    actviz_window, checkpoint, tmp_path
):
    from PySide6.QtCore import QSettings

    settings = QSettings(str(tmp_path / "actviz.ini"), QSettings.Format.IniFormat)
    win = actviz_window(settings=settings)
    result = _investigation(win, checkpoint)
    _sessions(win).autosave = True
    kept = _sessions(win).kept.path
    assert kept.parent == tmp_path and not kept.exists()
    win.window.close()
    assert kept.is_file()

    settings = QSettings(str(tmp_path / "actviz.ini"), QSettings.Format.IniFormat)
    other = actviz_window(settings=settings)
    sessions = _sessions(other)
    asked = []
    sessions.ask_restore = lambda _parent, text: asked.append(text) or True
    with other.qtbot.waitSignal(sessions.session_opened, timeout=60_000):
        assert sessions.offer_restore()
    other.wait_idle()
    assert asked
    _same_tensors(result.capture, other.window.session.result.capture)
    assert other.session.target == 2 and len(other.session.edits) == 3
    assert sessions.path is None  # Ctrl+S asks where: the kept session is not the user's file
    assert "Restored the last session" in other.status_text()

    # The setting turns the offer off: nothing asked.
    other.window.settings.restore_on_start = False
    asked.clear()
    assert not sessions.offer_restore() and not asked


def test_export_report_writes_one_html_file(actviz_window, checkpoint, tmp_path):
    win = actviz_window()
    _investigation(win, checkpoint)
    out = tmp_path / "report.html"
    sessions = _sessions(win)
    with win.qtbot.waitSignal(sessions.report_written, timeout=60_000):
        assert sessions.export_report(out)
    text = out.read_text()
    assert text.startswith("<!DOCTYPE html>") or "<html" in text[:200]
    assert "features.block3" in text and "data:image/png;base64," in text
    assert 'id="comparison"' not in text  # none shown
    # The comparison shown goes into the report too, with the pin it compared with.
    compare = win.compare.feature
    with win.qtbot.waitSignal(compare.compare_finished, timeout=60_000):
        assert compare.compare_with_pin(list(win.session.pins)[0])
    assert sessions.export_report(out, wait=True)
    text = out.read_text()
    assert 'id="comparison"' in text and list(win.session.pins)[0].label in text
    print(f"report: {out.stat().st_size / 1024:.0f} KiB")


def test_file_menu_lists_the_session_entries(actviz_window, tmp_path):
    from PySide6.QtCore import Qt

    win = actviz_window()
    texts = [a.text() for a in win.window.host.menu("File").actions()]
    for entry in ("Open session…", "Recent sessions", "Save session", "Save session as…",
                  "Export report…"):  # fmt: skip
        assert entry in texts
    save = next(a for a in win.window.host.menu("File").actions() if a.text() == "Save session")
    assert save.shortcut().toString() == "Ctrl+S"
    # Ctrl+S saves to the session's file once it has one.
    sessions = _sessions(win)
    sessions.path = tmp_path / "keyed.actviz"
    with win.qtbot.waitActive(win.window):
        win.window.activateWindow()
    with win.qtbot.waitSignal(sessions.session_saved, timeout=30_000):
        win.qtbot.keyClick(win.window, Qt.Key.Key_S, Qt.KeyboardModifier.ControlModifier)
    assert actviz.session.load(tmp_path / "keyed.actviz").model is None  # nothing open yet


def test_a_sessions_scan_is_shown_again_from_its_saved_arrays(actviz_window, checkpoint, tmp_path):
    from PIL import Image
    from PySide6.QtCore import QSettings

    from actviz.ui.dataset.dialog import ScanSpec

    folder = tmp_path / "images"
    folder.mkdir()
    rng = np.random.default_rng(0)
    for i in range(6):
        Image.fromarray(rng.integers(0, 256, (24, 24, 3), dtype=np.uint8)).save(
            folder / f"img{i}.png"
        )
    win = actviz_window()
    _open_model(win, checkpoint)
    win.set_input(_inputs()[0])
    win.run_and_wait()
    dataset = win.dataset.feature
    dataset.scans.num_workers = 0
    with win.qtbot.waitSignal(dataset.scans.scan_finished, timeout=60_000):
        dataset.start(ScanSpec(str(folder), ("features.block2",), 3, 3))
    # The report holds the scan's top-k sheet.
    report = tmp_path / "scan.html"
    assert _sessions(win).export_report(report, wait=True)
    assert 'id="scan"' in report.read_text() and "features.block2: top images" in report.read_text()
    path = tmp_path / "scan.actviz"
    assert _sessions(win).save_session(path, wait=True)
    state = actviz.session.load(path)
    assert state.scan_key == str(dataset.scan.cache_path)

    # Its own settings: the scan comes back from the session, not from the last folder.
    other = actviz_window(settings=QSettings(str(tmp_path / "b.ini"), QSettings.Format.IniFormat))
    scans = other.dataset.scans
    with other.qtbot.waitSignal(scans.scan_finished, timeout=60_000) as shown:
        assert _sessions(other).open_session(path)
    assert shown.args[0].from_cache and shown.args[0].count == 6
    assert str(shown.args[0].cache_path) == state.scan_key
    other.wait_idle()


def test_actviz_opens_a_session_file_given_as_its_argument(monkeypatch):
    from actviz import cli
    from actviz.ui import explore as app_module

    seen = {}
    monkeypatch.setattr(app_module, "run_app", lambda **kwargs: seen.update(kwargs) or 0)
    assert cli.main(["study.actviz"]) == 0
    assert seen["session"] == "study.actviz" and seen["model"] is None


def test_the_app_opens_a_session_keeps_it_on_quit_and_offers_it_next_time(
    actviz_window, checkpoint, tmp_path, monkeypatch
):
    from PySide6.QtCore import QTimer

    from actviz.ui import explore as app_module
    from actviz.ui.sessions import feature as questions
    from actviz.ui.window.main_window import MainWindow

    win = actviz_window()
    result = _investigation(win, checkpoint)
    path = tmp_path / "study.actviz"
    _sessions(win).ask_pin_captures = lambda *_: True
    assert _sessions(win).save_session(path, wait=True)
    win.window.close()  # the app's loop ends when its own window, the last one, closes

    opened: list[MainWindow] = []

    class Recorded(MainWindow):
        def __init__(self, *args, **kwargs):
            super().__init__(*args, **kwargs)
            opened.append(self)

    monkeypatch.setattr(app_module, "MainWindow", Recorded)
    shown = []

    def close_once_shown():
        w = opened[-1] if opened else None
        if w is None or w.session.result is None or w.is_busy() or len(shown) >= len(opened):
            QTimer.singleShot(20, close_once_shown)
            return
        shown.append((w.session.result.capture, w.session.model_source, list(w.session.pins)))
        w.close()

    QTimer.singleShot(0, close_once_shown)
    assert app_module.run_app(session=str(path)) == 0
    _same_tensors(result.capture, shown[0][0])
    kept = _sessions_of(opened[0]).kept.path
    assert kept.is_file()  # kept on quit

    # The next start without arguments offers it; yes opens it instead of the demo.
    asked = []
    monkeypatch.setattr(questions, "ask_restore", lambda _p, text: asked.append(text) or True)
    QTimer.singleShot(0, close_once_shown)
    assert app_module.run_app() == 0
    assert asked and shown[1][1] == str(checkpoint.resolve())
    _same_tensors(result.capture, shown[1][0])
    assert len(shown[1][2]) == 1  # (run_app deletes its window when it returns)
    # Qt keeps the class it made for ``Recorded`` alive, and with it this list: let the two
    # windows' Python side go now, not with the process.
    opened.clear()


def _sessions_of(window):
    return window.session_store  # the window of run_app, with no driver


def _dock(win, title):
    from PySide6.QtWidgets import QDockWidget

    return next(d for d in win.window.findChildren(QDockWidget) if d.windowTitle() == title)


def test_a_pickled_checkpoint_is_opened_only_when_trusted_now(actviz_window, tmp_path):
    torch.manual_seed(0)
    pickled = tmp_path / "whole_model.pt"
    torch.save(DemoNet().eval(), pickled)  # a full pickle: opening it runs code
    win = actviz_window()
    assert win.window.files.open_model_source(str(pickled), trust=True, wait=True)
    win.set_input(_inputs()[0])
    win.run_and_wait()
    path = tmp_path / "pickled.actviz"
    assert _sessions(win).save_session(path, wait=True)
    assert actviz.session.load(path).model.trust  # it needed trust when saved

    asked = []
    answer = [False]
    other = actviz_window(confirm_untrusted=lambda _p, where, _m: asked.append(where) or answer[0])
    assert not _sessions(other).open_session(path, wait=True)
    assert asked == [str(pickled.resolve())]  # the file's own "trust" is never taken as yes
    assert other.session.model is None
    assert any("not trusted" in m for m in other.banner_messages())
    answer[0] = True
    assert _sessions(other).open_session(path, wait=True)
    other.wait_idle()
    assert other.session.model_open_args["trust"] is True
    _same_tensors(win.window.session.result.capture, other.window.session.result.capture)
