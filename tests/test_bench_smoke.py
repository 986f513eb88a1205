"""The benchmark suite's pieces run and report sane figures (tiny sizes; no time is asserted).

``python -m actviz.bench --quick`` takes about two minutes here, so CI runs it once on its own;
these tests drive each section with small models so a broken benchmark is caught quickly.
"""

from __future__ import annotations

import json
import math
import sys

import pytest

from actviz.bench import (
    capture_bench,
    cli,
    edits_bench,
    live_bench,
    memory_bench,
    render_bench,
    startup_bench,
)
from actviz.bench.ui_bench import LagProbe, ensure_qt_app, lag_summary, wait_until


def test_lag_summary_reports_percentiles_in_ms():
    lags = [0.001] * 98 + [0.02, 0.05]
    s = lag_summary(lags)
    assert s["n"] == 100 and s["p50_ms"] == pytest.approx(1.0)
    assert s["p99_ms"] == pytest.approx(20.0) and s["max_ms"] == pytest.approx(50.0)
    assert math.isnan(lag_summary([])["p99_ms"])


def test_lag_probe_sees_a_blocked_event_loop(qtbot, monkeypatch):
    from types import SimpleNamespace

    from actviz.bench import ui_bench

    ensure_qt_app()
    probe = LagProbe(5)
    # Its timer really drives it: a few timeouts arrive while the event loop runs.
    probe.start()
    assert probe.timer.isActive()
    assert wait_until(lambda: len(probe.lags) >= 3, 10.0)
    probe.stop()
    assert not probe.timer.isActive()
    # The lag arithmetic, on a clock the test controls: timeouts due every 5 ms, one 80 ms late.
    # The GUI thread's CPU clock beside it: 10 ms of CPU in the late interval (it waited).
    clock = iter([10.000, 10.005, 10.010, 10.095, 10.100])
    cpu = iter([1.000, 1.001, 1.002, 1.012, 1.013])
    fake = SimpleNamespace(perf_counter=lambda: next(clock), thread_time=lambda: next(cpu))
    monkeypatch.setattr(ui_bench, "time", fake)
    probe.lags.clear()
    probe.cpu.clear()
    probe.start()
    probe.stop()  # only (re)sets the first timeout; the calls below are the timeouts
    for _ in range(5):
        probe._on_timeout()
    assert probe.lags == pytest.approx([0.0, 0.0, 0.080, 0.0], abs=1e-9)
    assert probe.cpu == pytest.approx([0.001, 0.001, 0.010, 0.001], abs=1e-9)
    s = probe.summary()
    assert s["n"] == 4 and s["max_ms"] == pytest.approx(80.0) and s["p50_ms"] == pytest.approx(0.0)
    # Drained (a long run, once it read them): the samples go, the longest lag stays.
    probe.stop(drain=True)
    assert probe.lags == [] == probe.cpu and probe.peak == pytest.approx(0.080, abs=1e-9)


def test_paired_reads_the_median_of_per_pair_differences(monkeypatch):
    from actviz.bench import timing

    # A clock that advances by what each call costs: base 10 ms, test 10.3 ms, except one
    # slow base run (a hiccup) that a median ignores.
    clock = [0.0]
    monkeypatch.setattr(timing.time, "perf_counter", lambda: clock[0])
    calls = [0]

    def base():
        calls[0] += 1
        clock[0] += 0.050 if calls[0] == 3 else 0.010

    def test():
        clock[0] += 0.0103

    r = timing.paired("x", base, test, pairs=9, warmup=0)
    assert r.diff_ms == pytest.approx(0.3)
    assert r.base_ms == pytest.approx(10.0) and r.test_ms == pytest.approx(10.3)


def test_render_bench_times_every_case():
    r = render_bench.run(repeats=2, panel_size=(400, 300))
    assert len(r["rows"]) == len(render_bench.CASES)
    assert all(row.p95_ms > 0 for row in r["rows"])
    assert r["render_p95_ms"] == max(row.p95_ms for row in r["rows"] if row.target)
    shapes = {row.name: row.image_shape for row in r["rows"]}
    # Live limits bound the pixels of a huge layer; the window's own path caps channels only.
    assert math.prod(shapes["1 ch of 1024x1024 (live limits)"]) <= 512 * 512
    assert shapes["1 ch of 1024x1024 (window limits)"] == (1024, 1024)


