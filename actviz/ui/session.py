"""The explorer's state, without widgets: model, input, ticked layers, target, view settings.

The window is a thin layer over one :class:`Session`: widgets change the session, the session
announces changes through plain-Python :class:`Event` objects (like napari's components), and
:func:`run_job` turns a :class:`RunRequest` snapshot into a :class:`RunResult` holding only the
numpy arrays the panels display. ``run_job`` is what the worker thread executes.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import torch
from torch import nn

from actviz.core.structures import first_tensor
from actviz.ui.memory import default_budget
from actviz.ui.pins import PinBoard

if TYPE_CHECKING:  # pragma: no cover
    from actviz.core.capture import Capture
    from actviz.core.tree import ModuleTree
    from actviz.core.views import LayerView, Mosaic

log = logging.getLogger(__name__)

#: At most this many channels go into one mosaic (the rest are summarised by the stats).
MAX_MOSAIC_CHANNELS = 256
#: Tiles at most this many pixels on a side are laid out without padding: one NaN pixel between
#: 2x2 tiles (ResNet's layer4 on a small input) turns the mosaic into speckle.
TINY_TILE_PX = 3
#: Default ticks are capped at this many layers so the first run stays quick to look at.
DEFAULT_TICK_LIMIT = 8
#: Generic containers: their outputs are their last child's output, so they are walked through.
_CONTAINERS = {"Sequential", "ModuleList", "ModuleDict"}
AUTO_TARGET_TEXT = "auto (top-1)"


class Event:
    """A minimal callback list: ``connect(fn)``, ``disconnect(fn)``, ``emit(*args)``."""

    def __init__(self) -> None:
        self._callbacks: list[Callable[..., Any]] = []

    def connect(self, callback: Callable[..., Any]) -> None:
        if callback not in self._callbacks:
            self._callbacks.append(callback)

    def disconnect(self, callback: Callable[..., Any] | None = None) -> None:
        if callback is None:
            self._callbacks.clear()
        elif callback in self._callbacks:
            self._callbacks.remove(callback)

    def emit(self, *args: Any) -> None:
        for callback in list(self._callbacks):
            callback(*args)


# --------------------------------------------------------------------------------------------
# Run request and prepared result (numpy only past this point)
# --------------------------------------------------------------------------------------------


@dataclass
class RunRequest:
    """A snapshot of everything a run needs, taken on the GUI thread.

    Attributes
    ----------
    layers
        Layers with a panel (the ticked ones), in module-tree order.
    extra_layers
        Layers captured only for Grad-CAM (not shown as panels).
    channel_pages
        ``{layer: first channel}`` of the mosaic page shown, for layers with more channels
        than one mosaic holds (:data:`MAX_MOSAIC_CHANNELS`); absent layers show page 0.
    """

    model: nn.Module
    inputs: Any
    layers: list[str]
    target: int | None = None
    normalize: str = "channel"
    extra_layers: list[str] = field(default_factory=list)
    image: np.ndarray | None = None
    categories: list[str] | None = None
    gradcam_layer: str | None = None
    max_bytes: int | None = None
    channel_pages: dict[str, int] = field(default_factory=dict)

    def first_channel(self, name: str) -> int:
        """The first channel of layer ``name``'s mosaic page (0 unless the user paged)."""
        return self.channel_pages.get(name, 0)


@dataclass
class PreparedLayer:
    """Everything one layer panel, its stats row and its histogram display."""

    name: str
    module_type: str
    shape: tuple[int, ...] | None
    calls: int
    view: LayerView | None
    mosaic: Mosaic | None
    grad_view: LayerView | None
    grad_mosaic: Mosaic | None
    stats: dict
    hist: tuple[np.ndarray, np.ndarray] | None


