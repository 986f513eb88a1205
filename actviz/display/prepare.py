"""The one path from a capture to what is shown: :func:`prepare` (single runs, live frames,
export). ``fast=True`` (live frames) takes float32 statistics, keeps mosaics under a pixel
budget and defers what nobody looks at until it is read; ``fast=False`` is exact."""

from __future__ import annotations

import logging
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

import numpy as np
import torch

from actviz.core.records import CaptureCancelled
from actviz.core.structures import first_tensor
from actviz.core.targets import name_token, sequence_logits
from actviz.core.tree import module_tree
from actviz.display import attribution as attr
from actviz.display import stats, token_maps
from actviz.display.attention import attention_rollout, rollout_map
from actviz.display.layer_views import LayerView, layer_view, magnitude_view
from actviz.display.logit_lens import lens_layers, logit_lens, token_texts
from actviz.display.mosaic import MAX_MOSAIC_PIXELS
from actviz.display.prepared import DisplaySpec, Lazy, LazyMap, LazyStats, PreparedLayer, RunResult
from actviz.display.repage import ReusableMosaics, layer_mosaics, symmetric_for

log = logging.getLogger(__name__)


def output_shapes(cap: Any) -> dict[str, tuple[int, ...]]:
    """Output shape of every captured layer (the tree's shape column, memory estimates)."""
    return {n: tuple(t.shape) for n in cap.names if (t := cap[n].tensor) is not None}


def prepare_layer(
    cap: Any,
    name: str,
    spec: DisplaySpec,
    *,
    fast: bool = False,
    hist_now: bool = True,
    stats_now: bool = True,
    max_pixels: int = MAX_MOSAIC_PIXELS,
    host: HostLayer | None = None,
    stand_in: ReusableMosaics | None = None,
) -> PreparedLayer:
    """Statistics, views, mosaics and histogram of one captured layer; ``hist_now`` /
    ``stats_now`` compute those now (else on first read); ``stand_in`` mosaics are kept instead
    of built when shape, page and normalisation match (a panel off screen)."""
    records = cap.calls(name)
    rec, calls = records[0], len(records)
    if (tensor := rec.tensor) is None:
        return PreparedLayer(
            name, rec.module_type, None, calls, None, None, None, None, {"shape": None}
        )
    shape = tuple(tensor.shape)
    record_grad = rec.grad
    grad = record_grad if record_grad is not None and record_grad.shape == tensor.shape else None
    if host is not None:
        figures = dict(host.stats)
        view = layer_view(host.sample, spec.sample, full_shape=shape)
        g = host.grad_sample
        grad_view = None if g is None else layer_view(g, spec.sample, full_shape=shape)
        hist = Lazy(lambda: stats.histogram(tensor)) if host.hist is None else Lazy.of(host.hist)
    else:
        if fast and not stats_now and tensor.device.type == "cpu":
            known = {"shape": shape, "name": rec.name, "type": rec.module_type}
            # The gradient's norm waits too: only the Overview's panels show it.
            norm = {"grad_norm": Lazy(lambda: stats.grad_norm(record_grad, exact=False))}
            figures = LazyStats(
                lambda: stats.tensor_stats(tensor, record_grad, exact=False), known, norm
            )
        else:
            figures = stats.tensor_stats(tensor, record_grad, exact=not fast)
        view = layer_view(tensor, spec.sample)
        # |g| made when read (a hover, the channel view); mosaics take it page by page.
        grad_view = None if grad is None else magnitude_view(layer_view(grad, spec.sample))
        hist = Lazy(lambda: stats.histogram(tensor))
    if hist_now:
        hist.get()
    if not isinstance(figures, LazyStats):
        figures.update(name=rec.name, type=rec.module_type)
    tokens: token_maps.TokenView | None = None
    if (kind := token_maps.sequence_kind(shape, spec.tokens, spec.layout)) is not None:
        # ViT tokens become maps on the patch grid; text tokens a token view, not a mosaic.
        values = host.sample if host is not None else tensor
        grads = host.grad_sample if host is not None else grad
        pick = 0 if host is not None else spec.sample
        if kind == "patches":
            view, grad_view = _patch_views(values, grads, spec, pick, shape)
        else:
            tokens = token_maps.token_view(values, spec.tokens or (), pick, grad=grads)
            tokens = replace(tokens, shape=shape, sample=min(spec.sample, shape[0] - 1))
    first, page = spec.first_channel(name, view), spec.page_size(name, view)
    order = spec.channel_orders.get(name)
    # An off-screen panel keeps its mosaics: they are made again once scrolled to.
    m = stand_in.mosaic if stand_in is not None else None
    kept = m is not None and (stand_in.shape, m.position, m.order, m.normalize, m.page_size)
    if stale := kept == (shape, first, order, spec.normalize, page):
        act_m, grad_m = m, stand_in.grad_mosaic if grad_view is not None else None
        for kept_m in (act_m, grad_m):  # made from their tiles: an older capture may go
            _ = kept_m.image if kept_m is not None else None
    else:
        act_m, grad_m = layer_mosaics(
            view,
            grad_view,
            spec.normalize,
            first,
            max_pixels=max_pixels if fast else None,
            page=page,
            symmetric=symmetric_for(spec.colormap, view),
            order=order,
        )
    if tokens is not None:
        act_m = grad_m = None  # the token panel shows it
    return PreparedLayer(
        name=name,
        module_type=rec.module_type,
        shape=shape,
        calls=calls,
        view=view,
        mosaic=act_m,
        grad_view=grad_view,
        grad_mosaic=grad_m,
        stats=figures,
        hist_lazy=hist,
        tokens=tokens,
        stale_mosaics=stale and act_m is not None,
    )


