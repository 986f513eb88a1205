"""``actviz.scan``: run a model over a dataset and keep, per channel, the images that excite it
most. A hook per layer reduces each batch (:mod:`accumulate`) into its :class:`_LayerRun`, or a
:class:`_Group` of layers merged as one; state is saved per batch (:mod:`cache`)."""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
import torch
from torch import nn
from torch.utils.data import DataLoader, Subset

from actviz.core.capture import format_bytes, resolve_layers
from actviz.core.edit_kinds import channel_dim
from actviz.core.guards import eval_mode
from actviz.core.threads import ThreadTuner, background_loader_init
from actviz.data import scan_sizing as sizing
from actviz.data.accumulate import LayerState, Reduced, first_tensor, reduce_output
from actviz.data.cache import LayerCache, ScanStore, cache_dir, log_line, weights_fingerprint
from actviz.data.distributed import run_sharded, shard_context
from actviz.data.fork_server import loader_context
from actviz.data.rows import attach_rows, new_vectors
from actviz.data.scan_result import Scan, ScanCancelled, ScanTooLarge, layer_result
from actviz.data.scan_sizing import ACTIVATION_BUDGET, MAX_BATCH, default_workers, estimate_memory
from actviz.data.sources import ScanData, collate, open_data, preprocessing_id, resolve_model

__all__ = ["ACTIVATION_BUDGET", "MAX_BATCH", "estimate_memory", "log_lines", "scan"]


