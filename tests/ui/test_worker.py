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


@pytest.fixture
def worker(qtbot):
    w = Worker()
    yield w
    w.shutdown()


def test_finished_carries_the_jobs_result(qtbot, worker):
    with qtbot.waitSignal(worker.signals.finished, timeout=5000) as blocker:
        gen = worker.submit(lambda stop, progress: 6 * 7)
    assert blocker.args == [gen, 42]
    assert not worker.is_busy()


def test_errors_are_emitted_not_swallowed(qtbot, worker):
    def job(stop, progress):
        raise ZeroDivisionError("boom")

    with qtbot.waitSignal(worker.signals.errored, timeout=5000) as blocker:
        gen = worker.submit(job)
    assert blocker.args[0] == gen
    assert isinstance(blocker.args[1], ZeroDivisionError)
    assert str(blocker.args[1]) == "boom"


def test_progress_is_forwarded(qtbot, worker):
    messages = []
    worker.signals.progress.connect(lambda gen, msg: messages.append(msg))

    def job(stop, progress):
        progress("half way")
        return 1

    with qtbot.waitSignal(worker.signals.finished, timeout=5000):
        worker.submit(job)
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

    finished = []
    worker.signals.finished.connect(lambda gen, result: finished.append((gen, result)))
    first = worker.submit(slow)
    assert started.wait(5)
    second = worker.submit(lambda stop, progress: "new")
    assert second == first + 1
    caplog.set_level("DEBUG", logger="actviz.ui.worker")
    release.set()
    # Both results reach the worker (it is idle only once every job's result was handled):
    # the stale one arrived first and was dropped, not merely late.
    qtbot.waitUntil(lambda: not worker.is_busy(), timeout=5000)
    assert finished == [(second, "new")]
    assert saw_stop == [True]
    assert f"dropping stale result of generation {first}" in caplog.messages


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
    cancelled, finished = [], []
    worker.signals.cancelled.connect(cancelled.append)
    worker.signals.finished.connect(lambda gen, r: finished.append(gen))
    gen = worker.submit(lambda stop, progress: run_job(request, stop, progress))
    assert entered.wait(5)
    assert worker.cancel()
    cancel_sent.set()
    qtbot.waitUntil(lambda: bool(cancelled), timeout=5000)
    assert cancelled == [gen]
    assert finished == []
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

    events = []
    worker.signals.cancelled.connect(lambda gen: events.append(("cancelled", gen)))
    worker.signals.finished.connect(lambda gen, r: events.append(("finished", gen)))
    gen = worker.submit(stubborn)
    worker.cancel()
    release.set()
    qtbot.waitUntil(lambda: bool(events), timeout=5000)
    assert events == [("cancelled", gen)]


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
    worker.signals.finished.connect(lambda gen, r: results.append(r))
    for _ in range(5):
        worker.submit(job)
    qtbot.waitUntil(lambda: not worker.is_busy(), timeout=5000)
    assert max(overlap) == 1
    assert len(results) == 1  # only the latest generation is reported
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
    worker.signals.finished.connect(lambda gen, r: finished.append((gen, r)))
    release.set()
    qtbot.waitUntil(lambda: not worker.is_busy(), timeout=5000)
    assert ran == []
    assert finished == [(last, "last")]


def test_cancel_without_a_job_is_a_no_op(worker):
    assert worker.cancel() is False


def test_cancel_of_one_generation_leaves_the_job_queued_behind_it(qtbot, worker):
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
    finished, cancelled = [], []
    worker.signals.finished.connect(lambda gen, r: finished.append((gen, r)))
    worker.signals.cancelled.connect(cancelled.append)
    assert worker.cancel(a) is True
    release.set()
    qtbot.waitUntil(lambda: not worker.is_busy(), timeout=5000)
    # Only the job asked for stopped: a feature's Cancel no longer kills another's job.
    assert cancelled == [a] and finished == [(b, "second")]


def test_capture_cancelled_is_reported_as_cancel_not_error(qtbot, worker):
    def job(stop, progress):
        raise CaptureCancelled("stop")

    errors, cancelled = [], []
    worker.signals.errored.connect(lambda gen, e: errors.append(e))
    worker.signals.cancelled.connect(cancelled.append)
    gen = worker.submit(job)
    qtbot.waitUntil(lambda: bool(cancelled), timeout=5000)
    assert cancelled == [gen] and errors == []


