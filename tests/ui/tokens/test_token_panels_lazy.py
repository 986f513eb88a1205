"""Token panels build their plots in the display passes, one per event-loop turn, and only
once on screen: a run with 12 ticked GPT-2 blocks built them all in a few turns (each token
panel's two heat-map canvases cost ~26 ms of CPU: ~0.9 s blocks in the stress run), and a
feature refreshing every panel (effects' outlines) built the ones still waiting in one go."""

from __future__ import annotations

import pytest
from PySide6.QtCore import QEvent, QObject, Qt, QTimer
from PySide6.QtTest import QTest
from PySide6.QtWidgets import QApplication

from actviz.ui.tokens.token_panel import LabelledHeatCanvas, TokenLayerPanel
from actviz.ui.window import display_steps

transformers = pytest.importorskip("transformers")
pytest.importorskip("tokenizers")

from tests.io.hf_tiny import save_tiny_gpt2  # noqa: E402
from tests.ui.turns import TurnCounter  # noqa: E402

LOAD_MS = 60_000
BLOCKS = 12


def _built_boxes(monkeypatch: pytest.MonkeyPatch) -> TurnCounter:
    """Counts the token panels whose plots are built, per event-loop turn; one display step a
    pass (a pass runs steps for 4 ms, less than one build takes, on a fast machine too)."""
    monkeypatch.setattr(display_steps, "DISPLAY_PASS_S", 0.0)
    return TurnCounter(monkeypatch, TokenLayerPanel, "_build_token_box", lambda p: p.name)


def _settle(w) -> None:
    """Wait for the display passes to end, without putting the result on every panel."""
    timer = QTimer()
    timer.setSingleShot(True)
    timer.start(LOAD_MS)
    w.wait_until(lambda: not timer.isActive() or not w.pending_work())
    assert not w.pending_work()


@pytest.fixture
def gpt2_window(actviz_window, tmp_path):
    folder = save_tiny_gpt2(tmp_path / "gpt2", n_layer=BLOCKS)
    win = actviz_window(auto_run=True)
    w = win.window
    win.resize(1200, 800)
    assert w.files.open_model_source(str(folder))
    _settle(w)
    assert not w.host.layer_panels  # no run before a text is given
    return win


def test_a_run_builds_one_token_panel_a_turn_and_none_off_screen(gpt2_window, monkeypatch):
    win = gpt2_window
    w = win.window
    counter = _built_boxes(monkeypatch)
    shown = TurnCounter(monkeypatch, TokenLayerPanel, "set_tokens", lambda p, v: p.name)
    plots = TurnCounter(monkeypatch, LabelledHeatCanvas, "__init__")  # ~19 ms of CPU each
    made_in: set[int] = set()  # the turns that made panels
    w.panel_created.connect(lambda _name, _panel: made_in.add(counter.turn))
    with win.expect_run(LOAD_MS, flush=False):
        assert w.files.open_input_source("text:the cat sat on the")
    _settle(w)
    assert len(w.host.layer_panels) == BLOCKS + 1
    tokens = [
        n
        for n, p in w.host.layer_panels.items()
        if isinstance(p, TokenLayerPanel) and w.session.result.layers[n].tokens is not None
    ]
    assert len(tokens) >= BLOCKS
    assert counter.most_in_a_turn() == 1, counter.calls
    # Never in a turn that made panels (making them took that turn's budget).
    assert made_in and not made_in & set(counter.calls), (made_in, counter.calls)
    # Panels below the fold wait to be scrolled to: not all were built.
    built = set(counter.names())
    assert built and len(built) < len(tokens)
    last = tokens[-1]
    assert last not in built
    # Scrolled to, the last one builds (in a display pass) and shows its tokens.
    bar = w.centre.layers_scroll.verticalScrollBar()
    bar.setValue(bar.maximum())
    w.wait_until(lambda: last in counter.names())
    assert counter.most_in_a_turn() == 1, counter.calls
    w.wait_until(lambda: w.host.layer_panels[last].token_box.isVisible())
    # A panel's plots are built in one turn, its tokens shown in a later one (~60 ms of CPU
    # both together), never with another panel's.
    built_in = {n: t for t, names in counter.calls.items() for n in names}
    shown_in = {n: t for t, names in shown.calls.items() for n in names if n in built_in}
    assert set(shown_in) == set(built_in)
    assert all(shown_in[n] > built_in[n] for n in built_in), (built_in, shown_in)
    assert not set(built_in.values()) & set(shown_in.values())
    assert plots.most_in_a_turn() == 1 and plots.count() >= 2 * len(built_in), plots.calls
    panel = w.host.layer_panels[last]
    assert panel.token_canvas is not None and panel.token_canvas.heat is not None
    assert panel.token_canvas.heat.shape == w.session.result.layers[last].tokens.heat.shape


