"""What-if edits: change a module's output during a capture (ablate, scale, keep, clamp, patch).

An edit (:class:`Edit`) is a forward hook (:class:`EditHooks`) returning a new output on
:func:`channel_dim`'s axis: never in place, kept in the autograd graph (an ablated channel's
gradient is zero, not None)."""

from __future__ import annotations

import difflib
import math
import numbers
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, fields
from typing import Any

import torch
from torch import nn

from actviz.core.records import Capture
from actviz.core.structures import first_tensor, replace_first

#: Every kind of edit.
KINDS = ("ablate", "scale", "keep", "clamp", "patch", "custom", "concept")
#: Fields compared by identity (objects with no value equality of their own).
_BY_IDENTITY = ("source", "fn", "concepts")
#: What :meth:`Edit.describe` says of the kinds with nothing but channels and a factor.
_DESCRIBED = {
    "ablate": "ablate {ch}",
    "keep": "keep {ch}",
    "scale": "scale {ch} x{factor:g}",
    "patch": "patch {ch} from another run",
}
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


class EditError(ValueError):
    """An edit that cannot be applied: bad layer, channel out of range, patch shape mismatch."""


def _channels(channels: Any) -> tuple[int, ...] | None:
    if channels is None:
        return None
    if isinstance(channels, numbers.Integral) or (
        isinstance(channels, torch.Tensor) and channels.ndim == 0
    ):
        channels = [channels]
    out: list[int] = []
    for c in channels:
        if isinstance(c, bool) or not isinstance(c, (numbers.Integral, torch.Tensor)):
            raise EditError(f"channels must be integers, not {c!r}")
        c = int(c)
        if c < 0:
            raise EditError(f"channel {c} is negative; channels count from 0")
        if c not in out:
            out.append(c)
    if not out:
        raise EditError("no channels given (use channels=None for every channel)")
    return tuple(out)


@dataclass(frozen=True, eq=False)
class Edit:
    """One change to a module's output, made by :func:`ablate`, :func:`scale`, :func:`keep`,
    :func:`clamp`, :func:`patch`, :func:`custom` or :func:`concept`.

    ``channels`` are sorted without duplicates (None: all; ``concept``: concept indices);
    ``factor`` is ``scale``'s factor or ``concept``'s scale; ``min``/``max`` ``clamp``'s bounds;
    ``source`` ``patch``'s run; ``fn`` ``custom``'s callable; ``call`` None edits every call, ``k``
    the k-th; ``dim`` overrides :func:`channel_dim`. ``source``, ``fn``, ``concepts`` compare by id.
    """

    kind: str
    channels: tuple[int, ...] | None = None
    factor: float | None = None
    min: float | None = None
    max: float | None = None
    source: Capture | None = None
    fn: Callable | None = None
    call: int | None = None
    enabled: bool = True
    dim: int | None = None
    concepts: Any = None

    def __post_init__(self) -> None:
        if self.kind not in KINDS:
            raise EditError(f"unknown edit kind {self.kind!r}; one of {', '.join(KINDS)}")
        object.__setattr__(self, "channels", _channels(self.channels))
        if self.call is not None:
            if isinstance(self.call, bool) or not isinstance(self.call, numbers.Integral):
                raise EditError(f"call must be an integer or None, not {self.call!r}")
            if self.call < 0:
                raise EditError(
                    f"call must be >= 0 (0 is the module's first call), not {self.call}"
                )
            object.__setattr__(self, "call", int(self.call))
        if self.dim is not None:
            object.__setattr__(self, "dim", int(self.dim))
        if self.kind == "scale":
            if self.factor is None or not math.isfinite(float(self.factor)):
                raise EditError(f"scale needs a finite factor, not {self.factor!r}")
            object.__setattr__(self, "factor", float(self.factor))
        if self.kind == "clamp":
            if self.min is None and self.max is None:
                raise EditError("clamp needs min, max or both")
            for bound in ("min", "max"):
                if (value := getattr(self, bound)) is not None and math.isnan(float(value)):
                    raise EditError(f"clamp {bound} is NaN")
                object.__setattr__(self, bound, None if value is None else float(value))
            if self.min is not None and self.max is not None and self.min > self.max:
                raise EditError(f"clamp min {self.min:g} is above max {self.max:g}")
        if self.kind == "patch" and not isinstance(self.source, Capture):
            raise EditError(
                f"patch needs a source Capture (actviz.capture of another run), "
                f"not {type(self.source).__name__}"
            )
        if self.kind == "custom" and not callable(self.fn):
            raise EditError(f"a custom edit needs a callable f(output) -> output, not {self.fn!r}")
        if self.kind == "keep" and not self.channels:
            raise EditError("keep needs the channels to keep")
        if self.kind == "concept":
            c = self.concepts
            if c is None or not callable(getattr(c, "contribution", None)):
                raise EditError(
                    f"a concept edit needs a dictionary (actviz.concepts.Concepts), not {c!r}"
                )
            if not self.channels:
                raise EditError("a concept edit needs the concepts to change")
            if bad := [i for i in self.channels if i >= int(c.d_sae)]:
                raise EditError(
                    f"concept {bad[0]} is out of range; the dictionary has {c.d_sae} concepts "
                    f"(0..{int(c.d_sae) - 1})"
                )
            factor = 0.0 if self.factor is None else float(self.factor)
            if not math.isfinite(factor):
                raise EditError(f"a concept edit needs a finite scale, not {self.factor!r}")
            object.__setattr__(self, "factor", factor)

    def _key(self) -> tuple:
        return tuple(
            id(getattr(self, f.name)) if f.name in _BY_IDENTITY else getattr(self, f.name)
            for f in fields(self)
        )

    def __eq__(self, other: object) -> bool:
        return NotImplemented if not isinstance(other, Edit) else self._key() == other._key()

    def __hash__(self) -> int:
        return hash(self._key())

    def describe(self) -> str:
        """Short text for the Edits panel: ``"ablate ch 3, 7"``, ``"scale ch 5 x0.5"``."""
        ch, n = "all", len(self.channels or ())
        if self.channels is not None:
            more = f", ... (+{n - 6})" if n > 6 else ""
            ch = f"ch {', '.join(str(c) for c in self.channels[:6])}{more}"
        if self.kind == "clamp":
            lo = "-inf" if self.min is None else f"{self.min:g}"
            hi = "inf" if self.max is None else f"{self.max:g}"
            text = f"clamp {ch} to [{lo}, {hi}]"
        elif self.kind == "concept":
            what = ch.replace("ch ", "concept ", 1)
            text = f"remove {what}" if self.factor == 0 else f"scale {what} x{self.factor:g}"
        elif self.kind == "custom":
            text = f"custom {getattr(self.fn, '__name__', type(self.fn).__name__)}"
        else:
            text = _DESCRIBED[self.kind].format(ch=ch, factor=self.factor)
        if self.call is not None:
            text += f" (call {self.call})"
        if not self.enabled:
            text += " (off)"
        return text

    def __repr__(self) -> str:
        return f"Edit({self.describe()!r})"


