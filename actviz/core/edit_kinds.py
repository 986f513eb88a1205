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

The record an edit is (:class:`Edit`, :class:`EditError`) lives in :mod:`actviz.core.edit_spec`,
the hooks that apply edits (:class:`EditHooks`) in :mod:`actviz.core.edit_hooks` and the rule
for the channel axis (:func:`channel_dim`) in :mod:`actviz.core.channel_axis`; this module
makes and checks edits, and every name above is importable from here.
"""

from __future__ import annotations

import difflib
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from torch import nn

from actviz.core.channel_axis import _known_channels, channel_dim
from actviz.core.edit_hooks import EditHooks
from actviz.core.edit_spec import KINDS, Edit, EditError
from actviz.core.records import Capture
from actviz.core.structures import first_tensor

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
