"""The capture worker: results, errors, stale results dropped, cooperative cancel, one thread."""

from __future__ import annotations

import sys
import threading
import time

import pytest
import torch
from torch import nn

from actviz.core.capture import CaptureCancelled
from actviz.ui.worker import Staged, Worker
from actviz.workspace.session_state import RunRequest, run_job

#: The core window is what these tests drive: built without the features.
pytestmark = pytest.mark.window_features()


def ends(*jobs, into=None, start=0):
    """Every end (and ``staged``) the jobs emit, in order, appended to ``into`` (a new list by
    default): ``(start + index of the job, signal, *args)``."""
    got = [] if into is None else into
    for i, job in enumerate(jobs, start):
        for name in ("staged", "finished", "failed", "cancelled", "superseded"):
            getattr(job, name).connect(lambda *args, i=i, n=name: got.append((i, n, *args)))
    return got


def wait_result(qtbot, worker, fn, **kwargs):
    """Submit ``fn`` and wait for its ``finished``; its value."""
    job = worker.submit(fn, **kwargs)
    with qtbot.waitSignal(job.finished, timeout=10_000) as blocker:
        pass
    return blocker.args[0]


def test_finished_carries_the_jobs_result(qtbot, worker):
    job = worker.submit(lambda stop, progress: 6 * 7)
    with qtbot.waitSignal(job.finished, timeout=30_000) as blocker:
        pass
    assert blocker.args == [42] and job.outcome == "finished" and job.done
    assert not worker.is_busy()


def test_errors_are_emitted_not_swallowed(qtbot, worker):
    def job(stop, progress):
        raise ZeroDivisionError("boom")

    handle = worker.submit(job)
    with qtbot.waitSignal(handle.failed, timeout=30_000) as blocker:
        pass
    assert isinstance(blocker.args[0], ZeroDivisionError)
    assert str(blocker.args[0]) == "boom"


def test_progress_is_forwarded(qtbot, worker):
    messages = []

    def job(stop, progress):
        progress("half way")
        return 1

    handle = worker.submit(job)
    handle.progress.connect(messages.append)
    with qtbot.waitSignal(handle.finished, timeout=30_000):
        pass
    assert messages == ["half way"]


def test_stale_results_are_dropped_and_the_stale_job_is_asked_to_stop(qtbot, worker, caplog):
    release = threading.Event()
    started = threading.Event()
    saw_stop = []

    def slow(stop, progress):
        started.set()
        release.wait(5)
        saw_stop.append(stop())
        return "old"

    first = worker.submit(slow)
    got = ends(first)
    assert started.wait(5)
    second = worker.submit(lambda stop, progress: "new")
    finished = []
    second.finished.connect(finished.append)
    assert got == [(0, "superseded")] and second.is_after(first)
    caplog.set_level("DEBUG", logger="actviz.ui.worker")
    release.set()
    # Both results reach the worker (it is idle only once every job's result was handled):
    # the stale one arrived first and was dropped, not merely late.
    qtbot.waitUntil(lambda: not worker.is_busy(), timeout=30_000)
    assert finished == ["new"] and got == [(0, "superseded")]
    assert saw_stop == [True]
    assert "dropping stale result of job 1" in caplog.messages


def test_cancel_stops_a_capture_between_modules(qtbot, worker):
    entered, cancel_sent = threading.Event(), threading.Event()
    ran = []

    class Gated(nn.Module):
        """Stops after layer 0 until the test has cancelled; records the layers that ran."""

        def __init__(self):
            super().__init__()
            self.layers = nn.ModuleList(nn.Linear(4, 4) for _ in range(50))

        def forward(self, x):
            for i, layer in enumerate(self.layers):
                if i == 1:
                    entered.set()
                    assert cancel_sent.wait(10)
                x = layer(x)
                ran.append(i)
            return x

    model = Gated()
    request = RunRequest(model=model, inputs=torch.randn(1, 4), layers=["layers.0", "layers.49"])
    job = worker.submit(lambda stop, progress: run_job(request, stop, progress))
    got = ends(job)
    assert entered.wait(5)
    assert worker.cancel()
    cancel_sent.set()
    qtbot.waitUntil(lambda: bool(got), timeout=30_000)
    assert got == [(0, "cancelled")]
    # Stopped before the next module call (capture polls should_stop before every one):
    # layer 0 ran before the cancel, none of the other 49 ran after it.
    assert ran == [0]
    for module in model.modules():
        assert not module._forward_hooks and not module._forward_pre_hooks


