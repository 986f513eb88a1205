"""An edited run's two captures: the edited one and the unedited one of the same input.

The unedited capture is cached (:class:`~actviz.workspace.edits_board.BaselineCache`) while
model, input, layers and target stay, so toggling an edit costs one forward and backward.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from actviz.workspace.edits_board import BaselineCache, BaselineKey

if TYPE_CHECKING:  # pragma: no cover
    from actviz.core.capture import Capture

__all__ = ["capture_pair"]


def capture_pair(
    model: Any,
    inputs: Any,
    layers: Sequence[str],
    *,
    edits: Mapping[str, Sequence[Any]] | None,
    cache: BaselineCache | None,
    reuse: bool = True,
    target: Any = None,
    input_grads: bool = True,
    should_stop: Callable[[], bool] | None = None,
    max_bytes: int | None = None,
) -> tuple[Capture, Capture | None]:
    """``(capture, unedited)``: the capture with ``edits`` applied and the unedited one (None
    without edits; a cached one with ``reuse``). With ``target`` None the edited run is held to
    the unedited default class (:func:`~actviz.core.targets.fixed_default`).
    """
    from actviz.core.capture import capture

    def run(with_edits: Mapping[str, Sequence[Any]] | None, target: Any = target) -> Capture:
        return capture(
            model,
            inputs,
            list(layers),
            target=target,
            should_stop=should_stop,
            max_bytes=max_bytes,
            input_grads=input_grads,
            edits=dict(with_edits) if with_edits else None,
        )

    def unedited() -> Capture:
        cap = run(None)
        if cache is not None:
            cache.put(key, cap)
        return cap

    key = BaselineKey(model, inputs, tuple(layers), target, bool(input_grads))
    baseline = cache.get(key) if cache is not None else None
    if not edits:
        if baseline is None or not reuse:
            baseline = unedited()
        return baseline, None
    if target is None:
        # The default target of an edited run is held to the unedited run's top-1: an edit
        # that makes another class lead would otherwise change what the gradients are of.
        if baseline is None:
            baseline = unedited()
        from actviz.core.targets import fixed_default

        return run(edits, fixed_default(baseline.output)), baseline
    # The edited capture first: a bad edit fails before the unedited forward is spent.
    edited = run(edits)
    return edited, unedited() if baseline is None else baseline
