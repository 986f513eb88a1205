"""One layer during a scan: :class:`_LayerRun` (top-k state, progress, embedding rows, cache
lines) and :class:`_Group` (layers merged as one state per batch).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from actviz.data.accumulate import LayerState, Reduced
from actviz.data.cache import LayerCache, log_line
from actviz.data.rows import new_vectors
from actviz.data.sources import ScanData

__all__ = ["log_lines"]


class _LayerRun:
    """One layer during a scan: its state, what is done, and its cache files."""

    def __init__(
        self,
        name: str,
        k: int,
        n: int,
        cache: LayerCache | None,
        data: ScanData,
        embed: bool = False,
    ):
        self.name = name
        self.cache = cache
        self._state = LayerState(k)
        self.group: _Group | None = None
        self.spatial: tuple[int, ...] | None = None
        self.done = np.zeros(n, dtype=bool)
        self.skipped: dict[int, str] = {}
        self.log_of_index = np.full(n, -1, dtype=np.int64)
        self.lines: list[str] = []
        self.loaded = False
        #: Record each image's pooled vector (``vectors``, by data index; NaN rows: none yet).
        self.embed = embed
        self.vectors: Any = None  # an array, or DiskRows (see actviz.data.rows)
        self.new_vectors: Callable[[int, int], Any] = new_vectors
        self.axis: int | None = None
        #: The data indices of ``lines``, in order (their embedding rows follow the log).
        self.line_indices: list[np.ndarray] = []
        if cache is not None:
            loaded = cache.load(k, data.sources, data.signatures, embeddings=embed)
            if loaded is None:
                cache.reset()
            else:
                self._state = loaded.state
                self.spatial = loaded.state.spatial
                self.done = loaded.done
                self.skipped = loaded.skipped
                self.log_of_index = loaded.log_of_index
                self.vectors, self.axis = loaded.vectors, loaded.axis
                self.loaded = True

    @property
    def state(self) -> LayerState:
        """This layer's figures (a view into its group's state while it has one)."""
        return self._state if self.group is None else self.group.part(self)

    def add(self, reduced: Reduced, indices: np.ndarray, data: ScanData) -> None:
        rows = ~self.done[indices]
        if not rows.any():
            return
        if not rows.all():
            sel = np.flatnonzero(rows)
            reduced = reduced.select(sel)
            indices = indices[sel]
        self._state.update(reduced, indices)
        self.spatial = self._state.spatial
        self.put_vectors(reduced, indices)
        self._mark(indices, "D", data)

    def put_vectors(self, reduced: Reduced, indices: np.ndarray) -> None:
        """Keep the images' pooled vectors (float16) when this layer records embeddings."""
        if not self.embed or reduced.embedding is None:
            return
        rows = reduced.embedding
        if self.vectors is None:
            self.vectors = self.new_vectors(len(self.done), rows.shape[1])
        elif rows.shape[1] != self.vectors.shape[1]:
            raise ValueError(
                f"layer {self.name!r} gave vectors of {rows.shape[1]} values, "
                f"earlier images {self.vectors.shape[1]}"
            )
        self.vectors[indices] = rows

    def mark_run(self, indices: np.ndarray, data: ScanData) -> None:
        """The images ``indices`` ran but this layer gave nothing to merge."""
        self._mark(indices[~self.done[indices]], "D", data)

    def scanned(self) -> int:
        """Images done for this layer, skipped ones excluded."""
        return int(self.done.sum()) - len(self.skipped)

    def skip(self, bad: list[tuple[int, str]], data: ScanData) -> None:
        for i, reason in bad:
            if not self.done[i]:
                self.skipped[i] = reason
                self._mark(np.array([i]), "S", data, reason)

    def _mark(
        self,
        indices: np.ndarray,
        kind: str,
        data: ScanData,
        reason: str = "",
        lines: list[str] | None = None,
    ) -> None:
        """Mark ``indices`` done, with their log ``lines`` when already made."""
        self.done[indices] = True
        if self.cache is None:
            return  # the log lines and their numbers only serve the cache
        base = self.cache.lines + len(self.lines)
        self.log_of_index[indices] = np.arange(base, base + len(indices))
        self.lines.extend(lines if lines is not None else log_lines(indices, kind, data, reason))
        if self.embed:
            self.line_indices.append(indices)

    def save(self) -> bool:
        """Put what is new into the store (the caller writes it); True when there was some."""
        new = bool(self.lines)
        if self.cache is not None and new:
            embedding = None
            if self.embed:
                embedding = (-1, -1)
                if self.vectors is not None:
                    # Rows follow the log: appended before the state that counts them.
                    order = np.concatenate(self.line_indices)
                    self.cache.save_rows(self.vectors[order], self.cache.lines)
                    embedding = (int(self.vectors.shape[1]), int(self.axis or 1))
            self.cache.save(self.state, self.lines, self.log_of_index, embedding)
        self.lines = []
        self.line_indices = []
        return new


def log_lines(indices: np.ndarray, kind: str, data: ScanData, reason: str = "") -> list[str]:
    """The log lines of data items ``indices``."""
    sources, signatures = data.sources, data.signatures
    return [log_line(kind, sources[i], signatures[i], reason) for i in indices.tolist()]


class _Group:
    """Layers merged as one state (one merge per batch), until they diverge."""

    def __init__(self, runs: list[_LayerRun], reduced: dict[str, Reduced]) -> None:
        self.runs = runs
        self.bounds: dict[str, tuple[int, int]] = {}
        lo = 0
        for r in runs:
            if r._state.channels is None:
                r._state._allocate(reduced[r.name].maxima.shape[1])
            hi = lo + int(r._state.channels or 0)
            self.bounds[r.name] = (lo, hi)
            lo = hi
        self.state = LayerState.joined([r._state for r in runs])
        for r in runs:
            r.group = self

    def part(self, run: _LayerRun) -> LayerState:
        lo, hi = self.bounds[run.name]
        return self.state.part(lo, hi, run.spatial)

    def takes(self, reduced: dict[str, Reduced], indices: np.ndarray) -> bool:
        """Whether every member fired and has none of ``indices`` done."""
        return all(r.name in reduced and not r.done[indices].any() for r in self.runs)

    def add(self, reduced: dict[str, Reduced], indices: np.ndarray, data: ScanData) -> None:
        self.state.update(Reduced.joined([reduced[r.name] for r in self.runs]), indices)
        lines = log_lines(indices, "D", data) if self.runs[0].cache is not None else None
        for r in self.runs:
            r.spatial = reduced[r.name].spatial or r.spatial
            r.put_vectors(reduced[r.name], indices)
            r._mark(indices, "D", data, lines=lines)

    def dissolve(self) -> None:
        for r in self.runs:
            r._state = self.part(r).copy()
            r.group = None


def _joinable(runs: list[_LayerRun], reduced: dict[str, Reduced], indices: np.ndarray) -> list:
    """The layers that can form a group at this batch (fired, same images done before)."""
    fired = [r for r in runs if r.name in reduced and not r.done[indices].any()]
    if not fired:
        return []
    first = fired[0]
    return [
        r
        for r in fired
        if r._state.count == first._state.count and np.array_equal(r.done, first.done)
    ]
