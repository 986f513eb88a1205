"""timm models by name (``timm:NAME``, ``timm/NAME`` or a bare name torchvision lacks), with
timm's own preprocessing (:class:`TimmTransform`) and cached pretrained weights."""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import Any

import torch
from torch import nn

from actviz.io.errors import ModelLoadError
from actviz.io.models import zoo
from actviz.io.models.checkpoints import one_line
from actviz.io.models.hf_models import cached_hub_file
from actviz.io.models.loaded_model import LoadedModel
from actviz.io.models.zoo import TIMM_PREFIX

log = logging.getLogger(__name__)

_PREFIXES = ("timm:", TIMM_PREFIX)
_HUB_HOST = "huggingface.co"


def timm_names() -> tuple[str, ...]:
    """Every architecture timm can build (empty when timm is not installed)."""
    try:
        import timm
    except ImportError:
        return ()
    # Not cached: listing takes milliseconds, and tests swap timm for a stand-in.
    return tuple(timm.list_models())


#: Where a name's next part begins (``vit_tiny`` in ``deit3.vit_tiny``, not ``convit_tiny``).
_PART_BREAKS = "_.-/:"


def rank_matches(query: str, names: Sequence[str]) -> list[str]:
    """The ``names`` containing ``query`` (any case; empty: all), best first: exact names, then
    prefixes, then a ``_``-part prefix, then any match, each group in the given order."""
    if not (key := query.strip().lower()):
        return list(names)
    groups: tuple[list[str], ...] = ([], [], [], [])
    for name in names:
        lowered = name.lower()
        at = lowered.find(key)
        if at < 0:
            continue
        if lowered == key:
            groups[0].append(name)
        elif at == 0:
            groups[1].append(name)
        elif any(
            lowered[i - 1] in _PART_BREAKS and lowered.startswith(key, i)
            for i in range(at, len(lowered) - len(key) + 1)
        ):
            groups[2].append(name)
        else:
            groups[3].append(name)
    return [name for group in groups for name in group]


def resolve_name(text: str, *, bare: bool = True) -> str | None:
    """The canonical ``timm/NAME`` for typed text (``timm:NAME``, ``timm/NAME``, or with ``bare`` a
    plain name), or None. ``ModelLoadError`` for a prefixed name timm lacks or without timm."""
    lowered = text.strip().lower()
    for prefix in _PREFIXES:
        if lowered.startswith(prefix):
            name = lowered[len(prefix) :]
            try:
                import timm  # noqa: F401
            except ImportError:
                raise ModelLoadError(
                    f"{text}: needs the 'timm' package (pip install 'actviz[timm]')"
                ) from None
            if not _is_timm_model(name):
                import difflib

                close = difflib.get_close_matches(name, timm_names(), n=3, cutoff=0.6)
                hint = f"; closest: {', '.join('timm:' + c for c in close)}" if close else ""
                raise ModelLoadError(f"{text}: timm has no model named {name!r}{hint}")
            return TIMM_PREFIX + name
    if bare and lowered and ":" not in lowered and "/" not in lowered and _is_timm_model(lowered):
        return TIMM_PREFIX + lowered
    return None


def _is_timm_model(name: str) -> bool:
    # A pretrained tag (vit_tiny_patch16_224.augreg_in21k) names weights, not the network.
    return bool(name) and name.split(".", 1)[0] in set(timm_names())


class TimmTransform:
    """timm's eval transform as actviz preprocessing (PIL image -> ``(C, H, W)``), with its data
    ``config`` and torchvision-style ``mean``, ``std``, ``crop_size`` and ``resize_size``."""

    def __init__(self, transform: Any, config: dict[str, Any]) -> None:
        self.transform = transform
        self.config = dict(config)
        self.mean = tuple(float(v) for v in config.get("mean", ())) or None
        self.std = tuple(float(v) for v in config.get("std", ())) or None
        size = config.get("input_size")
        self.crop_size = (int(size[-2]), int(size[-1])) if size else None
        self.resize_size = None
        for step in getattr(transform, "transforms", ()):
            if type(step).__name__ == "Resize":
                value = step.size
                self.resize_size = [value] if isinstance(value, int) else list(value)

    def __call__(self, image: Any) -> torch.Tensor:
        return self.transform(image)

    def __repr__(self) -> str:
        return f"TimmTransform({self.config})"


def build_timm(
    name: str, weights: Any = "DEFAULT", *, num_classes: int | None = None, src: str = ""
) -> LoadedModel:
    """Build a timm model with its preprocessing, pretrained when the weights are at hand:
    ``weights="DEFAULT"`` is cached, else downloaded when online (not ``ACTVIZ_OFFLINE``), else
    random with a warning. ``num_classes`` needs random init; ``src`` is what the user typed."""
    model = zoo.construct(name, num_classes=num_classes)
    warnings: list[str] = []
    weights_name: str | None = None
    if not zoo.random_init(weights) and num_classes is None:
        model, weights_name, note = _pretrained(name[len(TIMM_PREFIX) :], model)
        if note:
            warnings.append(note)
    transforms = categories = None
    try:
        from timm.data import create_transform, resolve_data_config

        config = resolve_data_config({}, model=model)  # from its pretrained config
        transforms = TimmTransform(create_transform(**config), config)
    except Exception as exc:  # noqa: BLE001 - an odd model or timm version: no preprocessing
        log.debug("no timm data config for %s: %s", type(model).__name__, exc)
    try:  # class names when the head is an ImageNet head timm knows
        from timm.data import ImageNetInfo, infer_imagenet_subset

        if subset := infer_imagenet_subset(model):
            info, count = ImageNetInfo(subset), int(getattr(model, "num_classes", 0) or 0)
            # The first synonym, as torchvision writes ImageNet names ("tench").
            categories = [info.index_to_description(i).split(",")[0] for i in range(count)] or None
    except Exception as exc:  # noqa: BLE001 - names are a nicety; never block the model
        log.debug("no ImageNet class names for %s: %s", type(model).__name__, exc)
    return LoadedModel(
        model,
        f"{name} ({weights_name or 'random init'})",
        src or name,
        "timm",
        categories=categories,
        transforms=transforms,
        input_size=transforms.crop_size if transforms is not None else None,
        warnings=warnings,
        task="classifier" if categories else None,
    )


def _pretrained(bare: str, model: nn.Module) -> tuple[nn.Module, str | None, str]:
    import timm

    cfg = getattr(model, "pretrained_cfg", None) or {}
    hub_id = cfg.get("hf_hub_id")  # the cached pretrained file (Hugging Face cache), if any
    cached = cached_hub_file(hub_id, "model.safetensors", "pytorch_model.bin") if hub_id else None
    try:
        if cached is not None:
            # source="" keeps timm from asking the hub: the cached file is loaded as a file.
            overlay = {"file": str(cached), "source": ""}
            built = timm.create_model(bare, pretrained=True, pretrained_cfg_overlay=overlay)
            return built, f"cached {hub_id}", ""
        if not hub_id and not cfg.get("url"):
            return model, None, f"timm/{bare} has no pretrained weights: it uses random weights"
        if zoo.network_available(_HUB_HOST):
            return timm.create_model(bare, pretrained=True), f"downloaded {hub_id}", ""
    except Exception as exc:  # noqa: BLE001 - hub, network and file errors of many kinds
        return (
            model,
            None,
            f"could not load pretrained timm/{bare} ({one_line(exc)}): random weights; "
            "predictions are meaningless",
        )
    return model, None, zoo.offline_note(_HUB_HOST, f" and no cached weights: timm/{bare}")