@dataclass
class RunResult:
    """The output of :func:`run_job`: numpy arrays for the panels plus the raw capture.

    ``capture`` stays here only for export and for re-preparing mosaics with another
    normalisation; widgets never receive it.
    """

    layers: dict[str, PreparedLayer]
    shown: list[str]
    predictions: list[tuple[int, str, float]]
    target_text: str
    target_index: int | None
    image: np.ndarray | None
    saliency: np.ndarray | None
    saliency_message: str
    grad_cams: dict[str, np.ndarray]
    gradcam_default: str | None
    grad_norm_names: list[str]
    grad_norms: np.ndarray
    output_shapes: dict[str, tuple[int, ...]]
    warnings: list[str]
    errors: list[str]
    elapsed_s: float
    nbytes: int
    capture: Capture | None = None
    tree: ModuleTree | None = None

    def stats_rows(self) -> list[dict]:
        """Rows for the statistics table, in execution order."""
        return [dict(layer.stats, name=name) for name, layer in self.layers.items()]


def run_job(
    request: RunRequest,
    should_stop: Callable[[], bool] | None = None,
    progress: Callable[[str], None] | None = None,
) -> RunResult:
    """Capture ``request.model`` on ``request.inputs`` and prepare every panel's arrays.

    Runs on the worker thread. Raises the model's own exceptions, ``CaptureCancelled`` when
    ``should_stop()`` turns True, and ``ValueError`` for bad layer names or targets.
    """
    from actviz.core.capture import capture

    report = progress or (lambda _msg: None)
    report("running forward and backward")
    layers = list(dict.fromkeys([*request.layers, *request.extra_layers]))
    cap = capture(
        request.model,
        request.inputs,
        layers,
        target=request.target,
        should_stop=should_stop,
        max_bytes=request.max_bytes,
    )
    return prepare_result(cap, request, should_stop=should_stop, progress=progress)


def prepare_result(
    cap: Capture,
    request: RunRequest,
    *,
    should_stop: Callable[[], bool] | None = None,
    progress: Callable[[str], None] | None = None,
) -> RunResult:
    """Turn a capture into panel-ready numpy arrays (mosaics, views, stats, saliency, ...).

    Parameters
    ----------
    cap
        The capture to display.
    request
        Which layers get panels, the normalisation, the input image and the categories.
    should_stop
        Polled between layers; True raises ``CaptureCancelled``.
    progress
        Receives short status messages.
    """
    from actviz.core import views
    from actviz.core.capture import CaptureCancelled
    from actviz.core.tree import module_tree

    report = progress or (lambda _msg: None)

    def check() -> None:
        if should_stop is not None and should_stop():
            raise CaptureCancelled("cancelled while preparing the views")

    shown = [n for n in request.layers if n in cap]
    layers: dict[str, PreparedLayer] = {}
    order = [n for n in cap.names if n in shown]
    for i, name in enumerate(order):
        check()
        report(f"preparing {name} ({i + 1}/{len(order)})")
        layers[name] = prepare_layer(cap, name, request.normalize, request.first_channel(name))
    check()
    image = display_image(cap.inputs, request.image)
    saliency_map, saliency_message = saliency_at_image(cap.input_grads, image)
    report("Grad-CAM")
    grad_cams: dict[str, np.ndarray] = {}
    size = image.shape[:2] if image is not None else None
    for name in gradcam_candidates(cap, image):
        check()
        rec = cap[name]
        try:
            grad_cams[name] = views.grad_cam(rec.tensor, rec.grad, size=size)
        except (ValueError, RuntimeError) as exc:  # a layer Grad-CAM cannot use
            log.debug("no Grad-CAM for %s: %s", name, exc)
    return assemble_result(
        cap,
        request,
        layers=layers,
        order=order,
        image=image,
        saliency=saliency_map,
        saliency_message=saliency_message,
        grad_cams=grad_cams,
        tree=module_tree(request.model, cap),
    )


def gradcam_candidates(cap: Capture, image: np.ndarray | None) -> list[str]:
    """Layers Grad-CAM can use: a spatial ``(N, C, H, W)`` output with a gradient of the same
    shape, for an image-like input (none otherwise)."""
    if image is None:
        return []
    out = []
    for name in cap.names:
        act, grad = cap[name].tensor, cap[name].grad
        if act is None or grad is None or act.dim() != 4 or act.shape != grad.shape:
            continue
        if act.shape[2] >= 1 and act.shape[3] >= 1:
            out.append(name)
    return out


