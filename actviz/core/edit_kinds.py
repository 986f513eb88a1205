"""What-if edits: change a module's output during a capture (ablate, scale, keep, clamp, patch).

``actviz.capture(model, x, layers, edits={"layer1.0.conv1": ablate([3, 7])})`` runs the model
with the edits applied to those modules' outputs. What the edited network does is what the
capture reports: every later layer sees the edited output, and so do the records, the model
output, the target and every gradient.

How an edit is applied (each choice is what a plain ``register_forward_hook`` returning the
modified output does, which the tests compare against to 1e-6):

* An edit is a forward hook registered before the recorder's, so the record of the edited
  layer holds the *edited* output (what the network used) and its ``grad_output`` is the
  gradient with respect to the edited output.
* Edits never write into the module's output: each makes a new tensor (one pass over the
  output: ``index_fill``, a multiply by a per-channel factor, ``torch.where``). A module may
  return its input (``Identity``, an in-place ReLU) or a tensor autograd saved for backward,
  and writing into those would change what other paths see or break the backward pass.
  Index and factor tensors are made once per capture, not per call.
* The new tensor stays connected to the module's output in the autograd graph, so an ablated
  or patched channel gives earlier layers a gradient of exactly zero there (not None).
* Channels are where the module puts them (:func:`channel_dim`): dimension 1 of
  ``(N, C, ...)`` outputs, the last dimension of ``(N, T, D)`` sequences and of channels-last
  ``(N, H, W, C)`` outputs (a ``LayerNorm`` or ``Linear`` on such an input, timm's Swin
  blocks); 3-D outputs of channel-first modules (``Conv1d``, ``BatchNorm1d``, 1-D pooling)
  use dimension 1. ``Edit.dim`` overrides the choice. A 2-D ``(N, C)`` output has its
  channels in dimension 1.
* A module with a tuple/dict output (``MultiheadAttention``, an LSTM) has its first tensor
  edited (the one the window shows); a custom callable receives the whole output.
* A disabled edit (``enabled=False``, the window's on/off box) is skipped; ``Capture.edits``
  holds the edits that were applied.

Errors are ``EditError`` (a ``ValueError``): a bad layer name, a channel out of range where the
module tells its channel count (``out_channels``, ``num_features``, ``num_channels``) or a
patch source without the layer are found before the forward runs; anything that needs the
output's shape (a channel beyond another module's output, a patch of another shape) when the
module first runs, before that output is changed. The model is left as it was found either way.
"""

from __future__ import annotations

import difflib
import math
import numbers
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

import torch
from torch import nn

from actviz.core.records import Capture
from actviz.core.structures import first_tensor, replace_first

__all__ = [
    "KINDS",
    "Edit",
    "EditError",
    "EditHooks",
    "ablate",
    "channel_dim",
    "check_edits",
    "clamp",
    "concept",
    "custom",
    "enabled_edits",
    "keep",
    "normalize_edits",
    "patch",
    "scale",
]

#: Every kind of edit.
KINDS = ("ablate", "scale", "keep", "clamp", "patch", "custom", "concept")

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


def _ch_text(channels: tuple[int, ...] | None) -> str:
    if channels is None:
        return "all"
    shown = ", ".join(str(c) for c in channels[:6])
    more = f", ... (+{len(channels) - 6})" if len(channels) > 6 else ""
    return f"ch {shown}{more}"


def _num(x: float) -> str:
    return f"{x:g}"