def ablate(channels: Any = None, *, call: int | None = None) -> Edit:
    """Set ``channels`` (an int, ints, or None: all) to zero; ``call`` k: only the k-th call."""
    return Edit("ablate", channels=channels, call=call)


def scale(channels: Any, factor: float, *, call: int | None = None) -> Edit:
    """Multiply ``channels`` (None: all) of the output by ``factor``."""
    return Edit("scale", channels=channels, factor=factor, call=call)


def keep(channels: Any, *, call: int | None = None) -> Edit:
    """Keep ``channels`` as they are and set every other channel to zero."""
    return Edit("keep", channels=channels, call=call)


def clamp(
    min: float | None = None,
    max: float | None = None,
    *,
    channels: Any = None,
    call: int | None = None,
) -> Edit:
    """Clamp the output (or ``channels`` of it) to ``[min, max]`` (``torch.clamp``)."""
    return Edit("clamp", channels=channels, min=min, max=max, call=call)


def patch(source: Capture, channels: Any = None, *, call: int | None = None) -> Edit:
    """Activation patching: replace the output (or ``channels`` of it) by the same layer's in
    ``source``, another run's capture (``call=None``: call by call). Shapes must match."""
    return Edit("patch", channels=channels, source=source, call=call)


def concept(concepts: Any, indices: Any, scale: float = 0.0, *, call: int | None = None) -> Edit:
    """Remove (``scale=0``) or scale concepts of a dictionary in the output.

    The vectors ``x`` become ``x - (1 - scale) * sum_i z_i d_i`` over ``indices``
    (``z = concepts.encode(x)``). Use the layer the dictionary was trained on:
    ``edits={"layer3": concept(c, [5])}``."""
    return Edit("concept", channels=indices, factor=scale, concepts=concepts, call=call)


def custom(fn: Callable[[Any], Any], *, call: int | None = None) -> Edit:
    """Any change: ``fn(output)`` returns the new output (None: the output unchanged)."""
    return Edit("custom", fn=fn, call=call)


def normalize_edits(edits: Any) -> dict[str, tuple[Edit, ...]]:
    """``{layer: Edit | callable | [...]}`` as ``{layer: (Edit, ...)}``, else ``EditError``."""
    if edits is None:
        return {}
    if not isinstance(edits, Mapping):
        raise EditError(
            f"edits must be a dict {{layer name: edit or list of edits}}, not {type(edits).__name__}"
        )
    out: dict[str, tuple[Edit, ...]] = {}
    for name, value in edits.items():
        if not isinstance(name, str):
            raise EditError(f"edit keys are layer names (str), not {name!r}")
        items: Iterable[Any] = value if isinstance(value, (list, tuple)) else [value]
        for item in items:
            if not isinstance(item, Edit) and not callable(item):
                raise EditError(
                    f"edit for layer {name!r} must be an Edit (actviz.edits.ablate(...)) or a "
                    f"callable f(output) -> output, not {type(item).__name__}"
                )
        if converted := [item if isinstance(item, Edit) else custom(item) for item in items]:
            out[name] = tuple(converted)
    return out