def test_cancelled_job_reports_cancelled_even_if_it_ignores_should_stop(qtbot, worker):
    release = threading.Event()

    def stubborn(stop, progress):
        release.wait(5)
        return "done anyway"

    job = worker.submit(stubborn)
    events = ends(job)
    assert job.cancel()
    release.set()
    qtbot.waitUntil(lambda: bool(events), timeout=30_000)
    assert events == [(0, "cancelled")] and job.outcome == "cancelled"


def test_jobs_never_overlap(qtbot, worker):
    active = []
    overlap = []
    lock = threading.Lock()

    def job(stop, progress):
        with lock:
            active.append(1)
            overlap.append(len(active))
        time.sleep(0.01)  # hold the slot: a second job started meanwhile would overlap it
        with lock:
            active.pop()
        return threading.get_ident()

    results = []
    jobs = [worker.submit(job) for _ in range(5)]
    for handle in jobs:
        handle.finished.connect(results.append)
    qtbot.waitUntil(lambda: not worker.is_busy(), timeout=30_000)
    assert max(overlap) == 1
    assert len(results) == 1 and jobs[-1].outcome == "finished"  # only the latest reports
    assert [j.outcome for j in jobs[:-1]] == ["superseded"] * 4
    assert results[0] != threading.get_ident()  # ran off the GUI thread


def test_a_job_superseded_before_it_starts_never_runs(qtbot, worker):
    release = threading.Event()
    started = threading.Event()
    ran = []

    def blocker(stop, progress):
        started.set()
        release.wait(5)

    worker.submit(blocker)
    # Superseded before it starts, the blocker itself would never run and free the thread.
    assert started.wait(5)
    worker.submit(lambda stop, progress: ran.append("middle"))
    last = worker.submit(lambda stop, progress: "last")
    finished = []
    last.finished.connect(finished.append)
    release.set()
    qtbot.waitUntil(lambda: not worker.is_busy(), timeout=30_000)
    assert ran == []
    assert finished == ["last"]


def test_cancel_without_a_job_is_a_no_op(worker):
    assert worker.cancel() is False


def test_cancel_of_one_job_leaves_the_job_queued_behind_it(qtbot, worker):
    release = threading.Event()
    started = threading.Event()

    def first(stop, progress):
        started.set()
        release.wait(5)
        if stop():
            raise CaptureCancelled("stopped")
        return "first"

    a = worker.submit(first)
    assert started.wait(5)
    b = worker.submit(lambda stop, progress: "second", supersede=False)
    got = ends(a, b)
    assert a.cancel() is True
    release.set()
    qtbot.waitUntil(lambda: not worker.is_busy(), timeout=30_000)
    # Only the job asked for stopped: a feature's Cancel no longer kills another's job.
    assert got == [(0, "cancelled"), (1, "finished", "second")]


def test_capture_cancelled_is_reported_as_cancel_not_error(qtbot, worker):
    def job(stop, progress):
        raise CaptureCancelled("stop")

    got = ends(worker.submit(job))
    qtbot.waitUntil(lambda: bool(got), timeout=30_000)
    assert got == [(0, "cancelled")]


def test_a_loader_worker_starts_a_new_job_while_a_stale_one_still_runs(qtbot):
    worker = Worker(max_threads=2)
    release = threading.Event()
    started = threading.Event()

    def stale(stop, progress):
        started.set()
        release.wait(5)
        return "stale"

    finished = []
    try:
        worker.submit(stale).finished.connect(finished.append)
        assert started.wait(5)
        worker.submit(lambda stop, progress: "fresh").finished.connect(finished.append)
        # With two threads the fresh job does not wait for the stale one.
        qtbot.waitUntil(lambda: finished == ["fresh"], timeout=30_000)
        assert worker.is_busy() and not worker.has_current_job()
        release.set()
        # Idle only once the stale job's result has reached the worker (and been dropped).
        qtbot.waitUntil(lambda: not worker.is_busy(), timeout=30_000)
        assert finished == ["fresh"]
    finally:
        release.set()
        worker.shutdown()


