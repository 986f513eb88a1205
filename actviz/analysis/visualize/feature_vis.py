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
from dataclasses import replace
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
    VisualizeSettings,
    frozen,
)
from actviz.core.guards import ModelState

__all__ = ["VisualizeSettings", "layer_channels", "visualize"]


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
        The channels to visualise, one image each (an int is one channel; None: ``[0]``).
        For objectives without channels the values only key the seeds; ``target=`` replaces
        them by the target classes.
    settings
        What shapes the images (:class:`VisualizeSettings`; None: its defaults).
    target
        A class index (or several): maximise that logit of the model's output instead.
    batch
        Images per forward pass; the channels run in chunks of this many. None: all at once.
    cache
        Read and write results in the user's cache
        (:mod:`actviz.analysis.visualize.picture_cache`); only missing channels are computed.
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
        ``should_stop()`` turned True.
    """
    t0 = time.perf_counter()
    net, loaded = unwrap_model(model)
    settings = replace(settings or VisualizeSettings(), **overrides)
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
    obj = make_objective(settings.objective, target, module, settings.negative)
    norm = model_normalisation(loaded, settings.mean, settings.std)
    record = settings.record(obj.name, norm)
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

        store = VisualizationCache.for_model(net, layer, record)
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
                device,
                dtype,
                progress,
                should_stop,
            )
        record["input_size"] = list(fed) if fed is not None else None
        if store is not None:
            for k, value in computed.items():
                store.put(k, *value, input_size=fed)
    elif found:
        record["input_size"] = store.input_size if store is not None else None
    rows = [found[k] if k in found else computed[k] for k in keys]
    hw = settings.size
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
            else np.zeros((settings.steps, 0))
        ),
        activations=frozen(np.array([r[2] for r in rows], dtype=np.float64)),
        settings=MappingProxyType(record),
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
    settings = VisualizeSettings(size=size, input_size=input_size)
    state = ModelState(net, out_of_place=False)
    runner = LayerRunner(net, module, layer, redirect=False)
    try:
        state.apply(train=False)
        _, out = probe_input(
            runner, lambda x: x.to(dtype), settings, fixed_size(net, loaded), device
        )
    finally:
        runner.close()
        state.restore()
    return int(channels_first(out, module).shape[1])