def _patch_views(
    values: Any, grads: Any, spec: DisplaySpec, pick: int, shape: tuple[int, ...]
) -> tuple[LayerView, LayerView | None]:
    """A ViT token layer as ``D`` maps over its patch grid (and ``|gradient|`` the same)."""
    layout = spec.layout
    assert layout is not None
    rows, cols = layout.grid
    s = min(spec.sample, shape[0] - 1)
    batch = f" (sample {s} of {shape[0]})" if shape[0] > 1 else ""
    text = f"{shape[2]} features on the {rows}x{cols} patch grid"
    if layout.prefix:
        text += f" ({layout.prefix} prefix token{'s' if layout.prefix > 1 else ''} left out)"

    def maps(t: Any) -> LayerView:
        return LayerView("maps", token_maps.patch_maps(t, layout, pick), shape, text + batch)

    same = grads is not None and tuple(grads.shape)[1:] == shape[1:]
    return maps(values), magnitude_view(maps(grads)) if same else None


def _cam_inputs(rec: Any, layout: Any) -> tuple[torch.Tensor, torch.Tensor]:
    """A layer's activation and gradient for Grad-CAM: ViT tokens as maps on the patch grid."""
    act, grad = rec.tensor, rec.grad
    if layout is not None and act.dim() == 3:
        return token_maps.patch_grid_tensor(act, layout), token_maps.patch_grid_tensor(grad, layout)
    return act, grad


def _cam_or_blank(
    rec: Any, size: tuple[int, int] | None, sample: int, layout: Any = None
) -> np.ndarray:
    try:
        return attr.grad_cam(*_cam_inputs(rec, layout), size=size, sample=sample)
    except (ValueError, RuntimeError) as exc:  # a layer Grad-CAM cannot use
        log.debug("no Grad-CAM for %s: %s", rec.name, exc)
        return np.zeros(size or (1, 1), dtype=np.float32)