def test_drop_silences_the_running_job_and_has_current_job_tracks_it(qtbot, worker):
    release = threading.Event()
    job = worker.submit(lambda stop, progress: release.wait(5))
    events = ends(job)
    assert worker.has_current_job() and worker.jobs() == [job]
    worker.drop()
    assert not worker.has_current_job() and worker.is_busy() and worker.jobs() == []
    assert events == [(0, "superseded")]
    release.set()
    # Idle only once the dropped job's result has reached the worker: nothing more reported.
    qtbot.waitUntil(lambda: not worker.is_busy(), timeout=30_000)
    assert events == [(0, "superseded")]


def test_shutdown_without_waiting_returns_at_once(qtbot):
    worker = Worker()
    release = threading.Event()
    started = threading.Event()
    try:
        worker.submit(lambda stop, progress: started.set() or release.wait(30))
        assert started.wait(5)
        # The job is blocked until released: returning False proves shutdown did not wait.
        assert worker.shutdown(timeout_ms=0) is False
        assert not release.is_set() and worker.is_busy()
        release.set()
        assert worker.shutdown() is True
    finally:
        release.set()
        worker.shutdown()


def test_finished_jobs_release_what_they_hold(qtbot, worker):
    """Qt's pool keeps finished runnables: the job (and its input tensors) must not stay alive."""
    import gc
    import weakref

    class Payload:
        pass

    refs = []
    for _ in range(3):
        payload = Payload()
        refs.append(weakref.ref(payload))

        def job(should_stop, progress, held=payload):
            return 1

        wait_result(qtbot, worker, job)
        del payload, job
    gc.collect()
    assert [r() for r in refs] == [None, None, None]


# ============================================================================ pipelining
def test_a_staged_job_finishes_on_the_second_thread_while_the_next_one_starts(qtbot, worker):
    """The second stage of job 1 waits for job 2's first stage: only a pipeline finishes."""
    second_started = threading.Event()
    threads = {}
    order = []

    def finish_one(stop, progress):
        threads["then"] = threading.get_ident()
        assert second_started.wait(5), "the next job did not start while this one finished"
        return "one"

    def one(stop, progress):
        threads["first"] = threading.get_ident()
        return Staged(finish_one)

    def two(stop, progress):
        second_started.set()
        return Staged(lambda stop, progress: "two")

    ends(worker.submit(one), worker.submit(two, supersede=False), into=order)
    qtbot.waitUntil(lambda: not worker.is_busy(), timeout=10_000)
    finished = [o for o in order if o[1] == "finished"]
    assert finished == [(0, "finished", "one"), (1, "finished", "two")]
    assert order.index((0, "staged")) < order.index((0, "finished", "one"))
    assert threads["then"] != threads["first"]


def test_supersede_makes_earlier_staged_jobs_stale(qtbot, worker):
    release = threading.Event()

    def slow_then(stop, progress):
        release.wait(5)
        return "old"

    old = worker.submit(lambda stop, progress: Staged(slow_then))
    got = ends(old)
    qtbot.waitUntil(lambda: worker.has_current_job(), timeout=30_000)
    new = worker.submit(lambda stop, progress: "new")
    ends(new, into=got, start=1)
    assert old.outcome == "superseded" and not new.done
    release.set()
    qtbot.waitUntil(lambda: not worker.is_busy(), timeout=30_000)
    assert got == [(0, "superseded"), (1, "finished", "new")]


def test_cancel_stops_every_pipelined_job(qtbot, worker):
    release = threading.Event()

    def waits(stop, progress):
        release.wait(5)
        if stop():
            raise CaptureCancelled("stopped")
        return "done"

    got = ends(worker.submit(lambda stop, progress: Staged(waits)))
    ends(worker.submit(waits, supersede=False), into=got, start=1)
    assert worker.cancel()
    release.set()
    qtbot.waitUntil(lambda: not worker.is_busy(), timeout=30_000)
    assert sorted(got) == [(0, "cancelled"), (1, "cancelled")]
    assert not worker.has_current_job()


