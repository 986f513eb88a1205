"""What a comparison runs off the GUI thread (no Qt): :func:`compare_job` on the capture worker
reads or captures run B and compares; :class:`CompareOutcome` holds no capture."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from torch import nn

from actviz.display.layer_views import magnitude_view
from actviz.display.mosaic import mosaic
from actviz.display.prepared import DisplaySpec, PreparedLayer

#: Where run B comes from.
PIN, INPUT, MODEL = "pin", "input", "model"


class LayersMismatch(ValueError):
    """Run B is not run A's architecture: it lacks its layers or has other modules there."""


@dataclass
class CompareRequest:
    """Everything a comparison needs, taken on the GUI thread. ``mode`` is :data:`PIN` (``cap_b``
    the pinned capture), :data:`INPUT` (``model`` on ``input_source``) or :data:`MODEL` (the
    second ``model`` on ``inputs``); ``max_bytes`` bounds run B's capture."""

    cap_a: Any
    mode: str
    spec: DisplaySpec
    cap_b: Any = None
    model: nn.Module | None = None
    input_source: str = ""
    input_loader: Callable[..., Any] | None = None
    loaded_model: Any = None
    input_as_list: bool = False
    inputs: Any = None
    categories: Sequence[str] | None = None
    target: int | None = None
    max_bytes: int | None = None


@dataclass(frozen=True)
class CompareOutcome:
    """A finished comparison: ``differences`` A - B per layer by depth, ``nbytes`` B's capture's."""

    comparison: Any
    differences: Mapping[str, PreparedLayer]
    predictions: Any
    input_description: str = ""
    nbytes: int = 0
    warnings: tuple[str, ...] = field(default=())

    @property
    def held_bytes(self) -> int:
        """Bytes the pictures of this comparison hold (views and mosaics; no capture)."""
        total = 0
        for layer in self.differences.values():
            for view in (layer.view, layer.grad_view):
                total += int(view.data.nbytes) if view is not None else 0
            total += sum(m.nbytes for m in (layer.mosaic, layer.grad_mosaic) if m is not None)
        return total


def layer_mismatch(cap_a: Any, model: nn.Module, layers: Sequence[str]) -> str:
    """Why ``model`` cannot be compared with run A layer by layer ("" when it can): each of
    ``layers`` must be in ``model`` as a module of the class run A recorded."""
    modules = dict(model.named_modules())
    missing = [n for n in layers if n not in modules]
    other = [
        f"{n} ({type(modules[n]).__name__}, not {cap_a[n].module_type})"
        for n in layers
        if n in modules and n in cap_a and type(modules[n]).__name__ != cap_a[n].module_type
    ]
    if not missing and not other:
        return ""

    def listed(items: list[str], most: int) -> str:
        return ", ".join(items[:most]) + (f" and {len(items) - most} more" if items[most:] else "")

    parts = [f"it has no {listed([repr(n) for n in missing], 5)}"] if missing else []
    parts += [f"other modules under {listed(other, 3)}"] if other else []
    return (
        f"Model B is not the architecture of run A: {'; '.join(parts)}. "
        "Open a checkpoint of the same architecture."
    )


def compare_job(
    request: CompareRequest,
    should_stop: Callable[[], bool] | None = None,
    progress: Callable[[str], None] | None = None,
) -> CompareOutcome:
    """Read or capture run B, compare it with run A, prepare the differences (worker thread);
    :class:`LayersMismatch` when B has none of A's layers."""
    from actviz.core.compare import compare
    from actviz.display.difference import prediction_change, prepare_difference

    report = progress or (lambda _msg: None)
    cap_a = request.cap_a
    layers = list(cap_a.names)
    description = ""
    if request.mode == PIN:
        cap_b = request.cap_b
    else:
        cap_b, description = _capture_b(request, layers, should_stop, report)
    common = [n for n in layers if n in cap_b]
    if not common:
        raise LayersMismatch(
            "Runs A and B have no layer in common: tick the same layers and run again."
        )
    report("comparing")
    # The layers shown, not every record (a text model's run records its embedding too).
    shown = [n for n in request.spec.layers if n in common]
    comparison = compare(cap_a, cap_b, layers=shown or None)
    if not comparison.layers:
        reasons = "; ".join(f"{n or '(model)'}: {why}" for n, _k, why in comparison.skipped[:3])
        raise LayersMismatch(f"No layer of runs A and B could be compared ({reasons}).")
    report("preparing the differences")
    differences = prepare_difference(cap_a, cap_b, request.spec, layers=shown)
    predictions = prediction_change(
        cap_a.output,
        cap_b.output,
        categories=request.categories,
        target=request.target,
        sample=request.spec.sample,
        tokenizer=getattr(request.spec, "tokenizer", None),  # a language model's tokens
    )
    return CompareOutcome(
        comparison=comparison,
        differences={n: with_magnitude(differences[n]) for n in shown if n in differences},
        predictions=predictions,
        input_description=description,
        nbytes=int(getattr(cap_b, "nbytes", 0)),
        warnings=tuple(getattr(cap_b, "warnings", ()) or ()),
    )


def with_magnitude(layer: PreparedLayer) -> PreparedLayer:
    """``layer`` (a difference) with ``|A - B|`` where a panel shows the gradient magnitude:
    where the runs differ, whatever the sign; it pages with the difference."""
    view, m = layer.view, layer.mosaic
    if view is None or m is None or view.kind != "maps":
        return layer
    grad_view = magnitude_view(view)
    grad_mosaic = mosaic(
        grad_view.data,
        normalize=m.normalize,
        first_channel=m.first_channel,
        max_channels=m.page_size,
    )
    return replace(layer, grad_view=grad_view, grad_mosaic=grad_mosaic)


def _capture_b(
    request: CompareRequest,
    layers: list[str],
    should_stop: Callable[[], bool] | None,
    report: Callable[[str], None],
) -> tuple[Any, str]:
    from actviz.core.capture import capture

    if (model := request.model) is None:
        raise ValueError("no model to run for B")
    description = ""
    if request.mode == INPUT:
        if request.input_loader is None:
            raise ValueError("no input loader")
        report(f"opening {request.input_source}")
        loaded = request.input_loader(
            request.input_source, model=model, loaded_model=request.loaded_model
        )
        inputs = loaded.value
        description = getattr(loaded, "description", "") or request.input_source
        if request.input_as_list:
            from actviz.core.input_copies import list_layout

            inputs = list_layout(inputs, True)
    else:
        if mismatch := layer_mismatch(request.cap_a, model, layers):
            raise LayersMismatch(mismatch)
        inputs = request.inputs
    report("running B (forward only)")
    # Only the values are compared: no backward, no layer inputs kept.
    cap_b = capture(
        model,
        inputs,
        layers,
        gradients=False,
        keep_inputs=False,
        max_bytes=request.max_bytes,
        should_stop=should_stop,
    )
    return cap_b, description
