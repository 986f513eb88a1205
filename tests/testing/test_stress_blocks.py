"""The block sampler names where the GUI thread was while it blocked, read from faulthandler's
dump (never from frame objects of the running thread)."""

from __future__ import annotations

import importlib.util
import threading
import time

from actviz.testing.stress_report import BlockSampler, _gui_stack, _other_threads


class _Probe:
    """A lag probe whose last timeout is long past: the GUI thread is blocked."""

    def __init__(self) -> None:
        self._last = time.perf_counter()


def test_the_sampler_names_the_function_that_blocked(tmp_path):
    folder = tmp_path / "site" / "actviz"
    folder.mkdir(parents=True)
    (folder / "slow_panel.py").write_text(
        "import time\n\ndef paint_all():\n    time.sleep(0.3)\n\ndef on_click():\n    paint_all()\n"
    )
    spec = importlib.util.spec_from_file_location("slow_panel", folder / "slow_panel.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    probe = _Probe()
    sampler = BlockSampler(probe, after_ms=20, every_ms=5)
    sampler.start()
    try:
        probe._last = time.perf_counter()
        module.on_click()
    finally:
        sampler.stop()
    where = sampler.take()
    assert where.startswith("actviz/slow_panel.py:4 in paint_all <- on_click"), where
    assert sampler.take() == ""  # taken: the next block starts afresh


def test_a_dump_is_read_for_the_gui_thread_only():
    ident = threading.main_thread().ident
    dump = (
        "Thread 0x00000000000000aa (most recent call first):\n"
        '  File "/x/actviz/ui/live/dock.py", line 9 in other\n'
        '  File "/x/actviz/ui/worker.py", line 3 in run\n\n'
        "Thread 0x00000000000000bb (most recent call first):\n"
        '  File "/x/actviz/core/allocator.py", line 190 in release_freed_memory\n\n'
        f"Thread 0x{ident:016x} (most recent call first):\n"
        '  File "/x/site-packages/pyqtgraph/AxisItem.py", line 999 in paint\n'
        '  File "/x/actviz/ui/panels/canvas.py", line 928 in paintEvent\n'
        '  File "/x/actviz/testing/stress.py", line 5 in settle\n'
        '  File "/x/actviz/ui/window/result_display.py", line 40 in apply_result\n'
    )
    assert _gui_stack(dump, ident) == [
        "actviz/ui/panels/canvas.py:928 in paintEvent",
        "actviz/ui/window/result_display.py:40 in apply_result",
    ]
    # Who else ran: each other thread's innermost frame (a GUI thread that waited for the GIL
    # or malloc's lock shows the holder there).
    assert _other_threads(dump, ident) == [
        "dock.py:9 in other",
        "allocator.py:190 in release_freed_memory",
    ]


def test_a_block_of_many_small_steps_is_named_by_the_handler_they_share():
    # A result's handler painting ten panels: the samples stop in the panels' paints (the most
    # frequent line, p0's twice, would name one panel by chance); one sample was elsewhere.
    sampler = BlockSampler(_Probe())
    handler = [
        "actviz/ui/window/result_display.py:88 in show_result",
        "actviz/ui/worker.py:5 in _end",
    ]
    for k in range(10):
        sampler.add([f"actviz/ui/panels/p{k}.py:{k + 1} in paint", *handler])
    sampler.add(["actviz/ui/panels/p0.py:1 in paint", *handler])
    sampler.add(["actviz/ui/tree/dock.py:7 in fit_columns", "actviz/ui/tree/dock.py:3 in update"])
    assert sampler.take() == (
        "actviz/ui/window/result_display.py:88 in show_result <- _end"
        " (11 of 12 samples; most often actviz/ui/panels/p0.py:1 in paint, 2)"
    )
    # Where no function holds most of the samples, the most frequent line, with its share.
    for frame in ("a.py:1 in f", "b.py:2 in g", "c.py:3 in h", "a.py:1 in f"):
        sampler.add([f"actviz/{frame}"])
    assert sampler.take() == "actviz/a.py:1 in f (2 of 4 samples)"