def output_shapes(cap: Capture) -> dict[str, tuple[int, ...]]:
    """Output shape of every captured layer (the tree's shape column, memory estimates)."""
    return {
        name: tuple(cap[name].tensor.shape) for name in cap.names if cap[name].tensor is not None
    }


def default_gradcam_layer(
    requested: str | None, candidates: Iterable[str], order: Sequence[str]
) -> str | None:
    """The Grad-CAM layer shown first: the requested one if it has a map, else the deepest
    layer with a panel that has one, else the deepest with one."""
    names = list(candidates)
    if requested in names:
        return requested
    if not names:
        return None
    spatial_shown = [n for n in order if n in names]
    return (spatial_shown or names)[-1]


def assemble_result(
    cap: Capture,
    request: RunRequest,
    *,
    layers: dict[str, PreparedLayer],
    order: list[str],
    image: np.ndarray | None,
    saliency: np.ndarray | None,
    saliency_message: str,
    grad_cams: dict[str, np.ndarray],
    tree: ModuleTree | None,
    shapes: dict[str, tuple[int, ...]] | None = None,
    gradcam_default: str | None = None,
) -> RunResult:
    """The :class:`RunResult` of prepared layers and pictures: what the window path
    (:func:`prepare_result`) and live mode (``live_prepare.prepare_live``) share.

    Adds what every result needs from the capture (predictions, target text, the NaN/Inf
    warning of the output, gradient norms, output shapes) and the mosaics' colour-table
    indices. ``gradcam_default`` None picks :func:`default_gradcam_layer`.
    """
    errors: list[str] = []
    out = first_tensor(cap.output)
    if out is not None and out.is_floating_point() and not bool(torch.isfinite(out).all()):
        bad = int((~torch.isfinite(out)).sum())
        errors.append(
            f"The model output contains {bad} NaN/Inf value(s) of {out.numel()}: predictions and "
            "gradients are not meaningful (see the statistics table for where they start)."
        )
    target_text = cap.target_description
    if cap.target_index is not None and request.categories:
        if 0 <= cap.target_index < len(request.categories):
            target_text += f": {request.categories[cap.target_index]}"
    if gradcam_default is None:
        gradcam_default = default_gradcam_layer(request.gradcam_layer, grad_cams, order)
    norms = [layers[n].stats.get("grad_norm") for n in order]
    attach_indices(layers.values())
    return RunResult(
        layers=layers,
        shown=order,
        predictions=top_predictions(out, request.categories),
        target_text=target_text,
        target_index=cap.target_index,
        image=image,
        saliency=saliency,
        saliency_message=saliency_message,
        grad_cams=grad_cams,
        gradcam_default=gradcam_default,
        grad_norm_names=list(order),
        grad_norms=np.asarray(
            [float("nan") if v is None else float(v) for v in norms], dtype=np.float64
        ),
        output_shapes=shapes if shapes is not None else output_shapes(cap),
        warnings=list(cap.warnings),
        errors=errors,
        elapsed_s=cap.elapsed_s,
        nbytes=cap.nbytes,
        capture=cap,
        tree=tree,
    )


def attach_indices(layers: Iterable[PreparedLayer]) -> None:
    """Give every mosaic of ``layers`` its colour-table indices (:attr:`Mosaic.indices`).

    Run on the worker: converting a mosaic costs ~1 ms per 500k pixels, GUI time otherwise.
    Mosaics that already carry indices (reused from an earlier frame) are left alone.
    """
    from actviz.core.index_images import to_indices

    for layer in layers:
        for m in (layer.mosaic, layer.grad_mosaic):
            if m is not None and m.indices is None:
                m.indices = to_indices(m.image, m.levels)


def mosaic_pad(shape: Sequence[int]) -> int:
    """Padding between the tiles of a ``(C, H, W)`` map: 0 for tiny tiles, else 1 pixel."""
    h, w = (int(shape[-2]), int(shape[-1])) if len(shape) >= 2 else (1, 1)
    return 0 if max(h, w) <= TINY_TILE_PX else 1


