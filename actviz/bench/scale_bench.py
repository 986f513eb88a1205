"""Scale: distributed scans (gloo), a million images with bounded memory, offloaded models.

* ``scan_dist_ratio``: images/s of a 2-rank gloo scan (one torch thread each, no loader
  workers: each rank reads its own shard) over a single-process scan with two threads, both in
  fresh processes, timed on rank 0 from a barrier to the merged result; worst of ResNet-18
  (random init, 112 px images) and the demo model. Target >= 0.9.
* ``scan_scale``: synthetic 16x16 images (made in memory by :class:`SyntheticImages`, no files)
  through a tiny conv net on 2 ranks, embeddings of two layers on disk (``embeddings_dir``):
  each rank's peak RSS at N and at N / 10 (``scan_scale_rss_ratio``, target <= 1.2), the rows'
  file size, the time to open them and to run PCA on every point (``scan_scale_pca_s``,
  target <= 10 s). N = 1,000,000; with ``--quick`` N = 20,000 (said in the table).
* ``offload_capture_ratio``: a 5-layer capture (forward only) / a bare forward, both on the same
  tiny model with most of it offloaded to disk by accelerate (median of pairs; target <= 1.1).
"""

from __future__ import annotations

import json
import os
import resource
import shutil
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch import nn
from torch.utils.data import Dataset

__all__ = ["SyntheticImages", "run"]


class SyntheticImages(Dataset):
    """``n`` deterministic ``(3, size, size)`` float images made on demand (nothing stored but a
    bank of 512): item ``i`` is bank image ``i % 512`` scaled by a factor from ``i``."""

    def __init__(self, n: int, size: int = 16, seed: int = 0) -> None:
        self.n = int(n)
        g = torch.Generator().manual_seed(seed)
        self.bank = torch.rand(512, 3, size, size, generator=g)

    def __len__(self) -> int:
        return self.n

    def __getitem__(self, i: int) -> torch.Tensor:
        return self.bank[i % 512] * (0.5 + ((i * 2654435761) % 1000) / 1000.0)


def tiny_conv() -> nn.Module:
    torch.manual_seed(0)
    return nn.Sequential(
        nn.Conv2d(3, 8, 3, padding=1),
        nn.ReLU(),
        nn.Conv2d(8, 16, 3, padding=1),
        nn.ReLU(),
        nn.AdaptiveAvgPool2d(1),
        nn.Flatten(),
        nn.Linear(16, 10),
    ).eval()


def _rank(rank: int, world: int, init: str, job: dict, out: str) -> None:
    import torch.distributed as dist

    from actviz.data.scan import scan

    torch.set_num_threads(job["threads"])
    os.environ["XDG_CACHE_HOME"] = job["cache"]
    dist.init_process_group("gloo", init_method=init, rank=rank, world_size=world)
    try:
        if job["kind"] == "folder":
            from actviz.bench.scan_bench import _LAYERS, _model

            net, source = _model(job["model"])
            data, layers, extra = job["folder"], _LAYERS[job["model"]], {}
        else:
            source = tiny_conv()
            data, layers = SyntheticImages(job["n"]), ["1", "3"]
            extra = {"embeddings": True, "embeddings_dir": job["rows"]}
        dist.barrier()
        t0 = time.perf_counter()
        result = scan(
            source, data, layers, batch_size=job["batch"], num_workers=0, cache=False, **extra
        )
        elapsed = time.perf_counter() - t0
        peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
        with open(os.path.join(out, f"rank{rank}.json"), "w") as fh:
            json.dump({"s": elapsed, "count": result.count, "peak": peak}, fh)
    finally:
        dist.destroy_process_group()


def _launch(world: int, job: dict, tmp: Path) -> list[dict]:
    import torch.multiprocessing as mp

    out = Path(tempfile.mkdtemp(dir=tmp))
    init = f"file://{out / 'rdv'}"
    mp.start_processes(
        _rank, args=(world, init, job, str(out)), nprocs=world, join=True, start_method="spawn"
    )
    return [json.loads((out / f"rank{r}.json").read_text()) for r in range(world)]


def dist_ratio(quick: bool, tmp: Path) -> dict[str, Any]:
    from actviz.bench.scan_bench import make_folder

    images = 128 if quick else 512
    folder = make_folder(tmp / "images", images, 112)
    rows = {}
    for model in ("resnet18", "demo"):
        job = {"kind": "folder", "model": model, "folder": str(folder), "batch": 16}
        job["cache"] = str(tmp / "cache")
        single = _launch(1, dict(job, threads=2), tmp)[0]
        dist2 = _launch(2, dict(job, threads=1), tmp)[0]
        one, two = images / single["s"], images / dist2["s"]
        rows[model] = (one, two, two / one)
    return rows