def scan(
    model: Any,
    data: Any,
    layers: Sequence[str] | str,
    *,
    k: int = 9,
    batch_size: int | None = None,
    transform: Callable[..., Any] | None = None,
    progress: Callable[[int, int, float], None] | None = None,
    should_stop: Callable[[], bool] | None = None,
    cache: bool | str = True,
    num_workers: int | None = None,
    background: bool = False,
    embeddings: bool | Sequence[str] = False,
    memory_budget: int | None = None,
    distributed: bool | None = None,
    embeddings_dir: str | os.PathLike[str] | None = None,
) -> Scan:
    """Scan a dataset: for each channel of ``layers``, the ``k`` images that excite it most.

    Parameters
    ----------
    model
        An ``nn.Module``, a ``LoadedModel`` (its preprocessing is used) or a model source.
    data
        A folder of images (ImageFolder gives ``class_names``), image paths, an ``(N, C, H, W)``
        tensor or array, a ``.pt``/``.npy`` file, or any ``Dataset``.
    batch_size
        None: as many as fit :data:`ACTIVATION_BUDGET`, at most :data:`MAX_BATCH`.
    transform
        Replaces the model's preprocessing: PIL image -> ``(C, H, W)`` tensor.
    progress
        ``progress(done, total, images_per_s)``, once per batch.
    should_stop
        Polled per batch; True saves and raises :class:`ScanCancelled` (a later scan resumes).
    cache
        True: reuse the user's cache; False: none; a string: the cache name of a ``Dataset``.
    num_workers
        Loader processes; None: ``min(2, cores)`` for image files, else 0.
    background
        Leave room for interactive work: loaders niced and forked by the fork server.
    embeddings
        Also record each image's pooled vector for all (True) or the listed layers.
    memory_budget
        Refuse (:class:`ScanTooLarge`) embeddings larger than this many bytes before running.
    distributed
        None: one shard per rank inside a process group; False: this process; True: require one.
    embeddings_dir
        Keep embeddings memory-mapped in this folder (:mod:`actviz.data.rows`).

    Raises
    ------
    InputError
        Missing data, no images, or samples that do not fit the model.
    ValueError
        Unknown layers, ``k < 1``, or ``embeddings`` naming a layer not scanned.
    ScanCancelled, ScanTooLarge, RankFailed
        See ``should_stop``, ``memory_budget`` and ``distributed``."""
    if int(k) < 1:
        raise ValueError(f"k must be at least 1, got {k}")
    k = int(k)
    spec = resolve_model(model, transform)
    net = spec.model
    if not (names := resolve_layers(net, layers)):
        raise ValueError("no layers to scan")
    embed = sizing._embedding_layers(net, names, embeddings)
    items = open_data(data, spec)
    n = len(items.sources)
    identity = f"named:{cache}:{n}" if isinstance(cache, str) else items.identity
    ctx = shard_context(distributed)
    if ctx is not None and identity is not None:
        identity = f"{identity}|{ctx.tag}"  # each rank resumes its own shard
    folder = None
    if cache is not False and identity is not None:
        folder = cache_dir(weights_fingerprint(net), preprocessing_id(spec), identity)
    store = ScanStore(folder) if folder is not None else None
    if embed:
        need, probed = sizing._estimate(spec, items, [n for n in names if n in embed], store)
        if batch_size is None and probed is not None:  # that pass was the probe too
            batch_size = sizing._batch_for(probed, sizing._model_device(net))
        if memory_budget is not None and need.embedding_bytes > memory_budget:
            raise ScanTooLarge(
                f"{need.describe()}, over the {format_bytes(memory_budget)} memory budget; "
                "record embeddings for fewer layers, scan fewer images, or raise the budget"
            )
    runs = [
        _LayerRun(name, k, n, LayerCache(store, name) if store else None, items, name in embed)
        for name in names
    ]
    pending = np.flatnonzero(~np.logical_and.reduce([r.done for r in runs]))
    labels = _labels(data, items)
    warnings: list[str] = []
    if embeddings_dir is not None:
        attach_rows(runs, embeddings_dir, n, ctx)

    def run(pending: np.ndarray, progress: Any, should_stop: Any) -> int:
        """Run the ``pending`` items; returns the CPU threads it ended on."""
        device, dtype = sizing._model_device(net), spec.expected.dtype
        modules = dict(net.named_modules())
        # Each layer's first output of the batch, reduced in the hook; merged after the forward.
        reduced: dict[str, Reduced] = {}

        def make_hook(layer: _LayerRun) -> Callable[..., None]:
            embed = layer.embed

            def hook(module: nn.Module, _args: Any, output: Any) -> None:
                if layer.name in reduced:
                    return
                if (t := first_tensor(output)) is not None and t.ndim >= 2:
                    axis = channel_dim(module, t) if embed else None
                    reduced[layer.name] = reduce_output(t, axis)
                    if embed and layer.axis is None:
                        layer.axis = axis

            return hook

        handles: list[Any] = []
        tuner: ThreadTuner | None = None
        done_before = n - len(pending)
        try:
            size = batch_size
            if size is None:
                size = sizing._probe(net, items, pending, device, dtype)
            size = max(1, int(size))
            workers = (
                default_workers(items, len(pending), size, background, device)
                if num_workers is None
                else max(0, int(num_workers))
            )
            dataset = Subset(items.dataset, pending.tolist())
            loader = DataLoader(
                dataset,
                batch_size=size,
                shuffle=False,
                num_workers=workers,
                collate_fn=collate,
                worker_init_fn=background_loader_init() if background else None,
                # Forking from a large process stalls its GUI: a background scan's forks a server.
                multiprocessing_context=loader_context(dataset) if background and workers else None,
            )
            handles.extend(modules[r.name].register_forward_hook(make_hook(r)) for r in runs)
            tuner = ThreadTuner(workers, len(loader), device)
            start = time.perf_counter()
            processed = 0
            silent: set[str] = set()
            group: _Group | None = None
            grouped_once = False
            for indices, images, bad in loader:
                if should_stop is not None and should_stop():
                    raise ScanCancelled(
                        f"scan cancelled after {done_before + processed} of {n} items",
                        result(False, None),  # what was scanned, saved
                    )
                if images is not None:
                    reduced.clear()
                    idx = indices.numpy()
                    floating = images.is_floating_point()
                    with torch.no_grad():
                        net(images.to(device=device, dtype=dtype if floating else None))
                    if group is not None and not group.takes(reduced, idx):
                        group.dissolve()
                        group = None
                    if group is None and not grouped_once and reduced:
                        grouped_once = True
                        if len(joinable := _joinable(runs, reduced, idx)) > 1:
                            group = _Group(joinable, reduced)
                    if group is not None:
                        group.add(reduced, idx, items)
                    for r in [r for r in runs if r.group is None]:  # a group's members: added above
                        if r.name in reduced:
                            r.add(reduced[r.name], idx, items)
                        else:
                            # Done all the same, or every later scan would run the data again.
                            silent.add(r.name)
                            r._mark(idx[~r.done[idx]], "D", items, "", None)
                changed = False
                for r in runs:
                    r.skip(bad, items)
                    changed |= r.save()
                if changed and runs[0].cache is not None:
                    runs[0].cache.store.write()  # one write per batch, every layer
                processed += len(indices) + len(bad)
                tuner.batch_done(len(indices))
                if progress is not None:
                    rate = processed / max(time.perf_counter() - start, 1e-9)
                    progress(done_before + processed, n, rate)
            for name in sorted(silent):
                warnings.append(
                    f"layer {name!r} gave no tensor with a channel dimension during the scan "
                    "(it never ran, or its output is not (N, C, ...)), so nothing was recorded"
                )
            return tuner.threads
        finally:
            if tuner is not None:
                tuner.restore()
            for r in runs:
                if r.cache is not None:
                    r.cache.close()
            for h in handles:
                h.remove()

    def result(cached: bool, threads: int | None) -> Scan:
        skipped = {i: reason for r in runs for i, reason in r.skipped.items()}
        pooled, axes = {}, {}
        for r in runs:
            if r.embed:
                vectors = r.vectors
                if vectors is None:
                    vectors = np.zeros((n, 0), dtype=np.float16)
                elif getattr(vectors, "on_disk", False):
                    vectors.axis = r.axis
                    vectors = vectors.finish()  # a read-only memory map
                vectors.flags.writeable = False  # the scan has ended: nothing writes them again
                pooled[r.name] = vectors
                axes[r.name] = int(r.axis or 1)
        if labels is not None:
            labels.flags.writeable = False
        return Scan(
            layers=tuple(r.name for r in runs),
            k=k,
            count=min(r.scanned() for r in runs),
            skipped=tuple((str(items.sources[i]), skipped[i]) for i in sorted(skipped)),
            sources=items.sources,
            class_names=items.class_names,
            from_cache=cached,
            cache_path=folder,
            results={r.name: layer_result(r.state) for r in runs},
            warnings=tuple(warnings),
            threads=threads,
            pooled=pooled,
            pooled_axis=axes,
            labels=labels,
        )

    cached = folder is not None and all(r.loaded for r in runs)
    with eval_mode(net):  # every module's training flag put back after
        if ctx is not None:
            return run_sharded(
                ctx, runs, pending, n, run, result, progress, should_stop, cached, warnings
            )
        threads = run(pending, progress, should_stop) if pending.size else None
    if not pending.size and progress is not None:
        progress(n, n, 0.0)
    return result(cached and pending.size == 0, threads)