def prepare_layer(
    cap: Capture, name: str, normalize: str = "channel", first_channel: int = 0
) -> PreparedLayer:
    """Views, mosaics, stats and histogram of one captured layer.

    ``first_channel`` picks the page of a layer with more than :data:`MAX_MOSAIC_CHANNELS`
    channels; the views always hold every channel.
    """
    from actviz.core import views

    rec = cap[name]
    tensor = rec.tensor
    calls = len(cap.calls(name))
    view = mosaic = grad_view = grad_mosaic = None
    hist = None
    stats: dict = {}
    if tensor is not None:
        stats = dict(views.layer_stats(rec))
        if not tensor.is_floating_point():
            tensor = tensor.float()
        view = views.layer_view(tensor)
        if view.kind == "maps":
            mosaic = views.mosaic(
                view.data,
                normalize=normalize,
                max_channels=MAX_MOSAIC_CHANNELS,
                pad=mosaic_pad(view.data.shape),
                first_channel=first_channel,
            )
        hist = views.histogram(tensor)
        grad = rec.grad
        if grad is not None and grad.shape == tensor.shape:
            grad_view = views.layer_view(views.magnitude(grad))
            if grad_view.kind == "maps":
                grad_mosaic = views.mosaic(
                    grad_view.data,
                    normalize=normalize,
                    max_channels=MAX_MOSAIC_CHANNELS,
                    pad=mosaic_pad(grad_view.data.shape),
                    first_channel=first_channel,
                )
    stats.setdefault("shape", tuple(tensor.shape) if tensor is not None else None)
    return PreparedLayer(
        name=name,
        module_type=rec.module_type,
        shape=tuple(tensor.shape) if tensor is not None else None,
        calls=calls,
        view=view,
        mosaic=mosaic,
        grad_view=grad_view,
        grad_mosaic=grad_mosaic,
        stats=stats,
        hist=hist,
    )


def top_predictions(
    output: torch.Tensor | None, categories: Sequence[str] | None, k: int = 5
) -> list[tuple[int, str, float]]:
    """Top-``k`` ``(index, label, probability)`` of the first row of a classifier output.

    Like :func:`actviz.core.views.top_k`, with NaN logits ranked last so a broken output still
    gives a readable (all-zero) list instead of NaN probabilities.
    """
    from actviz.core import views

    if output is None or not output.is_floating_point():
        return []
    if not bool(torch.isfinite(output).all()):
        # views.top_k works in float32: stay inside its range so the softmax stays finite.
        big = torch.finfo(torch.float32).max
        output = torch.nan_to_num(output.float(), nan=-big, posinf=big, neginf=-big)
    return views.top_k(output, k=k, categories=list(categories) if categories else None)


def display_image(inputs: Any, image: np.ndarray | None) -> np.ndarray | None:
    """The RGB image overlays are drawn on: the loaded image when it matches the input tensor's
    size, else one rebuilt from an image-like input tensor (min-max scaled), else None."""
    x = first_tensor(inputs)
    if x is None or not x.is_floating_point():
        return image
    if x.dim() == 4:
        x = x[0]
    if x.dim() != 3 or x.shape[0] not in (1, 3):
        return image if x.dim() != 3 else None
    h, w = int(x.shape[1]), int(x.shape[2])
    if image is not None and image.shape[:2] == (h, w):
        return np.ascontiguousarray(image)
    arr = x.detach().float()
    lo, hi = float(arr.min()), float(arr.max())
    arr = (arr - lo) / (hi - lo) if hi > lo else torch.zeros_like(arr)
    arr = (arr.clamp(0, 1) * 255).round().to(torch.uint8)
    if arr.shape[0] == 1:
        arr = arr.expand(3, h, w)
    return np.ascontiguousarray(arr.permute(1, 2, 0).numpy())


def saliency_at_image(input_grads: Any, image: np.ndarray | None) -> tuple[np.ndarray | None, str]:
    """The saliency map resized to the picture shown, or None and why (as the window words it).

    Parameters
    ----------
    input_grads
        The capture's input gradients (the first tensor is used).
    image
        The input as displayed (:func:`display_image`); None for inputs that are not images.
    """
    from actviz.core import views

    grad = first_tensor(input_grads)
    if grad is None:
        return None, "No input gradient: the input is not a float tensor or nothing depends on it."
    if grad.dim() not in (3, 4) or image is None:
        return None, f"Saliency needs an image-like input; this one is {tuple(grad.shape)}."
    heat = views.saliency(grad)
    if heat.shape != image.shape[:2]:
        resized = torch.nn.functional.interpolate(
            torch.from_numpy(np.ascontiguousarray(heat))[None, None],
            size=image.shape[:2],
            mode="bilinear",
            align_corners=False,
        )
        heat = np.ascontiguousarray(resized[0, 0].numpy(), dtype=np.float32)
    return heat, ""


