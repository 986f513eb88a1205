"""The scan benchmark runs end to end on a tiny folder and cleans up (no time is asserted)."""

from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path

import pytest
import torch

from actviz.bench import cli, scan_bench


@pytest.fixture(autouse=True)
def allocator_as_it_is(monkeypatch):
    """The benchmark pins glibc's allocator for good: not in the test process."""
    monkeypatch.setattr(scan_bench, "_pin_allocator", lambda: False)


def test_scan_bench_reports_ratio_and_memory_and_removes_its_folder(capsys, monkeypatch):
    cache_before = os.environ.get("XDG_CACHE_HOME")
    r = scan_bench.run(("demo",), images=16, size=32, batch_size=8, pairs=1, workers=0)
    (row,) = r["rows"]
    assert row.model == "demo" and len(row.bare_ips) == len(row.scan_ips) == 1
    assert row.bare_ips[0] > 0 and row.scan_ips[0] > 0
    assert r["scan_throughput_ratio"] == row.ratio == row.scan_ips[0] / row.bare_ips[0]
    # No workers: the scan keeps torch's count, so the like-for-like loop is the bare one.
    assert row.threads == [torch.get_num_threads()] and row.same_ips == row.bare_ips
    assert r["scan_overhead_ratio"] == row.overhead == row.ratio
    assert row.footprint == sum(
        p.numel() * p.element_size() for p in scan_bench._model("demo")[0].state_dict().values()
    )
    assert len(row.growths) == 1 and row.rss_growth == row.growths[0]
    assert row.peak_method == "VmHWM, allocator as it is"
    assert r["scan_rss_growth_mib"] == row.rss_growth / 2**20
    assert os.environ.get("XDG_CACHE_HOME") == cache_before
    assert not list(Path(tempfile.gettempdir()).glob("actviz-scan-bench-*"))
    scan_bench.print_table(r)
    assert "demo" in capsys.readouterr().out


def test_bench_cli_has_a_scan_section(monkeypatch, capsys):
    calls = []

    def fake_run(models, images, size, pairs, window):
        calls.append((models, images, size, pairs, window))
        lag = {"p50_ms": 0.1, "n": 10, "images_per_s": 500.0}
        return {
            "rows": [],
            "window_lag": {
                "idle": {**lag, "p99_ms": 3.0, "max_ms": 12.0},
                "beside live": {**lag, "p99_ms": 6.0, "max_ms": 9.0},
            },
            "scan_throughput_ratio": 0.95,
            "scan_overhead_ratio": 0.93,
            "scan_rss_growth_frac": 0.01,
            "scan_rss_growth_mib": 0.5,
        }

    monkeypatch.setattr(scan_bench, "run", fake_run)
    assert cli.main(["scan", "--quick"]) == 0
    assert calls == [(("demo", "resnet18"), 2000, 112, 1, True)]
    last = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert last["scan_throughput_ratio"] == 0.95 and last["scan_rss_growth_frac"] == 0.01
    assert last["scan_overhead_ratio"] == 0.93
    assert (last["scan_ui_lag_p99_ms"], last["scan_ui_lag_max_ms"]) == (6.0, 12.0)


def test_a_scan_on_fewer_threads_is_also_compared_like_for_like(monkeypatch):
    import dataclasses
    import sys

    scan_module = sys.modules["actviz.data.scan"]
    real_scan, real_bare = scan_module.scan, scan_bench._bare
    before = torch.get_num_threads()
    monkeypatch.setattr(
        scan_module, "scan", lambda *a, **k: dataclasses.replace(real_scan(*a, **k), threads=1)
    )
    bare_threads = []

    def bare(*a, **k):
        bare_threads.append(torch.get_num_threads())
        return real_bare(*a, **k)

    monkeypatch.setattr(scan_bench, "_bare", bare)
    torch.set_num_threads(2)
    try:
        r = scan_bench.run(("demo",), images=16, size=32, batch_size=8, pairs=1, workers=0)
    finally:
        torch.set_num_threads(before)
    (row,) = r["rows"]
    # Throughput: warm-up, the default-count loop, then the loop at the scan's count; memory:
    # its warm-up and its pair's loop, both at the scan's count.
    assert bare_threads == [2, 2, 1, 1, 1]
    assert row.threads == [1] and len(row.same_ips) == 1
    assert r["scan_overhead_ratio"] == row.overhead == row.scan_ips[0] / row.same_ips[0]
    assert r["scan_throughput_ratio"] == row.scan_ips[0] / row.bare_ips[0]


def test_window_lag_scans_in_the_window_idle_and_beside_live_mode(qtbot, tmp_path, capsys):
    folder = scan_bench.make_folder(tmp_path / "images", 16, 32)
    lag = scan_bench.window_lag(folder, batch_size=8, timeout_s=120.0)  # 16 images
    assert list(lag) == ["idle", "beside live"]
    for case in lag.values():
        assert case["n"] > 0 and case["images_per_s"] > 0 and case["max_ms"] >= case["p99_ms"]
    assert lag["beside live"]["live_frames"] >= 2
    scan_bench.print_table({"rows": [], "window_lag": lag})
    assert "beside live" in capsys.readouterr().out


def test_the_memory_passes_pin_glibcs_allocator(tmp_path):
    """In a process of its own (it is for good): freed blocks go back to the OS at once, so the
    resident set follows what is alive."""
    import subprocess
    import sys

    code = (
        "import ctypes, numpy as np\n"
        "from actviz.bench.scan_bench import _pin_allocator, _status_kib\n"
        "assert _pin_allocator()\n"
        "before = _status_kib('VmRSS')\n"
        "for _ in range(50):\n"
        "    a = np.ones(200_000)  # 1.6 MB: mmap'd, and unmapped when freed\n"
        "    del a\n"
        "print((_status_kib('VmRSS') - before) // 1024)\n"
    )
    if not sys.platform.startswith("linux"):
        pytest.skip("glibc only")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-1500:]
    assert int(done.stdout.strip()) < 512  # KiB: nothing of the 80 MB freed stays resident
