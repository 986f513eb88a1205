"""Records to the host: every device tensor copied once, in one transfer per device and dtype.

CUDA buffers cross through a small pinned staging buffer (:data:`STAGING_BYTES`); host
records are views into the copy.
"""

from __future__ import annotations

from collections.abc import Iterable

import torch

#: Page-locked staging buffer of a device-to-host transfer (bytes).
STAGING_BYTES = 32 << 20
#: Below this, a transfer goes straight to pageable memory (staging would not pay).
DIRECT_BYTES = 1 << 20


def to_host(tensors: Iterable[torch.Tensor]) -> dict[int, torch.Tensor]:
    """``id(device tensor) -> contiguous CPU copy`` for the tensors not on the CPU."""
    groups: dict[tuple[torch.device, torch.dtype], dict[int, torch.Tensor]] = {}
    for t in tensors:
        if t.device.type != "cpu":
            groups.setdefault((t.device, t.dtype), {}).setdefault(id(t), t)
    out: dict[int, torch.Tensor] = {}
    for group in groups.values():
        items = list(group.items())
        if len(items) == 1:
            key, t = items[0]
            out[key] = t.detach().cpu()
            continue
        flat = torch.cat([t.detach().reshape(-1) for _, t in items])
        host = _copy_flat(flat)
        del flat  # the device buffer goes before the next group's is made
        for (key, t), piece in zip(items, host.split([t.numel() for _, t in items]), strict=True):
            out[key] = piece.view(t.shape)
    return out


def _copy_flat(flat: torch.Tensor) -> torch.Tensor:
    """A 1-D device tensor on the host, through a page-locked staging buffer from CUDA."""
    nbytes = flat.numel() * flat.element_size()
    if flat.device.type != "cuda" or nbytes <= DIRECT_BYTES:
        return flat.cpu()
    n = flat.numel()
    host = torch.empty(n, dtype=flat.dtype)
    chunk = max(1, STAGING_BYTES // flat.element_size())
    stage = torch.empty(min(chunk, n), dtype=flat.dtype, pin_memory=True)
    for start in range(0, n, chunk):
        k = min(chunk, n - start)
        stage[:k].copy_(flat[start : start + k])  # synchronous: the chunk is on the host after
        host[start : start + k].copy_(stage[:k])
    return host
