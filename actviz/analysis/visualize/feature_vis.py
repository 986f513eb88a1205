"""Feature visualisation: the image a channel wants to see, by activation maximisation.

``actviz.visualize(model, "layer3", range(8))`` optimises one image per channel as Olah et al.
describe ("Feature Visualization", Distill 2017): Fourier parameterisation with 1/f scaling,
decorrelated colour, robustness transforms (:mod:`actviz.analysis.visualize.image_param`), and
Lucid's redirected ReLU for channels silent on the start image
(:mod:`~actviz.analysis.visualize.layer_runner`). It is faster than Lucent's ``render_vis``
because the forward stops at the layer, weights take no gradient, transforms are one affine
resampling per step and channels run as one batch (each from its own seed). The model is left
as found (:class:`~actviz.core.guards.ModelState`); no Qt here.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Sequence
from types import MappingProxyType
from typing import Any

import numpy as np
import torch

from actviz.analysis.visualize.image_model import (
    check_image_model,
    fixed_size,
    model_layer,
    model_normalisation,
    unwrap_model,
)
from actviz.analysis.visualize.layer_runner import LayerRunner, probe_input
from actviz.analysis.visualize.objectives import channels_first, make_objective
from actviz.analysis.visualize.optimise import optimise_images
from actviz.analysis.visualize.visualization import (
    Visualization,
    VisualizeError,
    frozen,
)
from actviz.core.guards import ModelState

__all__ = [
    "layer_channels",
    "visualize",
    "visualize_settings",
]


def visualize_settings(
    *,
    objective: Any = "channel",
    steps: int = 256,
    size: int | tuple[int, int] = 128,
    param: str = "fourier",
    decorrelate: bool = True,
    transforms: str = "standard",
    lr: float = 0.05,
    seed: int = 0,
    negative: bool = False,
    mean: Sequence[float] | None = None,
    std: Sequence[float] | None = None,
    input_size: tuple[int, int] | None = None,
    redirect_relu: bool = True,
) -> dict[str, Any]:
    """The settings dict :attr:`Visualization.settings` holds for these arguments (before the
    model's normalisation and input size are filled in); checks their values.

    Raises
    ------
    VisualizeError
        A value out of range.
    """
    if int(steps) < 1:
        raise VisualizeError(f"steps must be at least 1, not {steps}")
    hw = (int(size), int(size)) if isinstance(size, (int, np.integer)) else tuple(map(int, size))
    if len(hw) != 2 or min(hw) < 8:
        raise VisualizeError(f"size must be at least 8 pixels, not {size}")
    if not float(lr) > 0:
        raise VisualizeError(f"lr must be positive, not {lr}")
    name = objective if isinstance(objective, str) else None
    return {
        "objective": name,
        "steps": int(steps),
        "size": list(hw),
        "param": str(param),
        "decorrelate": bool(decorrelate),
        "transforms": str(transforms),
        "lr": float(lr),
        "seed": int(seed),
        "negative": bool(negative),
        "mean": list(mean) if mean is not None else None,
        "std": list(std) if std is not None else None,
        "input_size": list(input_size) if input_size is not None else None,
        "redirect_relu": bool(redirect_relu),
    }


def visualize(
    model: Any,
    layer: str | None,
    channels: int | Iterable[int] | None = None,
    *,
    objective: Any = "channel",
    steps: int = 256,
    size: int | tuple[int, int] = 128,
    batch: int | None = None,
    param: str = "fourier",
    decorrelate: bool = True,
    transforms: str = "standard",
    lr: float = 0.05,
    seed: int = 0,
    target: int | Sequence[int] | None = None,
    negative: bool = False,
    mean: Sequence[float] | None = None,
    std: Sequence[float] | None = None,
    input_size: tuple[int, int] | None = None,
    redirect_relu: bool = True,
    cache: bool = False,
    only_cached: bool = False,
    progress: Callable[[int, int], None] | None = None,
    should_stop: Callable[[], bool] | None = None,
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
        The channels to visualise, one image each (an int is one channel; None: ``[0]``).
        For objectives without channels the values only key the seeds; ``target=`` replaces
        them by the target classes.
    objective
        ``"channel"`` (the channel's mean activation), ``"neuron"`` (its centre position),
        ``"layer"`` (the layer's mean square, DeepDream), a direction tensor ``(C,)`` (dot
        product with the channel vector at every position, averaged) or ``(K, C)`` (one
        direction per channel key), or a callable ``f(layer_output) -> (N,)`` or scalar.
        Token layers ``(N, T, D)`` have their channels last.
    steps
        Optimisation steps.
    size
        Side (or ``(h, w)``) of the images.
    batch
        Images per forward pass; the channels run in chunks of this many. None: all at once.
    param
        ``"fourier"`` (1/f-scaled spectrum) or ``"pixel"``.
    decorrelate
        Decorrelated colour (ImageNet's colour covariance).
    transforms
        ``"standard"`` (pad 12, jitter 8, scale 0.9-1.1, rotation +-10 deg, jitter 4) or
        ``"none"``.
    lr
        Adam's learning rate.
    seed
        The run's seed; each sample's seed comes from it and the sample's key, so a channel
        gives the same image alone or batched.
    target
        A class index (or several): maximise that logit of the model's output instead.
    negative
        Minimise the objective instead (what the channel responds to least).
    mean, std
        The normalisation to apply; by default the opened model's (none for a bare module).
    input_size
        ``(H, W)`` the model must be fed (vision transformers); by default the opened model's.
    redirect_relu
        Lucid's redirected ReLU gradient, so channels silent on the starting image still
        get a picture (forward values unchanged).
    cache
        Read and write results in the user's cache
        (:mod:`actviz.analysis.visualize.picture_cache`); only missing channels are computed.
    only_cached
        With ``cache``: return only the channels the cache holds, computing nothing.
    progress
        ``progress(done, total)`` after each step, on the calling thread.
    should_stop
        Polled before each step; True raises :class:`~actviz.core.records.CaptureCancelled`.

    Raises
    ------
    VisualizeError
        Not an image model, an unknown layer, a channel out of range, a bad setting.
    CaptureCancelled
        ``should_stop()`` turned True.
    """
    t0 = time.perf_counter()
    net, loaded = unwrap_model(model)
    settings = visualize_settings(
        objective=objective,
        steps=steps,
        size=size,
        param=param,
        decorrelate=decorrelate,
        transforms=transforms,
        lr=lr,
        seed=seed,
        negative=negative,
        mean=mean,
        std=std,
        input_size=input_size,
        redirect_relu=redirect_relu,
    )
    device, dtype = check_image_model(net, loaded)
    if target is not None:
        if layer:
            raise VisualizeError("target= maximises a logit of the model's output: give layer=None")
        keys = [int(target)] if isinstance(target, (int, np.integer)) else [int(t) for t in target]
        layer = ""
        module = None
    else:
        if not layer:
            raise VisualizeError("give a layer to visualise (or target= for a class logit)")
        layer, module = model_layer(net, layer)
        if channels is None:
            keys = [0]
        elif isinstance(channels, (int, np.integer)):
            keys = [int(channels)]
        else:
            keys = [int(c) for c in channels]
    if not keys:
        raise VisualizeError("no channels to visualise")
    if len(set(keys)) != len(keys):
        raise VisualizeError("channels repeat; each channel gives one image")
    obj = make_objective(objective, target, module, negative)
    settings["objective"] = obj.name
    if transforms not in ("standard", "none"):
        raise VisualizeError(f"transforms must be 'standard' or 'none', not {transforms!r}")
    if param not in ("fourier", "pixel"):
        raise VisualizeError(f"param must be 'fourier' or 'pixel', not {param!r}")
    norm = model_normalisation(loaded, mean, std)
    settings["mean"], settings["std"] = (list(norm[0]), list(norm[1])) if norm else (None, None)
    # Objectives without channels (and one direction) repeat the same objective per key.
    if batch is not None and int(batch) < 1:
        raise VisualizeError(f"batch must be at least 1 image per pass, not {batch}")
    chunk = len(keys) if batch is None else int(batch)

    store = None
    found: dict[int, tuple[np.ndarray, np.ndarray, float]] = {}
    if only_cached and not cache:
        raise VisualizeError("only_cached=True needs cache=True")
    if cache and obj.name is not None:
        from actviz.analysis.visualize.picture_cache import VisualizationCache

        store = VisualizationCache.for_model(net, layer, settings)
        for k in keys:
            hit = store.get(k)
            if hit is not None:
                found[k] = hit
    todo = [k for k in keys if k not in found]
    if only_cached:
        keys, todo = [k for k in keys if k in found], []

    computed: dict[int, tuple[np.ndarray, np.ndarray, float]] = {}
    if todo:
        # A caller inside inference_mode (a window worker may be) still gets gradients, and
        # every tensor made here is a normal one.
        with torch.inference_mode(False):
            computed, fed = optimise_images(
                net,
                module,
                layer,
                todo,
                obj,
                settings,
                norm,
                fixed_size(net, loaded),
                chunk,
                bool(settings["redirect_relu"]),
                device,
                dtype,
                progress,
                should_stop,
            )
        settings["input_size"] = list(fed) if fed is not None else None
        if store is not None:
            for k, value in computed.items():
                store.put(k, *value, input_size=fed)
    elif found:
        settings["input_size"] = store.input_size if store is not None else None
    rows = [found[k] if k in found else computed[k] for k in keys]
    hw = settings["size"]
    return Visualization(
        layer=layer,
        channels=tuple(keys),
        images=frozen(
            np.stack([r[0] for r in rows]).astype(np.float32)
            if rows
            else np.zeros((0, 3, *hw), np.float32)
        ),
        objective=frozen(
            np.stack([r[1] for r in rows], axis=1).astype(np.float64)
            if rows
            else np.zeros((settings["steps"], 0))
        ),
        activations=frozen(np.array([r[2] for r in rows], dtype=np.float64)),
        settings=MappingProxyType(settings),
        elapsed_s=time.perf_counter() - t0,
        from_cache=tuple(k in found for k in keys),
    )


def layer_channels(
    model: Any, layer: str, *, size: int = 128, input_size: tuple[int, int] | None = None
) -> int:
    """How many channels ``layer`` has (what :func:`visualize` can be asked for): one grey
    image fed to the layer, the forward stopped there, the model left as found.

    Raises
    ------
    VisualizeError
        As :func:`visualize` does for the model and layer.
    """
    net, loaded = unwrap_model(model)
    device, dtype = check_image_model(net, loaded)
    layer, module = model_layer(net, layer)
    settings = visualize_settings(size=size, input_size=input_size)
    state = ModelState(net, out_of_place=False)
    runner = LayerRunner(net, module, layer, redirect=False)
    try:
        state.apply(train=False)
        hw = (settings["size"][0], settings["size"][1])
        _, out = probe_input(
            runner, lambda x: x.to(dtype), hw, settings, fixed_size(net, loaded), device
        )
    finally:
        runner.close()
        state.restore()
    return int(channels_first(out, module).shape[1])
