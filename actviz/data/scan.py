"""``actviz.scan``: run a model over a dataset and keep, per channel, the images that excite it most.

The scan reads the data through a ``torch.utils.data.DataLoader`` (worker processes when the
data is image files), runs the model under ``torch.no_grad()`` with one forward hook per
scanned layer, and reduces each layer's output in the hook (see
:mod:`actviz.data.accumulate`): no activation outlives its batch. After each batch the state is
saved (see :mod:`actviz.data.cache`), so a cancelled or killed scan resumes where it stopped and
a folder that grew is scanned for its new images only.
"""

from __future__ import annotations

import logging
import os
import time
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
import torch
from torch import nn
from torch.utils.data import DataLoader, Subset

from actviz.core.capture import resolve_layers
from actviz.data.accumulate import LayerState, Reduced, first_tensor, reduce_output
from actviz.data.cache import LayerCache, ScanStore, cache_dir, log_line, weights_fingerprint
from actviz.data.result import Scan, ScanCancelled, layer_result
from actviz.data.sources import ModelSpec, ScanData, collate, open_data, preprocessing_id
from actviz.data.sources import resolve_model as resolve_model

log = logging.getLogger(__name__)

__all__ = ["ACTIVATION_BUDGET", "MAX_BATCH", "scan"]

#: Bytes of layer outputs one batch may produce when the batch size is chosen automatically.
ACTIVATION_BUDGET = 256 << 20
#: Largest automatic batch size.
MAX_BATCH = 64


class _LayerRun:
    """One layer during a scan: its state, what is done, and its cache files."""

    def __init__(self, name: str, k: int, n: int, cache: LayerCache | None, data: ScanData):
        self.name = name
        self.cache = cache
        self.state = LayerState(k)
        self.done = np.zeros(n, dtype=bool)
        self.skipped: dict[int, str] = {}
        self.log_of_index = np.full(n, -1, dtype=np.int64)
        self.lines: list[str] = []
        self.loaded = False
        if cache is not None:
            loaded = cache.load(k, data.sources, data.signatures)
            if loaded is None:
                cache.reset()
            else:
                self.state = loaded.state
                self.done = loaded.done
                self.skipped = loaded.skipped
                self.log_of_index = loaded.log_of_index
                self.loaded = True

    def add(self, reduced: Reduced, indices: torch.Tensor, data: ScanData) -> None:
        rows = ~self.done[indices.numpy()]
        if not rows.any():
            return
        if not rows.all():
            sel = torch.from_numpy(np.flatnonzero(rows))
            reduced = reduced.select(sel)
            indices = indices[sel]
        self.state.update(reduced, indices)
        self._mark(indices.tolist(), "D", data)

    def mark_run(self, indices: torch.Tensor, data: ScanData) -> None:
        """The images ``indices`` ran but this layer gave nothing to merge."""
        todo = [i for i in indices.tolist() if not self.done[i]]
        self._mark(todo, "D", data)

    def scanned(self) -> int:
        """Images done for this layer, skipped ones excluded."""
        return int(self.done.sum()) - len(self.skipped)

    def skip(self, bad: list[tuple[int, str]], data: ScanData) -> None:
        for i, reason in bad:
            if not self.done[i]:
                self.skipped[i] = reason
                self._mark([i], "S", data, reason)

    def _mark(self, indices: list[int], kind: str, data: ScanData, reason: str = "") -> None:
        base = (self.cache.lines if self.cache is not None else 0) + len(self.lines)
        for j, i in enumerate(indices):
            self.done[i] = True
            self.log_of_index[i] = base + j
            self.lines.append(log_line(kind, data.sources[i], data.signatures[i], reason))

    def save(self) -> bool:
        """Put what is new into the store (the caller writes it); True when there was some."""
        new = bool(self.lines)
        if self.cache is not None and new:
            self.cache.save(self.state, self.lines, self.log_of_index)
        self.lines = []
        return new


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
) -> Scan:
    """Scan a dataset: for each channel of ``layers``, the ``k`` images that excite it most.

    Parameters
    ----------
    model
        An ``nn.Module``, a :class:`~actviz.io.models.LoadedModel` (its preprocessing is used:
        the same as a single run's) or a model source (``"demo"``, ``"resnet18"``, a file).
    data
        A folder of images (recursive; an ImageFolder layout gives ``class_names``), a list
        of image paths, an ``(N, C, H, W)`` tensor or array, a ``.pt``/``.npy`` file of N
        samples, or any ``torch.utils.data.Dataset`` (items: a tensor or PIL image, or a
        tuple/dict whose first element is one).
    layers
        Qualified module names (``model.named_modules()``).
    k
        Images kept per channel.
    batch_size
        Images per forward pass; None: as many as fit :data:`ACTIVATION_BUDGET` (measured on
        one image), at most :data:`MAX_BATCH`.
    transform
        Replaces the model's preprocessing: PIL image -> ``(C, H, W)`` tensor.
    progress
        ``progress(done, total, images_per_s)``, on the calling thread, once per batch.
    should_stop
        Polled once per batch; when it returns True the scan saves what it has and raises
        :class:`ScanCancelled` (a later scan of the same model and data resumes).
    cache
        True: save under the user's cache directory (keyed by the weights, the preprocessing,
        the layer and the data) and reuse what is saved; False: neither; a string: cache a
        ``Dataset`` (which has no identity of its own) under this name.
    num_workers
        DataLoader worker processes; None: ``min(2, cpu count)`` for image files, else 0.

    Returns
    -------
    Scan

    Raises
    ------
    actviz.io.errors.InputError
        Missing folder or file, no images, samples that do not fit the model.
    ValueError
        Unknown layer names or ``k < 1``.
    ScanCancelled
        ``should_stop()`` returned True.
    """
    if int(k) < 1:
        raise ValueError(f"k must be at least 1, got {k}")
    k = int(k)
    spec = resolve_model(model, transform)
    net = spec.model
    names = resolve_layers(net, layers)
    if not names:
        raise ValueError("no layers to scan")
    items = open_data(data, spec)
    n = len(items.sources)
    identity = items.identity
    if isinstance(cache, str):
        identity = f"named:{cache}:{n}"
    folder = None
    if cache is not False and identity is not None:
        folder = cache_dir(weights_fingerprint(net), preprocessing_id(spec), identity)
    store = ScanStore(folder) if folder is not None else None
    runs = [
        _LayerRun(name, k, n, LayerCache(store, name) if store else None, items) for name in names
    ]
    pending = np.flatnonzero(~np.logical_and.reduce([r.done for r in runs]))
    warnings: list[str] = []
    from_cache = folder is not None and pending.size == 0 and all(r.loaded for r in runs)
    if pending.size:
        _run(spec, items, runs, pending, batch_size, num_workers, progress, should_stop, warnings)
    elif progress is not None:
        progress(n, n, 0.0)
    return _result(runs, k, items, from_cache, folder, warnings)


