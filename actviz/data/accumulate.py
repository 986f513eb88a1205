"""Per-layer running figures of a dataset scan, merged in torch one batch at a time.

For every channel of a layer the state holds the ``k`` largest per-image maxima (with the data
index of the image and the ``(y, x)`` of the maximum) and the running mean, spread and
positive count of the per-image figures. Memory is ``O(k x C)``: each batch is reduced in the
forward hook, when the layer's output is produced, and merged into the state with two sorts
over ``(C, k + B)`` candidates; no loop over channels or images runs in Python.

Definitions (what :class:`~actviz.data.Scan` reports):

* per-image value of a channel: the maximum of its map over all positions (its only value for
  a ``(N, C)`` layer); its location is the first maximum in row-major order (``argmax``);
* ``mean`` / ``std``: over images, of the per-image *spatial mean* of the channel (population
  standard deviation, i.e. divided by the number of images);
* ``frac_positive``: the fraction of images whose per-image maximum is above zero, i.e. where
  the channel is above zero somewhere.

Ties between equal values are broken by data order: the image that comes first wins.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import torch

__all__ = ["EMPTY_INDEX", "LayerState", "reduce_output"]

#: Maps gathered at once to find where new top entries peak (bounds the hook's extra memory).
_LOCATE_ROWS = 64
#: Index of an empty top-k slot: larger than any data index, so empty slots sort last.
EMPTY_INDEX = 2**62


@dataclass
class Reduced:
    """One batch of one layer, reduced per image and channel (all on the CPU).

    ``locate(b, c)`` gives the ``(y, x)`` of the maximum of image ``b``'s channel ``c`` (tensors
    of equal length -> ``(n, 2)``); it reads the layer's output, so it is only called while
    that output is alive (in the forward hook), and only for entries that enter a top-k.
    """

    maxima: torch.Tensor  # (B, C) float64
    means: torch.Tensor  # (B, C) float64
    locate: Callable[[torch.Tensor, torch.Tensor], torch.Tensor] | None
    spatial: tuple[int, ...] | None

    def select(self, rows: torch.Tensor) -> Reduced:
        """The same figures for the images ``rows`` only (indices into the batch)."""
        locate = self.locate
        if locate is not None:
            inner = locate

            def locate(b: torch.Tensor, c: torch.Tensor) -> torch.Tensor:
                return inner(rows[b], c)

        return Reduced(self.maxima[rows], self.means[rows], locate, self.spatial)


def first_tensor(output: object) -> torch.Tensor | None:
    """The tensor a layer's output stands for: itself, or the first tensor of a tuple/list/dict."""
    if isinstance(output, torch.Tensor):
        return output
    if isinstance(output, (list, tuple)):
        for item in output:
            found = first_tensor(item)
            if found is not None:
                return found
    if isinstance(output, dict):
        for item in output.values():
            found = first_tensor(item)
            if found is not None:
                return found
    return None