def test_live_bench_measures_throughput_and_lag_on_a_small_resnet():
    r = live_bench.run("resnet18", 32, 6, pairs=1, frames=2, timeout_s=120)
    assert r["bare_fps"] > 0 and r["live_fps"] > 0
    assert r["live_throughput_ratio"] == pytest.approx(r["live_fps"] / r["bare_fps"])
    assert r["lag_samples"] > 0 and r["ui_lag_max_ms"] >= r["ui_lag_p99_ms"] >= 0
    assert r["capture_ms"] > 0 and r["prepare_ms"] > 0
    # The display's CPU per frame: the GUI thread's and the preparing thread's, both read.
    assert r["gui_cpu_ms"] > 0 and r["prepare_cpu_ms"] > 0
    assert r["display_cpu_ms"] == pytest.approx(r["gui_cpu_ms"] + r["prepare_cpu_ms"])
    assert r["prepare_cpu_ms"] <= r["prepare_ms"] * 1.5 + 1.0  # CPU of one thread, not more


def test_live_small_bench_reports_each_case_and_the_lowest_ratio():
    cases = (("resnet18", 32, 3), ("resnet18", 40, 5))
    r = live_bench.run_small(cases, pairs=1, frames=2, timeout_s=120)
    assert [(row["size"], row["layers"]) for row in r["rows"]] == [(32, 3), (40, 5)]
    assert all(row["bare_fps"] > 0 and row["live_fps"] > 0 for row in r["rows"])
    assert r["live_small_ratio"] == min(row["live_throughput_ratio"] for row in r["rows"])
    # No lag probe there: its timer's GUI time would count as the display's CPU per frame.
    assert all(row["lag_samples"] == 0 and row["gui_cpu_ms"] > 0 for row in r["rows"])
    assert live_bench.SMALL_CASES == (("resnet18", 64, 5), ("resnet18", 112, 20))


def test_capture_bench_reports_every_figure_with_gradcam():
    r = capture_bench.run(("resnet18",), pairs=1, size=32)
    names = [row.name for row in r["rows"]]
    assert names[-1] == "resnet18 Grad-CAM layer4 / hook + grad" and len(names) == 4
    assert r["gradcam_ratio"] == r["resnet18"]["gradcam_ratio"] == r["rows"][-1].ratio > 0
    assert all(row.base_ms > 0 and row.test_ms > 0 for row in r["rows"])


def test_capture_hooks_ratio_in_a_fresh_process():
    r = capture_bench.hooks_in_fresh_process(("resnet18",), pairs=1, size=32, threads=1)
    assert [line.split(":")[0] for line in r["row_text"]] == [
        "resnet18 fwd",
        "resnet18 fwd+grad",
    ] * 2
    assert r["capture_hooks_ratio"] == max(
        r["resnet18"]["hooks_fwd_ratio"], r["resnet18"]["hooks_grad_ratio"]
    )
    assert 0 < r["capture_hooks_cpu_ratio"] < 10 and 0 < r["capture_hooks_fwd_ratio"] < 10


def test_pick_layers_fills_up_with_leaves():
    import torchvision

    model = torchvision.models.resnet18(weights=None)
    names = live_bench.pick_layers(model, 20)
    assert len(names) == 20 == len(set(names))
    assert names[:4] == ["conv1", "bn1", "relu", "maxpool"]
    assert "layer4.1" in names and "fc" in names


def test_memory_bench_reads_rss_at_both_checkpoints():
    r = memory_bench.run("resnet18", 32, 6, checkpoints=(2, 6), timeout_s=120)
    assert set(r.rss_at) == {2, 6} and all(v > 0 for v in r.rss_at.values())
    assert 0.5 < r.ratio < 2.0
    assert r.held_bytes > 0


def test_startup_bench_reads_the_childs_timestamp(monkeypatch):
    from types import SimpleNamespace

    # The parent's clock reads 1000.0 when it starts the child; the child says 1012.5.
    monkeypatch.setattr(startup_bench, "time", SimpleNamespace(time=lambda: 1000.0))
    cmd = [sys.executable, "-c", f"print('noise'); print('{startup_bench.MARK}', 1012.5)"]
    assert startup_bench._time_process(cmd, 60) == 12.5
    with pytest.raises(RuntimeError, match="printed no"):
        startup_bench._time_process([sys.executable, "-c", "pass"], 60)


