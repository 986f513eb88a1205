"""Models larger than one device: placement over GPUs, CPU and disk with ``accelerate``
(``actviz[big]``, imported only when asked for). Captures wrap accelerate's forward and put it
back, so placement is untouched.
"""

from __future__ import annotations

import os
from typing import Any

from torch import nn

from actviz.io.errors import ModelLoadError


class Placement(dict):
    """``device_map`` / ``max_memory`` / ``offload_folder``, as ``from_pretrained`` takes them."""


def placement(
    device_map: Any = None,
    max_memory: dict | None = None,
    offload_folder: str | os.PathLike[str] | None = None,
) -> Placement | None:
    """The placement asked for, None when no ``device_map`` is given."""
    if device_map is None:
        if max_memory is not None or offload_folder is not None:
            raise ModelLoadError("max_memory and offload_folder need device_map (e.g. 'auto')")
        return None
    require_accelerate()
    out = Placement(device_map=device_map)
    if max_memory is not None:
        out["max_memory"] = dict(max_memory)
    if offload_folder is not None:
        out["offload_folder"] = os.fspath(offload_folder)
    return out


def require_accelerate() -> Any:
    """The ``accelerate`` module, or a :class:`ModelLoadError` saying how to install it."""
    try:
        import accelerate
    except ImportError as exc:
        raise ModelLoadError(
            "device_map needs Hugging Face accelerate: pip install 'actviz[big]' "
            "(or pip install accelerate)"
        ) from exc
    return accelerate


def parse_max_memory(text: str | None) -> dict | None:
    """``"0:10GiB,cpu:30GiB,disk:..."`` -> ``{0: "10GiB", "cpu": "30GiB"}`` (CLI form)."""
    if not text:
        return None
    out: dict[Any, str] = {}
    for part in text.split(","):
        key, _, value = part.strip().partition(":")
        if not value:
            raise ModelLoadError(f"--max-memory: {part!r} is not DEVICE:SIZE (e.g. cpu:8GiB)")
        out[int(key) if key.isdigit() else key] = value
    return out


def dispatch(model: nn.Module, where: Placement) -> nn.Module:
    """Place an already built ``model`` as ``where`` says (accelerate's ``dispatch_model``);
    a model that already has a ``hf_device_map`` (placed by ``from_pretrained``) is left."""
    if getattr(model, "hf_device_map", None):
        return model
    accelerate = require_accelerate()
    from accelerate.utils import get_balanced_memory

    device_map = where["device_map"]
    max_memory = where.get("max_memory")
    no_split = getattr(model, "_no_split_modules", None) or []
    if isinstance(device_map, str):
        if device_map not in ("auto", "balanced", "balanced_low_0", "sequential"):
            raise ModelLoadError(f"device_map {device_map!r}: use 'auto' or a dict")
        if device_map != "sequential":
            max_memory = get_balanced_memory(
                model,
                max_memory=max_memory,
                no_split_module_classes=no_split,
                low_zero=device_map == "balanced_low_0",
            )
        device_map = accelerate.infer_auto_device_map(
            model, max_memory=max_memory, no_split_module_classes=no_split
        )
    if set(device_map.values()) == {"disk"}:
        raise ModelLoadError(
            "max_memory leaves no device room for any part of the model (all of it would go "
            "to disk, which accelerate cannot run): raise max_memory"
        )
    offload = where.get("offload_folder")
    if "disk" in set(device_map.values()) and offload is None:
        raise ModelLoadError(
            "the model does not fit max_memory and some of it goes to disk: give "
            "offload_folder (--offload-folder)"
        )
    try:
        accelerate.dispatch_model(model, device_map=device_map, offload_dir=offload)
    except Exception as exc:
        raise ModelLoadError(f"cannot place the model with accelerate: {exc}") from exc
    if not getattr(model, "hf_device_map", None):
        model.hf_device_map = dict(device_map)  # one device: no hooks, but say where it is
    return model