def test_refreshing_every_panel_builds_none_at_once(gpt2_window, monkeypatch):
    win = gpt2_window
    w = win.window
    with win.expect_run(LOAD_MS, flush=False):
        assert w.files.open_input_source("text:the cat sat on the")
    _settle(w)
    counter = _built_boxes(monkeypatch)
    # A feature decorating every panel (the effects dock's outlines) refreshes each.
    for name in list(w.host.layer_panels):
        w.host.refresh_panel(name)
    assert counter.names() == []  # nothing built in the calls themselves
    _settle(w)
    assert counter.most_in_a_turn() <= 1, counter.calls
    # Every panel shows the result once flushed (an export, a test reading them).
    w.display.flush_panel_updates()
    for name, panel in w.host.layer_panels.items():
        if w.session.result.layers[name].tokens is not None:
            assert panel.token_canvas is not None and panel.token_canvas.heat is not None


def test_a_panel_export_fills_only_that_panel(gpt2_window, monkeypatch, tmp_path):
    win = gpt2_window
    w = win.window
    with win.expect_run(LOAD_MS, flush=False):
        assert w.files.open_input_source("text:the cat sat on the")
    _settle(w)
    waiting = [n for n in w.host.layer_panels if w.host.layer_panels[n].token_canvas is None]
    assert len(waiting) >= 2  # off screen: not built yet
    counter = _built_boxes(monkeypatch)
    w.display.select_layer(waiting[-1], reveal=False)
    path = w.exports.export_panel_png(tmp_path / "panel.png")
    # The exported panel shows the result; the others still wait to be scrolled to (filling
    # them all for one picture took seconds).
    assert counter.names() == [waiting[-1]]
    assert path is not None and path.stat().st_size > 0
    canvas = w.host.layer_panels[waiting[-1]].token_canvas
    assert canvas.heat.shape == w.session.result.layers[waiting[-1]].tokens.heat.shape


class _Events(QObject):
    """Counts the events of one type each widget it is installed on receives (by id)."""

    def __init__(self, kind: QEvent.Type) -> None:
        super().__init__()
        self.kind, self.counts = kind, {}

    def eventFilter(self, obj: QObject, event: QEvent) -> bool:  # noqa: N802 - Qt name
        if event.type() == self.kind:
            self.counts[id(obj)] = self.counts.get(id(obj), 0) + 1
        return False


def _token_maps(w, *, on_screen: bool = False) -> list[LabelledHeatCanvas]:
    """The token panels' shown maps (``on_screen``: only those with a part on screen)."""
    return [
        c
        for p in w.host.layer_panels.values()
        if isinstance(p, TokenLayerPanel)
        for c in (p.token_canvas, p.token_grad_canvas)
        if c is not None
        and c.isVisible()
        and not (on_screen and c.viewport().visibleRegion().isEmpty())
    ]


