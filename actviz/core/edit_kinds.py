"""What-if edits: change a module's output during a capture (ablate, scale, keep, clamp, patch).

``actviz.capture(model, x, layers, edits={"layer1.0.conv1": ablate([3, 7])})`` reports what
the edited network does: later layers, records, output, target and gradients all see the edit.

An edit behaves as a plain ``register_forward_hook`` returning the modified output (the tests
compare to 1e-6): it runs before the recorder's hook, never writes into the module's output
(a module may return its input or a tensor saved for backward), and stays in the autograd
graph, so an ablated channel's gradient is exactly zero, not None. Channels are on
:func:`channel_dim`'s axis; a tuple/dict output has its first tensor edited. Errors are
``EditError`` (a ``ValueError``), raised before the forward where the module tells enough.

The edit record lives in :mod:`actviz.core.edit_spec`, the hooks in
:mod:`actviz.core.edit_hooks`, the channel axis in :mod:`actviz.core.channel_axis`; this module
makes and checks edits and re-exports those names.
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

    Activation patching: ``source`` is another run's capture that recorded this layer (with
    ``call=None``, call by call). Shapes must match.
    """
    return Edit("patch", channels=channels, source=source, call=call)


def concept(concepts: Any, indices: Any, scale: float = 0.0, *, call: int | None = None) -> Edit:
    """Remove (``scale=0``) or scale concepts of a dictionary in the output.

    The vectors ``x`` become ``x - (1 - scale) * sum_i z_i d_i`` over ``indices``
    (``z = concepts.encode(x)``). Use the layer the dictionary was trained on:
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
