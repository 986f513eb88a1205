"""torchvision models by name: weights resolution, cache check, offline fallback (the network is
probed with a short timeout, so an offline machine gets random weights at once)."""

from __future__ import annotations

import contextlib
import inspect
import logging
import os
import socket
import urllib.error
from pathlib import Path
from typing import Any
from urllib.parse import urlparse

import torch
from torch import nn

from actviz.io.errors import ModelLoadError
from actviz.io.models.checkpoints import one_line
from actviz.io.models.loaded_model import LoadedModel

log = logging.getLogger(__name__)
#: Set to 1/true/yes to forbid any download attempt.
OFFLINE_ENV = "ACTVIZ_OFFLINE"
#: Seconds the connectivity probe may take before the machine counts as offline.
PROBE_TIMEOUT_S = 3.0
_DEFAULT_HOST = "download.pytorch.org"
#: Prefix of timm architecture names (``timm/resnet18``), as on the Hugging Face hub.
TIMM_PREFIX = "timm/"


def torchvision_names() -> list[str]:
    """All model names torchvision can build (``torchvision.models.list_models()``)."""
    import torchvision.models

    return list(torchvision.models.list_models())


def _offline_by_env() -> bool:
    return os.environ.get(OFFLINE_ENV, "").strip().lower() in {"1", "true", "yes", "on"}


def random_init(weights: Any) -> bool:
    """Whether ``weights=`` asks for random initialisation (None, False, none/random/"")."""
    if weights is None or weights is False:
        return True
    return isinstance(weights, str) and weights.strip().lower() in {"none", "random", ""}


def offline_note(host: str, what: str) -> str:
    """The warning of a model left random for want of the network; ``what`` leads to its name."""
    why = f"{OFFLINE_ENV} is set" if _offline_by_env() else f"{host} unreachable"
    return f"no network ({why}){what} uses random weights; predictions are meaningless"


def resolve_weights(name: str, weights: Any) -> Any:
    """``weights=`` (``"DEFAULT"``, a member or its name, None/``"random"``/``"none"``) as a
    torchvision ``WeightsEnum`` member, or None (random); ``ModelLoadError`` lists them."""
    from torchvision.models import get_model_weights

    if random_init(weights):
        return None
    if not isinstance(weights, str):
        return weights  # already a WeightsEnum member
    try:
        enum = get_model_weights(name)
    except (ValueError, KeyError) as exc:
        raise ModelLoadError(f"{name}: torchvision has no pretrained weights for it") from exc
    member = weights.rsplit(".", 1)[-1]
    if member.upper() == "DEFAULT":
        return enum.DEFAULT
    try:
        return enum[member]
    except KeyError:
        available = ", ".join(["DEFAULT", *enum.__members__])
        raise ModelLoadError(
            f"{name}: unknown weights {weights!r}; available: {available}"
        ) from None


def network_available(host: str = _DEFAULT_HOST, timeout: float = PROBE_TIMEOUT_S) -> bool:
    """Whether ``host:443`` answers within ``timeout`` seconds (never under ``ACTVIZ_OFFLINE``)."""
    if _offline_by_env():
        return False
    try:
        socket.create_connection((host, 443), timeout=timeout).close()
    except OSError:
        return False
    return True


def construct(name: str, *, num_classes: int | None = None) -> nn.Module:
    """Build an architecture (torchvision or ``timm/<name>``) with random weights, no download;
    ``ModelLoadError`` when timm is missing or ``num_classes`` is refused."""
    kwargs: dict[str, Any] = {} if num_classes is None else {"num_classes": num_classes}
    if name.startswith(TIMM_PREFIX):
        try:
            import timm
        except ImportError as exc:
            raise ModelLoadError(f"{name}: needs the 'timm' package (pip install timm)") from exc
        return timm.create_model(name[len(TIMM_PREFIX) :], pretrained=False, **kwargs)
    from torchvision.models import get_model, get_model_builder

    kwargs["weights"] = None
    # Detection/segmentation builders default to downloading an ImageNet backbone.
    if "weights_backbone" in inspect.signature(get_model_builder(name)).parameters:
        kwargs["weights_backbone"] = None
    try:
        return get_model(name, **kwargs)
    except TypeError as exc:
        if num_classes is None:
            raise
        # A builder without a num_classes argument (e.g. optical flow models).
        raise ModelLoadError(f"{name}: cannot build it with {num_classes} classes") from exc


def build_torchvision(
    name: str, weights: Any = "DEFAULT", *, num_classes: int | None = None, src: str = ""
) -> LoadedModel:
    """Build a torchvision model, pretrained when the weights can be had without hanging: cached,
    else downloaded if the network answers quickly, else random with a warning. Metadata comes
    from the weights enum (known offline); ``num_classes`` needs ``weights=None``."""
    from torchvision.models import get_model, get_model_weights

    wanted = resolve_weights(name, weights)
    if (meta := wanted) is None:
        with contextlib.suppress(ValueError, KeyError, AttributeError):
            meta = get_model_weights(name).DEFAULT
    # What the weights enum says, known without a download (the default's when random).
    categories = list(meta.meta.get("categories") or ()) or None if meta is not None else None
    transforms = meta.transforms() if meta is not None else None
    crop = getattr(transforms, "crop_size", None)
    input_size = (int(crop[0]), int(crop[-1])) if crop else None
    if num_classes is not None:
        if wanted is not None:
            raise ModelLoadError(f"{name}: pretrained weights cannot have {num_classes} classes")
        if categories is not None and len(categories) != num_classes:
            categories = None

    def built(model: nn.Module, label: str | None, *warnings: str) -> LoadedModel:
        suffix = label.rsplit(".", 1)[-1] if label else "random init"
        return LoadedModel(
            model,
            f"{name} ({suffix})",
            src or name,
            "torchvision",
            categories=categories,
            transforms=transforms,
            input_size=input_size,
            warnings=list(warnings),
        )

    if wanted is None:
        return built(construct(name, num_classes=num_classes), None)
    label = f"{type(wanted).__name__}.{wanted.name}"
    # Where torch.hub keeps (or would keep) the file.
    cached = Path(torch.hub.get_dir()) / "checkpoints" / os.path.basename(urlparse(wanted.url).path)
    if not cached.is_file():
        host = urlparse(wanted.url).hostname or _DEFAULT_HOST
        if not network_available(host):
            return built(construct(name), None, offline_note(host, f": {name}"))
        log.info("downloading %s weights to %s", label, cached)
    try:
        model = get_model(name, weights=wanted)
    except (urllib.error.URLError, TimeoutError, ConnectionError) as exc:
        msg = (
            f"could not download {label} ({one_line(exc)}): {name} uses random weights; "
            "predictions are meaningless"
        )
        return built(construct(name), None, msg)
    except (RuntimeError, OSError, EOFError, ValueError) as exc:
        raise ModelLoadError(
            f"{cached}: cached {label} weights are unreadable ({one_line(exc)}); "
            "delete the file to download it again"
        ) from exc
    return built(model, label)