@dataclass(frozen=True, eq=False)
class Edit:
    """One change to a module's output; make them with :func:`ablate`, :func:`scale`,
    :func:`keep`, :func:`clamp`, :func:`patch`, :func:`custom` or :func:`concept`.

    Attributes
    ----------
    kind
        ``"ablate"`` | ``"scale"`` | ``"keep"`` | ``"clamp"`` | ``"patch"`` | ``"custom"`` |
        ``"concept"``.
    channels
        The channels edited (sorted as given, no duplicates); None: every channel. For
        ``concept``: the concepts (indices into the dictionary).
    factor
        ``scale``'s factor; ``concept``'s scale of the concepts' contribution (0: removed).
    min, max
        ``clamp``'s bounds (either may be None).
    source
        ``patch``'s source run: the same layer's output (same call) in that capture.
    fn
        ``custom``'s callable ``f(output) -> output`` (None back: output unchanged).
    call
        None: every call of the module; ``k``: only its ``k``-th call (0 = first).
    enabled
        The window's on/off box: a capture skips disabled edits.
    dim
        The channel dimension; None: 1 for ``(N, C, ...)``, the last for ``(N, T, D)``
        (see :func:`channel_dim`).
    concepts
        ``concept``'s dictionary (:class:`actviz.analysis.concepts.Concepts`, or anything with
        ``d_in``, ``d_sae`` and ``contribution(x, indices)``).

    Equality compares every field, ``source``, ``fn`` and ``concepts`` by identity.
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
                value = getattr(self, bound)
                if value is not None:
                    if math.isnan(float(value)):
                        raise EditError(f"clamp {bound} is NaN")
                    object.__setattr__(self, bound, float(value))
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
            _check_concepts(self)

    def _key(self) -> tuple:
        return (
            self.kind,
            self.channels,
            self.factor,
            self.min,
            self.max,
            id(self.source),
            id(self.fn),
            self.call,
            self.enabled,
            self.dim,
            id(self.concepts),
        )

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Edit):
            return NotImplemented
        return self._key() == other._key()

    def __hash__(self) -> int:
        return hash(self._key())

    def describe(self) -> str:
        """Short text for the Edits panel: ``"ablate ch 3, 7"``, ``"scale ch 5 x0.5"``."""
        if self.kind == "ablate":
            text = f"ablate {_ch_text(self.channels)}"
        elif self.kind == "keep":
            text = f"keep {_ch_text(self.channels)}"
        elif self.kind == "scale":
            text = f"scale {_ch_text(self.channels)} x{_num(self.factor)}"  # type: ignore[arg-type]
        elif self.kind == "clamp":
            lo = "-inf" if self.min is None else _num(self.min)
            hi = "inf" if self.max is None else _num(self.max)
            text = f"clamp {_ch_text(self.channels)} to [{lo}, {hi}]"
        elif self.kind == "patch":
            text = f"patch {_ch_text(self.channels)} from another run"
        elif self.kind == "concept":
            what = _ch_text(self.channels).replace("ch ", "concept ", 1)
            text = f"remove {what}" if self.factor == 0 else f"scale {what} x{_num(self.factor)}"
        else:
            text = f"custom {getattr(self.fn, '__name__', type(self.fn).__name__)}"
        if self.call is not None:
            text += f" (call {self.call})"
        if not self.enabled:
            text += " (off)"
        return text

    def __repr__(self) -> str:
        return f"Edit({self.describe()!r})"


def ablate(channels: Any = None, *, call: int | None = None) -> Edit:
    """Set ``channels`` (None: all) of the output to zero.

    Parameters
    ----------
    channels
        An int or a sequence of ints; None: the whole output.
    call
        None: every call of the module; ``k``: only its ``k``-th call.
    """
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
    """Replace the output (or ``channels`` of it) by the same layer's output in ``source``.

    Activation patching: ``source`` is the capture of another run (another input, another
    checkpoint of the same architecture) that recorded this layer; with ``call=None`` each
    call takes the source's record of the same call. Shapes must match.
    """
    return Edit("patch", channels=channels, source=source, call=call)


def concept(concepts: Any, indices: Any, scale: float = 0.0, *, call: int | None = None) -> Edit:
    """Remove (``scale=0``) or scale concepts of a dictionary in the output.

    The output's vectors ``x`` (along the channel axis) become ``x - (1 - scale) *
    sum_i z_i d_i`` over the concepts ``i`` of ``indices``, where ``z = concepts.encode(x)``
    and ``d_i`` is concept ``i``'s decoder direction: what the rest of the network sees
    without (or with a scaled) concept. Give it the layer the dictionary was trained on:
    ``edits={"layer3": concept(c, [5])}``.
    """
    return Edit("concept", channels=indices, factor=scale, concepts=concepts, call=call)


def _check_concepts(edit: Edit) -> None:
    c = edit.concepts
    if c is None or not callable(getattr(c, "contribution", None)):
        raise EditError(f"a concept edit needs a dictionary (actviz.concepts.Concepts), not {c!r}")
    if not edit.channels:
        raise EditError("a concept edit needs the concepts to change")
    bad = [i for i in edit.channels if i >= int(c.d_sae)]
    if bad:
        raise EditError(
            f"concept {bad[0]} is out of range; the dictionary has {c.d_sae} concepts "
            f"(0..{int(c.d_sae) - 1})"
        )
    factor = 0.0 if edit.factor is None else float(edit.factor)
    if not math.isfinite(factor):
        raise EditError(f"a concept edit needs a finite scale, not {edit.factor!r}")
    object.__setattr__(edit, "factor", factor)


def custom(fn: Callable[[Any], Any], *, call: int | None = None) -> Edit:
    """Any change: ``fn(output)`` returns the new output (None: the output unchanged)."""
    return Edit("custom", fn=fn, call=call)


def normalize_edits(edits: Any) -> dict[str, tuple[Edit, ...]]:
    """``{layer: Edit | callable | [Edit | callable, ...]}`` as ``{layer: (Edit, ...)}``.

    None (or an empty mapping) gives ``{}``. Callables become :func:`custom` edits. Disabled
    edits are kept (see :func:`enabled_edits`).

    Raises
    ------
    EditError
        For anything else.
    """
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
        converted: list[Edit] = []
        for item in items:
            if isinstance(item, Edit):
                converted.append(item)
            elif callable(item):
                converted.append(custom(item))
            else:
                raise EditError(
                    f"edit for layer {name!r} must be an Edit (actviz.edits.ablate(...)) or a "
                    f"callable f(output) -> output, not {type(item).__name__}"
                )
        if converted:
            out[name] = tuple(converted)
    return out


def enabled_edits(edits: Mapping[str, tuple[Edit, ...]]) -> dict[str, tuple[Edit, ...]]:
    """``edits`` without disabled edits, and without layers left with none."""
    out = {}
    for name, items in edits.items():
        on = tuple(e for e in items if e.enabled)
        if on:
            out[name] = on
    return out


def channel_dim(module: nn.Module | None, output: torch.Tensor | int) -> int:
    """The dimension holding the feature channels of ``module``'s output.

    Parameters
    ----------
    module
        The module that produced the output (None: decided from the shape alone).
    output
        The output tensor itself (best: its shape settles what the module suggests), or only
        its number of dimensions (the rule below without the shape checks).

    Returns
    -------
    int
        A non-negative dimension: ``1`` for channel-first ``(N, C, ...)`` outputs, ``ndim - 1``
        for channels-last ones; ``0`` for outputs with fewer than 2 dimensions.

    Notes
    -----
    The rule, first match wins:

    1. Channel-first modules (convolutions, BatchNorm/InstanceNorm, GroupNorm, 1-D pooling,
       ``Upsample``): dimension 1.
    2. With the output tensor, for a 3-D or larger output, the module tells its channel count
       and where it lies: a ``Linear`` (``out_features``) or a ``LayerNorm`` / ``RMSNorm``
       over the last dimension on a 4-D ``(N, H, W, C)`` input puts channels last; a module
       with ``output_fmt`` ``"NHWC"`` (timm's patch embeddings) too; otherwise the first of
       ``out_dim``, ``dim``, ``embed_dim``, ``num_features``, ``out_channels``,
       ``out_features``, ``hidden_size`` (timm's Swin blocks, stages and patch merging, most
       transformer blocks) or else the channel count of the module's last layer that has one
       (a block ending in a ``Linear`` or a convolution) which matches exactly one of
       dimension 1 and the last dimension decides.
    3. Otherwise the shape: the last dimension of a 3-D ``(N, T, D)`` sequence, dimension 1 of
       anything else (``(N, C)``, ``(N, C, H, W)``).

    Edits take ``Edit.dim`` to override this choice; effects, scans and the display call this
    function for their channel axis.
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


def check_edits(modules: Mapping[str, nn.Module], edits: Mapping[str, tuple[Edit, ...]]) -> None:
    """Everything about ``edits`` that can be checked before the forward runs.

    Raises
    ------
    EditError
        A layer not in ``modules`` (with close matches), a channel at or beyond a count the
        module's attributes give, a patch source without the layer (or the call) edited.
    """
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
            if (
                count is not None
                and edit.channels
                and edit.dim in (None, 1)
                and (edit.kind != "concept")
            ):
                bad = [c for c in edit.channels if c >= count]
                if bad:
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


# --------------------------------------------------------------------------------------------
# applying edits during the forward pass
# --------------------------------------------------------------------------------------------


class _Applied:
    """One edit on one module, with its index/factor tensors made once per capture."""

    def __init__(self, name: str, module: nn.Module, edit: Edit) -> None:
        self.name = name
        self.module = module
        self.edit = edit
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
            size = t.shape[dim] if t.ndim else 1
            chosen = torch.zeros(size, dtype=torch.bool)
            chosen[list(self.edit.channels or range(size))] = True
            if complement:
                chosen = ~chosen
            idx = torch.nonzero(chosen).flatten().to(t.device)
            self.cache[key] = idx
        return idx

    def _shaped(self, vec: torch.Tensor, t: torch.Tensor, dim: int) -> torch.Tensor:
        shape = [1] * t.ndim
        if t.ndim:
            shape[dim] = -1
        return vec.view(shape)

    def _mask(self, t: torch.Tensor, dim: int) -> torch.Tensor:
        key = ("mask", t.ndim, dim, t.shape[dim] if t.ndim else 0, t.device)
        mask = self.cache.get(key)
        if mask is None:
            size = t.shape[dim] if t.ndim else 1
            flat = torch.zeros(size, dtype=torch.bool)
            flat[list(self.edit.channels or range(size))] = True
            mask = self._shaped(flat.to(t.device), t, dim)
            self.cache[key] = mask
        return mask

    def _factor(self, t: torch.Tensor, dim: int) -> torch.Tensor:
        key = ("factor", t.ndim, dim, t.shape[dim], t.device, t.dtype)
        vec = self.cache.get(key)
        if vec is None:
            flat = torch.ones(t.shape[dim], dtype=t.dtype)
            flat[list(self.edit.channels)] = self.edit.factor  # type: ignore[index]
            vec = self._shaped(flat.to(t.device), t, dim)
            self.cache[key] = vec
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
        if edit.kind == "patch":
            src = self._source(t, index)
        if edit.kind == "ablate":
            new = t.index_fill(dim, self._index(t, dim), 0) if t.ndim else torch.zeros_like(t)
        elif edit.kind == "keep":
            new = t.index_fill(dim, self._index(t, dim, complement=True), 0)
        elif edit.kind == "scale":
            if edit.channels is None:
                new = t * edit.factor
            else:
                new = t * self._factor(t, dim)
        elif edit.kind == "clamp":
            clamped = t.clamp(edit.min, edit.max)
            new = clamped if edit.channels is None else torch.where(self._mask(t, dim), clamped, t)
        else:  # patch: connected to t, so earlier layers get an exact zero gradient
            new = torch.where(self._mask(t, dim), src, t)
        if not t.is_floating_point() and edit.kind != "ablate":
            new = new.to(t.dtype)
        return replace_first(output, new)


class EditHooks:
    """The forward hooks of one capture attempt: one per edited module, counting its calls.

    Registered before the recorder's hooks, so the recorder sees (and records) the edited
    output. Made afresh for every attempt, so call counts start at 0.
    """

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