def prepare(
    cap: Any,
    spec: DisplaySpec,
    *,
    fast: bool = False,
    model: torch.nn.Module | None = None,
    previous_shapes: Mapping[str, tuple[int, ...]] | None = None,
    eager_hist: Collection[str] | None = None,
    eager_cams: Collection[str] | None = None,
    eager_stats: Collection[str] | None = None,
    mosaic_layers: Collection[str] | None = None,
    reuse: Mapping[str, ReusableMosaics] | None = None,
    device: bool | None = None,
    max_pixels: int = MAX_MOSAIC_PIXELS,
    should_stop: Callable[[], bool] | None = None,
    progress: Callable[[str], None] | None = None,
) -> RunResult:
    """Turn a capture into panel-ready arrays: the one preparation path. ``model`` gives the
    module tree (``result.tree``), not rebuilt when ``previous_shapes`` match; ``eager_hist``,
    ``eager_stats``, ``eager_cams`` name the layers whose histogram, statistics, Grad-CAM map are
    computed now, the others on first read (None: every one; Grad-CAM in the fast variant: the
    default layer); only the ``mosaic_layers`` on screen get mosaics built, the others keep
    ``reuse``'s; ``device`` reduces on the records' device with one host copy (None: when not on
    the CPU); ``should_stop`` is polled between layers (True raises ``CaptureCancelled``)."""
    report = progress or (lambda _msg: None)

    def check() -> None:
        if should_stop is not None and should_stop():
            raise CaptureCancelled("cancelled while preparing the views")

    shown = set(spec.layers)
    order = [n for n in cap.names if n in shown]
    image = attr.display_image(cap.inputs, spec.image, spec.sample)
    size = image.shape[:2] if image is not None else None
    candidates = attr.gradcam_candidates(cap, spec.layout) if image is not None else []
    cam_default = attr.default_gradcam_layer(cap, candidates, spec.gradcam_layer)
    if eager_cams is None:
        eager_cams = candidates if not fast else [cam_default] if cam_default else []
    cams_now = set(eager_cams)
    hist_names = set(order if eager_hist is None else eager_hist)
    stats_names = set(order if eager_stats is None else eager_stats)
    on_device = device
    if on_device is None:
        on_device = any((t := cap[n].tensor) is not None and t.device.type != "cpu" for n in order)
    cams: dict[str, np.ndarray] = {}
    hosts: dict[str, HostLayer] = {}
    sal, sal_msg = None, ""
    if on_device:
        to_copy: dict[str, torch.Tensor] = {}
        if cam_default is not None and cam_default in cams_now:
            cam_inputs = _cam_inputs(cap[cam_default], spec.layout)
            to_copy["gradcam"] = attr.grad_cam_tensor(*cam_inputs, size, spec.sample)
        if not attr.saliency_unavailable(cap.input_grads, image):
            grad = first_tensor(cap.input_grads)
            to_copy["saliency"] = attr.saliency_tensor(grad, image.shape[:2], spec.sample)  # type: ignore[union-attr]
        hosts, extras = copy_to_host(
            [(n, cap[n].tensor, cap[n].grad) for n in order],
            sample=spec.sample,
            hist_names=[n for n in order if n in hist_names],
            extras=to_copy,
        )
        if "gradcam" in extras:
            cams[cam_default] = extras["gradcam"]  # type: ignore[index]
        sal = extras.get("saliency")
    if sal is None:
        sal, sal_msg = attr.saliency_at_image(cap.input_grads, image, spec.sample, cap.inputs)
    tok_sal = None
    if sal is None and model is not None and attr.token_input(cap.inputs):
        tok_sal = attr.token_saliency(cap, attr.input_embedding(model), spec.tokens, spec.sample)
        if tok_sal is not None:
            sal_msg = ""
    layers: dict[str, PreparedLayer] = {}
    stand_ins = (reuse or {}) if mosaic_layers is not None else {}
    for i, name in enumerate(order):
        check()
        report(f"preparing {name} ({i + 1}/{len(order)})")
        layers[name] = prepare_layer(
            cap,
            name,
            spec,
            fast=fast,
            hist_now=name in hist_names,
            stats_now=name in stats_names,
            max_pixels=max_pixels,
            host=hosts.get(name),
            stand_in=None if name in (mosaic_layers or ()) else stand_ins.get(name),
        )
    check()
    report("Grad-CAM")
    grad_cams = LazyMap(
        {
            n: Lazy.of(cams[n])
            if n in cams
            else Lazy(lambda rec=cap[n]: _cam_or_blank(rec, size, spec.sample, spec.layout))
            for n in candidates
        }
    )
    for name in [n for n in candidates if n in cams_now]:
        check()
        _ = grad_cams[name]  # computed here, off the GUI thread
    # Attention maps, their rollout over a ViT's image, and a language model's logit lens.
    attention = cap.extra.get("attention") if isinstance(cap.extra, Mapping) else None
    extras: dict[str, Any] = {"token_saliency": tok_sal, "attention": attention}
    if attention is not None and spec.layout is not None and attention.layers:
        try:
            rollout = attention_rollout(attention.stacked(spec.sample))
            extras["rollout"] = rollout_map(rollout, spec.layout, size)
        except ValueError as exc:  # tokens that are not the patch layout's
            log.debug("no attention rollout: %s", exc)
    if model is not None and not fast:
        if (lens := lens_layers(model)) is not None and any(b in cap for b in lens.blocks):
            extras["logit_lens"] = logit_lens(
                model,
                cap,
                sample=spec.sample,
                tokenizer=spec.tokenizer,
                tokens=spec.tokens,
                layers=lens,
            )
    shapes = output_shapes(cap)
    changed = previous_shapes is None or dict(previous_shapes) != shapes
    tree = module_tree(model, cap) if model is not None and changed else None
    errors: list[str] = []
    out = first_tensor(cap.output)
    if out is not None and out.is_floating_point() and not bool(torch.isfinite(out).all()):
        bad = int((~torch.isfinite(out)).sum())
        errors.append(
            f"The model output contains {bad} NaN/Inf value(s) of {out.numel()}: predictions and "
            "gradients are not meaningful (see the statistics table for where they start)."
        )
    target_text, index, categories = cap.target_description, cap.target_index, spec.categories
    if index is not None and categories and 0 <= index < len(categories):
        target_text += f": {categories[index]}"
    elif (
        index is not None and spec.tokenizer is not None and sequence_logits(cap.output) is not None
    ):
        # A language model's target token, named by its text as the predictions are.
        target_text = name_token(target_text, index, token_texts(spec.tokenizer, [index])[0])
    return RunResult(
        layers=layers,
        shown=tuple(order),
        predictions=tuple(
            attr.top_predictions(
                cap.output, categories, sample=spec.sample, tokenizer=spec.tokenizer
            )
        ),
        prediction_kind=attr.prediction_kind(cap.output, categories),
        target_text=target_text,
        target_index=cap.target_index,
        image=image,
        saliency=sal,
        saliency_message=sal_msg,
        grad_cams=grad_cams,
        gradcam_default=cam_default,
        grad_norm_names=tuple(order),
        output_shapes=shapes,
        warnings=tuple(cap.warnings),
        errors=tuple(errors),
        elapsed_s=cap.elapsed_s,
        nbytes=cap.nbytes,
        spec=spec,
        capture=cap,
        tree=tree,
        **extras,
    )