def test_shutdown_waits_for_second_stages(qtbot):
    w = Worker()
    then_started = threading.Event()
    never = threading.Event()
    done = []

    def then(stop, progress):
        then_started.set()
        never.wait(0.3)  # busy for a while, whatever stop() says
        done.append("then")

    try:
        w.submit(lambda stop, progress: Staged(then))
        assert then_started.wait(5)  # handed over: the second stage is running
        assert w.shutdown(5000)
        # shutdown returned only after the running second stage ran to its end.
        assert done == ["then"]
        assert w._second.activeThreadCount() == 0
    finally:
        w.shutdown()


def test_the_window_lets_the_gui_thread_take_the_gil_within_a_millisecond(qtbot, actviz_window):
    import sys

    from actviz.ui.worker import GIL_SWITCH_INTERVAL_S

    # Windows as MainWindow() makes them: their own size and timing, not shown.
    plain = {"size": None, "show": False, "auto_run": True, "debounce_ms": 300}
    before = sys.getswitchinterval()
    try:
        sys.setswitchinterval(0.005)  # CPython's default
        window = actviz_window(**plain).window
        assert sys.getswitchinterval() == pytest.approx(GIL_SWITCH_INTERVAL_S)
        window2 = actviz_window(
            **plain
        ).window  # a second window keeps it short when the first one closes
        window.close()
        assert sys.getswitchinterval() == pytest.approx(GIL_SWITCH_INTERVAL_S)
        window2.close()  # the last one puts the caller's value back
        assert sys.getswitchinterval() == 0.005
        sys.setswitchinterval(0.0002)  # a shorter one set by the user is left alone
        window3 = actviz_window(**plain).window
        assert sys.getswitchinterval() == pytest.approx(0.0002)
        window3.close()
        assert sys.getswitchinterval() == pytest.approx(0.0002)
        sys.setswitchinterval(0.005)
        window4 = actviz_window(**plain).window
        assert sys.getswitchinterval() == pytest.approx(GIL_SWITCH_INTERVAL_S)
        sys.setswitchinterval(0.002)  # changed by someone else while the window is open
        window4.close()
        assert sys.getswitchinterval() == 0.002
    finally:
        sys.setswitchinterval(before)


# ============================================================================ nothing left alive
def _live(kind: type) -> int:
    """How many Python objects of exactly ``kind`` the garbage collector can see."""
    import gc

    gc.collect()
    return sum(type(obj) is kind for obj in gc.get_objects())


def _flush_deletes() -> None:
    """Run the deleteLater calls already posted (a test has no event loop of its own)."""
    from PySide6.QtCore import QCoreApplication, QEvent

    for _ in range(3):
        QCoreApplication.sendPostedEvents(None, QEvent.Type.DeferredDelete)
        QCoreApplication.processEvents()


def test_a_hundred_jobs_leave_no_runner_or_signals_alive(qtbot, worker):
    """A job's runner and signals object are freed when it ends, staged ones included."""
    from actviz.ui.worker import _Runner, _RunnerSignals

    # Another test's deletes still posted would be freed in the count after the jobs and
    # read as fewer than none: they run before the count starts.
    _flush_deletes()
    runners, signals = _live(_Runner), _live(_RunnerSignals)
    for i in range(100):
        if i % 2:
            job = lambda stop, progress: Staged(lambda stop, progress: 1)  # noqa: E731
        else:
            job = lambda stop, progress: 1  # noqa: E731
        wait_result(qtbot, worker, job)
    assert not worker.is_busy()
    _flush_deletes()
    # The last runner's thread may still be returning from run() (its end is already
    # reported): freed within moments, or never (a leak).
    qtbot.waitUntil(lambda: _live(_Runner) - runners == 0, timeout=5_000)
    assert _live(_RunnerSignals) - signals == 0


