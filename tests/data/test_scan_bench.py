"""The scan benchmark runs end to end on a tiny folder and cleans up (no time is asserted)."""

from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path

from actviz.bench import cli, scan_bench


def test_scan_bench_reports_ratio_and_memory_and_removes_its_folder(capsys, monkeypatch):
    cache_before = os.environ.get("XDG_CACHE_HOME")
    r = scan_bench.run(("demo",), images=16, size=32, batch_size=8, pairs=1, workers=0)
    (row,) = r["rows"]
    assert row.model == "demo" and len(row.bare_ips) == len(row.scan_ips) == 1
    assert row.bare_ips[0] > 0 and row.scan_ips[0] > 0
    assert r["scan_throughput_ratio"] == row.ratio == row.scan_ips[0] / row.bare_ips[0]
    assert row.footprint == sum(
        p.numel() * p.element_size() for p in scan_bench._model("demo")[0].state_dict().values()
    )
    assert row.peak_bare > 0 and row.peak_scan > 0
    assert r["scan_rss_growth_mib"] == row.rss_growth / 2**20
    assert os.environ.get("XDG_CACHE_HOME") == cache_before
    assert not list(Path(tempfile.gettempdir()).glob("actviz-scan-bench-*"))
    scan_bench.print_table(r)
    assert "demo" in capsys.readouterr().out


def test_bench_cli_has_a_scan_section(monkeypatch, capsys):
    calls = []

    def fake_run(models, images, size, pairs):
        calls.append((models, images, size, pairs))
        return {
            "rows": [],
            "scan_throughput_ratio": 0.95,
            "scan_rss_growth_frac": 0.01,
            "scan_rss_growth_mib": 0.5,
        }

    monkeypatch.setattr(scan_bench, "run", fake_run)
    assert cli.main(["scan", "--quick"]) == 0
    assert calls == [(("demo", "resnet18"), 2000, 112, 1)]
    last = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert last["scan_throughput_ratio"] == 0.95 and last["scan_rss_growth_frac"] == 0.01
