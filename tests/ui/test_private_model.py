"""The window's side of the copy service: a copy made on the capture worker between two of its
jobs, handed to everyone who asked, kept while the weights are unchanged."""

from __future__ import annotations

import weakref

import torch

from actviz.ui.private_model import PrivateModel
from tests.ui.conftest import frame


def _uncopyable(_memo):
    raise TypeError("holds a file handle")


def test_the_copy_is_made_once_for_all_who_wait_and_kept_until_the_weights_change(
    actviz_window, tiny_cnn
):
    win = actviz_window(tiny_cnn, frame(1), ["conv1"])
    win.run_and_wait()
    feature = win.feature("concepts")
    copies = feature.copies  # the Concept dock's jobs share it (eval mode)
    assert isinstance(copies, PrivateModel) and copies.to_eval
    tiny_cnn.train()
    got: dict[str, list] = {"a": [], "b": []}
    errors: list[BaseException] = []

    def take_a(twin):
        got["a"].append(twin)

    copies.get(take_a, errors.append)
    copies.get(lambda twin: got["b"].append(twin), errors.append)
    copies.get(take_a, errors.append)  # asked twice: called once
    job = copies._job  # noqa: SLF001 - the copy's own job, not a run
    assert copies.pending and job is not None and win.window.worker.jobs() == [job]
    win.qtbot.waitUntil(lambda: not copies.pending, timeout=10_000)
    assert not errors and len(got["a"]) == len(got["b"]) == 1
    twin = got["a"][0]
    assert got["b"][0] is twin and twin is not tiny_cnn
    assert not any(m.training for m in twin.modules())  # asked for in eval mode
    assert all(m.training for m in tiny_cnn.modules())  # the window's model is left as it was
    assert copies.engine_model(twin) is twin  # no opened model (no preprocessing): the copy

    assert copies.is_held()
    now: list = []
    copies.get(now.append, errors.append)  # held: handed over at once
    assert now == [twin]

    with torch.no_grad():
        tiny_cnn.conv1.weight.add_(1.0)  # an edit of the weights: the copy is made again
    assert not copies.is_held()
    copies.get(now.append, errors.append)
    win.qtbot.waitUntil(lambda: len(now) == 2, timeout=10_000)
    assert now[1] is not twin and torch.equal(now[1].conv1.weight, tiny_cnn.conv1.weight)

    copies.forget()
    assert not copies.is_held()
    tiny_cnn.__deepcopy__ = _uncopyable
    try:
        copies.get(now.append, errors.append)
        win.qtbot.waitUntil(lambda: bool(errors), timeout=10_000)
    finally:
        del tiny_cnn.__deepcopy__
    assert isinstance(errors[0], TypeError) and len(now) == 2
    tiny_cnn.eval()


def test_a_copy_nobody_uses_goes_when_the_window_is_idle_unless_a_job_runs_on_it(
    actviz_window, tiny_cnn
):
    import gc
    import weakref

    win = actviz_window(tiny_cnn, frame(1), ["conv1"])
    win.run_and_wait()
    copies = win.feature("concepts").copies
    got: list = []
    copies.get(got.append, lambda error: got.append(error))
    win.qtbot.waitUntil(lambda: bool(got), timeout=10_000)
    twin = got.pop()
    assert isinstance(twin, torch.nn.Module) and copies.is_held()
    gone = weakref.ref(twin)
    idle = win.window.memory.idle
    idle.emit()
    assert copies.is_held()  # a job still runs on it (it holds the copy): kept
    del twin
    idle.emit()
    assert not copies.is_held()
    gc.collect()
    assert gone() is None  # its memory can go back with the idle trim
    copies.get(got.append, lambda error: got.append(error))  # wanted again: made again
    win.qtbot.waitUntil(lambda: bool(got), timeout=10_000)
    assert isinstance(got[0], torch.nn.Module) and got[0] is not tiny_cnn


