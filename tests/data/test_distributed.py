"""Distributed scans over torch.distributed (gloo, CPU): 2 ranks == one process, exactly."""

from __future__ import annotations

import os
import pickle
import time
from pathlib import Path

import numpy as np
import pytest
import torch
import torch.distributed as dist
import torch.multiprocessing as mp

from actviz.data import scan
from actviz.data.accumulate import LayerState
from actviz.data.distributed import RankFailed, merge_states, shard_indices
from tests.data.conftest import LAYERS, tiny_net, write_images


def _worker(rank: int, world: int, init: str, folder: str, out: str, opts: dict) -> None:
    os.environ["XDG_CACHE_HOME"] = opts.get("cache_home", os.path.join(out, "cache"))
    torch.set_num_threads(1)
    dist.init_process_group("gloo", init_method=init, rank=rank, world_size=world)
    if rank == opts.get("slow_result_rank", -1):
        # This rank builds its result late: rank 0 has long merged (and removed) the shard
        # files of the rows by then, unless every rank opened its own before the gather.
        import sys

        scan_module = sys.modules["actviz.data.scan"]  # (actviz.data.scan is the function)
        real = scan_module.Scan

        def slow(*args, **kwargs):
            time.sleep(1.0)
            return real(*args, **kwargs)

        scan_module.Scan = slow
    try:
        lines: list[tuple[int, int]] = []

        def progress(done: int, total: int, rate: float) -> None:
            lines.append((done, total))

        batches = [0]

        def should_stop() -> bool:  # polled once per batch on every rank
            batches[0] += 1
            if rank == opts.get("fail_rank", -1):
                raise ValueError("disk on fire")
            if rank == opts.get("die_rank", -1) and batches[0] > opts.get("die_after", 0):
                os._exit(3)  # killed mid-scan: no cleanup, no collectives
            return False

        result = scan(
            tiny_net(),
            folder if opts.get("data") is None else torch.load(opts["data"]),
            LAYERS,
            k=opts.get("k", 5),
            batch_size=opts.get("batch", 4),
            num_workers=0,
            cache=opts.get("cache", True),
            embeddings=True,
            embeddings_dir=opts.get("rows"),
            progress=progress,
            should_stop=should_stop,
        )
        payload = {"scan": result, "progress": lines}
    except Exception as exc:  # the test reads each rank's error
        payload = {"error": f"{type(exc).__name__}: {exc}"}
    finally:
        pass
    if rank == 0 or "error" in payload:
        with open(os.path.join(out, f"rank{rank}.pkl"), "wb") as fh:
            pickle.dump(_plain(payload), fh)
    dist.destroy_process_group()


def _plain(payload: dict) -> dict:
    """A Scan whose pooled rows may be memory maps: pickle them as arrays."""
    s = payload.get("scan")
    if s is not None:
        import dataclasses

        payload["scan"] = dataclasses.replace(
            s, pooled={k: np.array(v) for k, v in s.pooled.items()}, _memo={}
        )
    return payload


def run_ranks(tmp_path: Path, folder: Path | None, world: int = 2, tag: str = "a", **opts):
    out = tmp_path / f"out-{tag}"
    out.mkdir()
    opts.setdefault("cache_home", str(tmp_path / "cache"))
    init = f"file://{tmp_path / f'rdv-{tag}'}"
    mp.start_processes(
        _worker,
        args=(world, init, str(folder), str(out), opts),
        nprocs=world,
        join=True,
        start_method="fork",
    )
    results = {}
    for f in out.glob("rank*.pkl"):
        results[int(f.stem[4:])] = pickle.loads(f.read_bytes())
    return results


def single(folder, batch: int = 4, **kw):
    """The single-process scan at the ranks' batch size (oneDNN's convolutions may round
    differently at another batch size: one float32 ulp was seen at 2 against 4)."""
    return scan(
        tiny_net(),
        folder,
        LAYERS,
        k=5,
        batch_size=batch,
        num_workers=0,
        embeddings=True,
        cache=False,
        **kw,
    )


