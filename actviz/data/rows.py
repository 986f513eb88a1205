"""A scan's per-image rows (embeddings) on disk instead of in memory.

``<dir>/<layer>.f16`` is raw ``(N, D)`` float16 (NaN rows: no vector), written with
``os.pwrite`` and read back as a read-only memmap; ``rows.json`` reopens them. Distributed
shards are interleaved by rank 0, so every rank must reach the folder.
"""

from __future__ import annotations

import json
import os
import re
from pathlib import Path
from typing import Any

import numpy as np

#: Bytes per block when filling and interleaving (what the rows hold in memory at a time).
BLOCK_BYTES = 1 << 20
_NAN16 = np.float16(np.nan)


def _safe(layer: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.-]", "_", layer or "_model") or "_model"


class DiskRows:
    """``(n, dim)`` float16 rows by data index, kept in a file (see the module notes).

    Indexing with an integer array reads rows (``os.pread``) and assigning writes them; rows
    never written read NaN. ``rank``/``world``: this file holds only items ``rank::world``.
    """

    on_disk = True
    dtype = np.dtype(np.float16)

    def __init__(
        self, folder: Path, layer: str, n: int, dim: int, rank: int = 0, world: int = 1
    ) -> None:
        self.folder, self.layer = Path(folder), layer
        self.n, self.dim, self.rank, self.world = int(n), int(dim), int(rank), int(world)
        self.shape = (self.n, self.dim)
        self.axis: int | None = None
        self.folder.mkdir(parents=True, exist_ok=True)
        name = _safe(layer) + (f".rank{rank}of{world}" if world > 1 else "")
        self.path = self.folder / f"{name}.f16"
        self.count = len(range(self.rank, self.n, self.world))
        _fill_nan(self.path, self.count, self.dim)

    def _positions(self, indices: np.ndarray) -> np.ndarray:
        indices = np.asarray(indices, dtype=np.int64)
        if self.world == 1:
            return indices
        if np.any(indices % self.world != self.rank):
            raise IndexError(f"rows of other ranks than {self.rank} written to its shard file")
        return indices // self.world

    def __setitem__(self, indices: Any, rows: np.ndarray) -> None:
        pos = self._positions(indices)
        rows = np.ascontiguousarray(rows, dtype="<f2").reshape(len(pos), self.dim)
        width = self.dim * 2
        fd = os.open(self.path, os.O_WRONLY)
        try:
            for a, b in _runs(pos):
                os.pwrite(fd, rows[a:b].tobytes(), int(pos[a]) * width)
        finally:
            os.close(fd)

    def __getitem__(self, indices: Any) -> np.ndarray:
        pos = self._positions(indices)
        out = np.empty((len(pos), self.dim), dtype=np.float16)
        width = self.dim * 2
        fd = os.open(self.path, os.O_RDONLY)
        try:
            for a, b in _runs(pos):
                data = os.pread(fd, (b - a) * width, int(pos[a]) * width)
                out[a:b] = np.frombuffer(data, dtype="<f2").reshape(b - a, self.dim)
        finally:
            os.close(fd)
        return out

    def merge_shards(self, world: int) -> DiskRows:
        """Rank 0 of ``world``: interleave every rank's shard file into ``<layer>.f16`` (by
        data index), remove the shard files; returns the merged rows."""
        merged = DiskRows.__new__(DiskRows)
        merged.__dict__.update(self.__dict__)
        merged.rank, merged.world, merged.count = 0, 1, self.n
        merged.path = self.folder / f"{_safe(self.layer)}.f16"
        shards = [self.folder / f"{_safe(self.layer)}.rank{r}of{world}.f16" for r in range(world)]
        block_rows = _block_rows(self.dim)
        step = max(world, block_rows - block_rows % world)
        with open(merged.path, "wb") as out:
            handles = [open(p, "rb") if p.exists() else None for p in shards]  # noqa: SIM115
            try:
                for start in range(0, self.n, step):
                    stop = min(self.n, start + step)
                    block = np.full((stop - start, self.dim), _NAN16, dtype="<f2")
                    for r, fh in enumerate(handles):
                        rows = len(range(start + r, stop, world))
                        if fh is None or rows == 0:
                            continue
                        data = fh.read(rows * self.dim * 2)
                        got = np.frombuffer(data, dtype="<f2").reshape(-1, self.dim)
                        block[r : r + len(got) * world : world] = got
                    out.write(memoryview(block))
            finally:
                for fh in handles:
                    if fh is not None:
                        fh.close()
        for p in shards:
            p.unlink(missing_ok=True)
        return merged

    def finish(self) -> np.memmap:
        """The rows as a read-only memory map (and their shape noted in ``rows.json``)."""
        if self.world == 1:
            _note(self.folder, self.layer, self.n, self.dim, self.axis)
        if self.count == 0 or self.dim == 0:
            return np.zeros((self.count, self.dim), dtype=np.float16)  # type: ignore[return-value]
        return np.memmap(self.path, dtype="<f2", mode="r", shape=(self.count, self.dim))