def test_closed_windows_leave_no_runner_signals_or_thread_pool_alive(qtbot, actviz_window):
    """40 runs over two windows, then both closed: their jobs and pools are all gone."""
    from PySide6.QtCore import QThreadPool

    from actviz.ui.worker import _Runner, _RunnerSignals
    from tests.ui.conftest import frame
    from tests.ui.tiny_models import TinyCNN

    torch.manual_seed(0)
    # Counted against what already lives in this process (another test's window may not be
    # collected yet): these two windows must leave nothing behind.
    _flush_deletes()
    pools, runners, signals = _live(QThreadPool), _live(_Runner), _live(_RunnerSignals)
    for _ in range(2):
        # Every feature: their workers and pools must go too.
        win = actviz_window(TinyCNN().eval(), frame(0), ["conv1", "fc"], features=None)
        window = win.window
        for _ in range(20):
            win.run_and_wait(flush=False)
        window.display.flush_panel_updates()
        _flush_deletes()
        # While the window is open: only the jobs of the last moments may still be pending,
        # and each worker has one object its runners report through, not one per job.
        assert _live(_Runner) - runners <= 2 and _live(_RunnerSignals) == _live(Worker)
        del window
        win.delete()  # closed and deleted; nothing holds its Python side
    assert _live(_Runner) - runners == 0
    assert _live(_RunnerSignals) - signals == 0
    assert _live(QThreadPool) - pools == 0


def test_a_second_stage_runs_torch_on_one_thread_and_the_first_keeps_its_count(qtbot, worker):
    # A second OpenMP team in the process would slow the capture beside it (core/threads.py).
    seen: dict[str, int] = {}
    before = torch.get_num_threads()

    def second(stop, progress):
        seen["second"] = torch.get_num_threads()
        return "done"

    def first(stop, progress):
        seen["first"] = torch.get_num_threads()
        return Staged(second)

    assert wait_result(qtbot, worker, first) == "done"
    assert seen == {"first": before, "second": 1}
    assert torch.get_num_threads() == before


def test_run_unreported_runs_on_the_capture_thread_after_the_queue(qtbot, worker):
    order: list[tuple[str, int]] = []
    gate = threading.Event()

    def job(stop, progress):
        gate.wait(5)
        order.append(("job", threading.get_ident()))
        return None

    worker.submit(job)
    worker.run_unreported(lambda: order.append(("fn", threading.get_ident())))
    gate.set()
    qtbot.waitUntil(lambda: len(order) == 2 and not worker.is_busy(), timeout=30_000)
    assert [what for what, _ in order] == ["job", "fn"]
    assert order[0][1] == order[1][1] != threading.get_ident()


def test_in_the_apps_process_workers_run_in_parallel_and_the_gui_thread_does_not(qtbot, worker):
    from actviz.core.threads import parallel_in_workers_only, worker_threads

    before = torch.get_num_threads()
    seen: dict[str, int] = {}

    def second(stop, progress):
        seen["second"] = torch.get_num_threads()

    def first(stop, progress):
        seen["first"] = torch.get_num_threads()
        return Staged(second)

    undo = parallel_in_workers_only()
    try:
        assert torch.get_num_threads() == 1 and worker_threads() == before
        wait_result(qtbot, worker, first)
        worker.run_unreported(lambda: seen.setdefault("unreported", torch.get_num_threads()))
        qtbot.waitUntil(lambda: "unreported" in seen, timeout=30_000)
    finally:
        undo()
    assert seen == {"first": before, "second": 1, "unreported": before}
    assert torch.get_num_threads() == before and worker_threads() is None


def test_first_stages_run_at_the_workers_count_whatever_their_thread_had(qtbot, worker):
    # A pool thread takes torch's last count set anywhere at its first parallel op; the
    # worker's jobs do not depend on it.
    assert worker.threads == torch.get_num_threads()
    seen: list[int] = []
    worker.threads = 1
    wait_result(qtbot, worker, lambda stop, progress: seen.append(torch.get_num_threads()))
    worker.threads = 3
    wait_result(qtbot, worker, lambda stop, progress: seen.append(torch.get_num_threads()))
    assert seen == [1, 3]