def test_a_loader_worker_starts_a_new_job_while_a_stale_one_still_runs(qtbot):
    worker = Worker(max_threads=2)
    release = threading.Event()
    started = threading.Event()

    def stale(stop, progress):
        started.set()
        release.wait(5)
        return "stale"

    finished = []
    worker.signals.finished.connect(lambda gen, r: finished.append(r))
    try:
        worker.submit(stale)
        assert started.wait(5)
        worker.submit(lambda stop, progress: "fresh")
        # With two threads the fresh job does not wait for the stale one.
        qtbot.waitUntil(lambda: finished == ["fresh"], timeout=5000)
        assert worker.is_busy() and not worker.has_current_job()
        release.set()
        # Idle only once the stale job's result has reached the worker (and been dropped).
        qtbot.waitUntil(lambda: not worker.is_busy(), timeout=5000)
        assert finished == ["fresh"]
    finally:
        release.set()
        worker.shutdown()


def test_drop_silences_the_running_job_and_has_current_job_tracks_it(qtbot, worker):
    release = threading.Event()
    events = []
    for signal in ("finished", "errored", "cancelled"):
        getattr(worker.signals, signal).connect(lambda *args, s=signal: events.append(s))
    worker.submit(lambda stop, progress: release.wait(5))
    assert worker.has_current_job()
    worker.drop()
    assert not worker.has_current_job() and worker.is_busy()
    release.set()
    # Idle only once the dropped job's result has reached the worker: nothing was reported.
    qtbot.waitUntil(lambda: not worker.is_busy(), timeout=5000)
    assert events == []


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

        with qtbot.waitSignal(worker.signals.finished, timeout=10_000):
            worker.submit(job)
        del payload, job
    gc.collect()
    assert [r() for r in refs] == [None, None, None]


# ============================================================================ pipelining
def test_a_staged_job_finishes_on_the_second_thread_while_the_next_one_starts(qtbot, worker):
    """The second stage of job 1 waits for job 2's first stage: only a pipeline finishes."""
    second_started = threading.Event()
    threads = {}
    order = []
    worker.signals.staged.connect(lambda gen: order.append(("staged", gen)))
    worker.signals.finished.connect(lambda gen, r: order.append(("finished", gen, r)))

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

    first = worker.submit(one)
    second = worker.submit(two, supersede=False)
    qtbot.waitUntil(lambda: not worker.is_busy(), timeout=10_000)
    finished = [o for o in order if o[0] == "finished"]
    assert finished == [("finished", first, "one"), ("finished", second, "two")]
    assert order.index(("staged", first)) < order.index(("finished", first, "one"))
    assert threads["then"] != threads["first"]


def test_supersede_makes_earlier_staged_jobs_stale(qtbot, worker):
    release = threading.Event()
    got = []
    worker.signals.finished.connect(lambda gen, r: got.append(r))

    def slow_then(stop, progress):
        release.wait(5)
        return "old"

    old = worker.submit(lambda stop, progress: Staged(slow_then))
    qtbot.waitUntil(lambda: worker.has_current_job(), timeout=5000)
    new = worker.submit(lambda stop, progress: "new")
    assert worker.is_stale(old) and not worker.is_stale(new)
    release.set()
    qtbot.waitUntil(lambda: not worker.is_busy(), timeout=5000)
    assert got == ["new"]


def test_cancel_stops_every_pipelined_job(qtbot, worker):
    release = threading.Event()
    cancelled = []
    worker.signals.cancelled.connect(cancelled.append)

    def waits(stop, progress):
        release.wait(5)
        if stop():
            raise CaptureCancelled("stopped")
        return "done"

    a = worker.submit(lambda stop, progress: Staged(waits))
    b = worker.submit(waits, supersede=False)
    assert worker.cancel()
    release.set()
    qtbot.waitUntil(lambda: not worker.is_busy(), timeout=5000)
    assert sorted(cancelled) == [a, b]
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

    runners, signals = _live(_Runner), _live(_RunnerSignals)
    for i in range(100):
        if i % 2:
            job = lambda stop, progress: Staged(lambda stop, progress: 1)  # noqa: E731
        else:
            job = lambda stop, progress: 1  # noqa: E731
        with qtbot.waitSignal(worker.signals.finished, timeout=10_000):
            worker.submit(job)
    assert not worker.is_busy()
    _flush_deletes()
    assert _live(_Runner) - runners == 0
    assert _live(_RunnerSignals) - signals == 0