def scale(quick: bool, tmp: Path) -> dict[str, Any]:
    from actviz.data.atlas_map import project
    from actviz.data.rows import open_rows

    big = 20_000 if quick else 1_000_000
    out: dict[str, Any] = {"n": big}
    for n in (big // 10, big):
        rows = tmp / f"rows{n}"
        job = {"kind": "synthetic", "n": n, "batch": 256, "threads": 1, "rows": str(rows)}
        job["cache"] = str(tmp / "cache")
        ranks = _launch(2, job, tmp)
        out[n] = {"peak": [r["peak"] for r in ranks], "s": ranks[0]["s"]}
    t0 = time.perf_counter()
    opened = open_rows(tmp / f"rows{big}")
    vectors = opened["3"][0]
    assert not np.isnan(vectors[:: max(1, big // 1000)]).any()
    out["open_s"] = time.perf_counter() - t0
    t0 = time.perf_counter()
    proj = project(vectors, "pca")
    out["pca_s"] = time.perf_counter() - t0
    out["points"] = len(proj.coords)
    out["bytes"] = sum(p.stat().st_size for p in (tmp / f"rows{big}").iterdir())
    return out


def offload_ratio(quick: bool, tmp: Path) -> tuple[float, dict]:
    import actviz

    net = nn.Sequential(
        *[
            m
            for i in range(5)
            for m in (nn.Conv2d(3 if i == 0 else 32, 32, 3, padding=1), nn.ReLU())
        ]
    ).eval()
    size = sum(p.numel() * 4 for p in net.parameters())
    big = actviz.load_model(
        net, device_map="auto", max_memory={"cpu": size // 3}, offload_folder=tmp / "off"
    )
    x = torch.rand(8, 3, 64, 64)
    layers = [str(i) for i in range(0, 10, 2)]
    ratios = []
    with torch.no_grad():
        for _ in range(5 if quick else 15):
            t0 = time.perf_counter()
            big(x)
            bare = time.perf_counter() - t0
            t0 = time.perf_counter()
            actviz.capture(big, x, layers, gradients=False)
            ratios.append((time.perf_counter() - t0) / bare)
    return statistics.median(ratios), dict(big.hf_device_map)


def run(quick: bool, summary: dict) -> None:
    """Print the scale table and put its figures in ``summary``."""
    tmp = Path(tempfile.mkdtemp(prefix="actviz-scale-bench-"))
    try:
        ratio, placed = offload_ratio(quick, tmp)
        disk = sum(v == "disk" for v in placed.values())
        print(f"offload_capture_ratio {ratio:.3f} (5 layers, {disk}/{len(placed)} on disk)")
        summary["offload_capture_ratio"] = ratio
        rows = dist_ratio(quick, tmp)
        for model, (one, two, r) in rows.items():
            print(
                f"scan_dist {model:9s} 1 proc x 2 threads {one:7.1f} img/s | "
                f"2 ranks x 1 thread {two:7.1f} img/s | ratio {r:.3f}"
            )
        summary["scan_dist_ratio"] = min(r for _, _, r in rows.values())
        s = scale(quick, tmp)
        n = s["n"]
        small, large = s[n // 10], s[n]
        rss = max(b / a for a, b in zip(small["peak"], large["peak"], strict=True))
        note = " (--quick: not the million)" if quick else ""
        print(
            f"scan_scale {n} images{note}: peak RSS per rank "
            f"{[round(p / 2**20) for p in large['peak']]} MiB vs "
            f"{[round(p / 2**20) for p in small['peak']]} MiB at {n // 10} (ratio {rss:.3f}); "
            f"scan {large['s']:.1f} s; rows {s['bytes'] / 2**20:.1f} MiB; open "
            f"{s['open_s']:.2f} s; PCA of {s['points']} points {s['pca_s']:.2f} s"
        )
        summary.update(
            scan_scale_images=n,
            scan_scale_rss_ratio=rss,
            scan_scale_bytes=s["bytes"],
            scan_scale_open_s=s["open_s"],
            scan_scale_pca_s=s["pca_s"],
            scan_scale_s=large["s"],
        )
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
