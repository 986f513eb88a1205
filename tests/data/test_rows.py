"""Per-image rows on disk (embeddings_dir): round trip, same as in memory, bounded memory."""

from __future__ import annotations

import tracemalloc
from pathlib import Path

import numpy as np
import torch
from torch import nn

from actviz.data import scan
from actviz.data.rows import DiskRows, open_rows


def wide_net() -> nn.Module:
    torch.manual_seed(1)
    return nn.Sequential(nn.Conv2d(3, 512, 3, padding=1), nn.ReLU()).eval()


def test_disk_rows_round_trip(tmp_path: Path):
    rows = DiskRows(tmp_path, "a/b", 10, 3)
    assert np.isnan(rows[np.arange(10)]).all()  # never written: NaN
    data = np.arange(12, dtype=np.float16).reshape(4, 3)
    rows[np.array([2, 3, 7, 9])] = data
    np.testing.assert_array_equal(rows[np.array([9, 2, 3, 7])], data[[3, 0, 1, 2]])
    shard = DiskRows(tmp_path, "s", 7, 2, rank=1, world=2)  # items 1, 3, 5
    assert shard.count == 3
    shard[np.array([1, 5])] = np.ones((2, 2), np.float16)
    mm = rows.finish()
    assert isinstance(mm, np.memmap) and not mm.flags.writeable
    opened, axis = open_rows(tmp_path)["a/b"]
    np.testing.assert_array_equal(np.asarray(opened)[[2, 3, 7, 9]], data)
    assert axis == 1


def test_scan_rows_on_disk_equal_in_memory_and_stay_out_of_memory(tmp_path: Path):
    data = torch.rand(8192, 3, 4, 4)
    kw = {"k": 3, "batch_size": 64, "cache": False, "embeddings": True, "num_workers": 0}
    width = 8192 * 512 * 2  # the rows: 8 MiB of float16

    tracemalloc.start()
    try:
        base = tracemalloc.get_traced_memory()[0]
        held = scan(wide_net(), data, ["1"], **kw)
        peak_memory = tracemalloc.get_traced_memory()[1] - base
        base = tracemalloc.get_traced_memory()[0]
        tracemalloc.reset_peak()
        ondisk = scan(wide_net(), data, ["1"], embeddings_dir=tmp_path / "rows", **kw)
        peak_disk = tracemalloc.get_traced_memory()[1] - base
    finally:
        tracemalloc.stop()
    assert peak_memory > width  # in memory, the rows are all there at the end
    # On disk: a batch's rows and one fill block (1 MiB) at a time, and the O(N)
    # bookkeeping every scan has (sources, done flags: about 1.3 MB here).
    assert peak_disk < width / 2, (peak_disk, width)
    a, b = held.embeddings("1"), ondisk.embeddings("1")
    assert isinstance(ondisk.pooled["1"], np.memmap)
    np.testing.assert_array_equal(a.vectors, np.asarray(b.vectors))
    np.testing.assert_array_equal(a.indices, b.indices)
    assert (tmp_path / "rows" / "1.f16").stat().st_size == width
    # Neighbours read the memory map.
    q = np.asarray(b.vectors[5], dtype=np.float32)
    assert ondisk.neighbours("1", q, k=1)[0].index == held.neighbours("1", q, k=1)[0].index