def test_closed_windows_leave_no_runner_signals_or_thread_pool_alive(qtbot, actviz_window):
    """100 runs over two windows, then both closed: their jobs and pools are all gone."""
    from PySide6.QtCore import QThreadPool

    from actviz.ui.worker import _Runner, _RunnerSignals
    from tests.ui.conftest import frame
    from tests.ui.tiny_models import TinyCNN

    torch.manual_seed(0)
    pools = _live(QThreadPool)
    for _ in range(2):
        win = actviz_window(TinyCNN().eval(), frame(0), ["conv1", "fc"])
        window = win.window
        for _ in range(50):
            win.run_and_wait(flush=False)
        window.flush_panel_updates()
        _flush_deletes()
        # While the window is open: only the jobs of the last moments may still be pending.
        assert _live(_Runner) <= 2 and _live(_RunnerSignals) <= 2
        del window
        win.delete()  # closed and deleted; nothing holds its Python side
    assert _live(_Runner) == 0
    assert _live(_RunnerSignals) == 0
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

    with qtbot.waitSignal(worker.signals.finished, timeout=5000) as blocker:
        worker.submit(first)
    assert blocker.args[1] == "done"
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
    qtbot.waitUntil(lambda: len(order) == 2 and not worker.is_busy(), timeout=5000)
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
        with qtbot.waitSignal(worker.signals.finished, timeout=5000):
            worker.submit(first)
        worker.run_unreported(lambda: seen.setdefault("unreported", torch.get_num_threads()))
        qtbot.waitUntil(lambda: "unreported" in seen, timeout=5000)
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
    with qtbot.waitSignal(worker.signals.finished, timeout=5000):
        worker.submit(lambda stop, progress: seen.append(torch.get_num_threads()))
    worker.threads = 3
    with qtbot.waitSignal(worker.signals.finished, timeout=5000):
        worker.submit(lambda stop, progress: seen.append(torch.get_num_threads()))
    assert seen == [1, 3]


# ============================================================================ lanes
def test_a_lane_one_job_runs_beside_lane_zero_and_results_report_in_submission_order(qtbot, worker):
    """Lane 1 runs while lane 0 is blocked; its result waits for the earlier job's."""
    release = threading.Event()
    ran = threading.Event()
    threads = {}
    got = []
    worker.signals.finished.connect(lambda gen, r: got.append((gen, r)))

    def blocked(stop, progress):
        threads["lane0"] = threading.get_ident()
        assert release.wait(5), "never released"
        return "first"

    def beside(stop, progress):
        threads["lane1"] = (threading.get_ident(), torch.get_num_threads())
        ran.set()
        return "second"

    a = worker.submit(blocked)
    b = worker.submit(beside, supersede=False, lane=1, threads=1)
    assert ran.wait(5), "the lane-1 job did not run while lane 0 was busy"
    qtbot.wait(50)  # its result is back on the GUI thread by now, and held
    assert got == []
    release.set()
    qtbot.waitUntil(lambda: not worker.is_busy(), timeout=5000)
    assert got == [(a, "first"), (b, "second")]
    assert threads["lane1"][0] != threads["lane0"]
    assert threads["lane1"][1] == 1


def test_a_held_result_is_dropped_when_its_job_goes_stale(qtbot, worker):
    release = threading.Event()
    got = []
    worker.signals.finished.connect(lambda gen, r: got.append(r))

    def blocked(stop, progress):
        release.wait(5)
        return "old"

    worker.submit(blocked)
    done = threading.Event()
    worker.submit(lambda stop, progress: (done.set(), "held")[1], supersede=False, lane=1)
    assert done.wait(5)
    qtbot.wait(50)
    worker.drop()  # both stale: neither reports, the held one included
    new = worker.submit(lambda stop, progress: "new", lane=1)
    release.set()
    qtbot.waitUntil(lambda: not worker.is_busy(), timeout=5000)
    assert got == ["new"]
    assert worker._held == {}  # noqa: SLF001 - nothing kept once everything reported
    assert new == worker.generation


def test_an_error_on_lane_zero_releases_the_result_held_behind_it(qtbot, worker):
    release = threading.Event()
    events = []
    worker.signals.finished.connect(lambda gen, r: events.append(("finished", gen)))
    worker.signals.errored.connect(lambda gen, e: events.append(("errored", gen)))

    def fails(stop, progress):
        release.wait(5)
        raise ValueError("bad frame")

    a = worker.submit(fails)
    b = worker.submit(lambda stop, progress: "ok", supersede=False, lane=1)
    qtbot.wait(50)
    release.set()
    qtbot.waitUntil(lambda: not worker.is_busy(), timeout=5000)
    assert events == [("errored", a), ("finished", b)]


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

    got = []
    worker.signals.finished.connect(lambda gen, r: got.append(r))
    base = os.getpriority(os.PRIO_PROCESS, threading.get_native_id())
    for _ in range(3):
        with qtbot.waitSignal(worker.signals.finished, timeout=5000):
            worker.submit(job)
    assert got == [min(19, base + 3)] * 3
