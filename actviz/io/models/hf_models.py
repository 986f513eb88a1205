"""Hugging Face transformers models from a ``save_pretrained`` folder or a cached hub id (nothing
downloads; own code needs ``trust=True``), with eager attention so its probabilities exist; and
timm models by name (``timm:NAME``, ``timm/NAME`` or a bare name torchvision lacks), with timm's
own preprocessing (:class:`TimmTransform`) and pretrained weights from the same hub cache."""

from __future__ import annotations

import contextlib
import json
import logging
import re
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import torch
from torch import nn

from actviz.io.errors import ModelLoadError, TrustNeededError
from actviz.io.models import zoo
from actviz.io.models.checkpoints import one_line
from actviz.io.models.loaded_model import LoadedModel
from actviz.io.models.zoo import TIMM_PREFIX

log = logging.getLogger(__name__)
CONFIG_FILE = "config.json"
WEIGHT_FILES = tuple(
    "model.safetensors model.safetensors.index.json "
    "pytorch_model.bin pytorch_model.bin.index.json".split()
)
_TOKENIZER_FILES = tuple(
    "tokenizer.json tokenizer_config.json vocab.txt vocab.json tokenizer.model spiece.model".split()
)
#: What loads a folder's tokenizer and image processor, and the files that say it has one.
_HELPERS = {
    "tokenizer": ("AutoTokenizer", _TOKENIZER_FILES),
    "image processor": ("AutoImageProcessor", ("preprocessor_config.json",)),
}
_HUB_ID = re.compile(r"^[A-Za-z0-9][\w.-]*/[A-Za-z0-9][\w.-]*$")
_INSTALL = "pip install 'actviz[hf]' (transformers, tokenizers, safetensors)"
#: ``from_pretrained`` placement arguments of the model being opened (see :func:`placed`).
_PLACEMENT: list[dict[str, Any]] = [{}]
_PREFIXES = ("timm:", TIMM_PREFIX)
_HUB_HOST = "huggingface.co"
#: Where a name's next part begins (``vit_tiny`` in ``deit3.vit_tiny``, not ``convit_tiny``).
_PART_BREAKS = "_.-/:"


def looks_like_hub_id(text: str) -> bool:
    """Whether ``text`` has the form of a Hugging Face hub id (``org/name``) and transformers
    is installed to open one (without it, such a name is just a missing file)."""
    if not _HUB_ID.match(text) or text.startswith(("timm/", "./", "../")):
        return False
    import importlib.util

    return importlib.util.find_spec("transformers") is not None


def cached_hub_file(repo_id: str, *names: str) -> Path | None:
    """The first of ``names`` in the local cache's snapshot of ``repo_id`` (no network), or None."""
    try:
        from huggingface_hub import try_to_load_from_cache
    except ImportError:
        return None
    for name in names:
        try:
            found = try_to_load_from_cache(repo_id, name)
        except ValueError:  # HFValidationError: not a valid repo id ("my model", "a//b")
            return None
        if isinstance(found, str) and Path(found).is_file():
            return Path(found)
    return None


def cached_hub_folder(repo_id: str) -> Path | None:
    """The snapshot folder of ``repo_id`` in the local Hugging Face cache, or None."""
    found = cached_hub_file(repo_id, CONFIG_FILE)
    return None if found is None else found.parent


def task_of(class_name: str) -> str | None:
    """A transformers class's task by name: ``"causal-lm"``, ``"classifier"``, ``"vision"``."""
    if class_name.endswith(("ForCausalLM", "LMHeadModel")):
        return "causal-lm"
    if re.search(r"For\w*Classification$", class_name) and "Token" not in class_name:
        return "classifier"
    if re.match(r"^(ViT|DeiT|BEiT|Swin|ConvNext|Dinov2|ResNet|Siglip|CLIPVision)", class_name):
        return "vision"
    return None