def enabled_edits(edits: Mapping[str, tuple[Edit, ...]]) -> dict[str, tuple[Edit, ...]]:
    """``edits`` without disabled edits, and without layers left with none."""
    on = {name: tuple(e for e in items if e.enabled) for name, items in edits.items()}
    return {name: items for name, items in on.items() if items}


def check_edits(modules: Mapping[str, nn.Module], edits: Mapping[str, tuple[Edit, ...]]) -> None:
    """Check ``edits`` before the forward runs; raises ``EditError`` for an unknown layer, a channel
    beyond the module's count, or a patch source without the layer."""
    for name, items in edits.items():
        if name not in modules:
            close = difflib.get_close_matches(name, [n for n in modules if n], n=3, cutoff=0.5)
            hint = f"; did you mean {', '.join(repr(c) for c in close)}?" if close else ""
            raise EditError(
                f"cannot edit unknown layer {name!r}{hint} (names come from model.named_modules())"
            )
        module = modules[name]
        count = _known_channels(module)
        for edit in items:
            if count is not None and edit.dim in (None, 1) and edit.kind != "concept":
                if bad := [c for c in edit.channels or () if c >= count]:
                    raise EditError(
                        f"{edit.describe()} on layer {name!r}: channel {bad[0]} is out of "
                        f"range; {type(module).__name__} has {count} channels (0..{count - 1})"
                    )
            if edit.kind == "patch":
                source = edit.source
                assert source is not None
                if name not in source.records:
                    raise EditError(
                        f"patch on layer {name!r}: the source run did not record that layer "
                        f"(it recorded {len(source.names)} layers); capture it in the source run"
                    )
                calls = len(source.records[name])
                if edit.call is not None and edit.call >= calls:
                    raise EditError(
                        f"patch on layer {name!r} call {edit.call}: the source run recorded "
                        f"only {calls} call(s) of it"
                    )
                if first_tensor(source.records[name][0].output) is None:
                    raise EditError(f"patch on layer {name!r}: the source record has no tensor")


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
        if (last := _channels_last(module, tuple(output.shape))) is not None:
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


def source_output(source: Capture, layer: str, call: int, shape: tuple[int, ...]) -> torch.Tensor:
    """The output of call ``call`` of ``layer`` in ``source``, another run, which must have
    ``shape`` (a patch's values); ``ValueError`` saying why it cannot be used."""
    if layer not in source.records:
        raise ValueError("the source run did not record this layer; capture it there too")
    calls = source.records[layer]
    if call >= len(calls):
        raise ValueError(
            f"the source run recorded {len(calls)} call(s) of this layer, but call {call} ran here"
        )
    src = first_tensor(calls[call].output)
    if src is None or tuple(src.shape) != shape:
        got = None if src is None else tuple(src.shape)
        raise ValueError(
            f"shape mismatch: the source run's output is {got}, this run's is {shape} (patch "
            "from the same layer of a run with the same input size and batch)"
        )
    return src


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
        if (channels := self.edit.channels) is not None and t.ndim > 0:
            size = t.shape[dim]
            if bad := [c for c in channels if c >= size]:
                raise self._fail(
                    f"channel {bad[0]} is out of range; the output {tuple(t.shape)} has {size} "
                    f"channels along dim {dim} (0..{size - 1})"
                )

    def _index(self, t: torch.Tensor, dim: int, complement: bool = False) -> torch.Tensor:
        key = ("index", t.shape[dim] if t.ndim else 0, t.device, complement)
        if (idx := self.cache.get(key)) is None:
            chosen = self._vec(t, dim).reshape(-1)
            idx = self.cache[key] = torch.nonzero(~chosen if complement else chosen).flatten()
        return idx

    def _vec(self, t: torch.Tensor, dim: int, value: Any = True) -> torch.Tensor:
        """``value`` on the edit's channels, shaped to broadcast on ``t``: a mask (True, else
        False) or per-channel factors (1 elsewhere, in ``t``'s dtype)."""
        mask = value is True
        key = ("vec", mask, value, t.ndim, dim, t.shape[dim] if t.ndim else 0, t.device, t.dtype)
        if (vec := self.cache.get(key)) is None:
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
        if (src := self.cache.get(key)) is None:
            assert self.edit.source is not None
            try:
                src = source_output(self.edit.source, self.name, index, tuple(t.shape))
            except ValueError as exc:
                raise self._fail(str(exc)) from None
            src = self.cache[key] = src.detach().to(device=t.device, dtype=t.dtype)
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
        if (t := first_tensor(output)) is None:
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
            if (call := applied.edit.call) is None or call == index:
                result = applied.apply(result, index)
        return None if result is output else result
