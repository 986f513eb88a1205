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
