"""One dataset scan over the ranks of a ``torch.distributed`` process group.

Rank ``r`` scans items ``r, r + world, ...`` with its own cache (so it resumes); rank 0 merges
exactly. A failing rank's error reaches every rank as :class:`RankFailed`.
"""

from __future__ import annotations

import logging
import time
import traceback
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from actviz.data.accumulate import LayerState
from actviz.data.scan_result import ScanCancelled

log = logging.getLogger(__name__)

#: Scans run in this process inside a process group: every rank runs the same scans in the same
#: order, so the count names this scan's keys in the group's store on every rank.
_SEQUENCE = [0]


class RankFailed(RuntimeError):
    """A rank of a distributed scan failed; the message is that rank's error."""


def shard_indices(n: int, rank: int, world: int) -> np.ndarray:
    """The data indices rank ``rank`` of ``world`` scans: ``rank::world`` (no duplicates, no
    gaps over all ranks; the ranks past ``n % world`` get one item fewer)."""
    return np.arange(rank, n, world, dtype=np.int64)


def merge_states(states: list[LayerState]) -> LayerState:
    """The figures of all ``states`` (disjoint images) as one state.

    Top-k by value (descending) then data index (ascending), as a single scan orders them;
    moments by Chan et al.'s pairwise merge (float64); positive counts summed.
    """
    full = [s for s in states if s.channels is not None]
    k = states[0].k
    if not full:
        return LayerState(k)
    out = LayerState(k, full[0].channels)
    out.spatial = next((s.spatial for s in full if s.spatial is not None), None)
    values = np.concatenate([s.values for s in full], axis=1)
    indices = np.concatenate([s.indices for s in full], axis=1)
    locations = np.concatenate([s.locations for s in full], axis=1)
    order = np.lexsort((indices, -values), axis=1)[:, :k]
    out.values = np.take_along_axis(values, order, axis=1)
    out.indices = np.take_along_axis(indices, order, axis=1)
    out.locations = np.take_along_axis(locations, order[..., None], axis=1)
    for s in full:
        if s.count == 0:
            continue
        total = out.count + s.count
        delta = s.mean - out.mean
        out.mean = out.mean + delta * (s.count / total)
        out.m2 = out.m2 + s.m2 + delta * delta * (out.count * s.count / total)
        out.positive = out.positive + s.positive
        out.count = total
    return out


@dataclass
class ShardContext:
    """This process's place in the group, and the scan's keys in the group's store."""

    rank: int
    world: int
    group: Any = None
    prefix: str = ""
    store: Any = None
    #: Items of the whole data already done (from the ranks' caches) when the run started.
    already: int = 0
    started: float = field(default_factory=time.perf_counter)

    @property
    def tag(self) -> str:
        """What makes this rank's cache folder its own."""
        return f"shard {self.rank}/{self.world}"

    def shard(self, n: int) -> np.ndarray:
        return shard_indices(n, self.rank, self.world)

    # -- progress and failure through the store
    def progress(
        self, n: int, user: Callable[[int, int, float], None] | None, done_before: int
    ) -> Callable[[int, int, float], None]:
        """A progress callback for this rank's run (which starts with ``done_before`` of its
        data done): adds its images to the group's counter; on rank 0 calls ``user(done of
        all ranks, n, images/s of all ranks)``."""
        last = [done_before]

        def report(done: int, _total: int, _rate: float) -> None:
            counted = self._add("done", done - last[0])
            last[0] = done
            if self.rank == 0 and user is not None:
                elapsed = max(time.perf_counter() - self.started, 1e-9)
                user(min(n, self.already + counted), n, counted / elapsed)

        return report

    def _add(self, key: str, delta: int) -> int:
        return 0 if self.store is None else int(self.store.add(f"{self.prefix}/{key}", int(delta)))

    def failed(self) -> str | None:
        """The first error another rank reported, if any."""
        if self.store is None:
            return None
        key = f"{self.prefix}/failed"
        try:
            return self.store.get(key).decode() if self.store.check([key]) else None
        except Exception:  # a store that went away: the collective will tell
            return None

    def fail(self, message: str) -> None:
        if self.store is not None:
            try:
                self.store.set(f"{self.prefix}/failed", message)
            except Exception:
                log.debug("could not report the failure to the store", exc_info=True)

    def should_stop(self, user: Callable[[], bool] | None) -> Callable[[], bool]:
        def stop() -> bool:
            return self.failed() is not None or (user is not None and bool(user()))

        return stop

    # -- collectives
    def all_gather(self, obj: Any) -> list[Any]:
        import torch.distributed as dist

        out: list[Any] = [None] * self.world
        dist.all_gather_object(out, obj, group=self.group)
        return out

    def gather(self, obj: Any) -> list[Any] | None:
        import torch.distributed as dist

        out: list[Any] | None = [None] * self.world if self.rank == 0 else None
        dist.gather_object(obj, out, dst=0, group=self.group)
        return out


