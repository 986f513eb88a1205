"""Feature visualisation: the image a channel wants to see, by activation maximisation after
Olah et al. ("Feature Visualization", Distill 2017), channels in one batch, the forward stopped
at the layer, no gradient for the weights and the model left as found."""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import replace
from types import MappingProxyType
from typing import Any

import numpy as np
import torch
from torch import nn

from actviz.analysis.visualize import visualization
from actviz.analysis.visualize.image_param import ImageParam, RobustTransforms, sample_seed
from actviz.analysis.visualize.visualization import Visualization, VisualizeError, VisualizeSettings
from actviz.core.capture import resolve_layers
from actviz.core.guards import ModelState
from actviz.core.records import INFERENCE_WEIGHTS_WARNING, CaptureCancelled
from actviz.core.structures import first_tensor
from actviz.data.atlas_map import frozen
from actviz.data.receptive import _Reached

#: Steps of redirected gradient an image takes, once, after a zero gradient (more: no settling).
_REDIRECT_STEPS = 4


def visualize(
    model: Any,
    layer: str | None,
    channels: int | Iterable[int] | None = None,
    settings: VisualizeSettings | None = None,
    *,
    target: int | Sequence[int] | None = None,
    batch: int | None = None,
    cache: bool = False,
    only_cached: bool = False,
    progress: Callable[[int, int], None] | None = None,
    should_stop: Callable[[], bool] | None = None,
    **overrides: Any,
) -> Visualization:
    """Synthesise the image each channel of ``layer`` responds to most (activation maximisation).

    Parameters
    ----------
    model
        A ``torch.nn.Module`` taking ``(N, 3, H, W)`` float images, or an opened model
        (:func:`actviz.io.models.loading.open_model`, whose normalisation and size are used).
    layer
        Qualified module name (``model.named_modules()``); None or "" with ``target=``.
    channels
        The channels to visualise, one image each (an int is one; None: ``[0]``). Objectives
        without channels use them only as seeds; ``target=`` replaces them by the classes.
    settings
        What shapes the images (:class:`VisualizeSettings`; None: its defaults).
    target
        A class index (or several): maximise that logit of the model's output instead.
    batch
        Images per forward pass; the channels run in chunks of this many. None: all at once.
    cache
        Read and write results in the user's cache (``picture_files.VisualizationCache``);
        only missing channels are computed.
    only_cached
        With ``cache``: return only the channels the cache holds, computing nothing.
    progress
        ``progress(done, total)`` after each step, on the calling thread.
    should_stop
        Polled before each step; True raises :class:`~actviz.core.records.CaptureCancelled`.
    **overrides
        Fields of :class:`VisualizeSettings` replaced (``steps=16, size=64``).

    Raises
    ------
    VisualizeError
        Not an image model, an unknown layer, a channel out of range, a bad setting.
    CaptureCancelled
        ``should_stop()`` turned True."""
    t0 = time.perf_counter()
    net, loaded = unwrap_model(model)
    settings = replace(settings or VisualizeSettings(), **overrides)
    device, dtype = check_image_model(net, loaded)
    if target is not None:
        if layer:
            raise VisualizeError("target= maximises a logit of the model's output: give layer=None")
        keys = [int(target)] if isinstance(target, (int, np.integer)) else [int(t) for t in target]
        layer, module = "", None
    else:
        if not layer:
            raise VisualizeError("give a layer to visualise (or target= for a class logit)")
        layer, module = model_layer(net, layer)
        one = channels is None or isinstance(channels, (int, np.integer))
        keys = [int(channels or 0)] if one else [int(c) for c in channels]
    if not keys:
        raise VisualizeError("no channels to visualise")
    if len(set(keys)) != len(keys):
        raise VisualizeError("channels repeat; each channel gives one image")
    obj = visualization.make_objective(settings.objective, target, module, settings.negative)
    record = settings.record(obj.name, model_normalisation(loaded, settings.mean, settings.std))
    if batch is not None and int(batch) < 1:
        raise VisualizeError(f"batch must be at least 1 image per pass, not {batch}")
    chunk = len(keys) if batch is None else int(batch)

    store = None
    found: dict[int, tuple[np.ndarray, np.ndarray, float]] = {}
    if only_cached and not cache:
        raise VisualizeError("only_cached=True needs cache=True")
    if cache and obj.name is not None:
        from actviz.analysis.visualize.picture_files import VisualizationCache

        store = VisualizationCache.for_model(net, layer, record)
        found = {k: hit for k in keys if (hit := store.get(k)) is not None}
    todo = [k for k in keys if k not in found]
    if only_cached:
        keys, todo = [k for k in keys if k in found], []

    computed, fed = optimise_images(
        net, loaded, module, layer, todo, obj, settings, chunk, device, dtype, progress, should_stop
    )
    if todo:
        record["input_size"] = list(fed) if fed is not None else None
        if store is not None:
            for k, value in computed.items():
                store.put(k, *value, input_size=fed)
    elif found:
        record["input_size"] = store.input_size if store is not None else None
    rows = [found[k] if k in found else computed[k] for k in keys]
    images = np.array([r[0] for r in rows], np.float32).reshape(len(rows), 3, *settings.size)
    curves = np.array([r[1] for r in rows], np.float64).T.reshape(settings.steps, len(rows))
    return Visualization(
        layer=layer,
        channels=tuple(keys),
        images=frozen(images),
        objective=frozen(curves),
        activations=frozen(np.array([r[2] for r in rows], dtype=np.float64)),
        settings=MappingProxyType(record),
        elapsed_s=time.perf_counter() - t0,
        from_cache=tuple(k in found for k in keys),
    )