def test_a_feature_takes_the_copy_another_feature_holds_when_no_job_uses_it(
    actviz_window, tiny_cnn
):
    win = actviz_window(tiny_cnn, frame(1), ["conv1"])
    win.run_and_wait()
    concepts = win.feature("concepts").copies  # eval copies
    visualize = win.feature("visualize").copy  # the model's own flags (all eval here)
    got: list = []
    concepts.get(got.append, got.append)
    win.qtbot.waitUntil(lambda: bool(got), timeout=10_000)
    twin = got.pop()  # held here, as a job holds the copy it runs on
    made = win.window.worker.submitted
    # A job still runs on the Concept dock's copy (it holds it): Visualise makes its own.
    visualize.get(got.append, got.append)
    win.qtbot.waitUntil(lambda: bool(got), timeout=10_000)
    own = got.pop()
    assert own is not twin and concepts.is_held() and visualize.is_held()
    assert win.window.worker.submitted == made + 1  # one more copy job
    del own
    visualize.forget()
    import weakref

    dock_copy = weakref.ref(twin)
    del twin
    # Nobody uses the dock's copy now: Visualise takes it, no copy is made.
    visualize.get(got.append, got.append)
    assert len(got) == 1 and got[0] is dock_copy()
    assert visualize.is_held() and not concepts.is_held()
    assert win.window.worker.submitted == made + 1
    got.clear()
    # A model in training mode: the Concept dock still takes the eval copy, but Visualise
    # hands out the model's own flags, so it makes a copy of its own.
    tiny_cnn.train()
    concepts.get(got.append, got.append)
    assert len(got) == 1 and got[0] is dock_copy() and not visualize.is_held()
    got.clear()
    visualize.get(got.append, got.append)
    win.qtbot.waitUntil(lambda: bool(got), timeout=10_000)
    assert got[0] is not dock_copy() and all(m.training for m in got[0].modules())
    assert concepts.is_held()
    tiny_cnn.eval()


def test_a_copy_of_the_model_shown_before_goes_with_the_model_switch(actviz_window, tiny_cnn):
    import gc
    import weakref

    from tests.ui.tiny_models import TinyCNN

    win = actviz_window(tiny_cnn, frame(1), ["conv1"])
    win.run_and_wait()
    copies = win.feature("concepts").copies
    got: list = []
    copies.get(got.append, got.append)
    win.qtbot.waitUntil(lambda: bool(got), timeout=10_000)
    gone = weakref.ref(got.pop())
    assert copies.is_held() and gone() is not None
    win.set_model(TinyCNN().eval(), layers=["conv1"])
    gc.collect()
    assert not copies.is_held() and copies.held is None  # not kept a minute
    assert gone() is None  # the old model's copy is freed at once


def test_the_idle_window_keeps_no_copy_that_no_job_uses(actviz_window, tiny_cnn):
    win = actviz_window(tiny_cnn, frame(1), ["conv1"])
    win.run_and_wait()
    concepts = win.feature("concepts").copies
    visualize = win.feature("visualize").copy
    got: list = []
    concepts.get(got.append, got.append)
    win.qtbot.waitUntil(lambda: bool(got), timeout=10_000)
    visualize.get(got.append, got.append)  # a job still runs on the dock's: a copy of its own
    win.qtbot.waitUntil(lambda: len(got) == 2, timeout=10_000)
    assert got[0] is not got[1] and concepts.is_held() and visualize.is_held()
    running = got.pop()  # Visualise's job still runs; the dock's ended
    got.clear()
    win.window.memory.idle.emit()
    # Both were used a moment ago (the old rule kept both a minute): the one in use stays.
    assert visualize.is_held() and not concepts.is_held()
    del running
    win.window.memory.idle.emit()
    assert not visualize.is_held() and not concepts.is_held()