def _labels(data: Any, items: ScanData) -> np.ndarray | None:
    """Each item's class index (ImageFolder folder or ``targets``); None without classes."""
    n = len(items.sources)
    if items.class_names is not None and items.files:
        where = {name: i for i, name in enumerate(items.class_names)}
        return np.array(
            [where.get(os.path.basename(os.path.dirname(str(s))), -1) for s in items.sources],
            dtype=np.int64,
        )
    targets = getattr(data, "targets", None)
    if targets is not None and not isinstance(data, (str, os.PathLike)):
        try:
            labels = np.asarray(targets, dtype=np.int64).reshape(-1)
        except (TypeError, ValueError):
            return None
        if len(labels) == n:
            return labels
    return None


class _LayerRun:
    """One layer during a scan: its state, what is done, and its cache files."""

    def __init__(
        self, name: str, k: int, n: int, cache: LayerCache | None, data: ScanData, embed: bool
    ):
        self.name, self.cache = name, cache
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
            if (loaded := cache.load(k, data.sources, data.signatures, embed)) is None:
                cache.reset()
            else:
                self._state, self.spatial, self.loaded = loaded.state, loaded.state.spatial, True
                self.done, self.skipped = loaded.done, loaded.skipped
                self.log_of_index = loaded.log_of_index
                self.vectors, self.axis = loaded.vectors, loaded.axis

    @property
    def state(self) -> LayerState:
        """This layer's figures (a view into its group's state while it has one)."""
        return self._state if self.group is None else self.group.part(self)

    def add(
        self, reduced: Reduced, indices: np.ndarray, data: ScanData, lines: list[str] | None = None
    ) -> None:
        """Merge the items not done yet (its group's state: merged by the group) and keep their
        pooled vectors (float16) when this layer records embeddings."""
        rows = ~self.done[indices]
        if not rows.any():
            return
        if not rows.all():
            sel = np.flatnonzero(rows)
            reduced, indices = reduced.select(sel), indices[sel]
        if self.group is None:
            self._state.update(reduced, indices)
            self.spatial = self._state.spatial
        else:
            self.spatial = reduced.spatial or self.spatial
        if self.embed and (vectors := reduced.embedding) is not None:
            if self.vectors is None:
                self.vectors = self.new_vectors(len(self.done), vectors.shape[1])
            elif vectors.shape[1] != self.vectors.shape[1]:
                raise ValueError(
                    f"layer {self.name!r} gave vectors of {vectors.shape[1]} values, "
                    f"earlier images {self.vectors.shape[1]}"
                )
            self.vectors[indices] = vectors
        self._mark(indices, "D", data, "", lines)

    def scanned(self) -> int:
        """Images done for this layer, skipped ones excluded."""
        return int(self.done.sum()) - len(self.skipped)

    def skip(self, bad: list[tuple[int, str]], data: ScanData) -> None:
        for i, reason in bad:
            if not self.done[i]:
                self.skipped[i] = reason
                self._mark(np.array([i]), "S", data, reason, None)

    def _mark(
        self, indices: np.ndarray, kind: str, data: ScanData, reason: str, lines: list[str] | None
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
        self.lines, self.line_indices = [], []
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
            r.add(reduced[r.name], indices, data, lines)

    def dissolve(self) -> None:
        for r in self.runs:
            r._state = self.part(r).copy()
            r.group = None


def _joinable(runs: list[_LayerRun], reduced: dict[str, Reduced], indices: np.ndarray) -> list:
    """The layers that can form a group at this batch (fired, same images done before)."""
    fired = [r for r in runs if r.name in reduced and not r.done[indices].any()]
    return [
        r
        for r in fired
        if r._state.count == fired[0]._state.count and np.array_equal(r.done, fired[0].done)
    ]