def _result(
    runs: list[_LayerRun],
    k: int,
    items: ScanData,
    from_cache: bool,
    folder: Any,
    warnings: list[str],
) -> Scan:
    skipped: dict[int, str] = {}
    for r in runs:
        skipped.update(r.skipped)
    sources = items.sources
    return Scan(
        layers=tuple(r.name for r in runs),
        k=k,
        count=min(r.scanned() for r in runs),
        skipped=tuple((str(sources[i]), skipped[i]) for i in sorted(skipped)),
        sources=sources,
        class_names=items.class_names,
        from_cache=from_cache,
        cache_path=folder,
        results={r.name: layer_result(r.state) for r in runs},
        warnings=tuple(warnings),
    )


def _model_device(net: nn.Module) -> torch.device:
    for p in net.parameters():
        return p.device
    for b in net.buffers():
        return b.device
    return torch.device("cpu")


def choose_batch_size(net: nn.Module, sample: torch.Tensor) -> int:
    """Images per batch so that one batch's layer outputs stay within :data:`ACTIVATION_BUDGET`.

    Runs the model once on ``sample`` (one input, ``(1, C, ...)``) and adds up the bytes of
    every module's tensor output.
    """
    total = 0

    def hook(_module: nn.Module, _args: Any, output: Any) -> None:
        nonlocal total
        t = first_tensor(output)
        if t is not None:
            total += t.numel() * t.element_size()

    handles = [m.register_forward_hook(hook) for m in net.modules()]
    try:
        with torch.no_grad():
            net(sample)
    finally:
        for h in handles:
            h.remove()
    return int(max(1, min(MAX_BATCH, ACTIVATION_BUDGET // max(total, 1))))


def default_workers(items: ScanData, pending: int, batch_size: int) -> int:
    """``min(2, cpu count)`` for files worth it (more than two batches), else 0."""
    if not items.files or pending <= 2 * batch_size:
        return 0
    return min(2, os.cpu_count() or 1)


def _run(
    spec: ModelSpec,
    items: ScanData,
    runs: list[_LayerRun],
    pending: np.ndarray,
    batch_size: int | None,
    num_workers: int | None,
    progress: Callable[[int, int, float], None] | None,
    should_stop: Callable[[], bool] | None,
    warnings: list[str],
) -> None:
    net = spec.model
    device = _model_device(net)
    dtype = spec.expected.dtype
    modules = dict(net.named_modules())
    # The batch being run: its data indices, and the layers whose hook has fired.
    batch_indices: list[torch.Tensor] = []
    fired: set[str] = set()

    def make_hook(run: _LayerRun) -> Callable[..., None]:
        def hook(_module: nn.Module, _args: Any, output: Any) -> None:
            if run.name in fired:
                return  # a module called twice in one forward: its first call counts
            t = first_tensor(output)
            if t is not None and t.ndim >= 2:
                fired.add(run.name)
                # Merged here, while the output is alive: locations of new top entries are
                # read from it, and nothing of it is kept.
                run.add(reduce_output(t), batch_indices[0], items)

        return hook

    training = [(m, m.training) for m in net.modules()]
    handles: list[Any] = []
    n = len(items.sources)
    done_before = n - len(pending)
    try:
        net.eval()
        if batch_size is None:
            batch_size = _probe(net, items, pending, device, dtype)
        batch_size = max(1, int(batch_size))
        workers = (
            default_workers(items, len(pending), batch_size)
            if num_workers is None
            else max(0, int(num_workers))
        )
        loader = DataLoader(
            Subset(items.dataset, pending.tolist()),
            batch_size=batch_size,
            shuffle=False,
            num_workers=workers,
            collate_fn=collate,
        )
        for r in runs:
            handles.append(modules[r.name].register_forward_hook(make_hook(r)))
        start = time.perf_counter()
        processed = 0
        silent: set[str] = set()
        for indices, batch, bad in loader:
            if should_stop is not None and should_stop():
                raise ScanCancelled(
                    f"scan cancelled after {done_before + processed} of {n} items",
                    _result(runs, runs[0].state.k, items, False, _folder(runs), warnings),
                )
            if batch is not None:
                fired.clear()
                batch_indices[:] = [indices]
                with torch.no_grad():
                    net(batch.to(device=device, dtype=dtype if batch.is_floating_point() else None))
                for r in runs:
                    if r.name not in fired:
                        # Done all the same: a layer that never runs must not make every
                        # later scan run the whole data again.
                        silent.add(r.name)
                        r.mark_run(indices, items)
            changed = False
            for r in runs:
                r.skip(bad, items)
                changed |= r.save()
            if changed and runs[0].cache is not None:
                runs[0].cache.store.write()  # one atomic write per batch, every layer
            processed += len(indices) + len(bad)
            if progress is not None:
                rate = processed / max(time.perf_counter() - start, 1e-9)
                progress(done_before + processed, n, rate)
        for name in sorted(silent):
            warnings.append(
                f"layer {name!r} gave no tensor with a channel dimension during the scan "
                "(it never ran, or its output is not (N, C, ...)), so nothing was recorded"
            )
    finally:
        for h in handles:
            h.remove()
        for m, flag in training:
            if m.training != flag:
                m.training = flag


def _folder(runs: list[_LayerRun]) -> Any:
    cache = runs[0].cache
    return None if cache is None else cache.folder


def _probe(
    net: nn.Module, items: ScanData, pending: np.ndarray, device: torch.device, dtype: Any
) -> int:
    for i in pending[:8].tolist():
        _, t, _ = items.dataset[i]
        if t is not None:
            sample = t[None].to(device=device, dtype=dtype if t.is_floating_point() else None)
            return choose_batch_size(net, sample)
    return MAX_BATCH