# ============================================================================ lanes
def test_a_lane_one_job_runs_beside_lane_zero_and_results_report_in_submission_order(qtbot, worker):
    """Lane 1 runs while lane 0 is blocked; its result waits for the earlier job's."""
    release = threading.Event()
    ran = threading.Event()
    threads = {}

    def blocked(stop, progress):
        threads["lane0"] = threading.get_ident()
        assert release.wait(5), "never released"
        return "first"

    def beside(stop, progress):
        threads["lane1"] = (threading.get_ident(), torch.get_num_threads())
        ran.set()
        return "second"

    got = ends(worker.submit(blocked), worker.submit(beside, supersede=False, lane=1, threads=1))
    assert ran.wait(5), "the lane-1 job did not run while lane 0 was busy"
    qtbot.wait(50)  # its result is back on the GUI thread by now, and held
    assert got == []
    release.set()
    qtbot.waitUntil(lambda: not worker.is_busy(), timeout=30_000)
    assert got == [(0, "finished", "first"), (1, "finished", "second")]
    assert threads["lane1"][0] != threads["lane0"]
    assert threads["lane1"][1] == 1


def test_a_held_result_is_dropped_when_its_job_goes_stale(qtbot, worker):
    release = threading.Event()

    def blocked(stop, progress):
        release.wait(5)
        return "old"

    done = threading.Event()
    got = ends(
        worker.submit(blocked),
        worker.submit(lambda stop, progress: (done.set(), "held")[1], supersede=False, lane=1),
    )
    assert done.wait(5)
    qtbot.wait(50)
    worker.drop()  # both stale: neither reports, the held one included
    ends(worker.submit(lambda stop, progress: "new", lane=1), into=got, start=2)
    release.set()
    qtbot.waitUntil(lambda: not worker.is_busy(), timeout=30_000)
    assert got == [(0, "superseded"), (1, "superseded"), (2, "finished", "new")]
    assert worker._held == {}  # noqa: SLF001 - nothing kept once everything reported
    assert worker.submitted == 3


def test_an_error_on_lane_zero_releases_the_result_held_behind_it(qtbot, worker):
    release = threading.Event()

    def fails(stop, progress):
        release.wait(5)
        raise ValueError("bad frame")

    a = worker.submit(fails)
    events = ends(a, worker.submit(lambda stop, progress: "ok", supersede=False, lane=1))
    qtbot.wait(50)
    release.set()
    qtbot.waitUntil(lambda: not worker.is_busy(), timeout=30_000)
    error = events[0][2]
    assert isinstance(error, ValueError)
    assert events == [(0, "failed", error), (1, "finished", "ok")]


def test_shutdown_waits_for_lane_one(qtbot):
    w = Worker()
    started, finished = threading.Event(), threading.Event()

    def slow(stop, progress):
        started.set()
        time.sleep(0.2)
        finished.set()
        return 1

    w.submit(slow, lane=1)
    assert started.wait(5)
    assert w.shutdown(5000)
    assert finished.is_set()
    with pytest.raises(ValueError, match="lane"):
        w.submit(lambda stop, progress: 1, lane=2)


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="per-thread priority: Linux")
def test_a_pool_thread_is_lowered_once_however_many_jobs_ask(qtbot, worker):
    """A Qt pool thread enters Python anew for each job (fresh thread-local data): the thread
    must still be lowered once, not once per job down to 19."""
    import os

    from actviz.core.threads import lower_thread_priority

    def job(stop, progress):
        lower_thread_priority(3)
        return os.getpriority(os.PRIO_PROCESS, threading.get_native_id())

    base = os.getpriority(os.PRIO_PROCESS, threading.get_native_id())
    got = [wait_result(qtbot, worker, job) for _ in range(3)]
    assert got == [min(19, base + 3)] * 3


