"""Per-frame preparation for live mode: the panels' arrays at a fraction of ``prepare_result``'s cost.

:func:`actviz.ui.session.prepare_result` prepares everything a result could ever show: a
histogram and a Grad-CAM for every layer, the module tree, float64 statistics. Live mode runs it
many times a second, so :func:`prepare_live` builds the same :class:`~actviz.ui.session.RunResult`
(through the same :func:`~actviz.ui.session.assemble_result`) but computes only what is on
screen and defers the rest until the user asks for it:

* statistics and mosaics by the cheap paths of :mod:`actviz.ui.fast_views`;
* histograms only for the layers named in ``eager_hist`` (the selected one); the others are
  computed when first read (:class:`~actviz.ui.fast_views.LazyHistLayer`);
* Grad-CAM only for the layer shown; the other layers' maps are computed when first read
  (:class:`~actviz.ui.fast_views.LazyGradCams`);
* mosaics only for the panels on screen: the others keep the previous frame's
  (:class:`ShownMosaics`) until they scroll into view;
* the module tree only when an output shape changed (``tree=None`` otherwise, which the window
  reads as "keep the tree you have").

When the records are on a GPU, :mod:`actviz.ui.device_reduction` computes the statistics,
histograms and normalised mosaics there and copies everything to the host in one transfer per
frame (not one per layer). ``actviz.capture`` moves records to the CPU today, so that path is
taken only with records kept on the device.

No Qt here: this module can move to ``actviz.core`` unchanged.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Collection, Sequence
from dataclasses import dataclass

import numpy as np
import torch

from actviz.core import views
from actviz.core.capture import Capture, CaptureCancelled
from actviz.core.structures import first_tensor
from actviz.ui import device_reduction
from actviz.ui.device_reduction import DeviceLayer, device_grad_cam, device_saliency
from actviz.ui.fast_views import (
    MAX_MOSAIC_PIXELS,
    LazyGradCams,
    LazyHistLayer,
    as_float,
    fast_stats,
    grad_norm,
    live_mosaic,
    max_tile_for,
    torch_threads,
)
from actviz.ui.session import (
    PreparedLayer,
    RunRequest,
    RunResult,
    assemble_result,
    default_gradcam_layer,
    display_image,
    gradcam_candidates,
    output_shapes,
    prepare_layer,
    saliency_at_image,
)

log = logging.getLogger(__name__)

__all__ = ["ShownMosaics", "prepare_live", "shown_mosaics"]


# --------------------------------------------------------------------------------------------
# CPU preparation
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class ShownMosaics:
    """A layer's mosaics as shown now: stand-ins while its panel is off screen.

    Holds no tensor and no capture, so keeping it does not keep the previous frame alive.
    """

    shape: tuple[int, ...] | None
    mosaic: views.Mosaic
    grad_mosaic: views.Mosaic | None


def shown_mosaics(result: RunResult | None) -> dict[str, ShownMosaics]:
    """The mosaics of ``result``'s layers (for :func:`prepare_live`'s ``previous_mosaics``)."""
    if result is None:
        return {}
    return {
        name: ShownMosaics(layer.shape, layer.mosaic, layer.grad_mosaic)
        for name, layer in result.layers.items()
        if layer.mosaic is not None
    }


def _prepare_maps_layer(
    cap: Capture,
    name: str,
    normalize: str,
    eager_hist: bool,
    max_pixels: int,
    previous: ShownMosaics | None = None,
    first_channel: int = 0,
) -> PreparedLayer | None:
    """The fast path for a 4-D float output; None when the layer needs the general path.

    With ``previous`` (a layer off screen), its mosaics are reused instead of recomputed when
    the shapes and the channel page match; views, statistics and histogram are always this
    frame's.
    """
    rec = cap[name]
    tensor = rec.tensor
    if tensor is None or tensor.dim() != 4 or not tensor.is_floating_point():
        return None
    stats = fast_stats(tensor)
    stats["name"] = rec.name
    stats["type"] = rec.module_type
    grad = rec.grad
    stats["grad_norm"] = grad_norm(grad)
    view = views.layer_view(tensor)
    c, h, w = view.data.shape
    tile = max_tile_for(c, h, w, max_pixels=max_pixels)
    first = views.clamp_first_channel(first_channel, c)
    reuse = (
        previous is not None
        and previous.shape == tuple(tensor.shape)
        and previous.mosaic.first_channel == first
    )
    mosaic = previous.mosaic if reuse else live_mosaic(view.data, normalize, tile, first)
    grad_view = grad_mosaic = None
    if grad is not None and grad.shape == tensor.shape:
        # |gradient| of the sample shown only (views.magnitude would copy the whole batch).
        g0 = np.abs(as_float(grad[0]).numpy())
        grad_view = views.LayerView("maps", g0, tuple(grad.shape), view.description)
        if reuse and previous.grad_mosaic is not None:  # type: ignore[union-attr]
            grad_mosaic = previous.grad_mosaic
        else:
            grad_mosaic = live_mosaic(grad_view.data, normalize, tile, first)
    layer = LazyHistLayer(
        hist_source=tensor,
        name=name,
        module_type=rec.module_type,
        shape=tuple(tensor.shape),
        calls=len(cap.calls(name)),
        view=view,
        mosaic=mosaic,
        grad_view=grad_view,
        grad_mosaic=grad_mosaic,
        stats=stats,
        hist=None,
    )
    if eager_hist:
        _ = layer.hist
    return layer


def prepare_live(
    cap: Capture,
    request: RunRequest,
    *,
    previous_shapes: dict[str, tuple[int, ...]] | None = None,
    eager_hist: Sequence[str] = (),
    threads: int | None = 1,
    max_pixels: int = MAX_MOSAIC_PIXELS,
    should_stop: Callable[[], bool] | None = None,
    device_path: bool | None = None,
    mosaic_layers: Collection[str] | None = None,
    previous_mosaics: dict[str, ShownMosaics] | None = None,
) -> RunResult:
    """Turn a capture into panel-ready arrays, computing only what is on screen.

    Parameters
    ----------
    cap
        The frame's capture.
    request
        Layers with panels, normalisation, image, categories and Grad-CAM layer.
    previous_shapes
        The previous frame's ``output_shapes``; when they are equal the module tree is not
        rebuilt (``result.tree`` is None).
    eager_hist
        Layers whose histogram is computed now (the selected layer); the others on first read.
    threads
        torch intra-op threads while preparing (None leaves the setting alone).
    max_pixels
        Pixel budget of one mosaic (tiles are downsampled above it).
    should_stop
        Polled between layers; True raises ``CaptureCancelled``.
    device_path
        Reduce with :func:`~actviz.ui.device_reduction.reduce_on_device` (one host copy per
        frame); None: when the records are not on the CPU.
    mosaic_layers
        Layers whose panels are on screen: only their mosaics are built; the others reuse
        ``previous_mosaics`` (same shape and normalisation) until they scroll into view.
        None builds every mosaic.
    previous_mosaics
        :func:`shown_mosaics` of the result shown now.

    Returns
    -------
    RunResult
        Same fields as :func:`actviz.ui.session.prepare_result`; ``grad_cams`` is a
        :class:`~actviz.ui.fast_views.LazyGradCams` and the layers are
        :class:`~actviz.ui.fast_views.LazyHistLayer` where possible.
    """
    with torch_threads(threads):
        return _prepare_live(
            cap,
            request,
            previous_shapes,
            set(eager_hist),
            max_pixels,
            should_stop,
            device_path,
            None if mosaic_layers is None else set(mosaic_layers),
            previous_mosaics,
        )


def _prepare_live(
    cap: Capture,
    request: RunRequest,
    previous_shapes: dict[str, tuple[int, ...]] | None,
    eager_hist: set[str],
    max_pixels: int,
    should_stop: Callable[[], bool] | None,
    device_path: bool | None = None,
    mosaic_layers: set[str] | None = None,
    previous_mosaics: dict[str, ShownMosaics] | None = None,
) -> RunResult:
    from actviz.core.tree import module_tree

    def check() -> None:
        if should_stop is not None and should_stop():
            raise CaptureCancelled("cancelled while preparing the views")

    shown = [n for n in request.layers if n in cap]
    order = [n for n in cap.names if n in shown]
    image = display_image(cap.inputs, request.image)
    size = image.shape[:2] if image is not None else None

    def compute_cam(name: str) -> np.ndarray:
        rec = cap[name]
        try:
            return views.grad_cam(rec.tensor, rec.grad, size=size)
        except (ValueError, RuntimeError) as exc:
            log.debug("no Grad-CAM for %s: %s", name, exc)
            return np.zeros(size or (1, 1), dtype=np.float32)

    grad_cams = LazyGradCams(gradcam_candidates(cap, image), compute_cam)
    gradcam_default = default_gradcam_layer(request.gradcam_layer, grad_cams, order)

    on_device = device_path
    if on_device is None:
        on_device = any((t := cap[n].tensor) is not None and t.device.type != "cpu" for n in order)
    device_layers: dict[str, DeviceLayer] = {}
    saliency_map: np.ndarray | None = None
    saliency_message = ""
    if on_device:
        # Everything the panels show travels in one device-to-host copy.
        extras: dict[str, torch.Tensor] = {}
        if gradcam_default is not None:
            rec = cap[gradcam_default]
            extras["gradcam"] = device_grad_cam(rec.tensor, rec.grad, size)
        in_grad = first_tensor(cap.input_grads)
        if in_grad is not None and in_grad.dim() in (3, 4) and image is not None:
            extras["saliency"] = device_saliency(in_grad, image.shape[:2])
        reduced = device_reduction.reduce_on_device(
            [(n, cap[n].tensor, cap[n].grad) for n in order],
            normalize=request.normalize,
            max_pixels=max_pixels,
            first_channels=request.channel_pages,
            hist_names=[n for n in order if n in eager_hist],
            extras=extras,
        )
        device_layers = reduced.layers
        if "gradcam" in reduced.extras:
            grad_cams.set_computed(gradcam_default, reduced.extras["gradcam"])
        if "saliency" in reduced.extras:
            saliency_map = reduced.extras["saliency"]
    if saliency_map is None:
        saliency_map, saliency_message = saliency_at_image(cap.input_grads, image)
    layers: dict[str, PreparedLayer] = {}
    for name in order:
        check()
        layer: PreparedLayer | None
        if name in device_layers:
            layer = device_layers[name].prepared(cap, name)
        else:
            stand_in = None
            if mosaic_layers is not None and name not in mosaic_layers and previous_mosaics:
                stand_in = previous_mosaics.get(name)
                if stand_in is not None and stand_in.mosaic.normalize != request.normalize:
                    stand_in = None
            layer = _prepare_maps_layer(
                cap,
                name,
                request.normalize,
                name in eager_hist,
                max_pixels,
                stand_in,
                request.first_channel(name),
            )
        if layer is None:
            layer = prepare_layer(cap, name, request.normalize, request.first_channel(name))
        layers[name] = layer
    shapes = output_shapes(cap)
    check()
    if gradcam_default is not None:
        _ = grad_cams[gradcam_default]  # the one on screen: computed here, off the GUI thread
    tree = None
    if previous_shapes is None or previous_shapes != shapes:
        tree = module_tree(request.model, cap)
    return assemble_result(
        cap,
        request,
        layers=layers,
        order=order,
        image=image,
        saliency=saliency_map,
        saliency_message=saliency_message,
        grad_cams=grad_cams,
        tree=tree,
        shapes=shapes,
        gradcam_default=gradcam_default,
    )