def _model_class(
    transformers: Any, config: dict[str, Any], src: str, folder: Path, trust: bool
) -> tuple[Any, str, str]:
    """(class or Auto class, architecture name, code that runs when remote) for the config."""
    architectures = config.get("architectures") or []
    arch = str(architectures[0]) if architectures else ""
    # Only the model's own code counts here (a tokenizer's is asked about when it loads).
    auto_map = {
        k: v
        for k, v in (config.get("auto_map") or {}).items()
        if k == "AutoConfig" or k.startswith("AutoModel")
    }
    if auto_map:
        # The folder's own code builds the model: pick the Auto class that maps to it.
        auto_name = next(
            (k for k, v in auto_map.items() if arch and str(v).endswith(f".{arch}")),
            next((k for k in auto_map if k.startswith("AutoModel")), "AutoModel"),
        )
        code = str(auto_map.get(auto_name, arch or auto_name))
        if not trust:
            # The folder (a cache snapshot for a hub id) is what would be trusted.
            raise TrustNeededError(folder, f"its config.json maps {auto_name} to {code}")
        return getattr(transformers, auto_name, transformers.AutoModel), arch or code, code
    model_type = config.get("model_type")
    from transformers.models.auto.configuration_auto import CONFIG_MAPPING

    if model_type not in CONFIG_MAPPING:
        raise ModelLoadError(
            f"{src}: model_type {model_type!r} is unknown to transformers "
            f"{transformers.__version__} and the folder has no code of its own (auto_map); "
            "a newer transformers may know it"
        )
    if arch and hasattr(transformers, arch):
        return getattr(transformers, arch), arch, ""
    if arch:
        raise ModelLoadError(
            f"{src}: transformers {transformers.__version__} has no class {arch} "
            "(named in config.json's architectures); a newer transformers may have it"
        )
    return transformers.AutoModel, "AutoModel", ""


@contextlib.contextmanager
def placed(where: dict[str, Any] | None) -> Any:
    """Models opened inside get ``where`` (``device_map``, ``max_memory``, ``offload_folder``)
    passed to ``from_pretrained`` (accelerate places them while loading)."""
    _PLACEMENT.append(dict(where or {}))
    try:
        yield
    finally:
        _PLACEMENT.pop()


def _helper(transformers: Any, folder: Path, what: str, trust: bool, warnings: list[str]) -> Any:
    """The folder's tokenizer or image processor (``what``), None when it has none."""
    auto, names = _HELPERS[what]
    if not any((folder / n).is_file() for n in names):
        return None
    try:
        return getattr(transformers, auto).from_pretrained(
            str(folder), local_files_only=True, trust_remote_code=trust
        )
    except Exception as exc:  # a broken one (an audio feature extractor) must not stop the model
        warnings.append(f"{folder.name}: its {what} could not be loaded ({one_line(exc)})")
        return None


class ProcessorTransform:
    """A Hugging Face image processor as actviz preprocessing: PIL image -> ``(C, H, W)``, with
    ``mean``/``std``/``crop_size`` exposed like torchvision presets (overlays undo them)."""

    def __init__(self, processor: Any) -> None:
        self.processor = processor
        self.mean, self.std = (getattr(processor, k, None) for k in ("image_mean", "image_std"))
        size, crop_size = (getattr(processor, k, None) for k in ("size", "crop_size"))
        resize = _hw(size) if getattr(processor, "do_resize", True) else None
        crop = _hw(crop_size) if getattr(processor, "do_center_crop", False) else None
        self.resize_size, self.crop_size = (list(resize) if resize else None), crop
        #: What the model gets, ``(H, W)``, when the processor fixes it.
        self.input_size = crop or resize

    def __call__(self, image: Any) -> torch.Tensor:
        return self.processor(images=image, return_tensors="pt")["pixel_values"][0]

    def __repr__(self) -> str:
        return f"ProcessorTransform({type(self.processor).__name__})"


def _hw(size: Any) -> tuple[int, int] | None:
    """``(height, width)`` of an image processor's ``size``/``crop_size`` (dict or object)."""
    if size is None:
        return None
    if isinstance(size, int):
        return (size, size)
    h, w = (
        size.get(k) if isinstance(size, dict) else getattr(size, k, None)
        for k in ("height", "width")
    )
    return (h, w) if isinstance(h, int) and isinstance(w, int) else None


