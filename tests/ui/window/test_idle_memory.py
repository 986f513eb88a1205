"""The window hands freed memory back once it has been idle a moment after a result, off the
GUI thread, and not while it works."""

from __future__ import annotations

from actviz.ui import worker as memory
from tests.ui.conftest import small_conv_window


def test_memory_is_trimmed_after_a_run_once_idle(actviz_window, monkeypatch):
    monkeypatch.setattr(memory, "IDLE_MS", 50)
    monkeypatch.setattr(memory, "SLACK_MIB", -1.0)  # always worth a trim here
    trims = []
    monkeypatch.setattr(memory.allocator, "release_freed_memory", lambda: trims.append(1) or True)
    win = small_conv_window(actviz_window)
    idle = win.window.memory
    win.qtbot.waitUntil(lambda: idle.trims >= 1, timeout=30_000)
    assert len(trims) == 1
    win.qtbot.wait(300)
    assert len(trims) == 1  # once per idle stretch, not on a timer
    win.run_and_wait()
    win.qtbot.waitUntil(lambda: idle.trims >= 2, timeout=30_000)


def test_the_idle_pass_frees_kernel_buffers_only_when_nothing_runs(actviz_window, monkeypatch):
    monkeypatch.setattr(memory, "IDLE_MS", 50)
    freed = []
    monkeypatch.setattr(memory.allocator, "release_kernel_buffers", lambda: freed.append(1))
    win = small_conv_window(actviz_window)
    idle = win.window.memory
    win.qtbot.waitUntil(lambda: idle.passes >= 1, timeout=30_000)
    assert len(freed) == 1
    monkeypatch.setattr(idle, "_busy", lambda: True)
    idle.idle_now()
    assert len(freed) == 1  # a job may be in a matrix product: not now
    # A feature's job (a scan, an estimate) may be too: the trim goes on, MKL's buffers wait.
    monkeypatch.setattr(idle, "_busy", lambda: False)
    monkeypatch.setattr(win.window.host, "features_busy", lambda: True)
    passes = idle.passes
    idle.idle_now()
    win.qtbot.waitUntil(lambda: idle.passes > passes, timeout=30_000)
    assert len(freed) == 1


def test_an_idle_pass_with_little_kept_ends_without_a_trim(actviz_window, monkeypatch):
    """The stress driver waits for the idle pass, not for a trim that never comes (it waited
    its whole 6 s at each checkpoint of a small model)."""
    monkeypatch.setattr(memory, "IDLE_MS", 50)
    monkeypatch.setattr(memory, "SLACK_MIB", 1e9)  # never worth a trim
    monkeypatch.setattr(memory.allocator, "release_freed_memory", lambda: 1 / 0)
    win = small_conv_window(actviz_window)
    idle = win.window.memory
    win.qtbot.waitUntil(lambda: idle.passes >= 1, timeout=30_000)
    assert idle.trims == 0


def test_cyclic_garbage_is_collected_when_idle_and_the_rest_frozen_until_the_close(
    actviz_window, monkeypatch
):
    import gc
    import weakref

    monkeypatch.setattr(memory, "IDLE_MS", 50)
    frozen = gc.get_freeze_count()  # what the test session froze after its imports
    plain = small_conv_window(actviz_window)  # a script's or a test's process: Python's schedule
    assert not plain.window.memory.freezes and gc.get_freeze_count() == frozen
    plain.close()
    monkeypatch.setattr(memory, "_FREEZE", [True])  # as run_app sets its own process up
    win = small_conv_window(actviz_window)
    idle = win.window.memory
    # Built: what exists is frozen, out of the collections Python starts on its own.
    assert gc.get_freeze_count() > 10_000 and 0 < idle.idles_before_full <= memory.FULL_EVERY

    class Node:
        pass

    def cycle() -> weakref.ref:
        a, b = Node(), Node()
        a.other, b.other = b, a  # only the collector frees them
        return weakref.ref(a)

    gc.disable()  # nothing but the idle moment collects
    try:
        young = cycle()
        idle.touch()
        win.qtbot.waitUntil(lambda: young() is None, timeout=30_000)
        # A cycle frozen while alive, garbage later: freed once the frozen objects grew by
        # half since the last full collection (here: said to have), at the next idle moment.
        old = Node()
        old.me = old
        gone = weakref.ref(old)
        gc.freeze()
        del old
        idle.touch()
        win.qtbot.wait(300)
        assert gone() is not None  # the idle collection walks only the youngest objects
        monkeypatch.setattr(memory, "FULL_IDLE_MS", 400)
        idle.idles_before_full = 1  # the next idle moment makes a full collection due
        idle.touch()
        win.qtbot.wait(250)
        assert gone() is not None  # due, but only after a longer idle stretch
        win.qtbot.waitUntil(lambda: gone() is None, timeout=30_000)
        assert idle.idles_before_full == memory.FULL_EVERY  # counted again from the full one
    finally:
        gc.enable()
    win.window.close()
    assert gc.get_freeze_count() == 0  # the process is left as it was found
