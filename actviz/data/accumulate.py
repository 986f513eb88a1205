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

from dataclasses import dataclass

import numpy as np
import torch

__all__ = ["EMPTY_INDEX", "LayerState", "reduce_output"]

#: Index of an empty top-k slot: larger than any data index, so empty slots sort last.
EMPTY_INDEX = 2**62


@dataclass
class Reduced:
    """One batch of one layer, reduced per image and channel (all on the CPU)."""

    maxima: torch.Tensor  # (B, C) float64
    means: torch.Tensor  # (B, C) float64
    locations: torch.Tensor | None  # (B, C, 2) int64, or None for non-spatial layers
    spatial: tuple[int, ...] | None


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

    Parameters
    ----------
    t
        The layer output: ``(B, C)`` or ``(B, C, *spatial)``.

    Returns
    -------
    Reduced
        Maxima, spatial means and ``(y, x)`` of the maxima (``(0, x)`` for 1-D maps; None for
        ``(B, C)`` layers and maps of more than 2 dimensions).
    """
    t = t.detach()
    if t.ndim < 2:
        raise ValueError(f"layer output of shape {tuple(t.shape)} has no channel dimension")
    if not t.is_floating_point():
        t = t.float()
    b, c = t.shape[0], t.shape[1]
    spatial = tuple(int(s) for s in t.shape[2:])
    if t.ndim == 2:
        values = t.to(torch.float64)
        maxima = torch.nan_to_num(values, nan=-torch.inf)
        return Reduced(maxima.cpu(), values.cpu(), None, None)
    flat = t.reshape(b, c, -1)
    # NaN never wins: it would hide every real maximum of the channel.
    clean = torch.nan_to_num(flat, nan=-torch.inf) if flat.isnan().any() else flat
    arg = clean.argmax(dim=-1)  # documented: the first maximal value wins
    maxima = clean.gather(-1, arg[..., None])[..., 0].to(torch.float64)
    means = flat.mean(dim=-1, dtype=torch.float64)
    locations = None
    if t.ndim == 4:
        width = spatial[1]
        locations = torch.stack((arg // width, arg % width), dim=-1)
    elif t.ndim == 3:
        locations = torch.stack((torch.zeros_like(arg), arg), dim=-1)
    return Reduced(
        maxima.cpu(),
        means.cpu(),
        None if locations is None else locations.cpu(),
        spatial,
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
        # Top-k: candidates = kept entries + this batch, ordered by value (descending), then
        # data index (ascending): a stable sort by index first, then a stable sort by value.
        cand_values = torch.cat((self.values, maxima.T), dim=1)
        cand_indices = torch.cat((self.indices, indices[None].expand(c, b)), dim=1)
        if reduced.locations is not None:
            new_locations = reduced.locations.transpose(0, 1)
        else:
            new_locations = torch.full((c, b, 2), -1, dtype=torch.int64)
        cand_locations = torch.cat((self.locations, new_locations), dim=1)
        by_index = torch.sort(cand_indices, dim=1, stable=True).indices
        cand_values = cand_values.gather(1, by_index)
        order = torch.sort(cand_values, dim=1, descending=True, stable=True).indices[:, : self.k]
        final = by_index.gather(1, order)
        self.values = cand_values.gather(1, order)
        self.indices = cand_indices.gather(1, final)
        self.locations = cand_locations.gather(1, final[..., None].expand(-1, -1, 2))
        # Statistics: Chan et al.'s parallel merge of (count, mean, M2), in float64.
        batch_mean = means.mean(dim=0)
        batch_m2 = ((means - batch_mean) ** 2).sum(dim=0)
        total = self.count + b
        delta = batch_mean - self.mean
        self.mean = self.mean + delta * (b / total)
        self.m2 = self.m2 + batch_m2 + delta**2 * (self.count * b / total)
        self.positive = self.positive + (maxima > 0).sum(dim=0)
        self.count = total

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