def test_a_scan_lets_go_of_its_model_copy_when_it_ends(actviz_window, tiny_cnn, tmp_path):
    import gc
    import weakref

    from PIL import Image

    from actviz.ui.dataset.dialog import ScanSpec

    for i in range(3):
        Image.new("RGB", (16, 16), (40 * i, 80, 120)).save(tmp_path / f"{i}.png")
    win = actviz_window(tiny_cnn, frame(1), ["conv1"])
    win.run_and_wait()
    scans = win.feature("dataset").scans
    scans.num_workers = 0
    made: list = []
    copy = scans.scan_copy  # the scan's own copy, from the window's service
    unbuilt = copy.unbuilt

    def spy(model=None):
        entry = unbuilt(model)
        made.append(entry)
        return entry

    copy.unbuilt = spy
    job = scans.start(ScanSpec(folder=str(tmp_path), layers=("conv1",), k=2, batch_size=2))
    win.qtbot.waitUntil(lambda: bool(job.outcome), timeout=30_000)
    assert job.outcome == "finished" and scans.scan is not None and scans.scan.count == 3
    assert len(made) == 1 and made[0].original is tiny_cnn and copy.held is None
    twin = weakref.ref(made.pop().twin)
    gc.collect()
    assert twin() is None  # the old code kept the copy until the model changed

    # The top views run on the window's shared copy: once they are made, another feature
    # takes that copy instead of making its own.
    with win.qtbot.waitSignal(scans.views_ready, timeout=30_000) as ready:
        assert scans.request_views("conv1", 0)
    assert ready.args[0] == "conv1" and len(ready.args[2]) == 2
    assert scans.views_copy.is_held() and not made  # no "views" copy of its own
    concepts = win.feature("concepts").copies
    submitted = win.window.worker.submitted
    got: list = []
    concepts.get(got.append, got.append)
    assert len(got) == 1 and concepts.is_held() and not scans.views_copy.is_held()
    assert win.window.worker.submitted == submitted


def _got(win, handle):
    """The copy ``handle`` hands over (made on the capture worker when none is at hand)."""
    got: list = []
    handle.get(got.append, got.append)
    win.qtbot.waitUntil(lambda: bool(got), timeout=10_000)
    assert isinstance(got[0], torch.nn.Module), got[0]
    return got[0]


def test_every_feature_gets_its_model_copy_from_the_hosts_one_service(actviz_window, tiny_cnn):
    win = actviz_window(tiny_cnn, frame(1), ["conv1"])
    host = win.window.host
    service = host.model_copies
    concepts, visualize = win.feature("concepts"), win.feature("visualize")
    scans, live = win.feature("dataset").scans, win.feature("live").controller
    # Each part that works on a copy holds a handle of its own, the host's service made it,
    # with the flags its work needs (eval for the analyses, the model's own for syntheses
    # and live frames; kept between jobs for a scan and live's second lane).
    handles = {
        "concept dock": (concepts.copies, concepts, True, False),
        "concept training": (concepts.training_.copy, concepts.training_, True, False),
        "what it wants": (visualize.copy, visualize, False, False),
        "visualise page": (visualize.page.copy, visualize.page, False, False),
        "top views": (scans.views_copy, scans, True, False),
        "scan": (scans.scan_copy, scans, True, True),
        "live lane 1": (live.lanes.copies, live, False, True),
    }
    owners = service.owners()
    for name, (handle, owner, to_eval, keep) in handles.items():
        assert isinstance(handle, PrivateModel), name
        assert handle.service is service and handle in owners, name
        assert handle.parent() is owner and (handle.to_eval, handle.keep) == (to_eval, keep), name
    assert len(owners) == len(handles)  # nothing else copies the model

    # Sharing stays within one window: another window on the same model makes its own copy
    # though this one's copy is free (asked with no event in between: no idle trim either).
    other = actviz_window(tiny_cnn, frame(1), ["conv1"], features=["concepts"])
    other.run_and_wait()
    win.run_and_wait()
    mine = other.feature("concepts").copies
    assert mine.service is other.window.host.model_copies and mine.service is not service
    twin = _got(win, concepts.copies)
    free = weakref.ref(twin)
    del twin
    made = other.window.worker.submitted
    got: list = []
    mine.get(got.append, got.append)
    assert not got and mine.pending and other.window.worker.submitted == made + 1
    assert not concepts.copies.in_use()  # (asked first: the assertion below holds it)
    assert concepts.copies.held.twin is free()
    other.qtbot.waitUntil(lambda: bool(got), timeout=10_000)
    assert isinstance(got[0], torch.nn.Module) and got[0] is not free()