def assert_equal_scans(a, b) -> None:
    """Top-k indices, values and locations exactly; moments 1e-6; embeddings exactly."""
    assert a.layers == b.layers and a.count == b.count and a.sources == b.sources
    assert a.skipped == b.skipped
    for layer in a.layers:
        ra, rb = a.results[layer], b.results[layer]
        np.testing.assert_array_equal(ra.indices, rb.indices)
        np.testing.assert_array_equal(ra.values, rb.values)
        np.testing.assert_array_equal(ra.locations, rb.locations)
        np.testing.assert_array_equal(ra.positive, rb.positive)
        np.testing.assert_allclose(ra.stats.mean, rb.stats.mean, rtol=0, atol=1e-6)
        np.testing.assert_allclose(ra.stats.std, rb.stats.std, rtol=0, atol=1e-6)
        assert ra.stats.count == rb.stats.count
        np.testing.assert_array_equal(np.asarray(a.pooled[layer]), np.asarray(b.pooled[layer]))


def test_shards_cover_every_index_once():
    for n, world in ((7, 2), (10, 3), (2, 4), (0, 2)):
        parts = [shard_indices(n, r, world) for r in range(world)]
        allidx = np.sort(np.concatenate(parts))
        np.testing.assert_array_equal(allidx, np.arange(n))
        # As DistributedSampler(shuffle=False) deals them, less its padding duplicates.
        sampler = (
            torch.utils.data.DistributedSampler(range(n), world, 0, shuffle=False) if n else None
        )
        if sampler is not None:
            assert list(sampler)[: len(parts[0])] == parts[0].tolist()


def test_merge_states_is_exact_on_ties():
    a, b = LayerState(2, 1), LayerState(2, 1)
    a.values[:] = [[3.0, 1.0]]
    a.indices[:] = [[4, 0]]
    b.values[:] = [[3.0, 2.0]]
    b.indices[:] = [[1, 5]]
    a.count = b.count = 1
    m = merge_states([a, b])
    assert m.indices.tolist() == [[1, 4]]  # equal values: the earlier data index first
    assert m.values.tolist() == [[3.0, 3.0]]


def test_two_ranks_equal_one_process(tmp_path: Path):
    folder = tmp_path / "images"
    write_images(folder, 30)
    got = run_ranks(tmp_path, folder, cache=False)
    assert "error" not in got[0], got
    ref = single(folder)
    assert_equal_scans(got[0]["scan"], ref)
    # Rank 0's progress counts both ranks' images and ends at the whole data.
    steps = got[0]["progress"]
    assert steps[-1] == (30, 30)  # every rank's images counted, not rank 0's own 15
    assert [d for d, _ in steps] == sorted(d for d, _ in steps)  # it never goes back


def test_uneven_shards_and_disk_rows(tmp_path: Path):
    folder = tmp_path / "images"
    write_images(folder, 7)
    rows = tmp_path / "rows"
    # 4 + 3 items, one batch each; the single scan: 4 + 3 too. (A batch of one image rounds
    # differently in oneDNN's convolution, by one float32 ulp: see docs/scale.md.)
    got = run_ranks(tmp_path, folder, cache=False, rows=str(rows), batch=4, slow_result_rank=1)
    assert set(got) == {0}, got.get(1)  # rank 1 (slow to build its result) did not fail
    ref = single(folder, batch=4)
    assert_equal_scans(got[0]["scan"], ref)
    assert sorted(p.name for p in rows.iterdir()) == sorted(
        [f"{layer}.f16" for layer in LAYERS] + ["rows.json"]
    )


def test_failing_rank_stops_the_job_with_its_error(tmp_path: Path):
    folder = tmp_path / "images"
    write_images(folder, 12)
    got = run_ranks(tmp_path, folder, cache=False, fail_rank=1)
    for rank in (0, 1):
        assert "RankFailed" in got[rank]["error"] or "ValueError" in got[rank]["error"]
        assert "rank 1: ValueError: disk on fire" in got[rank]["error"]