@pytest.mark.slow
def test_the_app_child_reports_its_first_painted_result(tmp_path, monkeypatch):
    monkeypatch.setenv("TMPDIR", str(tmp_path))  # the child's scratch settings go here
    app_cmd = [sys.executable, "-m", "actviz.bench.startup_bench", "--child"]
    # Raises unless the child printed its mark, which it does only once the demo is painted.
    seconds = startup_bench._time_process(app_cmd, 180)
    assert math.isfinite(seconds)
    assert list(tmp_path.iterdir()) == []  # and it removed its scratch settings


def test_scratch_settings_leave_nothing_behind(tmp_path, monkeypatch):
    """Benchmarks write settings only inside their own temporary folder, gone at exit."""
    import os
    import subprocess

    code = (
        "from actviz.bench.ui_bench import scratch_settings\n"
        "s = scratch_settings(); s.setValue('view/colormap', 'magma'); s.sync()\n"
        "print(s.fileName())\n"
    )
    env = dict(os.environ, TMPDIR=str(tmp_path))
    proc = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=120, env=env
    )
    assert proc.returncode == 0, proc.stderr
    written = proc.stdout.strip().splitlines()[-1]
    assert written.startswith(str(tmp_path / "actviz-bench-")) and written.endswith(".ini")
    assert list(tmp_path.iterdir()) == []


def test_cli_prints_a_table_and_a_json_last_line(capsys):
    assert cli.main(["render", "--quick"]) == 0
    out = capsys.readouterr().out.strip().splitlines()
    assert out[0].startswith("machine:")
    summary = json.loads(out[-1])
    assert summary["render_p95_ms"] > 0
    assert "steal_frac" in summary  # how much CPU other guests took meanwhile (None off Linux)
    if summary["steal_frac"] is not None:
        assert 0.0 <= summary["steal_frac"] <= 1.0 and "taken by other guests" in out[-2]
    assert any("set_activation + paint" in line for line in out)


def test_steal_meter_is_the_steal_share_of_all_ticks(monkeypatch):
    from actviz.bench.timing import StealMeter

    readings = iter([(100, 10_000), (160, 12_000)])  # (steal ticks, all ticks)
    monkeypatch.setattr(StealMeter, "_read", staticmethod(lambda: next(readings)))
    assert StealMeter().fraction() == pytest.approx(60 / 2000)
    monkeypatch.setattr(StealMeter, "_read", staticmethod(lambda: None))
    assert StealMeter().fraction() is None


def test_edits_bench_reports_the_ratio():
    r = edits_bench.run(("resnet18",), pairs=1, size=32)
    (row,) = r["rows"]
    assert r["edits_ratio"] == row.ratio > 0 and row.base_ms > 0 and row.test_ms > 0


def test_many_panels_bench_measures_blocks_of_a_small_model(qtbot):
    import torch

    from actviz.bench import ui_panels_bench

    torch.manual_seed(0)
    model = torch.nn.Sequential(
        torch.nn.Conv2d(3, 4, 3), torch.nn.ReLU(), torch.nn.Conv2d(4, 4, 3), torch.nn.Flatten()
    )
    figures = ui_panels_bench.measure(size=12, repeats=2, model=model)
    assert figures["panels"] == 4
    assert set(figures["blocks_ms"]) == {"first", "again", "compare_tab"}
    assert all(v >= 0 for v in figures["blocks_ms"].values())
    assert figures["max_ms"] == max(figures["blocks_ms"].values())


def test_visualize_bench_quick_run_reports_its_figures(capsys, monkeypatch):
    from actviz.bench import visualize_bench

    # The quick run's table and figures at the smallest sizes (the quick sizes take ~50 s).
    monkeypatch.setitem(visualize_bench.SETTINGS, True, (32, 1, 1, 2, 2, 32, 1))
    summary: dict = {}
    visualize_bench.run(True, summary)
    keys = (
        "vis_time_ratio",
        "vis_batch8_ratio",
        "vis_objective_ratio",
        "vis_objective_ratio_demo",
        "vis_page_ratio",
    )
    assert set(keys) <= set(summary)
    for key in keys:
        assert math.isfinite(summary[key]) and summary[key] > 0, key
    # The table names both sides (no timing asserted: a loaded machine reorders them).
    out = capsys.readouterr().out
    assert "8 channels batched vs 1" in out and "demo features.block3" in out
    assert "page of 16 vs 16 single pictures" in out
    json.dumps({k: float(v) for k, v in summary.items()})


