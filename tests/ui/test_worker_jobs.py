"""A job is a handle: each submitter hears of its own job only (issue 38, item 1)."""

from __future__ import annotations

import threading

from actviz.core.capture import CaptureCancelled
from actviz.ui.worker import Job, Staged


def record(job: Job) -> list[tuple]:
    """Everything ``job`` emits, in order: ``(signal, *args)``."""
    got: list[tuple] = []
    for name in ("started", "staged", "finished", "failed", "cancelled", "superseded"):
        getattr(job, name).connect(lambda *args, n=name: got.append((n, *args)))
    return got


def test_finished_goes_only_to_the_submitting_handle(qtbot, worker):
    a = worker.submit(lambda stop, progress: "a", supersede=False)
    b = worker.submit(lambda stop, progress: "b", supersede=False)
    got_a, got_b = record(a), record(b)
    qtbot.waitUntil(lambda: a.done and b.done, timeout=30_000)
    assert got_a == [("started",), ("finished", "a")]
    assert got_b == [("started",), ("finished", "b")]
    assert worker.jobs() == []


def test_a_superseded_job_says_so_at_once_and_never_finishes(qtbot, worker):
    release, began = threading.Event(), threading.Event()

    def slow(stop, progress):
        began.set()
        release.wait(5)
        return "old"

    old = worker.submit(slow)
    got = record(old)
    assert began.wait(5)
    new = worker.submit(lambda stop, progress: "new")
    # Superseded when the newer job was submitted, before anything ran on.
    assert got[-1] == ("superseded",) and old.outcome == "superseded"
    assert worker.jobs() == [new]
    release.set()
    with qtbot.waitSignal(new.finished, timeout=30_000) as blocker:
        pass
    qtbot.waitUntil(lambda: not worker.is_busy(), timeout=30_000)
    assert blocker.args == ["new"]
    assert [g[0] for g in got].count("superseded") == 1 and ("finished", "old") not in got


def test_a_kept_job_outlives_later_jobs_and_ends_by_drop(qtbot, worker):
    """``keep``: a report queued behind a run and one running when a run is asked for both
    finish, before the run's result; a drop (another model) still ends them."""
    release, began = threading.Event(), threading.Event()

    def slow(stop, progress):
        began.set()
        release.wait(5)
        return "report" if not stop() else "stopped"

    kept = worker.submit(slow, supersede=False, keep=True)
    queued = worker.submit(lambda stop, progress: "queued report", supersede=False, keep=True)
    got_kept, got_queued = record(kept), record(queued)
    assert began.wait(5)
    run = worker.submit(lambda stop, progress: "run")
    got_run = record(run)
    assert worker.jobs() == [kept, queued, run] and worker.has_current_job()
    release.set()
    qtbot.waitUntil(lambda: run.done, timeout=30_000)
    assert got_kept == [("started",), ("finished", "report")]
    assert got_queued == [("started",), ("finished", "queued report")]
    assert got_run == [("started",), ("finished", "run")]
    assert worker.jobs() == []

    release.clear()
    began.clear()
    dropped = worker.submit(slow, supersede=False, keep=True)
    got_dropped = record(dropped)
    assert began.wait(5)
    worker.drop()
    release.set()
    qtbot.waitUntil(lambda: not worker.is_busy(), timeout=30_000)
    assert got_dropped == [("superseded",)] and worker.jobs() == []


def test_cancel_on_one_handle_leaves_the_other_job_running(qtbot, worker):
    release, began = threading.Event(), threading.Event()

    def first(stop, progress):
        began.set()
        release.wait(5)
        if stop():
            raise CaptureCancelled("asked to stop")
        return "first"

    a = worker.submit(first)
    b = worker.submit(lambda stop, progress: "second", supersede=False)
    got_a, got_b = record(a), record(b)
    assert began.wait(5)
    assert a.cancel() is True
    assert worker.jobs() == [a, b]  # cancelled, not ended yet: it reports its cancel
    release.set()
    qtbot.waitUntil(lambda: a.done and b.done, timeout=30_000)
    assert got_a == [("cancelled",)] and a.outcome == "cancelled"
    assert got_b == [("started",), ("finished", "second")]
    assert a.cancel() is False  # ended: nothing to cancel


