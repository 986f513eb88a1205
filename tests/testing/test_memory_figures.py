"""The stress run's honest memory figure: resident anonymous memory over everything in use
(malloc's heap and Python's object heap), measured in a fresh process on real allocations."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap

import pytest

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="/proc and glibc")

SCRIPT = textwrap.dedent(
    """
    import json
    from actviz.core import allocator
    from actviz.testing.checks import python_heap_mib
    from actviz.testing.stress_report import Sample

    def sample():
        breakdown = {**allocator.memory_breakdown_mib(), **python_heap_mib()}
        s = Sample(0, {}, allocator.rss_mib(), allocator.heap_in_use_mib(), breakdown)
        return {"ratio": s.rss_anon_over_heap, "counted": s.heap_counted_mib,
                "anon": breakdown["rss_anon"], "old": breakdown["anonymous"] / s.heap_mib}

    assert allocator.tune_allocator()  # the window's process: freed heap is kept
    out = {"start": sample()}
    blocks = [bytearray(b"x" * (1 << 20)) for _ in range(300)]  # 300 MiB from malloc, in use
    out["held"] = sample()
    del blocks  # freed: glibc keeps it resident
    out["kept"] = sample()
    allocator.release_freed_memory()
    out["trimmed"] = sample()
    floats = [float(i) for i in range(2_000_000)]  # ~46 MiB of pymalloc blocks, not malloc's
    out["objects"] = sample()
    print(json.dumps(out))
    """
)


def test_rss_anon_over_heap_sees_kept_free_memory_and_counts_pythons_heap():
    proc = subprocess.run(
        [sys.executable, "-c", SCRIPT], capture_output=True, text=True, timeout=300
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    f = json.loads(proc.stdout.strip().splitlines()[-1])
    start, held, kept, trimmed, objects = (
        f[k] for k in ("start", "held", "kept", "trimmed", "objects")
    )

    def grew(a: dict, b: dict, key: str) -> float:
        return b[key] - a[key]

    # In use: resident anonymous memory and the heaps counted grow together (300 MiB).
    assert grew(start, held, "counted") > 290
    assert 0.9 < grew(start, held, "anon") / grew(start, held, "counted") < 1.15, f
    # Freed but kept resident (the tuned allocator): no longer counted, still resident, so
    # the ratio jumps by ~300 MiB over the heaps in use.
    assert grew(held, kept, "counted") < -290 and grew(held, kept, "anon") > -30, f
    assert kept["ratio"] - held["ratio"] > 250 / kept["counted"], f
    # Handed back: resident memory and the ratio return to where they were.
    assert abs(grew(start, trimmed, "anon")) < 30 and abs(trimmed["ratio"] - start["ratio"]) < 0.2
    # Python's objects live in pymalloc's arenas, outside malloc's figures: counted here, so
    # objects in use lower this ratio towards 1, where anonymous memory over malloc's heap
    # alone (the older figure) rises as if they were freed memory kept.
    assert grew(trimmed, objects, "counted") > 40
    assert 0.85 < grew(trimmed, objects, "anon") / grew(trimmed, objects, "counted") < 1.25, f
    assert grew(trimmed, objects, "ratio") < 0 < grew(trimmed, objects, "old") - 0.1, f