def test_visualize_page_ratio_times_a_page_against_single_pictures(qtbot):
    import os

    from actviz.bench import visualize_bench

    cache = os.environ.get("XDG_CACHE_HOME")
    r = visualize_bench.page_ratio(steps=2, size=32, channels=4, pairs=1)
    assert os.environ.get("XDG_CACHE_HOME") == cache  # put back
    assert r["page_s"] > 0 and r["singles_s"] > 0
    assert r["vis_page_ratio"] == r["page_s"] / r["singles_s"]


def test_a_section_of_its_own_process_reports_its_table_and_figures(capsys):
    import argparse

    summary = {"capture_fixed_ms": 0.5}
    args = argparse.Namespace(threads=1, quick=True, pairs=None)
    cli._run_in_child("render", args, summary)
    out = capsys.readouterr().out.splitlines()
    assert any("set_activation + paint" in line for line in out)
    assert not any(line.startswith(("machine:", "total ", "{")) for line in out)
    assert summary["render_p95_ms"] > 0 and summary["capture_fixed_ms"] == 0.5
    assert "steal_frac" not in summary


def test_a_failing_child_section_says_so():
    import argparse

    args = argparse.Namespace(threads=1, quick=True, pairs=None)
    with pytest.raises(RuntimeError, match="the nosuch section failed in its own process"):
        cli._run_in_child("nosuch", args, {})


def test_the_scale_bench_skips_the_offload_figure_without_accelerate(monkeypatch, capsys):
    """``python -m actviz.bench --quick`` stopped at the scale section with a traceback when the
    ``big`` extra (accelerate) was not installed; the other figures now still come."""
    import importlib.util

    from actviz.bench import scale_bench

    real = importlib.util.find_spec
    monkeypatch.setattr(
        importlib.util, "find_spec", lambda name, *a: None if name == "accelerate" else real(name)
    )

    def offload(*_args):
        raise AssertionError("the offload figure needs accelerate")

    monkeypatch.setattr(scale_bench, "offload_ratio", offload)
    monkeypatch.setattr(scale_bench, "dist_ratio", lambda quick, tmp: {"tiny": (1.0, 2.0, 2.0)})
    monkeypatch.setattr(scale_bench, "scale", lambda quick, tmp: "scaled")
    monkeypatch.setattr(scale_bench, "report_scale", lambda s, quick, summary: None)
    summary: dict = {}
    scale_bench.run(True, summary)
    assert "offload_capture_ratio: skipped (needs accelerate" in capsys.readouterr().out
    assert summary == {"scan_dist_ratio": 2.0}


def test_block_profiles_keep_the_profile_of_a_blocked_stretch(qtbot, monkeypatch, tmp_path):
    """The stress case's hook saves a profile of just the stretch the GUI thread blocked (the
    function that blocked it is in it); the summary reads actviz's functions only."""
    import time

    from PySide6.QtCore import QTimer

    from actviz.bench import block_profiles, ui_bench

    ensure_qt_app()
    monkeypatch.setenv("ACTVIZ_BLOCK_PROFILES", str(tmp_path))
    monkeypatch.setenv("ACTVIZ_BLOCK_OVER_MS", "40")
    hook: dict = {}
    before = list(sys.meta_path)
    exec(block_profiles._HOOK, hook)  # noqa: S102 - the text the case's processes load
    monkeypatch.setattr(sys, "meta_path", before)  # (the import hook is not needed here)
    monkeypatch.setattr(ui_bench.LagProbe, "_on_timeout", ui_bench.LagProbe._on_timeout)
    monkeypatch.setattr(ui_bench.LagProbe, "stop", ui_bench.LagProbe.stop)
    hook["_patch"]()

    def block() -> None:
        time.sleep(0.08)

    probe = LagProbe(5)
    probe.start()
    assert wait_until(lambda: len(probe.lags) >= 2, 10.0)
    QTimer.singleShot(0, block)
    assert wait_until(lambda: any(lag > 0.06 for lag in probe.lags), 10.0)
    probe.stop()
    (saved,) = tmp_path.glob("b001_*ms_*.prof")
    assert int(saved.name.split("_")[1].removesuffix("ms")) >= 80
    assert any(name == "block" for (_f, _l, name) in block_profiles.pstats.Stats(str(saved)).stats)
    assert block_profiles.summary(tmp_path) == []  # (the test's function is not actviz's)
