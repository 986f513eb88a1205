"""Activation vectors of a layer (each position or token on :func:`channel_dim`'s axis) from a
tensor, a capture, or a dataset streamed into a bounded :class:`Reservoir` (with a held-out one).
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch
from torch import nn

from actviz.core.edit_kinds import channel_dim
from actviz.core.guards import eval_mode, forward_hooks
from actviz.core.structures import first_tensor


def to_vectors(
    t: torch.Tensor, d_in: int | None = None, axis: int | None = None
) -> tuple[torch.Tensor, tuple[int, ...]]:
    """``(positions, C)`` vectors of a layer output ``t`` and the per-sample map shape.

    ``axis``: the channel axis (None: :func:`channel_dim`'s shape rule, or the one axis whose
    size is ``d_in`` when the rule's is not).
    """
    if t.ndim < 2:
        raise ValueError(f"a layer output of shape {tuple(t.shape)} has no channel axis")
    if axis is None:
        axis = channel_dim(None, t)
        if d_in is not None and t.shape[axis] != d_in:
            fits = [a for a in range(1, t.ndim) if t.shape[a] == d_in]
            if not fits:
                raise ValueError(
                    f"the layer's output {tuple(t.shape)} has no axis of {d_in} channels "
                    "(the dictionary's d_in)"
                )
            axis = fits[-1] if t.ndim == 3 else fits[0]
    moved = t.movedim(axis, -1)
    spatial = tuple(int(s) for s in moved.shape[1:-1])
    return moved.reshape(-1, moved.shape[-1]), spatial


def layer_tensor(
    capture: Any, concepts: Any, layer: str | None, *, call: int = 0, model: Any = None
) -> torch.Tensor:
    """The tensor a dictionary reads in ``capture``: the layer's output, or its input for a
    ``hook_resid_pre`` hook point."""
    from actviz.analysis.concepts.hooks import resolve_hook

    side = "output"
    if layer is None:
        layer = concepts.hook_name
        if model is not None:
            point = resolve_hook(model, layer)
            layer, side = point.module, point.side
    if layer not in capture.records:
        raise ValueError(
            f"layer {layer!r} was not captured (captured: {', '.join(capture.names) or 'none'})"
        )
    calls = capture.records[layer]
    if call >= len(calls):
        raise ValueError(f"layer {layer!r} ran {len(calls)} time(s); no call {call}")
    rec = calls[call]
    t = first_tensor(rec.inputs[0] if side == "input" and rec.inputs else rec.output)
    if t is None:
        raise ValueError(f"layer {layer!r} holds no tensor on its {side} side")
    return t


class Reservoir:
    """A uniform sample of the vectors offered, within ``nbytes`` (algorithm R, seeded by
    ``generator``).

    The buffer grows by doubling up to its capacity, set by the first offer's width.
    """

    def __init__(self, nbytes: int, generator: torch.Generator) -> None:
        self.limit = max(0, int(nbytes))
        self.capacity = 0
        self.generator = generator
        self.buffer: torch.Tensor | None = None
        self.seen = 0

    @property
    def nbytes(self) -> int:
        """Bytes of the buffer (0 before the first vector)."""
        return 0 if self.buffer is None else self.buffer.numel() * self.buffer.element_size()

    def __len__(self) -> int:
        return min(self.seen, self.capacity)

    def offer(self, vectors: torch.Tensor) -> None:
        """Take ``vectors`` ``(m, d)`` into the sample (each kept with probability
        ``capacity / vectors seen so far``)."""
        m = int(vectors.shape[0])
        if m == 0:
            return
        vectors = vectors.detach()
        if self.buffer is None:
            d = max(1, int(vectors.shape[1]))
            self.capacity = max(1, self.limit // (4 * d))
            self.buffer = torch.empty(min(self.capacity, max(m, 4096)), d, dtype=torch.float32)
        elif vectors.shape[1] != self.buffer.shape[1]:
            raise ValueError(
                f"vectors of {vectors.shape[1]} values after vectors of {self.buffer.shape[1]}"
            )
        need = min(self.capacity, self.seen + m)
        if need > self.buffer.shape[0]:
            # Grown by doubling up to the capacity: a small stream never takes the budget.
            grown = torch.empty(
                min(self.capacity, max(need, 2 * self.buffer.shape[0])), self.buffer.shape[1]
            )
            grown[: len(self)] = self.buffer[: len(self)]
            self.buffer = grown
        free = max(0, min(m, self.capacity - self.seen))
        if free:
            self.buffer[self.seen : self.seen + free] = vectors[:free].to(
                device="cpu", dtype=torch.float32
            )
        rest = m - free
        if rest:
            # Vector number t (0-based) replaces slot j ~ U{0..t} when j < capacity.
            t = torch.arange(self.seen + free, self.seen + m, dtype=torch.float64)
            u = torch.rand(rest, generator=self.generator, dtype=torch.float64)
            slots = (u * (t + 1)).floor().to(torch.int64)
            hit = torch.nonzero(slots < self.capacity).flatten()
            if hit.numel():
                chosen = slots[hit].numpy()
                # Within one offer a later vector wins a slot drawn twice (as one at a time).
                _, last = np.unique(chosen[::-1], return_index=True)
                keep = hit[torch.from_numpy(len(chosen) - 1 - last)]
                self.buffer[slots[keep]] = vectors[free + keep.to(vectors.device)].to(
                    device="cpu", dtype=torch.float32
                )
        self.seen += m

    def vectors(self) -> torch.Tensor:
        """The kept vectors ``(len, d)`` (a view of the buffer)."""
        return torch.zeros(0, 0) if self.buffer is None else self.buffer[: len(self)]


@dataclass
class StreamStats:
    """What streaming a dataset did: images run, vectors offered, seconds."""

    images: int = 0
    skipped: int = 0
    vectors: int = 0
    seconds: float = 0.0
    axis: int | None = None


def stream_batches(
    model: Any,
    data: Any,
    layer: str,
    *,
    batch_size: int | None = None,
    num_workers: int | None = 0,
    transform: Callable[..., Any] | None = None,
    progress: Callable[[int, int], None] | None = None,
    should_stop: Callable[[], bool] | None = None,
) -> Iterable[tuple[np.ndarray, torch.Tensor, int]]:
    """Run ``data`` through ``model``, yielding per batch ``(data indices, layer tensor, channel
    axis)``; the layer's value is copied in its hook, so later in-place ops cannot change it.
    """
    from torch.utils.data import DataLoader

    from actviz.analysis.concepts.hooks import resolve_hook
    from actviz.data.scan_sizing import MAX_BATCH, _model_device, _probe, default_workers
    from actviz.data.sources import collate, open_data, resolve_model

    spec = resolve_model(model, transform)
    net = spec.model
    point = resolve_hook(net, layer)
    items = open_data(data, spec)
    n = len(items.sources)
    device = _model_device(net)
    dtype = spec.expected.dtype
    module = dict(net.named_modules())[point.module]
    got: list[tuple[torch.Tensor, int]] = []

    def hook(m: nn.Module, args: tuple, output: Any) -> None:
        if got:
            return  # a module called twice: its first call
        t = first_tensor(args[0] if point.side == "input" and args else output)
        if t is not None and t.ndim >= 2:
            axis = channel_dim(m if point.side == "output" else None, t)
            got.append((t.detach().clone(), axis))

    with forward_hooks([module], hook), eval_mode(net):
        pending = np.arange(n)
        if batch_size is None:
            batch_size = min(MAX_BATCH, _probe(net, items, pending, device, dtype))
        workers = (
            default_workers(items, n, batch_size, device=device)
            if num_workers is None
            else int(num_workers)
        )
        loader = DataLoader(
            items.dataset,
            batch_size=max(1, int(batch_size)),
            shuffle=False,
            num_workers=workers,
            collate_fn=collate,
        )
        done = 0
        for indices, images, bad in loader:
            if should_stop is not None and should_stop():
                raise StreamCancelled(f"cancelled after {done} of {n} items")
            done += len(indices) + len(bad)
            if images is None:
                continue
            got.clear()
            with torch.no_grad():
                net(images.to(device=device, dtype=dtype if images.is_floating_point() else None))
            if not got:
                raise ValueError(f"layer {layer!r} did not run in the model's forward pass")
            t, axis = got.pop()
            yield indices.numpy(), t, axis
            if progress is not None:
                progress(done, n)


class StreamCancelled(Exception):
    """Raised by :func:`stream_batches` when ``should_stop()`` returned True."""


def collect(
    batches: Iterable[tuple[np.ndarray | None, torch.Tensor, int | None]],
    train: Reservoir,
    held: Reservoir,
    *,
    holdout_every: int,
    d_in: int | None = None,
    stats: StreamStats | None = None,
) -> StreamStats:
    """Offer every batch's vectors to ``train``, and those of every ``holdout_every``-th
    sample (by data index; every ``holdout_every``-th vector without indices) to ``held``."""
    stats = stats or StreamStats()
    t0 = time.perf_counter()
    for indices, t, axis in batches:
        if indices is None:  # plain vectors
            vectors = t.reshape(-1, t.shape[-1]) if t.ndim != 2 else t
            held_rows = torch.arange(stats.vectors, stats.vectors + len(vectors)) % holdout_every
            mask = held_rows == holdout_every - 1
        else:
            vectors, spatial = to_vectors(t, d_in, axis)
            stats.axis = axis
            per = max(1, math.prod(spatial))
            sample_held = torch.from_numpy(indices % holdout_every == holdout_every - 1)
            mask = sample_held.repeat_interleave(per).to(vectors.device)
            stats.images += len(indices)
        vectors = vectors.float() if vectors.dtype != torch.float32 else vectors
        if bool(mask.any()):
            held.offer(vectors[mask])
            train.offer(vectors[~mask])
        else:
            train.offer(vectors)
        stats.vectors += int(vectors.shape[0])
    stats.seconds += time.perf_counter() - t0
    return stats
