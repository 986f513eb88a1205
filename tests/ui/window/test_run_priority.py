"""A window's run captures below the GUI thread's priority, with every torch thread it starts:
a capture on two threads and the GUI thread at one priority share two cores by thirds, and a
paint waits for a time slice (issue 37: GUI blocks while a run captures)."""

from __future__ import annotations

import os
import sys
import threading

import pytest
import torch

from actviz.ui.worker import CAPTURE_NICE

pytestmark = pytest.mark.skipif(
    not sys.platform.startswith("linux"), reason="per-thread priority: Linux"
)


def _nice_of_threads() -> dict[int, int]:
    found = {}
    for tid in os.listdir("/proc/self/task"):
        try:
            with open(f"/proc/self/task/{tid}/stat", encoding="ascii") as fh:
                found[int(tid)] = int(fh.read().rsplit(")", 1)[1].split()[16])
        except OSError:  # a thread that ended meanwhile
            pass
    return found


def test_a_run_and_the_torch_threads_it_starts_capture_below_the_gui(actviz_window, monkeypatch):
    import actviz.core.capture as core_capture

    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Conv2d(3, 32, 3), torch.nn.ReLU())
    image = torch.rand(1, 3, 160, 160, generator=torch.Generator().manual_seed(0))
    win = actviz_window(model, image, layers=["0", "1"], auto_run=False)
    gui = os.getpriority(os.PRIO_PROCESS, threading.get_native_id())
    lowered = min(19, gui + CAPTURE_NICE)
    seen: list[tuple[int, dict[int, int]]] = []
    real = core_capture.capture

    def watching(*args, **kwargs):
        out = real(*args, **kwargs)  # torch's threads for this thread exist after it
        seen.append(
            (os.getpriority(os.PRIO_PROCESS, threading.get_native_id()), _nice_of_threads())
        )
        return out

    monkeypatch.setattr(core_capture, "capture", watching)
    with win.expect_run():
        win.window.commands.run_action.trigger()  # Run > Run
    assert [nice for nice, _ in seen] == [lowered]
    if win.window.worker.threads >= 2:  # the capture's OpenMP helper started lowered too
        assert lowered in seen[0][1].values(), seen[0][1]
    assert os.getpriority(os.PRIO_PROCESS, threading.get_native_id()) == gui


def test_every_worker_of_the_window_and_its_features_runs_below_the_gui(actviz_window, tiny_cnn):
    """Issue 37: a paint beside a synthesis, a UMAP or a load at the GUI's priority waited for
    its time slice (the stress run's longest blocks: 81 ms of the GUI's CPU in 191 ms beside
    "What it wants"). Every worker, the features' included, runs CAPTURE_NICE lower (a scan
    BACKGROUND_NICE: live mode comes first)."""
    from actviz.core.threads import BACKGROUND_NICE
    from actviz.ui.worker import Worker

    win = actviz_window(tiny_cnn, None, ["conv1"], auto_run=False)
    workers = win.window.findChildren(Worker)
    owners = {type(w.parent()).__name__ for w in workers}
    # The window's own and those of the features that run long jobs.
    assert {"MainWindow", "AtlasFeature", "SessionsFeature", "EffectsFeature"} <= owners, owners
    assert len(workers) >= 10
    assert {w.nice for w in workers} == {CAPTURE_NICE, BACKGROUND_NICE}, [
        (type(w.parent()).__name__, w.nice) for w in workers
    ]