def test_slots_given_to_on_are_called_in_order_without_qt_connections(qtbot, worker, monkeypatch):
    """A live frame's job made and undid ~14 Qt connections per frame: ``on``'s slots are
    called directly, in order, a raising one reported (as Qt does) without stopping the
    others; a slot connected through Qt still hears the job, and nothing is kept after."""
    from actviz.ui.worker import _SIGNAL_METHODS

    reported: list[BaseException] = []
    monkeypatch.setattr(sys, "excepthook", lambda _t, exc, _tb: reported.append(exc))
    calls: list[tuple] = []

    def boom(value):
        calls.append(("boom", value))
        raise RuntimeError("a slot's bug")

    job = worker.submit(lambda stop, progress: (progress("half"), 42)[1])
    job.on(progress=lambda m: calls.append(("progress", m)), finished=boom)
    job.on(finished=lambda v: calls.append(("second", v)), staged=calls.append)
    assert not any(job.isSignalConnected(m) for m in _SIGNAL_METHODS.values())
    with qtbot.waitSignal(job.finished, timeout=10_000) as blocker:  # a Qt connection too
        pass
    assert blocker.args == [42]
    assert calls == [("progress", "half"), ("boom", 42), ("second", 42)]
    assert [str(e) for e in reported] == ["a slot's bug"]
    assert job.outcome == "finished" and job._slots == {}  # noqa: SLF001
    assert not any(job.isSignalConnected(m) for m in _SIGNAL_METHODS.values())
    job.on(finished=calls.append)  # ended: nothing more comes, nothing is kept
    assert job._slots == {}  # noqa: SLF001
    with pytest.raises(AttributeError):
        job.on(finishd=calls.append)


def test_superseded_jobs_tell_their_on_slots_once(qtbot, worker):
    gate = threading.Event()
    seen: list[str] = []
    first = worker.submit(lambda stop, progress: gate.wait(5)).on(
        superseded=lambda: seen.append("first superseded"), finished=lambda v: seen.append("x")
    )
    second = worker.submit(lambda stop, progress: "b").on(finished=seen.append)
    assert seen == ["first superseded"] and first.outcome == "superseded"
    gate.set()
    with qtbot.waitSignal(second.finished, timeout=10_000):
        pass
    qtbot.waitUntil(lambda: not worker.is_busy(), timeout=10_000)
    assert seen == ["first superseded", "b"]


def test_each_stages_thread_marks_its_malloc_arena_for_the_idle_trim(qtbot, worker, monkeypatch):
    import ctypes

    from actviz.core import allocator

    # As in the window's tuned process (the marks are only made there); this process's
    # allocator itself is left as it is: the marks are freed here, not by a trim.
    monkeypatch.setattr(allocator, "_tuned", True)
    monkeypatch.setattr(allocator, "_marks", {})
    threads = []

    def then(stop, progress):
        threads.append(threading.get_ident())
        return "done"

    def first(stop, progress):
        threads.append(threading.get_ident())
        return Staged(then)

    try:
        assert wait_result(qtbot, worker, first) == "done"
        qtbot.waitUntil(lambda: len(allocator._marks) == 2, timeout=30_000)
        # The capture's thread and the second stage's: one mark each, from their own arenas.
        assert sorted(allocator._marks) == sorted(threads) and len(set(threads)) == 2
        assert wait_result(qtbot, worker, first) == "done"
        assert len(allocator._marks) == 2  # still the same two: once per thread until a trim
    finally:
        free = ctypes.CDLL(None).free
        free.argtypes = [ctypes.c_void_p]
        for block in allocator._marks.values():
            free(block)


def test_ends_that_arrive_together_are_reported_one_a_turn(qtbot, worker):
    """Two jobs' ends queued at once (Qt handles posted events in one go) reach their slots on
    two event-loop turns, so their handlers are two short blocks, not one long one; the worker
    stays busy until the second has reported."""
    from PySide6.QtCore import QTimer

    order: list[str] = []
    turn = lambda: order.append("next turn")  # noqa: E731 - a zero timer's slot
    first = worker.submit(lambda stop, progress: "a", supersede=False)
    second = worker.submit(lambda stop, progress: "b", supersede=False)
    first.on(finished=lambda value: (order.append(value), QTimer.singleShot(0, turn)))
    second.on(finished=order.append)
    assert worker._pool.waitForDone(10_000)  # noqa: SLF001 - both ends now queued to this thread
    assert worker.is_busy()
    qtbot.waitUntil(lambda: len(order) == 3, timeout=10_000)
    assert order == ["a", "next turn", "b"]
    assert not worker.is_busy() and not worker.has_current_job()
