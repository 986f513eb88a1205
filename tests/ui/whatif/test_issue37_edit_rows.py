"""Issue 37: a session of many edits restored blocked the GUI for 116 ms, the Edits dock
building one row of widgets per edit in one event-loop turn. Its rows are built a few per
turn now, and what the dock shows at every turn is the current edits' rows, in order."""

from __future__ import annotations

from actviz.edits import ablate, scale
from actviz.ui.host import Docks
from actviz.ui.whatif.feature import EditRow, _summary
from tests.ui.tiny_models import tiny_window
from tests.ui.turns import TurnCounter

#: The most rows one turn may build (the dock's budget is ~15 ms, a row ~0.4 ms).
MOST_A_TURN = 40


def _watch(win, monkeypatch):
    """Rows built and dock fits per turn, and what the dock shows at each turn."""
    built = TurnCounter(monkeypatch, EditRow, "__init__", lambda _row, entry: entry.describe())
    fits = TurnCounter(  # (on the rows' clock)
        monkeypatch, Docks, "fit_dock_width", lambda _host, d: f"{d.objectName()}@{built.turn}"
    )
    dock, board, wrong = win.whatif.dock, win.window.session.edits, []

    def check() -> None:  # shown: rows of the edits now, in order (the rest still to come)
        texts = [e.describe() for e in board.entries]
        shown = [r for r in dock.rows_box.findChildren(EditRow) if r.isVisibleTo(dock.rows_box)]
        placed = [r.label.text() for r in dock.rows]
        if not set(shown) <= set(dock.rows) or placed != texts[: len(placed)]:
            wrong.append((built.turn, placed, [r.label.text() for r in shown]))

    built.timer.timeout.connect(check)
    return built, fits, wrong


def _settled(win, built, fits, wrong) -> list[str]:
    """Wait for the run and the dock; check each turn's rows and the one fit at the end."""
    with win.expect_run(flush=False):  # (a flush shows everything at once)
        pass
    assert win.settle()
    built.timer.stop()
    fits.timer.stop()
    assert not wrong, wrong[:3]
    assert 1 < len(built.calls) and built.most_in_a_turn() <= MOST_A_TURN, built.calls.keys()
    fitted = [int(n.split("@")[1]) for n in fits.names() if n.startswith("editsDock@")]
    # Fitted once, after the last row (not as each row came).
    assert len(fitted) == 1 and fitted[0] >= max(built.calls), (fitted, built.calls.keys())
    dock, entries = win.whatif.dock, win.window.session.edits.entries
    assert [r.key for r in dock.rows] == [e.key for e in entries]
    assert all(r.isVisibleTo(dock) for r in dock.rows) and dock.clear_button.isEnabled()
    assert [r.enabled_box.isChecked() for r in dock.rows] == [e.edit.enabled for e in entries]
    result = win.window.session.result
    assert dock.summary.text() == _summary(win.window.features["whatif"].prediction_change(result))
    return [r.label.text() for r in dock.rows]


def test_sixty_edits_restored_are_listed_a_few_rows_per_turn(actviz_window, monkeypatch):
    win = tiny_window(actviz_window, size=(1280, 720), auto_run=True)
    dock = win.open_dock("Edits")
    board = win.window.session.edits
    built, fits, wrong = _watch(win, monkeypatch)
    with board.batch():  # as a session restores its edits
        for i in range(60):
            board.add(*(("conv1", ablate([i % 4])) if i % 2 else ("conv2", scale([i % 6], 1.5))))
    texts = _settled(win, built, fits, wrong)
    assert len(texts) == 60 and built.count() == 60
    assert texts[:3] == ["conv2: scale ch 0 x1.5", "conv1: ablate ch 1", "conv2: scale ch 2 x1.5"]
    assert texts[-1] == "conv1: ablate ch 3"
    assert [r.value_box is not None for r in dock.rows] == [i % 2 == 0 for i in range(60)]

    # The first 45 switched off: their rows are built again, the last 15 are kept, and none
    # shows before the rows above it.
    kept = dock.rows[45:]
    built, fits, wrong = _watch(win, monkeypatch)
    with board.batch():
        for entry in board.entries[:45]:
            board.set_enabled(entry.key, False)
    texts = _settled(win, built, fits, wrong)
    assert built.count() == 45 and dock.rows[45:] == kept
    assert texts[0] == "conv2: scale ch 0 x1.5 (off)" and texts[59] == "conv1: ablate ch 3"