def test_jobs_report_in_submission_order_across_lanes_and_stages(qtbot, worker):
    release = threading.Event()
    order: list[tuple[str, str]] = []

    def lane0(stop, progress):
        assert release.wait(5)
        return Staged(lambda stop, progress: "lane 0")

    jobs = [
        worker.submit(lane0),
        worker.submit(lambda stop, progress: "lane 1", supersede=False, lane=1),
        worker.submit(lambda stop, progress: "lane 1 again", supersede=False, lane=1),
    ]
    for job in jobs:
        job.finished.connect(lambda value, j=job: order.append((value, j.outcome)))
    qtbot.wait(50)  # both lane-1 results are back and held behind lane 0's
    assert order == []
    release.set()
    qtbot.waitUntil(lambda: len(order) == 3, timeout=30_000)
    assert [value for value, _ in order] == ["lane 0", "lane 1", "lane 1 again"]
    # The outcome is set before the signal goes out: a slot sees the job as done.
    assert {outcome for _, outcome in order} == {"finished"}
    assert jobs[2].is_after(jobs[1]) and jobs[1].is_after(jobs[0])
    assert not jobs[0].is_after(jobs[1])


def test_a_failed_jobs_exception_arrives_on_its_own_handle(qtbot, worker):
    def bad(stop, progress):
        raise KeyError("no such layer")

    good = worker.submit(lambda stop, progress: 1, supersede=False)
    failing = worker.submit(bad, supersede=False)
    got_good, got_bad = record(good), record(failing)
    qtbot.waitUntil(lambda: good.done and failing.done, timeout=30_000)
    assert got_good == [("started",), ("finished", 1)]
    assert [g[0] for g in got_bad] == ["started", "failed"]
    error = got_bad[1][1]
    assert isinstance(error, KeyError) and error.args == ("no such layer",)
    assert failing.outcome == "failed"


def test_on_connects_several_slots_and_drop_supersedes_every_job(qtbot, worker):
    release = threading.Event()
    seen: list[str] = []
    a = worker.submit(lambda stop, progress: release.wait(5)).on(
        finished=lambda _v: seen.append("a finished"), superseded=lambda: seen.append("a gone")
    )
    b = worker.submit(lambda stop, progress: 2, supersede=False).on(
        superseded=lambda: seen.append("b gone")
    )
    worker.drop()
    assert seen == ["a gone", "b gone"] and worker.jobs() == []
    assert a.done and b.done
    release.set()
    qtbot.waitUntil(lambda: not worker.is_busy(), timeout=30_000)
    assert seen == ["a gone", "b gone"]
    # Closing drops quietly: a window's slots are not called while it goes.
    c = worker.submit(lambda stop, progress: 3).on(superseded=lambda: seen.append("c gone"))
    assert worker.shutdown(5000)
    assert seen == ["a gone", "b gone"] and c.outcome == "superseded"


def test_an_ended_job_lets_go_of_its_slots_and_what_they_hold(qtbot, worker):
    import gc
    import weakref

    class Owner:
        def show(self, job, value):
            self.shown = (job, value)

    owners, jobs = [], []
    for supersede in (False, True):
        owner = Owner()
        job = worker.submit(lambda stop, progress: 1, supersede=supersede)
        # A slot naming its own job: a cycle through Qt the collector cannot see.
        job.finished.connect(lambda value, job=job, owner=owner: owner.show(job, value))
        owners.append(weakref.ref(owner))
        jobs.append(job)  # the handles stay held (a request keeps its job)
        del owner, job
    qtbot.waitUntil(lambda: all(j.done for j in jobs), timeout=30_000)
    assert [j.outcome for j in jobs] == ["superseded", "finished"]
    gc.collect()
    assert [o() for o in owners] == [None, None]
