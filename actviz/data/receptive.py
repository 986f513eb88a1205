"""Where a channel's top images fire: :func:`receptive_box` (analytic through conv/pool chains,
else the input gradient's support) and :func:`top_views`, the crops around each maximum."""

from __future__ import annotations

import contextlib
import weakref
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from actviz.core.capture import resolve_layers
from actviz.core.guards import eval_mode, forward_hooks
from actviz.core.records import CaptureCancelled
from actviz.data.accumulate import first_tensor
from actviz.data.scan_result import Scan, TopEntry
from actviz.data.sources import ModelSpec, open_data, resolve_model
from actviz.io.errors import InputError
from actviz.io.input_tensors import _display_image, _from_image, _open_image

# Modules that keep every position where it is (output position i depends on input i only).
_POINTWISE_NAMES = (
    "ReLU ReLU6 LeakyReLU PReLU ELU SELU CELU GELU SiLU Mish Sigmoid Tanh Hardswish Hardsigmoid "
    "Hardtanh Softplus Identity Dropout Dropout2d GroupNorm InstanceNorm2d"
)
_POINTWISE = (nn.modules.batchnorm._BatchNorm, *(getattr(nn, n) for n in _POINTWISE_NAMES.split()))
_WINDOWED = (nn.Conv2d, nn.MaxPool2d, nn.AvgPool2d)
Stop = Callable[[], bool] | None  # polled during the model passes; True: CaptureCancelled
Box = tuple[int, int, int, int]
#: Per model, the fields already worked out: the window asks again for every channel it shows.
_FIELDS: weakref.WeakKeyDictionary[nn.Module, dict] = weakref.WeakKeyDictionary()


def _pair(v: Any) -> tuple[int, int]:
    return (int(v), int(v)) if isinstance(v, int) else (int(v[0]), int(v[1]))


