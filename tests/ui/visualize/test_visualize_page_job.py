"""What channels want's job is a host.FeatureJob on the page's own worker: the two things the
page asks of FeatureJob beyond the other features (a cancel message saying what was done by
then; a job dropped when the page turns), on a real worker, then through the page."""

from __future__ import annotations

import threading

import pytest

from actviz.ui.host import FeatureJob
from tests.ui.host_doubles import RecordingHost, RecordingView


@pytest.fixture
def own_worker(qtbot):
    from actviz.ui.worker import Worker

    host, view = RecordingHost(), RecordingView()
    worker = Worker(host)
    done = {"n": 0}
    ended: list[tuple[str, object]] = []
    job = FeatureJob(
        host,
        host,
        view,
        failed="Could not count",
        status="Counting",
        cancelled=lambda: f"Cancelled ({done['n']} counted).",
        log_as="counting",
        on_finished=lambda value, context: ended.append((value, context)),
        on_failed=lambda text: ended.append(("failed", text)),
        worker=worker,
    )
    yield host, view, job, done, ended
    worker.shutdown()
    host.worker.shutdown()


def _counting(done, began):
    def work(stop, _report):
        began.set()
        while not stop():
            done["n"] += 1
            threading.Event().wait(0.002)
        return done["n"]

    return work


def test_the_cancel_message_says_what_was_done_when_it_is_shown(qtbot, own_worker):
    host, view, job, done, ended = own_worker
    began = threading.Event()
    job.start(_counting(done, began), message="Counting…", status="Counting", done="Counted")
    assert began.wait(5)
    qtbot.waitUntil(lambda: done["n"] >= 3, timeout=30_000)
    assert job.cancel()
    qtbot.waitUntil(lambda: bool(ended), timeout=30_000)
    text = f"Cancelled ({done['n']} counted)."
    assert done["n"] >= 3 and ended == [("failed", text)]
    assert view.messages[-1] == (text, True) and host.statuses[-1] == "Counting cancelled"
    assert not job.running and host.worker.submitted == 0  # the capture worker untouched


def test_a_dropped_job_never_reports_and_the_next_one_does(qtbot, own_worker):
    host, view, job, done, ended = own_worker
    began = threading.Event()
    first = job.start(_counting(done, began), message="Counting…", status="Counting", done="1")
    assert began.wait(5)
    job.drop()
    assert not job.running and job.context is None and first.outcome == "superseded"
    assert view.busy == [True] and view.messages == [("Counting…", False)]  # left as it was
    assert job.cancel() is False  # nothing of this job's runs now
    second = job.start(lambda _s, _r: "again", message="Again…", status="", done="2", context=2)
    assert second.is_after(first)
    qtbot.waitUntil(lambda: bool(ended), timeout=30_000)
    qtbot.wait(50)  # the dropped job stopped (it was asked to) and said nothing
    assert ended == [("again", 2)] and not job.running
    assert view.busy == [True, True, False] and host.statuses[-1] == "2"
