"""The capture section's fixed and per-call figures, run at tiny sizes (no time asserted)."""

from __future__ import annotations

import math

from actviz.bench import capture_bench


def test_overheads_report_every_figure(capsys):
    r = capture_bench.overheads(pairs=1, small_size=32, fixed_size=16)
    assert r["calls"] > 100  # every leaf call of MobileNetV3-small
    for key in ("capture_fixed_ms", "capture_per_call_us", "capture_small_all_ratio"):
        assert math.isfinite(r[key])
    assert r["capture_small_all_ratio"] > 0
    capture_bench.print_overheads(r)
    out = capsys.readouterr().out
    assert "capture_fixed_ms" in out and "mobilenet_v3_small 32 px: all" in out
    assert "page faults" in out and all(len(v) == 2 for v in r["faults"].values())