# Records on a GPU are reduced where they live and copied to the host once, not per layer.
@dataclass
class HostLayer:
    """One layer's numbers after the copy: statistics, the shown sample, its histogram."""

    shape: tuple[int, ...]
    stats: dict[str, Any]
    sample: np.ndarray  # output[s : s + 1] (the whole output when it has no batch dimension)
    grad_sample: np.ndarray | None = None  # |gradient|, same slice
    hist: tuple[np.ndarray, np.ndarray] | None = None


def _to_host(buffer: torch.Tensor) -> torch.Tensor:
    """The frame's single device-to-host copy (a seam the tests count)."""
    return buffer.cpu()


def _sample_slice(t: torch.Tensor, sample: int) -> torch.Tensor:
    if t.dim() < 2:
        return t
    s = min(sample, t.shape[0] - 1)
    return t[s : s + 1]


def copy_to_host(
    layers: Sequence[tuple[str, torch.Tensor | None, torch.Tensor | None]],
    *,
    sample: int = 0,
    hist_names: Sequence[str] = (),
    bins: int = stats.HIST_BINS,
    extras: dict[str, torch.Tensor] | None = None,
) -> tuple[dict[str, HostLayer], dict[str, np.ndarray]]:
    """Reduce ``(name, output, gradient)`` layers where they live and copy the results once:
    ``({name: HostLayer}, {key: extra})``: the ``sample`` and ``hist_names``' histograms."""
    f64: list[torch.Tensor] = []
    f32: list[torch.Tensor] = []
    plan: list[dict[str, Any]] = []
    wanted = set(hist_names)
    for name, tensor, grad in layers:
        if tensor is None:
            continue
        entry: dict[str, Any] = {"name": name, "shape": tuple(tensor.shape), "stats": len(f64)}
        f64.append(stats.stats_vector(tensor, grad))
        if name in wanted:
            entry["hist"] = len(f64)
            f64.append(stats.histogram_tensor(tensor, bins))
        part = stats.as_float(_sample_slice(tensor, sample)).contiguous()
        entry["sample"] = (len(f32), tuple(part.shape))
        f32.append(part)
        if grad is not None and grad.shape == tensor.shape:
            entry["grad"] = len(f32)
            f32.append(stats.as_float(_sample_slice(grad, sample)).abs().contiguous())
        plan.append(entry)
    extra_index: dict[str, tuple[int, tuple[int, ...]]] = {}
    for key, value in (extras or {}).items():
        f32.append(stats.as_float(value).contiguous())
        extra_index[key] = (len(f32) - 1, tuple(value.shape))
    if not f32 and not f64:
        return {}, {}
    device = (f64 or f32)[0].device  # parts from elsewhere (a CPU extra) join it first
    parts = [p.reshape(-1).to(device, torch.float64).view(torch.uint8) for p in f64]
    parts += [p.reshape(-1).to(device).view(torch.uint8) for p in f32]
    host = _to_host(torch.cat(parts)).numpy()
    # Slice the buffer back into arrays (float64 parts first keeps every part aligned).
    out64, out32, offset = [], [], 0
    for group, out, dtype in ((f64, out64, np.float64), (f32, out32, np.float32)):
        for p in group:
            out.append(np.frombuffer(host, dtype, p.numel(), offset))
            offset += out[-1].nbytes
    hosts: dict[str, HostLayer] = {}
    for entry in plan:
        i, shape = entry["sample"]
        figures = stats.stats_from_vector(entry["shape"], out64[entry["stats"]])
        layer = HostLayer(entry["shape"], figures, out32[i].reshape(shape).copy())
        if "grad" in entry:
            layer.grad_sample = out32[entry["grad"]].reshape(shape).copy()
        if "hist" in entry:
            layer.hist = stats.split_histogram(out64[entry["hist"]], bins)
        hosts[entry["name"]] = layer
    return hosts, {k: out32[i].reshape(s).copy() for k, (i, s) in extra_index.items()}
