"""Opening a model from whatever the user names (:func:`open_model`, for CLI, GUI and scripts),
tried in order: ``"demo"``, a file, a ``save_pretrained`` folder, ``"timm:NAME"``, a code
reference, a torchvision or timm name, a cached hub id."""

from __future__ import annotations

import logging
import os
from pathlib import Path
from typing import Any

import torch
from torch import nn

from actviz.io.errors import ModelLoadError
from actviz.io.models import hf_models
from actviz.io.models.checkpoints import one_line
from actviz.io.models.loaded_model import LoadedModel
from actviz.io.models.model_files import BUILDERS, open_file, resolve_named, unknown_name_message
from actviz.io.models.user_code import build_from_code, module_classes_in_file

log = logging.getLogger(__name__)

_MODEL_SUFFIXES = {".pt", ".pth", ".ckpt", ".bin", ".safetensors", ".pt2", ".pkl", ".tar", ".py"}


def load_model(source: str | os.PathLike[str] | nn.Module, **options: Any) -> nn.Module:
    """Open a model and return only the module; ``options`` as :func:`open_model` takes them."""
    return open_model(source, **options).model


def open_model(
    source: str | os.PathLike[str] | nn.Module,
    *,
    arch: str | None = None,
    weights: Any = "DEFAULT",
    trust: bool = False,
    device: str | torch.device = "cpu",
    guess: bool = True,
    device_map: Any = None,
    max_memory: dict | None = None,
    offload_folder: str | os.PathLike[str] | None = None,
) -> LoadedModel:
    """Open a model from a name, code reference or file, in eval mode on ``device``.

    Parameters
    ----------
    source
        ``"demo"``; a torchvision name; ``"timm:NAME"``; ``"file.py:Class"`` or
        ``"pkg.mod:factory"``; a checkpoint file (state_dict, training dict, Lightning,
        safetensors, TorchScript, ``.pt2``, pickled module); a Hugging Face folder or cached hub
        id; or an ``nn.Module``.
    arch
        The architecture for weights-only files (a name or code reference).
    weights
        For torchvision names: ``"DEFAULT"``, a weights name, or None for random init.
    trust
        Allow files that run code when unpickled, and models that ship their own code.
    guess
        For weights without ``arch``: use the architecture when exactly one fits.
    device_map, max_memory, offload_folder
        Place a model larger than one device with ``accelerate`` (:mod:`actviz.io.models.big`);
        ``device`` is then ignored.

    Raises
    ------
    ModelLoadError
        Any failure, naming the source and the cause.
    ArchitectureNeededError
        Weights whose architecture is uncertain; ``candidates`` are the best guesses.
    UntrustedFileError
        The file needs ``trust=True``.
    """
    from actviz.io.models import big

    where = big.placement(device_map, max_memory, offload_folder)
    # The device must exist here; else ModelLoadError.
    try:
        dev = torch.device(device if device is not None else "cpu")
    except (RuntimeError, TypeError) as exc:
        raise ModelLoadError(f"device {device!r}: not a device name ({one_line(exc)})") from exc
    if dev.type == "cuda":
        if not torch.cuda.is_available():
            raise ModelLoadError(
                f"device {device!r}: CUDA is not available on this machine (use device='cpu')"
            )
        if dev.index is not None and dev.index >= torch.cuda.device_count():
            raise ModelLoadError(
                f"device {device!r}: only {torch.cuda.device_count()} CUDA device(s) present"
            )
    elif dev.type == "mps":
        if (mps := getattr(torch.backends, "mps", None)) is None or not mps.is_available():
            raise ModelLoadError(f"device {device!r}: MPS is not available on this machine")
    if isinstance(source, nn.Module):
        loaded = LoadedModel(source, type(source).__name__, type(source).__name__, "module")
    else:
        src = os.fspath(source)
        with hf_models.placed(where):
            loaded = _open_source(src, arch=arch, weights=weights, trust=trust, guess=guess)
        if arch and loaded.kind not in ("state_dict", "safetensors"):
            loaded.warnings.append(f"arch={arch!r} ignored: {src} already defines the model")
    try:
        if where is not None:
            big.dispatch(loaded.model, where)
        else:
            loaded.model.to(dev)
    except Exception as exc:  # exotic modules (TorchScript, quantized) refuse some devices
        raise ModelLoadError(
            f"{loaded.source}: cannot move the model to {dev} ({one_line(exc)})"
        ) from exc
    try:
        loaded.model.eval()
    except (NotImplementedError, RuntimeError) as exc:
        loaded.warnings.append(f"{loaded.name}: cannot switch to eval mode ({one_line(exc)})")
    # Callers show .warnings themselves; logged at WARNING they would print twice.
    for message in loaded.warnings:
        log.info("%s", message)
    return loaded


def _open_source(
    src: str, *, arch: str | None, weights: Any, trust: bool, guess: bool
) -> LoadedModel:
    if src == "demo":
        from actviz.io.models import demo_model as demo

        try:
            model = demo.load_demo_model()
        except (OSError, RuntimeError, ValueError) as exc:
            raise ModelLoadError(
                f"demo: the bundled demo model is unavailable ({one_line(exc)})"
            ) from exc
        classes, size = list(demo.DEMO_CLASSES), demo.DEMO_INPUT_SIZE
        return LoadedModel(model, "demo", "demo", "demo", classes, demo.demo_transform, size)
    path = Path(src)
    if path.is_dir():
        if hf_models.is_model_folder(path):
            return hf_models.open_hf(src, folder=path, trust=trust)
        found = sorted(p.name for p in path.iterdir() if p.suffix in _MODEL_SUFFIXES)[:5]
        hint = f" (model files in it: {', '.join(found)})" if found else ""
        raise ModelLoadError(
            f"{src}: is a folder without config.json, so not a Hugging Face model folder; "
            f"give a model file, a name or file.py:Class{hint}"
        )
    if path.exists():
        if path.suffix == ".py":
            classes = module_classes_in_file(path)
            hint = f" (classes in it: {', '.join(classes[:8])})" if classes else ""
            raise ModelLoadError(
                f"{src}: name the model inside the file as {src}:ClassName or "
                f"{src}:factory_function{hint}"
            )
        return open_file(path, src, arch=arch, trust=trust, guess=guess)
    if (named := resolve_named(src)) is not None:
        kind, name = named
        if kind == "code":
            return LoadedModel(build_from_code(name), f"{name.attr} ({name.target})", src, "code")
        return BUILDERS[kind](name, weights, src=src)
    if hf_models.looks_like_hub_id(src):
        return hf_models.open_hf(src, trust=trust)
    if path.suffix.lower() in _MODEL_SUFFIXES or os.sep in src or "/" in src:
        raise ModelLoadError(f"{src}: file not found")
    if hf_models.cached_hub_folder(src) is not None:
        # A canonical hub id without an organisation (gpt2, bert-base-uncased), cached.
        return hf_models.open_hf(src, trust=trust)
    raise ModelLoadError(unknown_name_message(src, "model"))
