"""What-if edits: change a module's output during a capture (ablate, scale, keep, clamp, patch).

An edit is a forward hook returning a new output on :func:`channel_dim`'s axis: never in place,
kept in the autograd graph (an ablated channel's gradient is zero, not None)."""

from __future__ import annotations

import difflib
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from torch import nn

from actviz.core.edit_hooks import EditHooks as EditHooks
from actviz.core.edit_hooks import _known_channels
from actviz.core.edit_hooks import channel_dim as channel_dim
from actviz.core.edit_spec import KINDS as KINDS
from actviz.core.edit_spec import Edit, EditError
from actviz.core.records import Capture
from actviz.core.structures import first_tensor


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
        converted = [item if isinstance(item, Edit) else custom(item) for item in items]
        if converted:
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
                bad = [c for c in edit.channels or () if c >= count]
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