def test_killed_rank_then_resume(tmp_path: Path):
    folder = tmp_path / "images"
    write_images(folder, 24)
    with pytest.raises(mp.ProcessExitedException):
        run_ranks(tmp_path, folder, tag="killed", die_rank=1, die_after=3, batch=2)
    cached = list((tmp_path / "cache" / "actviz" / "scans").iterdir())
    assert len(cached) == 2  # one folder per rank's shard
    got = run_ranks(tmp_path, folder, tag="resumed", batch=2)
    ref = single(folder, batch=2)
    assert_equal_scans(got[0]["scan"], ref)
    # The second run started from what the first had saved (rank 1: 3 batches of 2).
    first_done = got[0]["progress"][0][0]
    assert first_done >= 6 + 2 and got[0]["progress"][-1] == (24, 24)
    assert not got[0]["scan"].from_cache


def test_distributed_true_needs_a_group():
    with pytest.raises(ValueError, match="process group"):
        scan(tiny_net(), torch.rand(2, 3, 16, 16), LAYERS, distributed=True, cache=False)


def test_rank_failed_is_a_runtime_error():
    assert issubclass(RankFailed, RuntimeError)


def test_torchrun_cli_progress_line_and_resume(tmp_path: Path):
    """``torchrun --nproc_per_node=2 -m actviz scan``: one progress line (rank 0's, counting
    both ranks), one scan.json equal to a single-process scan's."""
    import json
    import subprocess
    import sys

    folder = tmp_path / "images"
    write_images(folder, 12)
    env = dict(os.environ, XDG_CACHE_HOME=str(tmp_path / "cache"), OMP_NUM_THREADS="1")
    env["PYTHONPATH"] = str(Path(__file__).resolve().parents[2])
    layers = "features.block1.conv,features.block2.conv"

    def cli(*extra: str, out: str, ranks: int = 2) -> subprocess.CompletedProcess:
        run = [sys.executable, "-m", "torch.distributed.run", "--standalone"]
        run += [f"--nproc_per_node={ranks}", "-m", "actviz"]
        cmd = [*run, "scan", "-m", "demo", "-d", str(folder), "-l", layers, "-o", out]
        cmd += ["--batch-size", "3", "--workers", "0", *extra]
        return subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=120)

    rows = tmp_path / "rows"
    done = cli("--resume", "--embeddings-dir", str(rows), out=str(tmp_path / "dist"))
    assert done.returncode == 0, done.stderr[-3000:]
    lines = [s for s in done.stderr.splitlines() if s.startswith("scanned ")]
    assert lines[-1].startswith("scanned 12/12 images on 2 ranks (")
    assert sum("opening demo" in s for s in done.stderr.splitlines()) == 1  # rank 0 only
    assert "resuming: " in done.stderr
    ref = scan("demo", folder, layers.split(","), k=9, batch_size=3, num_workers=0, cache=False)
    got = json.loads((tmp_path / "dist" / "scan.json").read_text())
    for layer in ref.layers:
        for c in range(ref.channels(layer)):
            want = [(e.index, e.value) for e in ref.top(layer, c)]
            have = [(e["index"], e["value"]) for e in got["layers"][layer]["top"][c]]
            assert have == want
    # The scan is saved beside its rows, for the window.
    from actviz.data.scan_file import open_scan

    saved = open_scan(rows)
    assert saved.layers == ref.layers and saved.count == 12
    assert saved.top(ref.layers[0], 0) == ref.top(ref.layers[0], 0)
    assert saved.embeddings(ref.layers[1]).vectors.shape[0] == 12
    # Run again: every rank's shard comes from its cache.
    again = cli("--resume", out=str(tmp_path / "again"))
    assert again.returncode == 0 and "resuming: 12 of 12" in again.stderr