def open_hf(src: str, *, folder: Path | None = None, trust: bool = False) -> LoadedModel:
    """Open a transformers model from ``folder``, or the hub id ``src`` from the local cache;
    ``ModelLoadError`` or ``TrustNeededError`` (own code without ``trust``)."""
    try:
        import transformers
    except ImportError as exc:
        raise ModelLoadError(f"{src}: opening a Hugging Face model needs {_INSTALL}") from exc
    if folder is None and (folder := cached_hub_folder(src)) is None:
        from huggingface_hub import constants  # installed with transformers

        raise ModelLoadError(
            f"{src}: no such file or folder, and not in the local Hugging Face cache "
            f"({constants.HF_HUB_CACHE}); actviz never downloads models: download it first "
            f"with `hf download {src}` (or save it with save_pretrained and open that folder)"
        )
    try:
        config = json.loads((folder / CONFIG_FILE).read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, ValueError) as exc:
        raise ModelLoadError(f"{src}: unreadable {CONFIG_FILE} ({one_line(exc)})") from exc
    if not isinstance(config, dict):
        raise ModelLoadError(f"{src}: {CONFIG_FILE} does not hold a JSON object")
    cls, arch, _ = _model_class(transformers, config, src, folder, trust)
    weights = next((n for n in WEIGHT_FILES if (folder / n).is_file()), None)
    if weights is None:
        raise ModelLoadError(
            f"{src}: has {CONFIG_FILE} but no weights (model.safetensors or pytorch_model.bin); "
            "save the model with save_pretrained"
        )
    kwargs = {"local_files_only": True, "trust_remote_code": trust, **_PLACEMENT[-1]}
    warnings: list[str] = []
    from transformers.utils import logging as hf_logging

    # transformers' own loading bar off while it loads (actviz reports in its own words).
    bar_on = hf_logging.is_progress_bar_enabled()
    hf_logging.disable_progress_bar()
    try:
        try:
            model = cls.from_pretrained(str(folder), attn_implementation="eager", **kwargs)
        except (ValueError, TypeError) as exc:
            if "attn" not in str(exc).lower():
                raise
            warnings.append(
                f"eager attention unavailable ({one_line(exc)}): attention maps may be missing"
            )
            model = cls.from_pretrained(str(folder), **kwargs)
    except Exception as exc:  # transformers and remote code raise many kinds
        raise ModelLoadError(f"{src}: cannot load the model ({one_line(exc)})") from exc
    finally:
        if bar_on:
            hf_logging.enable_progress_bar()
    inner_config = getattr(model, "config", None)
    if inner_config is not None and getattr(inner_config, "use_cache", False):
        # One forward needs no key/value cache; without it the output is just the logits.
        inner_config.use_cache = False
    task = task_of(type(model).__name__) or task_of(arch)
    tokenizer, processor = (_helper(transformers, folder, w, trust, warnings) for w in _HELPERS)
    if task is None and processor is not None and tokenizer is None:
        task = "vision"
    transforms = ProcessorTransform(processor) if processor is not None else None
    categories = None
    if task == "classifier" and (id2label := getattr(inner_config, "id2label", None)):
        with contextlib.suppress(KeyError):  # labels not numbered 0..n-1: none shown
            categories = [str(id2label[i]) for i in range(len(id2label))]
    label = Path(src).name if folder is not None and Path(src).exists() else src
    log.info("%s: %s loaded from %s (%s)", src, type(model).__name__, folder, weights)
    return LoadedModel(
        model,
        f"{label} ({type(model).__name__})",
        src,
        "hf",
        categories=categories,
        transforms=transforms,
        input_size=transforms.input_size if transforms is not None else None,
        warnings=warnings,
        task=task,
        tokenizer=tokenizer,
        processor=processor,
    )


def timm_names() -> tuple[str, ...]:
    """Every architecture timm can build (empty when timm is not installed)."""
    try:
        import timm
    except ImportError:
        return ()
    # Not cached: listing takes milliseconds, and tests swap timm for a stand-in.
    return tuple(timm.list_models())


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
        self.transform, self.config = transform, dict(config)
        self.mean = tuple(float(v) for v in config.get("mean", ())) or None
        self.std = tuple(float(v) for v in config.get("std", ())) or None
        size = config.get("input_size")
        self.crop_size = (int(size[-2]), int(size[-1])) if size else None
        self.resize_size = None
        for step in getattr(transform, "transforms", ()):
            if type(step).__name__ == "Resize":
                self.resize_size = [step.size] if isinstance(step.size, int) else list(step.size)

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
