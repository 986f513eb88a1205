"""Seeded random user actions on a real window (the short run; the long one is
``python -m actviz.bench stress``): no unhandled exception, no hook left on the model, live
objects flat. The checks themselves are shown to catch what they look for."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from actviz.testing.stress import (
    StressDriver,
    count_objects,
    demo_model,
    model_leftovers,
    model_state,
    module_model,
)
from tests.ui.tiny_models import TinyCNN


def _tiny_setup():
    torch.manual_seed(0)
    x = torch.randn(1, 3, 16, 16, generator=torch.Generator().manual_seed(1))
    return module_model("tiny", TinyCNN().eval(), x)


def test_random_actions_on_the_demo_leave_nothing_behind(demo_resources, qapp, tmp_path):
    # Windows other tests of this process left to the garbage collector are not this run's.
    before = count_objects(["MainWindow"])["MainWindow"]
    report = StressDriver(demo_model(), seed=7, folder=tmp_path, sample_every=40).run(160)
    assert report.actions == 160
    # Most kinds of action were taken, not only the cheap ones.
    assert len(report.action_counts) >= 18, report.action_counts
    assert not report.exceptions, report.describe()
    assert not report.leaked_hooks, report.describe()
    assert not report.stuck, report.describe()
    assert not report.widgets_left, report.describe()
    assert not report.windows_kept, report.describe()
    # Job runners are freed when their jobs end; windows, pools and workers go with the window.
    assert report.objects_growth == 0, report.describe()
    assert report.samples[-1].counts["_Runner"] == 0, report.describe()
    assert report.peak("MainWindow") <= before + 1, report.describe()
    assert count_objects(["MainWindow"])["MainWindow"] <= before


def test_an_exception_in_a_slot_is_reported_with_the_actions_before_it(qapp, tmp_path):
    from PySide6.QtCore import QTimer

    driver = StressDriver(_tiny_setup(), seed=1, folder=tmp_path, sample_every=100)

    def boom() -> str:
        def fail() -> None:
            raise RuntimeError("a slot failed")

        QTimer.singleShot(0, fail)
        return "boom"

    driver.actions["boom"] = boom
    driver.weights = {name: (1.0 if name in ("boom", "tab") else 0.0) for name in driver.actions}
    report = driver.run(6)
    assert report.exceptions, report.describe()
    assert "RuntimeError: a slot failed" in report.exceptions[0].text
    # Reported with the actions before it, the one that caused it among them.
    assert any(step.endswith(":boom") for step in report.exceptions[0].recent)
    assert report.action_counts["boom"] == len(report.exceptions)


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


def test_stress_bench_reports_every_figure(demo_resources, qapp, capsys):
    from actviz.bench import stress_bench

    reports = stress_bench.run_stress(16, seed=3)
    assert [r.model for r in reports] == ["demo", "resnet18"]
    assert [r.actions for r in reports] == [8, 8]
    stress_bench.print_table(reports)
    summary: dict = {}
    stress_bench.summarise(reports, summary)
    assert summary["stress_actions"] == 16
    assert summary["stress_exceptions"] == 0 and summary["stress_leaked_hooks"] == 0
    assert summary["stress_max_block_ms"] > 0 and summary["stress_objects_growth"] == 0
    assert "stress_heap_growth_mib" in summary
    for r in reports:  # the longest blocks, longest first, each naming its action
        assert 0 < len(r.worst_blocks) <= 5
        assert [ms for ms, _ in r.worst_blocks] == sorted(
            (ms for ms, _ in r.worst_blocks), reverse=True
        )
        assert r.worst_blocks[0][0] == pytest.approx(r.max_block_ms)
        assert all(":" in what for _, what in r.worst_blocks)
    assert all(s.heap_mib > 0 for r in reports for s in r.samples)  # glibc 2.33+ here
    assert "resnet18" in capsys.readouterr().out


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
