"""The forward hooks that apply edits during one capture attempt (:class:`EditHooks`), on the
dimension of a module's output that holds its feature channels (:func:`channel_dim`)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import torch
from torch import nn

from actviz.core.edit_spec import Edit, EditError
from actviz.core.structures import first_tensor, replace_first

# Modules whose 3-D output is (N, C, L): channels in dimension 1, not last.
_POOLS_1D = "MaxPool1d AvgPool1d AdaptiveAvgPool1d AdaptiveMaxPool1d LPPool1d".split()
_CHANNEL_FIRST = (
    nn.modules.conv._ConvNd,
    nn.modules.batchnorm._NormBase,  # BatchNorm*d, InstanceNorm*d
    nn.GroupNorm,
    nn.Upsample,
    *(getattr(nn, name) for name in _POOLS_1D),
)
# Attributes that hold the channel count of a module's output, most specific first.
_COUNT_ATTRS = "out_dim dim embed_dim num_features out_channels out_features hidden_size".split()
_RMS_NORM: tuple[type, ...] = (nn.RMSNorm,) if hasattr(nn, "RMSNorm") else ()
# torch.nn's own modules that act on the last dimension only.
_LAST_DIM_TYPES = frozenset({nn.Linear, nn.LayerNorm, *_RMS_NORM})


def channel_dim(module: nn.Module | None, output: torch.Tensor | int) -> int:
    """The dimension holding the feature channels of ``module``'s output (non-negative);
    ``output`` is the tensor or only its ``ndim``. First match wins:

    1. Channel-first modules (convolutions, norms over channels, 1-D pooling, ``Upsample``): 1.
    2. For a 3-D or larger output, the module's channel count (``Linear.out_features``,
       ``LayerNorm`` over the last dimension, ``output_fmt="NHWC"``, ``out_dim``/``dim``/
       ``embed_dim``/``num_features``/``hidden_size``..., else its last layer's) when it matches
       exactly one of dimension 1 and the last dimension.
    3. The shape: the last dimension of ``(N, T, D)``, dimension 1 of anything else; 0 below 2-D."""
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
    return int(module.num_channels) if isinstance(module, nn.GroupNorm) else None


class _Applied:
    """One edit on one module, with its index/factor tensors made once per capture."""

    def __init__(self, name: str, module: nn.Module, edit: Edit) -> None:
        self.name, self.module, self.edit = name, module, edit
        self.cache: dict[tuple, Any] = {}

    def _fail(self, message: str) -> EditError:
        return EditError(f"{self.edit.describe()} on layer {self.name!r}: {message}")

    def _dim(self, t: torch.Tensor) -> int:
        edit = self.edit
        if edit.dim is not None:
            if not -t.ndim <= edit.dim < t.ndim:
                raise self._fail(
                    f"dim {edit.dim} does not exist in an output of shape {tuple(t.shape)}"
                )
            return edit.dim % t.ndim
        if t.ndim < 2:
            if edit.channels is not None:
                raise self._fail(f"the output of shape {tuple(t.shape)} has no channel dimension")
            return 0
        return channel_dim(self.module, t)

    def _check(self, t: torch.Tensor, dim: int) -> None:
        channels = self.edit.channels
        if channels is not None and t.ndim > 0:
            size = t.shape[dim]
            bad = [c for c in channels if c >= size]
            if bad:
                raise self._fail(
                    f"channel {bad[0]} is out of range; the output {tuple(t.shape)} has {size} "
                    f"channels along dim {dim} (0..{size - 1})"
                )

    def _index(self, t: torch.Tensor, dim: int, complement: bool = False) -> torch.Tensor:
        key = ("index", t.shape[dim] if t.ndim else 0, t.device, complement)
        idx = self.cache.get(key)
        if idx is None:
            chosen = self._vec(t, dim).reshape(-1)
            idx = self.cache[key] = torch.nonzero(~chosen if complement else chosen).flatten()
        return idx

    def _vec(self, t: torch.Tensor, dim: int, value: Any = True) -> torch.Tensor:
        """``value`` on the edit's channels, shaped to broadcast on ``t``: a mask (True, else
        False) or per-channel factors (1 elsewhere, in ``t``'s dtype)."""
        mask = value is True
        key = ("vec", mask, value, t.ndim, dim, t.shape[dim] if t.ndim else 0, t.device, t.dtype)
        vec = self.cache.get(key)
        if vec is None:
            size = t.shape[dim] if t.ndim else 1
            flat = torch.full((size,), not mask, dtype=torch.bool if mask else t.dtype)
            flat[list(self.edit.channels or range(size))] = value
            shape = [1] * t.ndim
            if t.ndim:
                shape[dim] = -1
            vec = self.cache[key] = flat.to(t.device).view(shape)
        return vec

    def _source(self, t: torch.Tensor, index: int) -> torch.Tensor:
        key = ("source", index, t.device, t.dtype)
        src = self.cache.get(key)
        if src is None:
            source = self.edit.source
            assert source is not None
            calls = source.records.get(self.name, [])
            if index >= len(calls):
                raise self._fail(
                    f"the source run recorded {len(calls)} call(s) of this layer, but call "
                    f"{index} ran here"
                )
            src = first_tensor(calls[index].output)
            if src is None or tuple(src.shape) != tuple(t.shape):
                got = None if src is None else tuple(src.shape)
                raise self._fail(
                    f"shape mismatch: the source run's output is {got}, this run's is "
                    f"{tuple(t.shape)} (patch from the same layer of a run with the same "
                    f"input size and batch)"
                )
            src = src.detach().to(device=t.device, dtype=t.dtype)
            self.cache[key] = src
        return src

    def _concept(self, t: torch.Tensor, dim: int) -> torch.Tensor:
        """``t`` less ``(1 - scale)`` times the edit's concepts' part of it."""
        edit = self.edit
        c = edit.concepts
        if t.shape[dim] != int(c.d_in):
            raise self._fail(
                f"the output {tuple(t.shape)} has {t.shape[dim]} channels along dim {dim}; the "
                f"dictionary reads vectors of {c.d_in}"
            )
        x = t.movedim(dim, -1)
        part = c.contribution(x, list(edit.channels or ())).to(t.dtype)
        return (x - (1.0 - edit.factor) * part).movedim(-1, dim)  # type: ignore[operator]

    def apply(self, output: Any, index: int) -> Any:
        """The edited output of call ``index`` (a new object; ``output`` is not written)."""
        edit = self.edit
        if edit.kind == "custom":
            result = edit.fn(output)  # type: ignore[misc]
            return output if result is None else result
        t = first_tensor(output)
        if t is None:
            raise self._fail(f"the output ({type(output).__name__}) holds no tensor")
        dim = self._dim(t)
        if edit.kind == "concept":
            return replace_first(output, self._concept(t, dim))
        self._check(t, dim)
        if edit.kind == "ablate":
            new = t.index_fill(dim, self._index(t, dim), 0) if t.ndim else torch.zeros_like(t)
        elif edit.kind == "keep":
            new = t.index_fill(dim, self._index(t, dim, complement=True), 0)
        elif edit.kind == "scale":
            new = t * (edit.factor if edit.channels is None else self._vec(t, dim, edit.factor))
        elif edit.kind == "clamp":
            clamped = t.clamp(edit.min, edit.max)
            new = clamped if edit.channels is None else torch.where(self._vec(t, dim), clamped, t)
        else:  # patch: connected to t, so earlier layers get an exact zero gradient
            new = torch.where(self._vec(t, dim), self._source(t, index), t)
        return replace_first(output, new if t.is_floating_point() else new.to(t.dtype))


class EditHooks:
    """The forward hooks of one capture attempt, one per edited module, counting its calls;
    registered before the recorder's, so records hold the edited output."""

    def __init__(
        self, modules: Mapping[str, nn.Module], edits: Mapping[str, tuple[Edit, ...]]
    ) -> None:
        self.edited: dict[nn.Module, list[_Applied]] = {}
        for name, items in edits.items():
            module = modules[name]
            self.edited.setdefault(module, []).extend(_Applied(name, module, e) for e in items)
        self.calls: dict[nn.Module, int] = {}

    def register(self) -> list[Any]:
        """Register the hooks; the caller removes the handles (in ``finally``)."""
        return [module.register_forward_hook(self.hook) for module in self.edited]

    def warnings(self) -> list[str]:
        """Edits that never applied: their module did not run, or ran fewer times."""
        out = []
        for module, items in self.edited.items():
            ran = self.calls.get(module, 0)
            for applied in items:
                call = applied.edit.call
                if ran == 0 or (call is not None and call >= ran):
                    times = "did not run" if ran == 0 else f"ran {ran} time(s)"
                    out.append(
                        f"edit {applied.edit.describe()!r} on layer {applied.name!r} was not "
                        f"applied: the module {times} during this forward pass"
                    )
        return out

    def hook(self, module: nn.Module, args: tuple, output: Any) -> Any:
        index = self.calls.get(module, 0)
        self.calls[module] = index + 1
        result = output
        for applied in self.edited[module]:
            call = applied.edit.call
            if call is None or call == index:
                result = applied.apply(result, index)
        return None if result is output else result