def test_a_copy_follows_the_weights_and_leaves_the_edits_to_the_runs(actviz_window, tiny_cnn):
    from actviz.core.capture import capture
    from actviz.core.edit_kinds import ablate
    from tests.ui.tiny_models import seeded_tiny_cnn

    win = actviz_window(tiny_cnn, frame(1), ["conv1"])
    win.run_and_wait()
    concepts = win.feature("concepts").copies
    views = win.feature("dataset").scans.views_copy  # eval copies too: it may share
    twin = _got(win, concepts)
    x = frame(1)
    plain = capture(tiny_cnn, x, ["conv1"])["conv1"].tensor
    # An edit on the board is applied by each run (it is passed to it), never put in a copy:
    # the copy stays, with the model's weights, and runs as the model does without it.
    win.window.session.edits.add("conv1", ablate([0, 1]))
    assert concepts.is_held() and _got(win, concepts) is twin
    torch.testing.assert_close(capture(twin, x, ["conv1"])["conv1"].tensor, plain)
    edited = capture(twin, x, ["conv1"], edits={"conv1": (ablate([0, 1]),)})["conv1"].tensor
    assert torch.count_nonzero(edited[:, :2]) == 0 and torch.equal(edited[:, 2:], plain[:, 2:])

    # New weights loaded into the model (what opening a session file does): the copy held is
    # stale, nobody is handed it, and the next copy has the new weights.
    new = seeded_tiny_cnn(7).state_dict()
    tiny_cnn.load_state_dict(new)
    del twin
    assert not concepts.is_held()
    made = win.window.worker.submitted
    fresh = _got(win, views)  # the dock's copy is free but stale: not taken
    assert win.window.worker.submitted == made + 1
    for name, value in new.items():
        assert torch.equal(fresh.state_dict()[name], value), name


def test_every_copy_goes_with_the_model_switch_and_the_window_close(actviz_window):
    import gc

    from actviz.ui.live.frames import TensorFrames
    from tests.helpers import random_frames
    from tests.ui.tiny_models import seeded_tiny_cnn

    model = seeded_tiny_cnn(0)
    win = actviz_window(
        model, frame(1), ["conv1"], features=["live", "concepts", "visualize", "dataset"]
    )
    win.run_and_wait()
    window = win.window
    service = window.host.model_copies
    assert window.worker.threads >= 2  # the suite runs torch on two threads: two lanes
    # Live mode plays a clip: its second lane's copy is made (by a frame on lane 0).
    live = win.live.configure(max_fps=1000)
    live.set_source(TensorFrames(random_frames(6, 3), "clip"))
    win.live.wait_frames(1)
    live.set_loop(False)
    live.play()
    win.qtbot.waitUntil(lambda: not live.playing, timeout=30_000)
    win.live.wait_idle()
    lane = live.lanes.replica
    assert lane is not None and lane.twin is not None and lane.original is model
    concepts = win.feature("concepts").copies
    visualize = win.feature("visualize").copy
    in_use = _got(win, concepts)  # a job holds it: Visualise makes its own
    own = _got(win, visualize)
    copies = [weakref.ref(t) for t in (lane.twin, in_use, own)]
    assert len({id(c()) for c in copies}) == 3
    assert {id(c) for c in service.held()} == {id(lane), id(concepts.held), id(visualize.held)}
    del lane, in_use, own

    # Another model (the Open model path's end): every copy of the old one goes at once.
    win.set_model(seeded_tiny_cnn(1), layers=["conv1"])
    gc.collect()
    assert service.held() == [] and live.lanes.replica is None
    assert [c() for c in copies] == [None, None, None]

    # The window closes (File > Quit): every handle is closed, its copy let go of, and the
    # session no longer calls the service.
    in_use = _got(win, concepts)
    twin = weakref.ref(in_use)
    assert [c.twin for c in service.held()] == [in_use]
    window.commands.quit_action.trigger()
    win.qtbot.waitUntil(window.is_closed, timeout=10_000)
    del in_use  # the job that ran on it ended
    gc.collect()
    assert twin() is None and service.held() == [] and service.owners() == []
    assert service._on_model_changed not in window.session.model_changed._callbacks  # noqa: SLF001
    late: list = []
    concepts.get(late.append, late.append)  # a closed handle asks for nothing
    assert late == [] and not concepts.pending