def layer_channels(
    model: Any, layer: str, *, size: int = 128, input_size: tuple[int, int] | None = None
) -> int:
    """How many channels ``layer`` has (what :func:`visualize` can be asked for): one grey
    image fed to the layer, the forward stopped there, the model left as found;
    ``VisualizeError`` as :func:`visualize` raises it for the model and layer."""
    net, loaded = unwrap_model(model)
    device, dtype = check_image_model(net, loaded)
    layer, module = model_layer(net, layer)
    settings = VisualizeSettings(size=size, input_size=input_size)
    with contextlib.closing(LayerRunner(net, module, layer, redirect=False)) as runner:
        _, out = probe_input(
            runner, lambda x: x.to(dtype), settings, fixed_size(net, loaded), device
        )
    return int(visualization.channels_first(out, module).shape[1])


def unwrap_model(model: Any) -> tuple[nn.Module, Any]:
    """``(module, loaded)`` from an ``nn.Module`` or a ``LoadedModel``."""
    if isinstance(model, nn.Module):
        return model, None
    if isinstance(inner := getattr(model, "model", None), nn.Module):
        return inner, model
    raise VisualizeError(
        f"expected a torch.nn.Module or an opened model, not {type(model).__name__}"
    )


def model_normalisation(
    loaded: Any, mean: Sequence[float] | None, std: Sequence[float] | None
) -> tuple[tuple[float, ...], tuple[float, ...]] | None:
    """The mean/std the model's preprocessing applies, read as the input pipeline reads it."""
    if mean is not None or std is not None:
        if mean is None or std is None:
            raise VisualizeError("give both mean= and std= (or neither)")
        return tuple(float(v) for v in mean), tuple(float(v) for v in std)
    transforms = getattr(loaded, "transforms", None) if loaded is not None else None
    m, s = getattr(transforms, "mean", None), getattr(transforms, "std", None)
    if m is not None and s is not None and len(m) == 3 and len(s) == 3:
        return tuple(float(v) for v in m), tuple(float(v) for v in s)
    return None  # the window feeds such a model [0, 1] images as they are; so do we