# --------------------------------------------------------------------------------------------
# Targets and default layers
# --------------------------------------------------------------------------------------------


def parse_target(text: str, categories: Sequence[str] | None = None) -> int | None:
    """Turn the target selector's text into a class index (None = auto top-1).

    Accepts ``""``/``"auto..."`` (None), an integer (``"207"``), an entry of the selector list
    (``"207: golden retriever"``) or a class name searched in ``categories`` (exact match first,
    case-insensitive, then the only name containing the text).

    Raises
    ------
    ValueError
        Unknown or ambiguous class name, or a name given for a model without categories.
    """
    text = text.strip()
    if not text or text.lower().startswith("auto"):
        return None
    match = re.match(r"^(-?\d+)\s*(?::.*)?$", text)
    if match:
        return int(match.group(1))
    if not categories:
        raise ValueError(
            f"{text!r} is not a class index, and this model has no class names to search"
        )
    lowered = [c.lower() for c in categories]
    key = text.lower()
    if key in lowered:
        return lowered.index(key)
    hits = [i for i, c in enumerate(lowered) if key in c]
    if len(hits) == 1:
        return hits[0]
    if not hits:
        raise ValueError(f"no class named {text!r} in this model's {len(categories)} categories")
    shown = ", ".join(f"{i}: {categories[i]}" for i in hits[:5])
    raise ValueError(f"{text!r} matches {len(hits)} classes ({shown}...); be more specific")


def target_choices(categories: Sequence[str] | None) -> list[str]:
    """Entries of the target selector list: auto first, then ``"index: name"`` per category."""
    return [AUTO_TARGET_TEXT, *(f"{i}: {name}" for i, name in enumerate(categories or []))]


def default_layers(tree: ModuleTree, limit: int = DEFAULT_TICK_LIMIT) -> list[str]:
    """A few interesting layers to tick on a fresh model: each block's output, plus the head.

    Blocks are the non-container modules with children found by walking through
    ``Sequential``/``ModuleList``/``ModuleDict`` (ResNet's ``BasicBlock``, the demo's
    ``ConvBlock``). Models made only of leaves get their leaves (convolutions first when
    there are many). At most ``limit`` names, spread evenly, the last leaf always kept.
    """
    blocks: list[str] = []

    def walk(name: str) -> None:
        for child in tree[name].children:
            node = tree[child]
            if node.is_leaf:
                continue
            if node.type_name in _CONTAINERS:
                walk(child)
            else:
                blocks.append(child)

    walk("")
    leaves = tree.leaves()
    if not leaves or leaves == [""]:
        return [""] if "" in tree else []
    head = leaves[-1]
    if len(blocks) > limit - 1:
        # Too many blocks (ResNet's 8 BasicBlocks): show the stages that group them instead.
        parents = list(dict.fromkeys(tree[b].parent or "" for b in blocks))
        if len(parents) >= 2 and "" not in parents:
            blocks = parents
    if len(blocks) >= 2:
        picks = blocks
    else:
        picks = [n for n in leaves if "Conv" in tree[n].type_name] if len(leaves) > limit else []
        picks = picks or leaves
    picks = [p for p in picks if p != head]
    chosen = _spread(picks, limit - 1) + [head]
    # Keep tree order so panels appear top to bottom as the data flows.
    order = {node.name: i for i, node in enumerate(tree.nodes)}
    return sorted(dict.fromkeys(chosen), key=order.__getitem__)


def _spread(items: list[str], n: int) -> list[str]:
    if n <= 0:
        return []
    if len(items) <= n:
        return list(items)
    step = (len(items) - 1) / max(n - 1, 1)
    return [items[round(i * step)] for i in range(n)]


