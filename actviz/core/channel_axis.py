"""Which dimension of a module's output holds its feature channels."""

from __future__ import annotations

import torch
from torch import nn

__all__ = ["channel_dim"]

# Modules whose 3-D output is (N, C, L): channels in dimension 1, not last.
_CHANNEL_FIRST = (
    nn.modules.conv._ConvNd,
    nn.modules.batchnorm._NormBase,  # BatchNorm*d, InstanceNorm*d
    nn.GroupNorm,
    nn.MaxPool1d,
    nn.AvgPool1d,
    nn.AdaptiveAvgPool1d,
    nn.AdaptiveMaxPool1d,
    nn.LPPool1d,
    nn.Upsample,
)


def channel_dim(module: nn.Module | None, output: torch.Tensor | int) -> int:
    """The dimension holding the feature channels of ``module``'s output (non-negative).

    ``output`` is the tensor (its shape settles what the module suggests) or only its ``ndim``.
    First match wins:

    1. Channel-first modules (convolutions, norms over channels, 1-D pooling, ``Upsample``): 1.
    2. For a 3-D or larger output, the module's channel count (``Linear.out_features``,
       ``LayerNorm`` over the last dimension, ``output_fmt="NHWC"``, ``out_dim``/``dim``/
       ``embed_dim``/``num_features``/``hidden_size``..., else its last layer's) when it matches
       exactly one of dimension 1 and the last dimension.
    3. The shape: the last dimension of ``(N, T, D)``, dimension 1 of anything else; 0 below 2-D.
    """
    ndim = output if isinstance(output, int) else output.ndim
    if ndim < 2:
        return 0
    if isinstance(module, _CHANNEL_FIRST):
        return 1
    if ndim >= 3 and module is not None and isinstance(output, torch.Tensor):
        last = _channels_last(module, tuple(output.shape))
        if last is not None:
            return ndim - 1 if last else 1
    return 2 if ndim == 3 else 1


# Attributes that hold the channel count of a module's output, most specific first.
_COUNT_ATTRS = (
    "out_dim",
    "dim",
    "embed_dim",
    "num_features",
    "out_channels",
    "out_features",
    "hidden_size",
)


def _channels_last(module: nn.Module, shape: tuple[int, ...]) -> bool | None:
    """True/False when ``module`` shows where the channels of an output ``shape`` are."""
    if type(module) in _LAST_DIM_TYPES:
        return True  # by definition (subclasses such as timm's LayerNorm2d may permute)
    fmt = getattr(module, "output_fmt", None)
    fmt = getattr(fmt, "value", fmt)
    if isinstance(fmt, str) and fmt.upper() in ("NHWC", "NLC"):
        return True
    if isinstance(fmt, str) and fmt.upper() in ("NCHW", "NCL"):
        return False
    counts = [getattr(module, attr, None) for attr in _COUNT_ATTRS]
    if isinstance(module, (nn.LayerNorm, *_RMS_NORM)) and len(module.normalized_shape or ()) == 1:
        counts.insert(0, module.normalized_shape[0])
    counts.append(_last_layer_channels(module))
    for count in counts:
        if isinstance(count, int) and not isinstance(count, bool):
            first, last = shape[1] == count, shape[-1] == count
            if first != last:
                return last
    return None


_RMS_NORM: tuple[type, ...] = (nn.RMSNorm,) if hasattr(nn, "RMSNorm") else ()
# torch.nn's own modules that act on the last dimension only.
_LAST_DIM_TYPES = frozenset({nn.Linear, nn.LayerNorm, *_RMS_NORM})


def _last_layer_channels(module: nn.Module) -> int | None:
    """The channel count of the last registered layer of ``module`` that states one."""
    for sub in reversed(list(module.modules())):
        if isinstance(sub, nn.Linear):
            return int(sub.out_features)
        if isinstance(sub, nn.modules.conv._ConvNd):
            return int(sub.out_channels)
        if isinstance(sub, (nn.LayerNorm, *_RMS_NORM)) and len(sub.normalized_shape or ()) == 1:
            return int(sub.normalized_shape[0])
    return None


def _known_channels(module: nn.Module) -> int | None:
    """The channel count (dimension 1) a module's attributes promise, else None."""
    if isinstance(module, nn.modules.conv._ConvNd):
        return int(module.out_channels)
    if isinstance(module, nn.modules.batchnorm._NormBase):
        return int(module.num_features)
    if isinstance(module, nn.GroupNorm):
        return int(module.num_channels)
    return None