def _runs(pos: np.ndarray) -> list[tuple[int, int]]:
    """``(a, b)`` slices of ``pos`` that are consecutive positions (one write or read each)."""
    if len(pos) == 0:
        return []
    cuts = np.flatnonzero(np.diff(pos) != 1) + 1
    edges = [0, *cuts.tolist(), len(pos)]
    return list(zip(edges[:-1], edges[1:], strict=False))


def _block_rows(dim: int) -> int:
    return max(1, BLOCK_BYTES // max(1, dim * 2))


def _fill_nan(path: Path, rows: int, dim: int) -> None:
    """A file of ``rows x dim`` NaN float16, written a block at a time."""
    per = _block_rows(dim)
    block = np.full((min(per, max(rows, 1)), dim), _NAN16, dtype="<f2")
    with open(path, "wb") as fh:
        left = rows
        while left > 0:
            take = min(left, per)
            fh.write(memoryview(block[:take]))  # no copy of the block
            left -= take


def _note(folder: Path, layer: str, n: int, dim: int, axis: int | None) -> None:
    index = folder / "rows.json"
    try:
        meta = json.loads(index.read_text())
    except (OSError, ValueError):
        meta = {}
    meta[layer] = {
        "file": f"{_safe(layer)}.f16",
        "rows": n,
        "dim": dim,
        "dtype": "float16",
        "axis": axis or 1,
    }
    index.write_text(json.dumps(meta, indent=1))


def open_rows(folder: str | os.PathLike[str]) -> dict[str, tuple[np.memmap, int]]:
    """Per layer, the rows a scan wrote to ``folder`` (read-only memory map) and their axis."""
    folder = Path(folder)
    meta = json.loads((folder / "rows.json").read_text())
    out = {}
    for layer, m in meta.items():
        shape = (int(m["rows"]), int(m["dim"]))
        out[layer] = (np.memmap(folder / m["file"], dtype="<f2", mode="r", shape=shape), m["axis"])
    return out


def attach_rows(runs: list[Any], folder: Any, n: int, ctx: Any = None) -> None:
    """Make the embedding layers of ``runs`` keep their rows in files under ``folder``
    (rows a cache already had are copied there)."""
    rank, world = (0, 1) if ctx is None else (ctx.rank, ctx.world)
    for r in runs:
        if not r.embed:
            continue

        def make(count: int, dim: int, run: Any = r) -> DiskRows:
            rows = DiskRows(Path(folder), run.name, count, dim, rank, world)
            rows.axis = run.axis
            return rows

        r.new_vectors = make
        if r.vectors is not None and not getattr(r.vectors, "on_disk", False):
            held = r.vectors
            r.vectors = make(n, held.shape[1])
            idx = np.flatnonzero(r.done)
            if world > 1:
                idx = idx[idx % world == rank]
            r.vectors[idx] = held[idx]


def new_vectors(n: int, dim: int) -> np.ndarray:
    """In-memory rows (the default): NaN until written."""
    return np.full((n, dim), np.nan, dtype=np.float16)