def fixed_size(model: nn.Module, loaded: Any) -> tuple[int, int] | None:
    """The input size a model needs, if known (opened model, timm, Hugging Face config)."""
    size = getattr(loaded, "input_size", None) if loaded is not None else None
    if size is None:
        size = getattr(getattr(model, "patch_embed", None), "img_size", None)
    if isinstance(size, Sequence) and len(size) == 2:
        return (int(size[0]), int(size[1]))
    cfg = getattr(model, "pretrained_cfg", None) or getattr(model, "default_cfg", None)
    if isinstance(cfg, Mapping) and isinstance(cfg.get("input_size"), Sequence):
        if len(shape := cfg["input_size"]) == 3:
            return (int(shape[1]), int(shape[2]))
    image_size = getattr(getattr(model, "config", None), "image_size", None)
    if isinstance(image_size, int):
        return (image_size, image_size)
    if isinstance(image_size, Sequence) and len(image_size) == 2:
        return (int(image_size[0]), int(image_size[1]))
    return None


def check_image_model(model: nn.Module, loaded: Any) -> tuple[torch.device, torch.dtype]:
    """Refuse what cannot take an RGB float image; the device and dtype to feed it."""
    from actviz.io.input_tensors import expected_input, reads_text

    if reads_text(loaded):
        raise VisualizeError(
            f"{loaded.name} reads text (it has a tokenizer and no image processor); "
            "feature visualisation optimises an input image"
        )
    exp = expected_input(model)
    if exp.channels is None:
        # An embedding, no convolution: a text model (the probe's hint would mislead).
        for name, module in model.named_modules():
            if isinstance(module, (nn.Embedding, nn.EmbeddingBag)):
                raise VisualizeError(
                    f"the model's {name or '(model)'} ({type(module).__name__}) reads token "
                    "ids, not images; feature visualisation optimises an input image, so it "
                    "needs a model that takes (N, 3, H, W) images"
                )
    if exp.spatial_dims is not None and exp.spatial_dims != 2:
        raise VisualizeError(
            f"the model's {exp.layer} takes {exp.spatial_dims}-D signals, not images; "
            "feature visualisation optimises a 2-D RGB image"
        )
    if exp.channels is not None and exp.channels != 3:
        raise VisualizeError(
            f"the model's {exp.layer} takes {exp.channels} input channels; feature "
            "visualisation optimises a 3-channel RGB image"
        )
    if not exp.dtype.is_floating_point:
        raise VisualizeError(f"the model's parameters are {exp.dtype}; an image input is float")
    if any(p.is_inference() for p in model.parameters()):
        raise VisualizeError(INFERENCE_WEIGHTS_WARNING.replace("no gradients", "no pictures"))
    return exp.device, exp.dtype


def model_layer(net: nn.Module, layer: str) -> tuple[str, nn.Module]:
    """The qualified name and module of ``layer`` (:func:`~actviz.core.capture.resolve_layers`)."""
    try:
        (layer,) = resolve_layers(net, [layer])
    except ValueError as exc:
        raise VisualizeError(str(exc)) from None
    return layer, dict(net.named_modules())[layer]