def _window(module: nn.Module) -> tuple[tuple[int, int], ...]:
    """``(kernel, stride, padding, dilation)``, each a ``(y, x)`` pair, of a conv or pool."""
    kernel, stride = _pair(module.kernel_size), _pair(module.stride)
    dilation, padding = _pair(getattr(module, "dilation", 1)), module.padding
    if padding == "valid":
        padding = (0, 0)
    elif isinstance(padding, str):  # "same": torch pads (total // 2) before
        padding = tuple(d * (k - 1) // 2 for k, d in zip(kernel, dilation, strict=True))
    return kernel, stride, _pair(padding), dilation


@dataclass(frozen=True)
class ReceptiveField:
    """How one layer's positions map to input pixels, per (model, layer, shape): ``chain`` holds
    each conv/pool's ``(kernel, stride, padding, dilation)`` (None off a plain chain); ``method``
    is ``"analytic"`` or ``"gradient"`` (one position's support, shifted for the others)."""

    input_hw: tuple[int, int]
    map_hw: tuple[int, int] | None
    chain: tuple[tuple[tuple[int, int], ...], ...] | None
    method: str
    model_ref: Any = None  # weakref.ref to the model: a remembered field must not keep it alive
    layer: str = ""
    input_shape: tuple[int, ...] = ()
    _cache: dict = field(default_factory=dict, repr=False, compare=False)

    def model(self) -> nn.Module:
        model = self.model_ref() if self.model_ref is not None else None
        if model is None:
            raise ValueError("the model of this receptive field no longer exists")
        return model

    def box(self, location: tuple[int, int] | None, should_stop: Stop = None) -> Box:
        """``(y0, y1, x0, x1)``, half-open, clipped to the input, of what ``location`` sees;
        ``should_stop()`` true ends a gradient pass at its next module (``CaptureCancelled``)."""
        h, w = self.input_hw
        if location is None or self.map_hw is None:
            return (0, h, 0, w)
        if self.chain is not None:
            lo, hi = [int(v) for v in location], [int(v) for v in location]
            for kernel, stride, padding, dilation in reversed(self.chain):
                for a in (0, 1):
                    lo[a] = lo[a] * stride[a] - padding[a]
                    hi[a] = hi[a] * stride[a] - padding[a] + dilation[a] * (kernel[a] - 1)
            y0, y1, x0, x1 = lo[0], hi[0] + 1, lo[1], hi[1] + 1
        else:
            if (template := self._template(should_stop)) is None:
                model, shape = self.model(), self.input_shape
                return _gradient_box(model, self.layer, shape, location, should_stop)
            (yc, xc), box, (sy, sx) = template
            dy, dx = (int(location[0]) - yc) * sy, (int(location[1]) - xc) * sx
            y0, y1, x0, x1 = (round(v + d) for v, d in zip(box, (dy, dy, dx, dx), strict=True))
        return (max(0, y0), min(h, y1), max(0, x0), min(w, x1))

    def _template(self, should_stop: Stop = None) -> tuple | None:
        """One position's gradient support (on a 3x input), shifted for others; kept if finished."""
        if (cached := self._cache.get("template", False)) is not False:
            return cached
        template = None
        _, c, h, w = self.input_shape
        big = (1, c, 3 * h, 3 * w)
        try:
            _, out = _layer_output(self.model(), self.layer, torch.zeros(big), False, should_stop)
            big_map = tuple(out.shape[-2:]) if out is not None and out.ndim == 4 else None
            if big_map is not None:
                yc, xc = big_map[0] // 2, big_map[1] // 2
                box = _gradient_box(self.model(), self.layer, big, (yc, xc), should_stop)
                stride = (big[2] / big_map[0], big[3] / big_map[1])
                # Measured on the big input, moved to the real one: only the centre differs.
                template = ((yc, xc), box, stride)
        except CaptureCancelled:
            raise
        except Exception:  # noqa: BLE001 - e.g. a model with a fixed input size: no template
            template = None
        self._cache["template"] = template
        return template


class _Reached(Exception):
    """Raised from the layer's hook: what runs after the layer is not needed."""


def _layer_output(
    net: nn.Module, layer: str, x: torch.Tensor, grad: bool = False, should_stop: Stop = None
) -> tuple[torch.Tensor, Any]:
    """``(x as the model takes it, the layer's first output tensor)`` of an eval-mode forward
    that ends at the layer; ``should_stop()`` is asked after each module."""
    module = dict(net.named_modules())[layer]
    params = next(net.parameters(), None)
    dtype = params.dtype if params is not None and params.is_floating_point() else torch.float32
    device = params.device if params is not None else torch.device("cpu")
    x = x.to(device=device, dtype=dtype).requires_grad_(grad)
    got: list[Any] = []

    def hook(_m: nn.Module, _a: tuple, output: Any) -> None:
        got.append(first_tensor(output))
        raise _Reached

    def stop(*_args: Any) -> None:
        _check(should_stop)

    stops = [] if should_stop is None else [m for m in net.modules() if m is not module]
    with contextlib.suppress(_Reached), forward_hooks([module], hook), forward_hooks(stops, stop):
        with eval_mode(net), torch.set_grad_enabled(grad):
            net(x)
    return x, got[0] if got else None


def _check(should_stop: Stop) -> None:
    if should_stop is not None and should_stop():
        raise CaptureCancelled("the receptive field was cancelled")


def _input_shape(spec: ModelSpec, input_shape: Sequence[int]) -> tuple[int, ...]:
    shape = tuple(int(s) for s in input_shape)
    if len(shape) == 2:
        shape = (1, spec.expected.channels or 3, *shape)
    elif len(shape) == 3:
        shape = (1, *shape)
    if len(shape) != 4:
        raise ValueError(
            f"input_shape {tuple(input_shape)}: give (H, W), (C, H, W) or (N, C, H, W)"
        )
    return (1, *shape[1:])


def receptive_field(model: Any, layer: str, input_shape: Sequence[int]) -> ReceptiveField:
    """The :class:`ReceptiveField` of ``layer`` for inputs of ``input_shape`` (remembered)."""
    spec = resolve_model(model)
    net = spec.model
    modules = dict(net.named_modules())
    if layer not in modules:
        resolve_layers(net, [layer])  # raises with suggestions
    shape = _input_shape(spec, input_shape)
    known = _FIELDS.setdefault(net, {})
    if (key := (layer, shape, len(modules))) in known:
        return known[key]
    target = modules[layer]
    calls: list[tuple[nn.Module, int, int]] = []  # (module, id(input), id(output))
    keep: list[Any] = []
    layer_out: list[int] = []

    def leaf_hook(module: nn.Module, args: tuple, output: Any) -> None:
        first = args[0] if args and isinstance(args[0], torch.Tensor) else None
        out = first_tensor(output)
        keep.extend([first, out])  # ids stay unique while the objects live
        calls.append((module, id(first), id(out)))

    def layer_hook(_module: nn.Module, _args: tuple, output: Any) -> None:
        if not layer_out and (out := first_tensor(output)) is not None:
            keep.append(out)
            layer_out.extend((id(out), len(calls), out.shape))

    leaves = [m for m in net.modules() if next(m.children(), None) is None]
    x = torch.zeros(shape, dtype=spec.expected.dtype, device=spec.expected.device)
    keep.append(x)
    with forward_hooks(leaves, leaf_hook), forward_hooks([target], layer_hook):
        with eval_mode(net), torch.no_grad():
            net(x)
    if not layer_out:
        raise ValueError(f"layer {layer!r} did not run for an input of shape {shape}")
    out_shape = layer_out[2]
    map_hw = (int(out_shape[-2]), int(out_shape[-1])) if len(out_shape) == 4 else None
    chain = _chain(calls[: layer_out[1]], id(x), layer_out[0])
    method = "analytic" if chain is not None else "gradient"
    known[key] = ReceptiveField(shape[2:], map_hw, chain, method, weakref.ref(net), layer, shape)
    return known[key]


def _chain(calls: list[tuple[nn.Module, int, int]], input_id: int, output_id: int) -> tuple | None:
    """The conv/pool windows from the input to the layer when the calls form a plain chain."""
    windows = []
    current = input_id
    for module, in_id, out_id in calls:
        if in_id != current:
            return None  # a branch (residual, concatenation...): not a chain
        if isinstance(module, _WINDOWED):
            windows.append(_window(module))
        elif not isinstance(module, _POINTWISE):
            return None
        current = out_id
    return tuple(windows) if current == output_id else None


def receptive_box(
    model: Any,
    layer: str,
    input_shape: Sequence[int],
    location: tuple[int, int] | None,
    *,
    method: str = "auto",
) -> tuple[int, int, int, int]:
    """The input pixels ``(y0, y1, x0, x1)`` (half-open, clipped) that ``location`` of ``layer``'s
    map depends on (None: the whole input); ``method``: ``"analytic"`` (a plain chain, else
    ``ValueError``), ``"gradient"`` (any model) or ``"auto"``."""
    rf = receptive_field(model, layer, input_shape)
    if method == "gradient" or (method == "auto" and rf.chain is None):
        if location is None or rf.map_hw is None:
            return rf.box(None)
        return _gradient_box(rf.model(), layer, rf.input_shape, location)
    if method == "analytic" and rf.chain is None:
        raise ValueError(
            f"layer {layer!r} is not reached through a plain chain of convolutions and pools; "
            "use method='gradient'"
        )
    if method not in ("auto", "analytic"):
        raise ValueError(f"method must be 'auto', 'analytic' or 'gradient', not {method!r}")
    return rf.box(location)


def _gradient_box(
    net: nn.Module, layer: str, shape: tuple, location: tuple[int, int], should_stop: Stop = None
) -> Box:
    """Bounding box of the input pixels where the map at ``location`` has a gradient."""
    noise = torch.randn((4, *shape[1:]), generator=torch.Generator().manual_seed(0))
    x, out = _layer_output(net, layer, noise, True, should_stop)
    _check(should_stop)  # before the backward pass
    with torch.enable_grad():
        value = out[:, :, int(location[0]), int(location[1])].abs().sum()
        (grad,) = torch.autograd.grad(value, x, allow_unused=True)
    support = None if grad is None else grad.detach().abs().sum(dim=(0, 1)) > 0
    if support is None or not support.any():
        return (0, shape[2], 0, shape[3])
    rows = torch.nonzero(support.any(dim=1)).flatten()
    cols = torch.nonzero(support.any(dim=0)).flatten()
    return (int(rows[0]), int(rows[-1]) + 1, int(cols[0]), int(cols[-1]) + 1)


@dataclass(frozen=True)
class TopView:
    """A top image cropped around its maximum's receptive field: ``image`` ``(size, size, 3)``
    uint8 as the model sees it, ``heat`` the activation over it, ``box`` in input pixels."""

    entry: TopEntry
    image: np.ndarray
    heat: np.ndarray
    box: tuple[int, int, int, int]
    #: Why the image is not shown ("" when it is: else gone or changed since the scan; grey).
    missing: str = ""


def _square(box: tuple[int, int, int, int], hw: tuple[int, int]) -> tuple[int, int, int, int]:
    """Grow the box to a square around its centre (shifted to stay inside the image)."""
    y0, y1, x0, x1 = box
    side = min(max(y1 - y0, x1 - x0), *hw)
    ys, xs = (
        max(0, min((a + b - side) // 2, n - side)) for a, b, n in ((y0, y1, hw[0]), (x0, x1, hw[1]))
    )
    return (ys, ys + side, xs, xs + side)


def _load(spec: ModelSpec, entry: TopEntry, data: Any) -> tuple[torch.Tensor, np.ndarray]:
    """The model input ``(C, H, W)`` and the picture as shown, for one entry."""
    if isinstance(entry.source, str):
        img = _open_image(Path(entry.source), entry.source)
        loaded = _from_image(img, entry.source, spec.expected, spec.transforms, spec.size)
        return loaded.value[0], loaded.image
    _, t, reason = open_data(data, spec).dataset[entry.index]
    if t is None:
        raise ValueError(f"sample {entry.index}: {reason}")
    t = t.to(device=spec.expected.device)
    if (shown := _display_image(t[None])) is None:
        shown = np.zeros((*t.shape[-2:], 3), dtype=np.uint8)
    return t, shown


def _missing_view(entry: TopEntry, error: BaseException, size: int) -> TopView:
    """A grey view saying why ``entry``'s image cannot be shown now (it was read by the scan)."""
    source = entry.source
    name = Path(source).name if isinstance(source, str) else f"sample {entry.index}"
    gone = isinstance(source, str) and not Path(source).exists()
    why = f"{name} is gone since the scan" if gone else f"{name} cannot be read now: {error}"
    grey = np.full((size, size, 3), 200, dtype=np.uint8)
    return TopView(entry, grey, np.zeros((size, size), np.float32), (0, 0, 0, 0), why)


def top_views(
    model: Any,
    scan: Scan,
    layer: str,
    channel: int,
    *,
    size: int = 96,
    data: Any = None,
    transform: Any = None,
    should_stop: Callable[[], bool] = lambda: False,
) -> tuple[TopView, ...]:
    """Crops of a channel's top images around the receptive field of each maximum, best first;
    the model runs once on these images only. ``data`` is the scanned tensor or dataset when
    sources are indices; ``transform`` the scan's. A missing image gets a grey view saying why;
    ``should_stop()`` true ends it (``CaptureCancelled``) before each model pass."""
    from PIL import Image

    from actviz.core.capture import capture

    if not (entries := scan.top(layer, channel)):
        return ()
    if data is None and not all(isinstance(e.source, str) for e in entries):
        raise ValueError(
            "the scan was over samples, not files: pass the same data as data= to top_views"
        )
    spec = resolve_model(model, transform)
    # An image gone or changed since the scan leaves a grey view saying so; the others show.
    views: list[TopView | None] = []
    readable: list[tuple[torch.Tensor, np.ndarray]] = []
    for e in entries:
        try:
            readable.append(_load(spec, e, data))
            views.append(None)
        except (InputError, ValueError, OSError) as exc:
            views.append(_missing_view(e, exc, size))
    if not readable:
        return tuple(views)  # type: ignore[arg-type]
    batch = torch.stack([t for t, _ in readable]).to(
        device=spec.expected.device, dtype=spec.expected.dtype
    )
    cap = capture(
        spec.model, batch, [layer], gradients=False, keep_inputs=False, should_stop=should_stop
    )
    out = first_tensor(cap[layer].output)
    if out is None or out.ndim < 2:
        raise ValueError(f"layer {layer!r} gave no (N, C, ...) output")
    maps = out[:, channel].detach().to("cpu", torch.float32)
    hw = (int(batch.shape[-2]), int(batch.shape[-1]))
    rf = receptive_field(spec.model, layer, tuple(batch.shape[1:]))
    if maps.ndim == 3:
        heat_full = F.interpolate(maps[:, None], hw, mode="bilinear", align_corners=False)[:, 0]
    else:  # one value per image: the whole picture at that value
        heat_full = maps.reshape(-1, 1, 1).expand(-1, *hw)
    if should_stop():  # before the first box, which runs the model backward once
        raise CaptureCancelled("the top views were cancelled")
    rows = iter(enumerate(readable))  # the readable entries' rows in the batch
    for k, entry in enumerate(entries):
        if views[k] is not None:
            continue
        i, (_, shown) = next(rows)
        box = _square(rf.box(entry.location, should_stop), hw)
        y0, y1, x0, x1 = box
        crop = Image.fromarray(np.ascontiguousarray(shown[y0:y1, x0:x1]))
        image = np.asarray(crop.resize((size, size), Image.BILINEAR), dtype=np.uint8)
        heat = heat_full[i, y0:y1, x0:x1][None, None]
        heat = F.interpolate(heat, size=(size, size), mode="bilinear", align_corners=False)[0, 0]
        views[k] = TopView(entry, image, heat.numpy().astype(np.float32), box)
    return tuple(views)  # type: ignore[arg-type]