def reduce_output(t: torch.Tensor) -> Reduced:
    """Reduce a layer's batch output ``(B, C, ...)`` to per-image, per-channel figures.

    Only two vectorised passes over the map run per batch (``amax`` and ``mean``): the
    location of a maximum (an ``argmax``, several times slower than ``amax`` on the CPU) is
    found later, by :attr:`Reduced.locate`, for the few entries that enter a top-k.

    Parameters
    ----------
    t
        The layer output: ``(B, C)`` or ``(B, C, *spatial)``.

    Returns
    -------
    Reduced
        Maxima and spatial means; ``locate`` gives ``(y, x)`` for 2-D maps, ``(0, x)`` for
        1-D maps, and is None for ``(B, C)`` layers and maps of more than 2 dimensions.
    """
    t = t.detach()
    if t.ndim < 2:
        raise ValueError(f"layer output of shape {tuple(t.shape)} has no channel dimension")
    if not t.is_floating_point():
        t = t.float()
    b, c = t.shape[0], t.shape[1]
    spatial = tuple(int(s) for s in t.shape[2:])
    if t.ndim == 2 or math.prod(spatial) == 0:
        values = t.reshape(b, c, -1).mean(-1) if t.ndim > 2 else t
        values = values.to(torch.float64)
        return Reduced(torch.nan_to_num(values, nan=-torch.inf).cpu(), values.cpu(), None, None)
    flat = t.reshape(b, c, -1)
    maxima = flat.amax(dim=-1)
    nan = maxima.isnan()
    if nan.any():
        # amax propagates NaN; NaN must never hide a real maximum: recompute those maps only.
        bb, cc = nan.nonzero(as_tuple=True)
        maxima[bb, cc] = torch.nan_to_num(flat[bb, cc], nan=-torch.inf).amax(dim=-1)
    # The mean in the map's own precision: a float64 reduction would copy the whole map.
    means = flat.mean(dim=-1)
    locate = None
    if t.ndim in (3, 4):
        width = spatial[-1]
        has_nan = bool(nan.any())

        def locate(bi: torch.Tensor, ci: torch.Tensor) -> torch.Tensor:
            # In slices of rows: the maps gathered here sit on top of the model's own
            # activations (the hook runs mid-forward), so they must stay small.
            bi, ci = bi.to(flat.device), ci.to(flat.device)
            args = []
            for start in range(0, len(bi), _LOCATE_ROWS):
                rows = flat[bi[start : start + _LOCATE_ROWS], ci[start : start + _LOCATE_ROWS]]
                if has_nan:
                    rows = torch.nan_to_num(rows, nan=-torch.inf)
                args.append(rows.argmax(dim=-1))  # documented: the first maximum wins
            arg = torch.cat(args).cpu() if args else torch.zeros(0, dtype=torch.int64)
            return torch.stack((arg // width, arg % width), dim=-1)

    return Reduced(
        maxima.to(torch.float64).cpu(), means.to(torch.float64).cpu(), locate, spatial or None
    )


class LayerState:
    """The running figures of one layer: top-k per channel and per-channel statistics.

    Parameters
    ----------
    k
        Entries kept per channel.
    channels
        Channel count (known from the first batch when None).
    """

    def __init__(self, k: int, channels: int | None = None) -> None:
        self.k = int(k)
        self.channels: int | None = None
        self.spatial: tuple[int, ...] | None = None
        self.count = 0
        if channels is not None:
            self._allocate(channels)

    def _allocate(self, channels: int) -> None:
        c, k = int(channels), self.k
        self.channels = c
        self.values = torch.full((c, k), -torch.inf, dtype=torch.float64)
        self.indices = torch.full((c, k), EMPTY_INDEX, dtype=torch.int64)
        self.locations = torch.full((c, k, 2), -1, dtype=torch.int64)
        self.mean = torch.zeros(c, dtype=torch.float64)
        self.m2 = torch.zeros(c, dtype=torch.float64)
        self.positive = torch.zeros(c, dtype=torch.int64)

    def update(self, reduced: Reduced, indices: torch.Tensor) -> None:
        """Merge one reduced batch whose rows are the images ``indices`` (data positions)."""
        maxima, means = reduced.maxima, reduced.means
        b, c = maxima.shape
        if b == 0:
            return
        if self.channels is None:
            self._allocate(c)
        elif c != self.channels:
            raise ValueError(f"layer gave {c} channels, earlier batches {self.channels}")
        if reduced.spatial is not None:
            self.spatial = reduced.spatial
        indices = indices.to(torch.int64)
        self._merge(reduced, indices)
        # Statistics: Chan et al.'s parallel merge of (count, mean, M2), in float64.
        batch_mean = means.mean(dim=0)
        batch_m2 = ((means - batch_mean) ** 2).sum(dim=0)
        total = self.count + b
        delta = batch_mean - self.mean
        self.mean = self.mean + delta * (b / total)
        self.m2 = self.m2 + batch_m2 + delta**2 * (self.count * b / total)
        self.positive = self.positive + (maxima > 0).sum(dim=0)
        self.count = total

    def _merge(self, reduced: Reduced, indices: torch.Tensor) -> None:
        maxima = reduced.maxima.T  # (C, B)
        c, b = maxima.shape
        k = self.k
        # Once the top-k have filled, most batches beat no kept entry: test that first (an
        # entry enters when it beats the k-th: a larger value, or an equal one seen earlier).
        last_v, last_i = self.values[:, -1:], self.indices[:, -1:]
        enters = (maxima > last_v) | ((maxima == last_v) & (indices[None] < last_i))
        if not bool(enters.any()):
            return
        # Top-k: candidates = kept entries + this batch, ordered by value (descending), then
        # data index (ascending): a stable sort by index first, then a stable sort by value.
        cand_values = torch.cat((self.values, maxima), dim=1)
        cand_indices = torch.cat((self.indices, indices[None].expand(c, b)), dim=1)
        by_index = torch.sort(cand_indices, dim=1, stable=True).indices
        cand_values = cand_values.gather(1, by_index)
        order = torch.sort(cand_values, dim=1, descending=True, stable=True).indices[:, :k]
        final = by_index.gather(1, order)  # (C, k) positions among the candidates
        self.values = cand_values.gather(1, order)
        self.indices = cand_indices.gather(1, final)
        kept = final.clamp(max=k - 1)[..., None].expand(-1, -1, 2)
        locations = self.locations.gather(1, kept)
        fresh = final >= k
        if fresh.any():
            cc, jj = fresh.nonzero(as_tuple=True)
            if reduced.locate is None:
                locations[cc, jj] = -1
            else:
                locations[cc, jj] = reduced.locate(final[cc, jj] - k, cc).to(torch.int64)
        self.locations = locations

    # -- what a Scan keeps
    def std(self) -> np.ndarray:
        if self.count == 0:
            return np.zeros_like(self.mean.numpy())
        return np.sqrt(np.maximum(self.m2.numpy() / self.count, 0.0))

    def remap(self, mapping: np.ndarray) -> None:
        """Renumber the kept data indices (``new = mapping[old]``) and re-sort ties."""
        if self.channels is None:
            return
        valid = self.indices != EMPTY_INDEX
        idx = self.indices.clone()
        idx[valid] = torch.from_numpy(mapping)[self.indices[valid]]
        by_index = torch.sort(idx, dim=1, stable=True).indices
        values = self.values.gather(1, by_index)
        order = torch.sort(values, dim=1, descending=True, stable=True).indices
        final = by_index.gather(1, order)
        self.values = values.gather(1, order)
        self.indices = idx.gather(1, final)
        self.locations = self.locations.gather(1, final[..., None].expand(-1, -1, 2))
