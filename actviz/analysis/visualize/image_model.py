"""What the model expects of an image: the module inside an opened model, its normalisation and
fixed input size, and the checks that refuse models that take no RGB float image.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import torch
from torch import nn

from actviz.analysis.visualize.visualization import VisualizeError
from actviz.core.capture import resolve_layers
from actviz.core.records import INFERENCE_WEIGHTS_WARNING


def unwrap_model(model: Any) -> tuple[nn.Module, Any]:
    """``(module, loaded)`` from an ``nn.Module`` or a
    :class:`~actviz.io.models.loaded_model.LoadedModel`."""
    if isinstance(model, nn.Module):
        return model, None
    inner = getattr(model, "model", None)
    if isinstance(inner, nn.Module):
        return inner, model
    raise VisualizeError(
        f"expected a torch.nn.Module or an opened model, not {type(model).__name__}"
    )


def model_normalisation(
    loaded: Any, mean: Sequence[float] | None, std: Sequence[float] | None
) -> tuple[tuple[float, ...], tuple[float, ...]] | None:
    """The mean/std the model's preprocessing applies, as the input pipeline reads it
    (:func:`actviz.io.input_files.open_input` undoes the same attributes for overlays)."""
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
    """The input size a model is known to need: the opened model's, a timm patch embedding's,
    timm's config, a Hugging Face config's ``image_size``."""
    size = getattr(loaded, "input_size", None) if loaded is not None else None
    if size is None:
        size = getattr(getattr(model, "patch_embed", None), "img_size", None)
    if isinstance(size, Sequence) and len(size) == 2:
        return (int(size[0]), int(size[1]))
    cfg = getattr(model, "pretrained_cfg", None) or getattr(model, "default_cfg", None)
    if isinstance(cfg, Mapping) and isinstance(cfg.get("input_size"), Sequence):
        shape = cfg["input_size"]
        if len(shape) == 3:
            return (int(shape[1]), int(shape[2]))
    image_size = getattr(getattr(model, "config", None), "image_size", None)
    if isinstance(image_size, int):
        return (image_size, image_size)
    if isinstance(image_size, Sequence) and len(image_size) == 2:
        return (int(image_size[0]), int(image_size[1]))
    return None


def check_image_model(model: nn.Module, loaded: Any) -> tuple[torch.device, torch.dtype]:
    """Refuse what cannot take an RGB float image; the device and dtype to feed it."""
    from actviz.io.input_files import expected_input

    if loaded is not None and getattr(loaded, "tokenizer", None) is not None:
        if getattr(loaded, "processor", None) is None:
            raise VisualizeError(
                f"{loaded.name} reads text (it has a tokenizer and no image processor); "
                "feature visualisation optimises an input image"
            )
    exp = expected_input(model)
    if exp.channels is None:
        # No convolution to read the input from, and an embedding table: token ids go in
        # (a text model shown without its tokenizer). Its forward would fail on any image,
        # and the probe's "pass input_size" hint would send the user after the wrong fix.
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