def shard_context(distributed: bool | None = None) -> ShardContext | None:
    """This process's shard context in an initialised group of several ranks (unless
    ``distributed`` is False), else None; ``ValueError`` for ``distributed=True`` without a group.
    """
    if distributed is False:
        return None
    try:
        import torch.distributed as dist
    except ImportError:  # pragma: no cover - builds without distributed support
        dist = None
    if dist is None or not dist.is_available() or not dist.is_initialized():
        if distributed:
            raise ValueError(
                "distributed=True needs an initialised torch.distributed process group "
                "(torchrun, or torch.distributed.init_process_group)"
            )
        return None
    world = dist.get_world_size()
    if world < 2 and not distributed:
        return None
    _SEQUENCE[0] += 1
    try:
        from torch.distributed.distributed_c10d import _get_default_store

        store = _get_default_store()
    except Exception:  # no store reachable: progress counts this rank only
        store = None
    return ShardContext(dist.get_rank(), world, None, f"actviz/scan/{_SEQUENCE[0]}", store)


def describe_error(exc: BaseException, rank: int) -> str:
    """``rank R: Type: message`` and the last lines of the traceback."""
    tail = "".join(traceback.format_exception(type(exc), exc, exc.__traceback__)[-3:]).strip()
    return f"rank {rank}: {type(exc).__name__}: {exc}\n{tail}"


def run_sharded(
    ctx: ShardContext,
    runs: list[Any],
    pending: np.ndarray,
    n: int,
    run: Callable[..., int],
    result: Callable[[bool, int | None], Any],
    progress: Callable[[int, int, float], None] | None,
    should_stop: Callable[[], bool] | None,
    cached: bool,
    warnings: list[str],
) -> Any:
    """Scan this rank's shard of ``pending`` with ``run``, merge every rank's figures on rank 0, and
    return ``result(from_cache, threads)``.
    """
    mine = np.intersect1d(pending, ctx.shard(n))
    ctx.already = sum(ctx.all_gather(int(len(ctx.shard(n)) - len(mine))))
    ctx.started = time.perf_counter()
    error: BaseException | None = None
    threads = None
    try:
        if len(mine):
            threads = run(
                mine, ctx.progress(n, progress, n - len(mine)), ctx.should_stop(should_stop)
            )
    except Exception as exc:  # every rank must reach the collectives below to hear of it
        error = exc
        if ctx.failed() is None:
            ctx.fail(describe_error(exc, ctx.rank))
    status = None
    if error is not None:
        status = (ctx.failed() or describe_error(error, ctx.rank), isinstance(error, ScanCancelled))
    statuses = ctx.all_gather(status)
    bad = [s for s in statuses if s is not None]
    if bad:
        message = ctx.failed() or bad[0][0]
        if all(cancelled for _, cancelled in bad) and ctx.failed() is None:
            raise ScanCancelled(message) from error
        raise RankFailed(message) from error
    part = _partial(runs, len(mine) == 0 and cached, threads, warnings)
    # Another rank's result first: its rows may be a shard file (embeddings_dir), which rank 0
    # removes once it has merged them (a memory map opened before stays readable).
    own = result(len(mine) == 0 and cached, threads) if ctx.rank != 0 else None
    parts = ctx.gather(part)
    if ctx.rank != 0:
        return own
    assert parts is not None
    _merge_into(runs, parts, n)
    for p in parts[1:]:
        warnings.extend(w for w in p["warnings"] if w not in warnings)
    if progress is not None:
        done = sum(p["scanned"] for p in parts)
        elapsed = max(time.perf_counter() - ctx.started, 1e-9)
        progress(n, n, max(0, done - ctx.already) / elapsed)
    return result(all(p["from_cache"] for p in parts), parts[0]["threads"])


def _partial(
    runs: list[Any], from_cache: bool, threads: int | None, warnings: list[str]
) -> dict[str, Any]:
    """What rank 0 needs of this rank's runs (picklable)."""
    layers = []
    for r in runs:
        rows = None
        if r.embed and r.vectors is not None and not getattr(r.vectors, "on_disk", False):
            idx = np.flatnonzero(r.done)
            rows = (idx, np.asarray(r.vectors[idx]))
        layers.append(
            {
                "state": r.state.copy(),
                "done": np.packbits(r.done),
                "skipped": dict(r.skipped),
                "axis": r.axis,
                "rows": rows,
                "dim": None if r.vectors is None else int(r.vectors.shape[1]),
            }
        )
    return {
        "layers": layers,
        "from_cache": from_cache,
        "threads": threads,
        "scanned": min(r.scanned() for r in runs),
        "warnings": list(warnings),
    }


def _merge_into(runs: list[Any], parts: list[dict[str, Any]], n: int) -> None:
    """Rank 0: every rank's figures merged into ``runs`` (states, done, skipped, vectors)."""
    for j, r in enumerate(runs):
        mine = [p["layers"][j] for p in parts]
        r.group = None
        r._state = merge_states([m["state"] for m in mine])
        r.spatial = r._state.spatial
        for m in mine:
            r.done |= np.unpackbits(m["done"], count=n).astype(bool)
            r.skipped.update(m["skipped"])
            if r.axis is None:
                r.axis = m["axis"]
        if not r.embed:
            continue
        dims = [m["dim"] for m in mine if m["dim"] is not None]
        if r.vectors is None and dims:
            r.vectors = r.new_vectors(n, dims[0])
        if getattr(r.vectors, "on_disk", False):
            r.vectors = r.vectors.merge_shards(len(parts))
            continue
        for m in mine[1:]:
            if m["rows"] is not None:
                idx, rows = m["rows"]
                r.vectors[idx] = rows
