"""How one layer's output is shown: maps, bars, a heat map or a scalar, for one sample."""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from functools import cached_property
from typing import Any

import numpy as np
import torch


def as_numpy(x: Any) -> np.ndarray:
    """``x`` as a float32 host array (complex tensors by magnitude), copying only if needed."""
    if isinstance(x, torch.Tensor):
        if (x := x.detach()).dtype == torch.float32 and x.device.type == "cpu":
            return x.numpy()  # a live frame's records: no conversion, no copy
        if x.is_complex():
            x = x.abs()
        return x.to("cpu", torch.float32).numpy()
    return np.asarray(x, dtype=np.float32)


@dataclass(frozen=True)
class LayerView:
    """One sample of a layer output, shaped for display (``data`` read-only): ``kind`` is
    ``"maps"`` (``data`` is ``(C, H, W)``), ``"bars"`` (``(C,)``), ``"heatmap"`` (2-D, e.g.
    tokens x features) or ``"scalar"`` (0-d); ``shape`` is the whole output's."""

    kind: str
    data: np.ndarray
    shape: tuple[int, ...]
    description: str

    def __post_init__(self) -> None:
        if self.data.flags.writeable:
            # A view of someone else's array (a capture's tensor) must not be frozen in place.
            object.__setattr__(self, "data", self.data.view())
            self.data.setflags(write=False)

    @cached_property
    def signed(self) -> bool:
        """Whether any value is negative (a convolution's output, not a ReLU's); computed once."""
        if not self.data.size:
            return False
        low = self.data.min()  # one pass, no mask: this runs for every layer of every frame
        if np.isnan(low):  # min propagates NaN: look past it
            return bool((self.data < 0).any())
        return bool(low < 0)


def layer_view(
    tensor: Any, sample: int = 0, *, full_shape: tuple[int, ...] | None = None
) -> LayerView:
    """Pick a display for one sample of a batched layer output by its rank: ``(N, C, H, W)``
    maps, ``(N, C)`` and ``(N, C, 1, 1)`` bars, ``(N, L, D)`` heatmap, 5-D its middle slice;
    ``full_shape`` is the whole output's when ``tensor`` is already the one-sample slice."""
    data = as_numpy(tensor)
    shape = tuple(full_shape) if full_shape is not None else tuple(data.shape)
    if math.prod(shape) == 1:
        return LayerView("scalar", np.asarray(data.reshape(()), np.float32), shape, "scalar")
    if len(shape) == 1:
        return LayerView("bars", np.ascontiguousarray(data), shape, f"{shape[0]} values")
    s = min(sample, shape[0] - 1)
    pick = data[0] if full_shape is not None else data[s]
    batch = f" (sample {s} of {shape[0]})" if shape[0] > 1 else ""
    if pick.ndim == 1:
        kind, shown, text = "bars", pick, f"{shape[1]} units"
    elif pick.ndim == 2:
        kind, shown, text = "heatmap", pick, f"{shape[1]} x {shape[2]}"
    elif pick.ndim == 3:  # one value a channel (a global pool): bars, not a wall of 1x1 tiles
        kind, shown = ("bars", pick.reshape(-1)) if pick.shape[1:] == (1, 1) else ("maps", pick)
        text = "{} channels of {}x{}".format(*pick.shape)
    elif pick.ndim == 4:
        c, depth, h, w = pick.shape
        kind, shown = "maps", pick[:, depth // 2]
        text = f"{c} channels of {h}x{w}, depth slice {depth // 2} of {depth}"
    else:
        kind, shown, text = "heatmap", pick.reshape(pick.shape[0], -1), f"{shape} flattened"
    return LayerView(kind, np.ascontiguousarray(shown), shape, text + batch)


class LazyLayerView(LayerView):
    """A :class:`LayerView` whose ``data`` is made on first read; ``magnitude_of``: the signed
    values whose magnitude it is (mosaics take ``|x|`` of a page from them, not of it all)."""

    def __init__(
        self,
        kind: str,
        make: Callable[[], np.ndarray],
        shape: tuple[int, ...],
        description: str,
        magnitude_of: np.ndarray | None = None,
    ) -> None:
        self.__dict__.update(kind=kind, shape=shape, description=description, _make=make)
        self.__dict__.update(magnitude_of=magnitude_of)

    @cached_property
    def data(self) -> np.ndarray:  # type: ignore[override]
        data = self._make()  # type: ignore[attr-defined]
        object.__setattr__(self, "_make", None)  # let go of what it was made from
        data.setflags(write=False)
        return data


def magnitude_view(view: LayerView) -> LayerView:
    """The same view of ``|values|`` (a gradient's magnitude), same layout and description,
    made when read: a result that is not hovered or paged keeps no copy of the layer."""
    values = view.data
    return LazyLayerView(
        view.kind, lambda: np.abs(values), view.shape, view.description, magnitude_of=values
    )


def class_units(
    shape: tuple[int, ...] | None, output_shape: tuple[int, ...] | None, categories: Any
) -> tuple[str, ...] | None:
    """The class names of a layer's units when its output is the model's class scores, else None."""
    if not categories or shape is None or output_shape is None or len(shape) != 2:
        return None
    if tuple(shape) != tuple(output_shape) or shape[1] != len(categories):
        return None
    return tuple(str(c) for c in categories)
