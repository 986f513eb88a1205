"""The stress driver (the short run; the long one is ``python -m actviz.bench stress``): a
case in its own process acting through real input events leaves nothing behind; a crash, a
hang and an exception are each counted with what led to them; a failure shrinks to the step
that causes it; the checks themselves are shown to catch what they look for."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
import torch

from actviz.testing.stress import (
    StressDriver,
    StressReport,
    busy_parts,
    idle_spinners,
    module_model,
)
from actviz.testing.stress_cases import finding_key, run_case, shrink, shrink_failure
from actviz.testing.stress_report import Failure, Sample, model_leftovers, model_state
from tests.ui.tiny_models import TinyCNN

#: Actions that are quick on a tiny model (the shrinker test replays many lists).
QUICK = ("tile_click", "key", "combo", "resize", "close_channel", "sort")


def _tiny_setup():
    torch.manual_seed(0)
    x = torch.randn(1, 3, 16, 16, generator=torch.Generator().manual_seed(1))
    return module_model("tiny", TinyCNN().eval(), x)


def test_a_short_case_in_its_own_process_leaves_nothing_behind():
    report = run_case("demo", seed=2, actions=24, hang_s=30, sample_every=24)
    assert report.actions == 24, report.describe()
    assert not report.crashes and not report.hangs, report.describe()
    assert not report.exceptions, report.describe()
    assert not report.leaked_hooks, report.describe()
    assert not report.widgets_left and not report.windows_kept, report.describe()
    assert not report.stuck, report.describe()
    # Many kinds of action were taken, every one recorded with what it clicked.
    assert len(report.action_counts) >= 12, report.action_counts
    assert len(report.steps) == 24 and all("r" in p for _, p in report.steps)
    assert any("layer" in p and "channel" in p for n, p in report.steps if n == "tile_click")
    # Job runners are freed when their jobs end; windows, pools and workers stay flat.
    assert report.objects_growth == 0, report.describe()
    assert [s.action for s in report.samples] == [0, 24]
    assert all(s.rss_mib > 0 and s.heap_mib > 0 for s in report.samples)
    assert report.max_block_ms > 0


@pytest.mark.parametrize("kind", ["crash", "hang"])
def test_a_crash_or_a_hang_in_the_case_process_is_counted_with_its_stack(kind):
    report = run_case("demo", seed=1, actions=4, inject={2: kind}, hang_s=6)
    found = report.crashes if kind == "crash" else report.hangs
    assert len(found) == 1 and len(report.findings()) == 1, report.describe()
    # The stack faulthandler printed, down to the driver's action that died.
    text = found[0].text
    assert ("Segmentation fault" in text) if kind == "crash" else ("Timeout (" in text)
    assert "act_inject_failure" in text
    # The steps up to it, the one in flight last: what a replay needs.
    assert [n for n, _ in report.steps][-1] == "inject_failure"
    assert len(report.steps) == 2 and found[0].recent[-1].startswith("2:inject_failure")


def test_a_failure_shrinks_to_the_step_that_causes_it(qapp, tmp_path):
    driver = StressDriver(_tiny_setup(), seed=4, folder=tmp_path / "0", sample_every=100)
    driver.weights = {n: (1.0 if n in QUICK else 0.0) for n in driver.actions}
    report = driver.run(8, inject={5: {"kind": "exception"}})
    assert len(report.exceptions) == 1, report.describe()
    failure = report.exceptions[0]
    assert "RuntimeError: injected failure" in failure.text and failure.action == 5
    assert failure.recent[-1] == "5:inject exception"
    replays = []

    def replay(steps):
        replays.append(len(steps))
        folder = tmp_path / str(len(replays))
        # No memory figures: a replay looks for the finding (its checkpoints' gc walks
        # took two thirds of each replay).
        driver = StressDriver(_tiny_setup(), folder=folder, sample_every=100, memory=False)
        return driver.run(steps=steps)

    shrunk, runs = shrink_failure(report, failure, replay, max_runs=20)
    assert 1 <= len(shrunk) <= 2, shrunk
    assert "inject_failure" in [name for name, _ in shrunk]
    assert runs == len(replays) <= 20
    # The shrunk list replays to the same failure; its checkpoints count objects, not memory.
    again = replay(shrunk)
    assert [finding_key(f) for f in again.findings()] == ["exception RuntimeError"]
    assert [s.breakdown for s in again.samples] == [{}, {}]
    assert all(s.counts and s.rss_mib > 0 for s in again.samples)


def test_an_error_the_window_shows_names_the_action_it_followed(qapp, tmp_path):
    driver = StressDriver(_tiny_setup(), seed=4, folder=tmp_path / "0", sample_every=100)
    driver.weights = {n: (1.0 if n in QUICK else 0.0) for n in driver.actions}
    report = driver.run(6, inject={3: {"kind": "shown"}})
    assert report.errors_shown == (
        "run: injected run failure (first after action 3:inject_failure)",
    )


def test_a_right_click_on_a_widget_gone_meanwhile_opens_nothing(qapp, tmp_path):
    """The 20,000-action run's one exception: a tile's panel went (a model switch's steps)
    between the right click and the context-menu event that follows it."""
    from PySide6.QtWidgets import QWidget

    driver = StressDriver(_tiny_setup(), seed=1, folder=tmp_path, sample_every=100)
    widget = QWidget()
    widget.show()
    widget.deleteLater()  # goes while the driver waits for a menu
    driver._context_menu_event(widget, None)  # before: "Internal C++ object already deleted"


def test_shrink_keeps_the_steps_a_failure_needs_together():
    steps = [(f"s{i}", {}) for i in range(20)]
    tried = []

    def fails(candidate):
        tried.append(candidate)
        names = {n for n, _ in candidate}
        return {"s3", "s15"} <= names  # fails only with both

    shrunk, runs = shrink(steps, fails)
    assert [n for n, _ in shrunk] == ["s3", "s15"]
    assert runs == len(tried)


def test_a_recorded_step_replays_to_what_it_clicked_first(qapp, tmp_path):
    driver = StressDriver(_tiny_setup(), seed=2, folder=tmp_path / "a", sample_every=100)
    driver.weights = {n: (1.0 if n == "tile_click" else 0.0) for n in driver.actions}
    first = driver.run(3)
    assert [n for n, _ in first.steps] == ["tile_click"] * 3
    # The lag probe's samples go once each action's block is read (they grew with the run, in
    # the memory the run measures); the run's longest lag is kept.
    assert driver.probe.lags == [] and driver.probe.cpu == []
    # (Under a heavy load no lag sample may fall inside three quick clicks: no worst block.)
    assert first.max_block_ms >= max((ms for ms, _ in first.worst_blocks), default=0.0)
    assert first.max_block_ms > 0
    again = StressDriver(_tiny_setup(), folder=tmp_path / "b", sample_every=100).run(
        steps=first.steps
    )
    assert again.steps == first.steps  # the same layer and channel clicked each time
    assert not again.exceptions, again.describe()


def test_model_leftovers_names_hooks_wrapped_forwards_and_changed_flags():
    model = TinyCNN().eval()
    before = model_state(model)
    assert model_leftovers(model, before) == []
    handle = model.conv1.register_forward_hook(lambda *a: None)
    model.fc.forward = model.fc.forward  # an instance-level wrapper, as capture installs
    model.conv2.train()
    found = " ".join(model_leftovers(model, before))
    assert "conv1 still has _forward_hooks" in found
    assert "fc still has a wrapped forward" in found
    assert "training changed on ['conv2']" in found
    handle.remove()
    del model.fc.forward
    model.conv2.eval()
    assert model_leftovers(model, before) == []


def _stress_report(model, rss, heap, **kwargs):
    samples = tuple(
        Sample(i * 100, {"MainWindow": 1}, r, h)
        for i, (r, h) in enumerate(zip(rss, heap, strict=True))
    )
    base = dict(
        model=model, seed=0, actions=200, action_counts={"key": 200}, exceptions=(),
        leaked_hooks=(), stuck=(), errors_shown=(), max_block_ms=50.0, samples=samples,
        widgets_left=(), seconds=1.0,
    )  # fmt: skip
    return StressReport(**{**base, **kwargs})


def test_stress_bench_reports_every_figure():
    from actviz.bench import stress_bench

    crash = Failure(3, "crash", "the process died (exit -11)", ("3:click tile",))
    reports = [
        _stress_report("demo", [900, 1000, 1100], [200, 210, 220]),
        _stress_report(
            "gpt2", [900, 950, 950], [200, 200, 200], crashes=(crash,), max_block_ms=150
        ),
    ]
    # RSS per 1,000 actions: the slope after the warm-up (100 MiB per 100 actions).
    assert reports[0].rss_growth_per_1k_mib == pytest.approx(1000.0)
    assert reports[0].heap_growth_per_1k_mib == pytest.approx(100.0)
    summary: dict = {}
    stress_bench.summarise(reports, summary)
    for name in (
        "stress_actions", "stress_exceptions", "stress_leaked_hooks", "stress_max_block_ms",
        "stress_objects_growth", "stress_rss_growth_mib", "stress_heap_growth_mib",
        "stress_stuck", "stress_crashes", "stress_hangs", "stress_rss_growth_per_1k_mib",
    ):  # fmt: skip
        assert name in summary, name
    assert summary["stress_actions"] == 400 and summary["stress_crashes"] == 1
    assert summary["stress_hangs"] == 0 and summary["stress_max_block_ms"] == 150
    assert summary["stress_rss_growth_per_1k_mib"] == pytest.approx(1000.0)
    # A long run leaves its warm-up out: 400 MiB in its first 250 actions, then flat.
    long = _stress_report("demo", [900, 1000, 1300, 1300, 1300, 1300], [200] * 6)
    assert long.rss_growth_per_1k_mib == pytest.approx(0.0)
    assert _stress_report("demo", [900, 1000, 1300], [200] * 3).rss_growth_per_1k_mib > 0
    # One checkpoint holding a large capture (700 MiB over its neighbours) is that moment's
    # state, not growth: the median slope stays at the trend, the least-squares line tilts.
    spike = _stress_report("demo", [900, 1000, 1000, 1010, 1020, 1030, 1700, 1050], [200] * 8)
    assert spike.rss_growth_per_1k_mib == pytest.approx(100.0)
    assert spike.rss_growth_per_1k_ls_mib > 400
    assert stress_bench.summarise([spike], summary) is None
    assert summary["stress_rss_growth_per_1k_ls_mib"] == spike.rss_growth_per_1k_ls_mib
    # RssAnon over malloc's and Python's heaps in use, at each process's end; the worst one.
    assert summary["stress_rss_anon_over_heap"] is None  # no breakdown: not made up
    ends = [
        Sample(0, {}, 900, 200, {"rss_anon": 500.0, "python_heap": 50.0}),
        Sample(0, {}, 900, 300, {"rss_anon": 700.0, "python_heap": 100.0}),
    ]
    with_anon = [_stress_report("demo", [900], [200]), _stress_report("demo", [900], [200])]
    with_anon = [dataclasses.replace(r, samples=(s,)) for r, s in zip(with_anon, ends, strict=True)]
    assert ends[0].heap_counted_mib == 250 and ends[0].rss_anon_over_heap == pytest.approx(2.0)
    stress_bench.summarise(with_anon, summary)
    assert summary["stress_rss_anon_over_heap"] == pytest.approx(2.0)
    assert Sample(0, {}, 900, 200, {"rss_anon": 500.0}).rss_anon_over_heap is None
    # A report survives its trip through JSON (how a case process hands it back).
    back = StressReport.from_json(reports[1].to_json())
    assert back == reports[1]


def test_heap_in_use_follows_an_allocation_and_its_release():
    from actviz.testing.stress import heap_in_use_mib

    before = heap_in_use_mib()
    block = np.ones(8 * 2**20 // 8)  # 8 MiB through malloc
    during = heap_in_use_mib()
    del block
    after = heap_in_use_mib()
    assert during - before == pytest.approx(8, abs=0.5)
    assert after - before == pytest.approx(0, abs=0.5)


def test_bench_cli_takes_the_number_of_stress_actions(monkeypatch, capsys):
    from actviz.bench import cli, stress_bench

    seen = []
    monkeypatch.setattr(stress_bench, "run_stress", lambda actions: seen.append(actions) or [])
    threads = ["--threads", str(torch.get_num_threads())]  # the process's setting unchanged
    assert cli.main(["stress", "--actions", "42", *threads]) == 0
    assert cli.main(["stress", "--quick", *threads]) == 0
    assert seen == [42, stress_bench.QUICK_ACTIONS]
    assert '"stress_actions": 0' in capsys.readouterr().out


#: Issue 37's bug 1 as recorded steps: ResNet-18 at 1360x820, "Tick all Conv2d modules" from
#: the module tree's menu, sort the tiles by effect, ablate a channel of layer4.1.conv2 from
#: its tile menu, click a tile of the first panel. On 1f277d1 (before the layout fix) the
#: last click never returns: the case process ends as a hang with open_channel's stack.
BUG1_STEPS = [
    ("resize", {"size": "1360x820", "settle": True}),
    ("tree_menu", {"row": "conv1", "items": ["Tick all Conv2d modules"], "settle": True}),
    ("wait", {}),
    ("sort", {"box": "Sort tiles by effect", "settle": True}),
    ("wait", {}),
    ("tile_menu", {"layer": "layer4.1.conv2", "r": [0, 0, 0, 0.1], "settle": True}),
    ("wait", {}),
    ("tile_click", {"layer": "conv1", "channel": 0, "spin": 0.5, "settle": True}),
    ("wait", {}),
]


def test_the_channel_view_hang_replayed_through_real_events_returns():
    report = run_case("resnet18", steps=BUG1_STEPS, hang_s=30, threads=1)
    assert not report.hangs and not report.crashes, report.describe()
    assert not report.exceptions, report.describe()
    assert [name for name, _ in report.steps] == [name for name, _ in BUG1_STEPS]
    assert report.samples[-1].counts["LayerPanel"] == 25  # every Conv2d module ticked
    assert report.steps[5][1]["items"][0].startswith("Ablate ch ")


def test_a_stuck_finding_names_what_kept_the_window_busy(qapp, tmp_path):
    from PySide6.QtWidgets import QMessageBox

    driver = StressDriver(_tiny_setup(), folder=tmp_path, sample_every=100)
    driver.open_window()
    box = QMessageBox(driver.window)
    try:
        box.setWindowTitle("Replace the model?")
        box.setModal(True)
        box.show()
        qapp.processEvents()
        assert busy_parts(driver.window) == "modal QMessageBox 'Replace the model?'"
        box.close()
        driver.window.runs.run()
        assert "busy" in busy_parts(driver.window).split(", ")
        assert driver.settle(timeout_s=30)
        assert busy_parts(driver.window) == "idle by now"
    finally:
        box.deleteLater()
        driver.close_window()


def test_a_0ms_timer_left_running_in_the_idle_window_is_a_finding(qapp, tmp_path):
    """The dropped panels' deletion asked for itself again every turn after a model switch: a
    GUI thread that never slept, with the window idle. Each checkpoint now looks for that."""
    from PySide6.QtCore import QTimer

    driver = StressDriver(_tiny_setup(), folder=tmp_path, sample_every=100)
    driver.open_window()
    try:
        w = driver.window
        w.runs.run()
        assert driver.settle(timeout_s=30) and w.host.layer_panels
        w.display.clear_panels()  # what opening another model does
        assert driver.settle(timeout_s=30)
        assert idle_spinners(w, driver.spin) == ""
        loop = QTimer(w, singleShot=True, interval=0)
        loop.timeout.connect(loop.start)
        loop.start()
        assert idle_spinners(w, driver.spin) == "MainWindow"
        loop.stop()
    finally:
        driver.close_window()
