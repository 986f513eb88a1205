"""The window's side of the copy service: a copy made on the capture worker between two of its
jobs, handed to everyone who asked, kept while the weights are unchanged."""

from __future__ import annotations

import torch

from actviz.ui.worker_copy import WorkerCopy
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
    assert isinstance(copies, WorkerCopy) and copies.to_eval
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
    assert not copies.is_held() and copies._held is None  # noqa: SLF001 - not kept a minute
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
    copies = scans._copies  # noqa: SLF001 - what it holds is the point
    get = copies.get

    def spy(purpose, model, **kwargs):
        twin = get(purpose, model, **kwargs)
        made.append(weakref.ref(twin))
        return twin

    copies.get = spy
    job = scans.start(ScanSpec(folder=str(tmp_path), layers=("conv1",), k=2, batch_size=2))
    win.qtbot.waitUntil(lambda: bool(job.outcome), timeout=30_000)
    assert job.outcome == "finished" and scans.scan is not None and scans.scan.count == 3
    gc.collect()
    assert made and made[0]() is None  # the old code kept the copy until the model changed

    # The top views run on the window's shared copy: once they are made, another feature
    # takes that copy instead of making its own.
    with win.qtbot.waitSignal(scans.views_ready, timeout=30_000) as ready:
        assert scans.request_views("conv1", 0)
    assert ready.args[0] == "conv1" and len(ready.args[2]) == 2
    assert scans.views_copy.is_held() and len(made) == 1  # no "views" copy of its own
    concepts = win.feature("concepts").copies
    submitted = win.window.worker.submitted
    got: list = []
    concepts.get(got.append, got.append)
    assert len(got) == 1 and concepts.is_held() and not scans.views_copy.is_held()
    assert win.window.worker.submitted == submitted