def test_a_new_result_does_not_resize_the_token_maps(gpt2_window):
    # Each update of a token panel showed the mosaic's gradient slot and hid it again: Qt lays
    # out every visible ancestor when a widget is shown, so each token canvas of each panel
    # was resized twice per result (~90 ms of GUI-thread CPU a run with 25 GPT-2 panels).
    win = gpt2_window
    w = win.window
    with win.expect_run(LOAD_MS):
        assert w.files.open_input_source("text:the cat sat on the")
    assert win.settle()  # the first result laid out (on a loaded machine it can take passes)
    canvases = _token_maps(w)
    assert len(canvases) >= 4
    sizes = [c.size() for c in canvases]
    resizes = _Events(QEvent.Type.Resize)
    for canvas in canvases:
        canvas.installEventFilter(resizes)
    try:
        with win.expect_run(LOAD_MS):
            QTest.keyClick(w, Qt.Key.Key_R, Qt.KeyboardModifier.ControlModifier)  # Ctrl+R
        for _ in range(3):
            QApplication.processEvents()
    finally:
        for canvas in canvases:
            canvas.removeEventFilter(resizes)
    assert sum(resizes.counts.values()) == 0
    # The maps kept their size (before, the first result's maps stayed squeezed to 120 px
    # tall until a later layout pass).
    assert [c.size() for c in canvases] == sizes
    assert all(s.height() > 200 for s in sizes), sizes
    panel = next(p for p in w.host.layer_panels.values() if isinstance(p, TokenLayerPanel))
    assert panel.gradient_slot.isHidden() and panel.token_box.isVisible()


class _Heights(QObject):
    """Records each resized widget's new height beside the least height it asks for."""

    def __init__(self) -> None:
        super().__init__()
        self.squeezed: list[tuple[str, int, int]] = []

    def eventFilter(self, obj: QObject, event: QEvent) -> bool:  # noqa: N802 - Qt name
        if event.type() == QEvent.Type.Resize and obj.isVisible():
            least = obj.minimumSizeHint().height()
            if event.size().height() < least:
                self.squeezed.append((obj.name, event.size().height(), least))
        return False


def test_new_panels_never_squeeze_the_ones_on_screen(gpt2_window):
    # Token panels have no height for width: the grid laid each pass's new panels out in the
    # old container's height, squeezing every panel on screen (300 -> 104 px) and painting it
    # so, then again at its height once the container grew (two repaints a pass, ~2 ms each).
    win = gpt2_window
    w = win.window
    heights = _Heights()

    def watch(_name: str, panel: QObject) -> None:
        panel.installEventFilter(heights)

    w.panel_created.connect(watch)
    with win.expect_run(LOAD_MS):
        assert w.files.open_input_source("text:the cat sat on the")
    assert win.settle()
    names = [n for n, _ in w.session.model.named_modules() if n][:30]
    win.tick(*names)
    with win.expect_run(LOAD_MS):
        QTest.keyClick(w, Qt.Key.Key_R, Qt.KeyboardModifier.ControlModifier)  # Ctrl+R
    assert win.settle()
    assert len(w.host.layer_panels) >= 25
    assert heights.squeezed == []


def test_new_tokens_paint_each_token_map_once(gpt2_window):
    # Longer tokens widen the label axis, found by pyqtgraph as it paints; the new width laid
    # the plot out again and the view boxes' new ranges were applied in the paint too: each
    # token map was painted five times per new text (~90 ms of CPU for 12 maps on screen).
    win = gpt2_window
    w = win.window
    with win.expect_run(LOAD_MS):
        assert w.files.open_input_source("text:the cat sat on the")
    assert win.settle()
    canvases = _token_maps(w, on_screen=True)
    assert len(canvases) >= 4
    paints = _Events(QEvent.Type.Paint)
    for canvas in canvases:
        canvas.viewport().installEventFilter(paints)
    try:
        with win.expect_run(LOAD_MS):
            assert w.files.open_input_source(
                "text:the cat sat on the mat and a dog ran in the park"
            )
        assert win.settle()
    finally:
        for canvas in canvases:
            canvas.viewport().removeEventFilter(paints)
    assert set(paints.counts) == {id(c.viewport()) for c in canvases}
    assert max(paints.counts.values()) == 1, sorted(paints.counts.values())
    rows = canvases[0].heat.shape[0]
    assert rows == len(w.session.result.layers[next(iter(w.host.layer_panels))].tokens.tokens)