# --------------------------------------------------------------------------------------------
# Session
# --------------------------------------------------------------------------------------------


@dataclass
class InputState:
    """The current input: what goes into the model and how to show it."""

    value: Any
    source: str
    kind: str
    image: np.ndarray | None
    description: str


class Session:
    """Pure-Python explorer state shared by the window, the tree model and the worker.

    Events (plain callbacks, emitted on the thread that changes the session, i.e. the GUI):
    ``model_changed()``, ``input_changed()``, ``ticks_changed(names: set[str])``,
    ``target_changed()``, ``result_changed()``, ``pins_changed()``.
    """

    def __init__(self) -> None:
        self.model: nn.Module | None = None
        self.model_name = ""
        self.model_source = ""
        self.model_kind = ""
        self.categories: list[str] | None = None
        self.transforms: Any = None
        self.input_size: Any = None
        self.model_warnings: list[str] = []
        self.loaded_model: Any = None
        self.tree: ModuleTree | None = None
        self.input: InputState | None = None
        self.target: int | None = None
        self.normalize = "channel"
        # Bytes one capture may hold; a bigger selection is refused with a message (the live
        # dock edits it; ACTVIZ_MEMORY_BUDGET sets the default).
        self.memory_budget: int | None = default_budget()
        self.gradcam_layer: str | None = None
        # {layer: first channel} of the mosaic page the user turned to (layers with more
        # channels than one mosaic shows); kept across runs, cleared with the model.
        self.channel_pages: dict[str, int] = {}
        self.result: RunResult | None = None
        self._ticked: set[str] = set()
        self.model_changed = Event()
        self.input_changed = Event()
        self.ticks_changed = Event()
        self.target_changed = Event()
        self.result_changed = Event()
        self.pins_changed = Event()
        # Results the user keeps beside the latest one (see actviz.ui.pins).
        self.pins = PinBoard(self.pins_changed.emit)

    # -- model -------------------------------------------------------------------------------
    def set_model(
        self,
        model: nn.Module,
        *,
        name: str | None = None,
        source: str = "",
        kind: str = "module",
        categories: Sequence[str] | None = None,
        transforms: Any = None,
        input_size: Any = None,
        warnings: Iterable[str] = (),
        ticks: Iterable[str] | None = None,
        gradcam_layer: str | None = None,
        loaded: Any = None,
    ) -> None:
        """Make ``model`` current; ticks default to :func:`default_layers`."""
        from actviz.core.tree import module_tree

        self.model = model
        self.model_name = name or type(model).__name__
        self.model_source = source
        self.model_kind = kind
        self.categories = list(categories) if categories else None
        self.transforms = transforms
        self.input_size = input_size
        self.model_warnings = list(warnings)
        self.loaded_model = loaded
        self.tree = module_tree(model)
        self.result = None
        self.pins.clear()  # captures of another model: their panels would not match the tree
        self.target = None
        self.gradcam_layer = gradcam_layer if gradcam_layer in self.tree else None
        self.channel_pages = {}
        if ticks is None:
            self._ticked = set(default_layers(self.tree))
        else:
            ticks = list(ticks)
            unknown = [t for t in ticks if t not in self.tree]
            if unknown:
                from actviz.core.capture import resolve_layers

                resolve_layers(model, unknown)  # raises ValueError with suggestions
            self._ticked = set(ticks)
        self.model_changed.emit()

    def set_loaded_model(self, loaded: Any, **kwargs: Any) -> None:
        """Adopt an :class:`actviz.io.models.LoadedModel`."""
        self.set_model(
            loaded.model,
            name=loaded.name,
            source=str(loaded.source),
            kind=loaded.kind,
            categories=loaded.categories,
            transforms=loaded.transforms,
            input_size=loaded.input_size,
            warnings=loaded.warnings,
            loaded=loaded,
            **kwargs,
        )

    # -- input -------------------------------------------------------------------------------
    def set_input(
        self,
        value: Any,
        *,
        source: str = "",
        kind: str = "tensor",
        image: np.ndarray | None = None,
        description: str = "",
    ) -> None:
        """Make ``value`` (a tensor, a tuple or a dict of tensors) the current input."""
        if description == "" and isinstance(value, torch.Tensor):
            description = f"tensor {tuple(value.shape)} {str(value.dtype).replace('torch.', '')}"
        self.input = InputState(value, source, kind, image, description)
        self.input_changed.emit()

    def set_loaded_input(self, loaded: Any) -> None:
        """Adopt an :class:`actviz.io.inputs.LoadedInput`."""
        self.set_input(
            loaded.value,
            source=str(loaded.source),
            kind=loaded.kind,
            image=loaded.image,
            description=loaded.description,
        )

    @property
    def input_path(self) -> Path | None:
        """The input's file, when it came from one (used to re-open it for a new model)."""
        if self.input is None or not self.input.source:
            return None
        path = Path(self.input.source)
        return path if path.is_file() else None

    # -- ticks -------------------------------------------------------------------------------
    @property
    def ticked(self) -> list[str]:
        """Ticked layer names in module-tree order."""
        if self.tree is None:
            return sorted(self._ticked)
        return [node.name for node in self.tree.nodes if node.name in self._ticked]

    def is_ticked(self, name: str) -> bool:
        return name in self._ticked

    def set_ticked(self, names: Iterable[str], ticked: bool = True) -> None:
        """Tick (or untick) ``names``; emits ``ticks_changed`` with the names that changed."""
        names = set(names)
        before = set(self._ticked)
        if ticked:
            self._ticked |= names
        else:
            self._ticked -= names
        changed = before ^ self._ticked
        if changed:
            self.ticks_changed.emit(changed)

    def replace_ticked(self, names: Iterable[str]) -> None:
        """Make exactly ``names`` ticked."""
        names = set(names)
        changed = names ^ self._ticked
        self._ticked = names
        if changed:
            self.ticks_changed.emit(changed)

    def tick_leaves_below(self, name: str) -> None:
        """Tick every leaf under ``name`` (``name`` itself when it is a leaf)."""
        if self.tree is None:
            return
        below = self.tree.descendants(name, leaves_only=True) or [name]
        self.set_ticked(below, True)

    def tick_type(self, type_name: str) -> None:
        """Tick every module of class ``type_name``."""
        if self.tree is not None:
            self.set_ticked(self.tree.names_of_type(type_name), True)

    def untick_all(self) -> None:
        self.replace_ticked(())

    # -- target ------------------------------------------------------------------------------
    def set_target(self, target: int | None) -> None:
        if target != self.target:
            self.target = target
            self.target_changed.emit()

    def set_target_text(self, text: str) -> int | None:
        """Parse ``text`` (see :func:`parse_target`) and make it the target."""
        target = parse_target(text, self.categories)
        self.set_target(target)
        return target

    # -- runs --------------------------------------------------------------------------------
    def can_run(self) -> bool:
        return self.model is not None and self.input is not None

    def make_request(self, *, allow_no_input: bool = False) -> RunRequest:
        """Snapshot the state for a run.

        Raises RuntimeError when there is no model, or no input unless ``allow_no_input``
        (live mode supplies each frame's input itself; ``inputs`` and ``image`` are then None).
        """
        if self.model is None:
            raise RuntimeError("open a model first")
        if self.input is None and not allow_no_input:
            raise RuntimeError("open an input first (an image, a tensor file or a sample)")
        layers = self.ticked
        extra = []
        if self.gradcam_layer and self.gradcam_layer not in layers:
            extra.append(self.gradcam_layer)
        return RunRequest(
            model=self.model,
            inputs=self.input.value if self.input is not None else None,
            layers=layers,
            target=self.target,
            normalize=self.normalize,
            extra_layers=extra,
            image=self.input.image if self.input is not None else None,
            categories=self.categories,
            gradcam_layer=self.gradcam_layer,
            max_bytes=self.memory_budget,
            channel_pages=dict(self.channel_pages),
        )

    def set_result(self, result: RunResult | None) -> None:
        self.result = result
        self.result_changed.emit()

    def held_bytes(self) -> int:
        """Bytes the shown result and the pinned ones hold together."""
        return self.pins.held_bytes(self.result)
