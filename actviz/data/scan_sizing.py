"""Sizing a scan (or concept training) before it runs: embedding memory, batch, loader workers."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
import torch
from torch import nn

from actviz.core.capture import model_device, resolve_layers
from actviz.core.edit_kinds import channel_dim
from actviz.core.guards import eval_mode, forward_hooks
from actviz.core.threads import available_cores
from actviz.data.accumulate import first_tensor
from actviz.data.cache import ScanStore
from actviz.data.scan_result import ScanMemory
from actviz.data.sources import ModelSpec, ScanData, open_data, resolve_model

#: Bytes of layer outputs one batch may produce when the batch size is chosen automatically.
ACTIVATION_BUDGET = 256 << 20
MAX_BATCH = 64  #: Largest automatic batch size.
#: Loader processes at most for a scan whose forward runs on a GPU (the loaders set its pace).
GPU_MAX_WORKERS = 16


def _embedding_layers(net: nn.Module, names: list[str], embeddings: Any) -> set[str]:
    if embeddings is True:
        return set(names)
    if not embeddings:
        return set()
    wanted = resolve_layers(net, [embeddings] if isinstance(embeddings, str) else embeddings)
    if missing := [name for name in wanted if name not in names]:
        raise ValueError(
            f"embeddings asked for layers that are not scanned: {', '.join(map(repr, missing))}"
        )
    return set(wanted)


def estimate_memory(
    model: Any,
    data: Any,
    layers: Sequence[str] | str,
    *,
    embeddings: bool | Sequence[str] = True,
    transform: Callable[..., Any] | None = None,
) -> ScanMemory:
    """What a scan with ``embeddings`` will hold for them, learnt by running the model once on the
    first readable item (flags restored; not while another job uses the model)."""
    spec = resolve_model(model, transform)
    names = resolve_layers(spec.model, layers)
    embed = _embedding_layers(spec.model, names, embeddings)
    items = open_data(data, spec)
    return _estimate(spec, items, [name for name in names if name in embed], None)[0]


def _estimate(
    spec: ModelSpec, items: ScanData, names: list[str], store: ScanStore | None
) -> tuple[ScanMemory, int | None]:
    """Widths (cached, else from one forward pass) and that pass's output bytes (None: none ran)."""
    widths: dict[str, int] = {}
    for name in names:
        saved = store.get(name) if store is not None else None
        if saved is not None and int(saved.get("embed_dim", -1)) >= 0:
            widths[name] = int(saved["embed_dim"])
    unknown = [name for name in names if name not in widths]
    total = None
    if unknown:
        order = range(min(8, len(items.sources)))
        sample = _first_sample(items, order, _model_device(spec.model), spec.expected.dtype)
        if sample is not None:
            total, found = _probe_forward(spec.model, sample, unknown)
            widths.update(found)
    n = len(items.sources)
    return ScanMemory(n, widths, n * sum(widths.values()) * 2), total


def _first_sample(items: ScanData, order: Any, device: Any, dtype: Any) -> torch.Tensor | None:
    """The first readable of items ``order`` as a batch of one, on ``device``."""
    for i in order:
        _, t, _ = items.dataset[int(i)]
        if t is not None:
            return t[None].to(device=device, dtype=dtype if t.is_floating_point() else None)
    return None


def _model_device(net: nn.Module) -> torch.device:
    return model_device(net) or torch.device("cpu")


def _batch_for(total: int, device: torch.device | None = None) -> int:
    budget = ACTIVATION_BUDGET
    if device is not None and device.type == "cuda":  # a GPU waits on small batches' launches
        budget = max(budget, torch.cuda.mem_get_info(device)[0] // 4)
    return int(max(1, min(MAX_BATCH, budget // max(total, 1))))


def _probe_forward(
    net: nn.Module, sample: torch.Tensor, names: Sequence[str]
) -> tuple[int, dict[str, int]]:
    """One eval-mode forward of ``sample``: every tensor output's bytes and ``names``' widths."""
    total = 0
    widths: dict[str, int] = {}
    wanted = {id(m): name for name, m in net.named_modules() if name in set(names)}

    def hook(module: nn.Module, _args: Any, output: Any) -> None:
        nonlocal total
        if (t := first_tensor(output)) is None:
            return
        total += t.numel() * t.element_size()
        if (name := wanted.get(id(module))) is not None and name not in widths and t.ndim >= 2:
            widths[name] = int(t.shape[channel_dim(module, t)])

    with forward_hooks(net.modules(), hook), eval_mode(net), torch.no_grad():
        net(sample)
    return total, widths


def default_workers(
    items: ScanData,
    pending: int,
    batch_size: int,
    background: bool = False,
    device: torch.device | None = None,
) -> int:
    """Loader processes for files worth it (more than two batches), else 0: ``min(2, cores)``,
    a background scan leaving one core to the foreground; on a GPU, which the decoding keeps
    waiting, every core but one (at most :data:`GPU_MAX_WORKERS`)."""
    if not items.files or pending <= 2 * batch_size:
        return 0
    cores = available_cores()
    if device is not None and device.type == "cuda":
        return max(1, min(GPU_MAX_WORKERS, cores - 1))
    return max(1, min(2, cores - 1 if background else cores))


def _probe(
    net: nn.Module, items: ScanData, pending: np.ndarray, device: torch.device, dtype: Any
) -> int:
    """Images per batch that fit :func:`_batch_for`'s budget, from the first readable item."""
    if (sample := _first_sample(items, pending[:8], device, dtype)) is None:
        return MAX_BATCH
    return _batch_for(_probe_forward(net, sample, ())[0], sample.device)
