"""host.FeatureJob: one job of a feature on a real worker, and the feature's view kept in step
(the window's features use it; here with a host and a view that record what they are told)."""

from __future__ import annotations

import logging
import threading

import pytest

from actviz.ui.host import FeatureJob
from tests.ui.host_doubles import RecordingHost, RecordingView


@pytest.fixture
def tracked(qtbot):
    host, view = RecordingHost(), RecordingView()
    ended: list[tuple[str, object, object]] = []
    job = FeatureJob(
        host,
        host,
        view,
        failed="Could not add",
        status="Adding",
        cancelled="The adding was cancelled.",
        interrupted="A new run replaced the adding.",
        log_as="adding",
        on_finished=lambda value, context: ended.append(("finished", value, context)),
        on_failed=lambda text: ended.append(("failed", text, None)),
    )
    yield host, view, job, ended
    host.worker.shutdown()


def _start(job, work, **words):
    return job.start(work, message="Adding…", status="Adding 2 and 3…", done="Added", **words)


def test_a_finished_job_frees_the_view_then_hands_over_its_value(qtbot, tracked):
    host, view, job, ended = tracked

    def work(_stop, report):
        job.progress = (1, 2)
        report("half")
        return 2 + 3

    handle = _start(job, work, context="sum")
    assert job.running and job.job is handle and host.worker.jobs() == [handle]
    assert view.busy == [True] and view.messages == [("Adding…", False)]
    qtbot.waitUntil(lambda: bool(ended), timeout=30_000)
    assert ended == [("finished", 5, "sum")]
    assert view.busy == [True, False] and view.steps == [(1, 2)]
    assert host.statuses == ["Adding 2 and 3…", "Added"]
    assert host.shown == ["half"]  # the job's own message, in the window's status bar
    assert not job.running and job.context is None and handle.outcome == "finished"
    # The steps and the time left follow the message (issue 39); what the feature says next
    # is its own.
    assert view.messages[0] == ("Adding…", False) and len(view.messages) == 2
    assert view.messages[1][0].startswith("Adding… Step 1 of 2, about ")
    assert job.cancel() is False  # nothing runs


def test_a_failure_is_logged_and_said_in_red(qtbot, tracked, caplog):
    host, view, job, ended = tracked

    def work(_stop, _report):
        raise ValueError("no numbers today")

    with caplog.at_level(logging.INFO, logger=RecordingHost.__module__):
        _start(job, work, failed="Could not add 2 and 3")
        qtbot.waitUntil(lambda: bool(ended), timeout=30_000)
    text = "Could not add 2 and 3: no numbers today"
    assert ended == [("failed", text, None)]
    assert view.messages[-1] == (text, True) and view.busy == [True, False]
    assert host.statuses[-1] == "Adding failed"
    assert "adding failed: no numbers today" in caplog.text
    # The failure prefix given to one start is that job's only.
    ended.clear()
    _start(job, work)
    qtbot.waitUntil(lambda: bool(ended), timeout=30_000)
    assert ended == [("failed", "Could not add: no numbers today", None)]


def test_cancel_stops_the_job_and_says_so(qtbot, tracked):
    host, view, job, ended = tracked
    began = threading.Event()

    def work(stop, _report):
        began.set()
        while not stop():
            threading.Event().wait(0.005)
        return "stopped"

    _start(job, work)
    assert began.wait(5)
    assert job.cancel() is True
    qtbot.waitUntil(lambda: bool(ended), timeout=30_000)
    assert ended == [("failed", "The adding was cancelled.", None)]
    assert view.messages[-1] == ("The adding was cancelled.", True)
    assert host.statuses[-1] == "Adding cancelled" and not job.running


def test_a_superseding_run_interrupts_it_and_other_jobs_are_not_its_own(qtbot, tracked):
    host, view, job, ended = tracked
    release = threading.Event()
    handle = _start(job, lambda _stop, _report: release.wait(5))
    # The window's run supersedes every job before it: this one will never report.
    run = host.worker.submit(lambda _stop, _report: "run")
    release.set()
    assert ended == [("failed", "A new run replaced the adding.", None)]
    assert view.messages[-1] == ("A new run replaced the adding.", True)
    assert view.busy == [True, False] and not job.running
    assert handle.outcome == "superseded"
    # Its own status line: a live frame that interrupts it sets none, and "Adding 2 and 3…"
    # stayed in the status bar after the job had ended.
    assert host.statuses[-1] == "Adding interrupted"
    # The run's end is the run's own: nothing of it reaches this job.
    qtbot.waitUntil(lambda: run.done, timeout=30_000)
    assert run.outcome == "finished" and len(ended) == 1