# Gradients and normal tensors even for a caller inside inference_mode.
@torch.inference_mode(False)
def optimise_images(
    net: nn.Module,
    loaded: Any,
    module: nn.Module | None,
    layer: str,
    keys: list[int],
    obj: visualization.Objective,
    settings: VisualizeSettings,
    chunk: int,
    device: torch.device,
    dtype: torch.dtype,
    progress: Callable[[int, int], None] | None,
    should_stop: Callable[[], bool] | None,
) -> tuple[dict[int, tuple[np.ndarray, np.ndarray, float]], tuple[int, int] | None]:
    """Run the optimisation of ``keys`` in chunks; per key ``(image, curve, activation)``."""
    if not keys:
        return {}, None
    norm = model_normalisation(loaded, settings.mean, settings.std)
    steps, hw, seed, redirect = settings.steps, settings.size, settings.seed, settings.redirect_relu
    if norm is not None:
        mean_t = torch.tensor(norm[0], device=device).view(1, 3, 1, 1)
        inv_std = 1.0 / torch.tensor(norm[1], device=device).view(1, 3, 1, 1)
    total = steps * -(-len(keys) // chunk)
    done = 0

    def feed(x: torch.Tensor) -> torch.Tensor:
        if norm is not None:
            x = (x - mean_t) * inv_std
        return x.to(dtype)

    results: dict[int, tuple[np.ndarray, np.ndarray, float]] = {}
    with (
        contextlib.closing(LayerRunner(net, module, layer, redirect)) as runner,
        torch.enable_grad(),  # also when the caller is inside no_grad
    ):
        fed, out = probe_input(runner, feed, settings, fixed_size(net, loaded), device)
        visualization.check_keys(out, keys, obj, module, layer)
        for start in range(0, len(keys), chunk):
            part = keys[start : start + chunk]
            seeds = [sample_seed(seed, k) for k in part]
            key_t = torch.tensor(part, device=device)
            image = ImageParam(seeds, hw, settings.param, settings.decorrelate, device)
            robust = RobustTransforms(seeds, steps, hw, fed, settings.transforms, device=device)
            optimizer = torch.optim.Adam([image.tensor], lr=settings.lr)
            runner.stuck = None
            left = torch.zeros(len(part), dtype=torch.int64, device=device)
            curve = torch.empty(steps, len(part), dtype=torch.float64, device=device)
            for i in range(steps):
                if should_stop is not None and should_stop():
                    raise CaptureCancelled("feature visualisation cancelled")
                optimizer.zero_grad(set_to_none=True)
                values = obj.fn(runner(feed(robust(image.images(), i))), key_t)
                (-values.sum()).backward()
                if redirect:
                    runner.stuck, left = next_stuck(image.tensor.grad, left)
                optimizer.step()
                curve[i] = values.detach()
                done += 1
                if progress is not None:
                    progress(done, total)
            with torch.no_grad():
                final = x = image.images()
                if fed is not None and tuple(fed) != hw:
                    x = torch.nn.functional.interpolate(
                        x, size=tuple(fed), mode="bilinear", align_corners=False
                    )
                act = obj.fn(runner(feed(x)), key_t)
            images = final.detach().float().cpu().numpy()
            curves = curve.cpu().numpy()
            acts = act.double().cpu().numpy()
            for j, k in enumerate(part):
                results[k] = (images[j], curves[:, j].copy(), float(acts[j]))
    return results, fed


class _RedirectedReLU(torch.autograd.Function):
    """ReLU whose gradient is not lost where units are off (Lucid's ``redirected_relu_grad``):
    per image the plain gradient if any got through and it is not in ``stuck`` (last step's
    gradient exactly zero), else the one that would turn units on (plain would stay grey)."""

    @staticmethod
    def forward(ctx: Any, x: torch.Tensor, stuck: torch.Tensor) -> torch.Tensor:
        ctx.save_for_backward(x, stuck)
        return x.clamp_min(0)

    @staticmethod
    def backward(ctx: Any, grad: torch.Tensor) -> tuple[torch.Tensor, None]:
        x, stuck = ctx.saved_tensors
        off = x < 0
        plain = grad.masked_fill(off, 0)
        through = plain.reshape(plain.shape[0], -1).ne(0).any(1) & ~stuck
        if grad.device.type == "cpu" and bool(through.all()):
            # Nearly every step: skip the blend (not on a GPU: the check would wait for it).
            return plain, None
        # Gradient descent on the loss moves x by -grad: grad > 0 would push an off unit lower.
        redirected = grad.masked_fill(off & (grad > 0), 0)
        return torch.where(through.view(-1, *([1] * (x.dim() - 1))), plain, redirected), None


class LayerRunner:
    """Feeds a batch and returns what the objective reads: the layer's output or the logits; the
    model in eval mode with its weights' gradients off until :meth:`close`."""

    def __init__(
        self, model: nn.Module, module: nn.Module | None, layer: str, redirect: bool
    ) -> None:
        self.model, self.module, self.layer = model, module, layer
        self.taken: torch.Tensor | None = None
        self.stuck: torch.Tensor | None = None  # (N,) bool, set per step
        # Out of place: a redirected ReLU reads its input, which an in-place ReLU overwrites.
        self.state = ModelState(model, out_of_place=redirect)
        self.flags = [(p, p.requires_grad) for p in model.parameters()]
        self.state.apply(train=False)
        for p, _ in self.flags:
            p.requires_grad_(False)
        self.handles: list[Any] = []
        if redirect:
            # Registered first, so a hooked ReLU layer hands its redirected output on.
            self.handles += [
                m.register_forward_hook(self._redirect)
                for m in model.modules()
                if isinstance(m, nn.ReLU)
            ]
        if module is not None:
            self.handles.append(module.register_forward_hook(self._hook))

    def _redirect(self, module: nn.Module, args: Any, output: Any) -> Any:
        x = args[0] if args else None
        if isinstance(x, torch.Tensor) and isinstance(output, torch.Tensor) and x.requires_grad:
            if (stuck := self.stuck) is None or stuck.shape[0] != x.shape[0]:
                stuck = torch.zeros(x.shape[0], dtype=torch.bool, device=x.device)
            return _RedirectedReLU.apply(x, stuck)
        return None

    def _hook(self, module: nn.Module, args: Any, output: Any) -> None:
        if self.taken is None:
            self.taken = first_tensor(output)
            raise _Reached

    def __call__(self, x: torch.Tensor) -> torch.Tensor:
        self.taken = None
        if self.module is None:
            out = self.model(x)
            logits = out.get("logits") if isinstance(out, Mapping) else getattr(out, "logits", None)
            if (t := logits if isinstance(logits, torch.Tensor) else first_tensor(out)) is None:
                raise VisualizeError("the model's output holds no tensor")
            return t
        with contextlib.suppress(_Reached):
            self.model(x)
        if self.taken is None:
            raise VisualizeError(f"layer {self.layer!r} did not run in the model's forward")
        if not self.taken.is_floating_point():
            raise VisualizeError(f"layer {self.layer!r} outputs {self.taken.dtype}, not floats")
        return self.taken

    def close(self) -> None:
        for handle in self.handles:
            handle.remove()
        self.handles = []
        for p, flag in self.flags:
            if p.requires_grad != flag:
                p.requires_grad_(flag)
        self.state.restore()


def next_stuck(grad: torch.Tensor | None, left: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Which images take the redirected gradient next step, and the countdown (no host sync):
    ``left`` per image is 0 never redirected, ``n > 0`` steps of redirection left, -1 done."""
    if grad is None:
        return left > 0, left
    zero = grad.reshape(grad.shape[0], -1).ne(0).any(1).logical_not()
    counted = torch.where(left > 0, left - 1, left)
    counted = torch.where((left > 0) & (counted == 0), -1, counted)  # its steps are over
    counted = torch.where(zero & (left == 0), _REDIRECT_STEPS, counted)
    return counted > 0, counted


def probe_input(
    runner: LayerRunner,
    feed: Callable[[torch.Tensor], torch.Tensor],
    settings: VisualizeSettings,
    known_size: tuple[int, int] | None,
    device: torch.device,
) -> tuple[tuple[int, int] | None, torch.Tensor]:
    """One grey image through the model: the input size to use (None: the padded image; else
    ``settings.input_size`` or the known size) and what the objective reads."""
    pad = 12 if settings.transforms == "standard" else 0
    canvas = (settings.size[0] + 2 * pad, settings.size[1] + 2 * pad)
    asked = settings.input_size
    tries: list[tuple[int, int] | None] = [tuple(asked)] if asked else [None]
    if not asked and known_size is not None and tuple(known_size) != canvas:
        tries.append(tuple(known_size))
    error: Exception | None = None
    for size in tries:
        x = torch.full((1, 3, *(size if size is not None else canvas)), 0.5, device=device)
        try:
            with torch.no_grad():
                return size, runner(feed(x))
        except VisualizeError:
            raise
        except Exception as exc:  # the model's own complaint about the size, usually
            error = exc
    hint = "; pass input_size=(H, W)" if known_size is None and not asked else ""
    raise VisualizeError(
        f"the model did not run on a {tries[-1] or canvas} RGB image "
        f"({type(error).__name__}: {error}){hint}"
    ) from error
