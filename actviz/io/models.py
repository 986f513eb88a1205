"""Opening a model from whatever the user names: the demo, a torchvision name, code, or a file.

``open_model`` is the one entry point (the CLI, the GUI and scripts all use it); it returns
the model in eval mode on the requested device, together with what is known about its
preprocessing and labels, and any warnings the user should see.

Sources, in the order they are tried:

* ``"demo"`` - the bundled demo CNN (:mod:`actviz.io.demo`).
* an existing file - its format is read from its content: state_dict / training checkpoint /
  Lightning ``.ckpt`` or ``.safetensors`` (the architecture comes from ``arch=``, else it is
  guessed from the key names and shapes, see :mod:`actviz.io.arch_guess`), TorchScript,
  ``torch.export`` ``.pt2``, or a whole pickled module (needs ``trust=True``).
* a folder written by ``save_pretrained`` - a Hugging Face transformers model
  (:mod:`actviz.io.hf_models`), with its tokenizer or image processor.
* ``"timm:NAME"`` / ``"timm/NAME"`` - a timm model (:mod:`actviz.io.timm_models`).
* ``"path/file.py:Name"`` or ``"package.module:name"`` - code the user points at.
* a torchvision model name (``resnet18``, ``vit_b_16``, ...), else a bare timm name.
* ``"org/name"`` - a Hugging Face hub id, only when it is in the local cache.
"""

from __future__ import annotations

import difflib
import logging
import os
import warnings as pywarnings
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch
from torch import nn

from actviz.io import hf_models, timm_models, zoo
from actviz.io.arch_guess import (
    ArchGuess,
    compare_architecture,
    confident_guess,
    guess_architecture,
)
from actviz.io.checkpoints import (
    FileFormat,
    apply_state_dict,
    export_needs_trust,
    extract_weights,
    one_line,
    sniff_format,
    torch_load_guarded,
)
from actviz.io.errors import ArchitectureNeededError, ModelLoadError, UntrustedFileError
from actviz.io.user_code import (
    CodeRef,
    build_from_code,
    module_classes_in_file,
    parse_code_ref,
)

__all__ = ["LoadedModel", "open_model", "load_model", "resolve_device"]

log = logging.getLogger(__name__)

_MODEL_SUFFIXES = {".pt", ".pth", ".ckpt", ".bin", ".safetensors", ".pt2", ".pkl", ".tar", ".py"}


@dataclass
class LoadedModel:
    """A model ready to explore, with what is known about how to feed it.

    Attributes
    ----------
    model
        The module, in eval mode, on the requested device.
    name
        Short display name (e.g. ``"resnet18"``, ``"model.pt (resnet18)"``).
    source
        The source string as given.
    kind
        ``"demo"``, ``"torchvision"``, ``"timm"``, ``"hf"`` (Hugging Face transformers),
        ``"code"``, ``"module"``, ``"state_dict"``, ``"safetensors"``, ``"torchscript"``,
        ``"export"`` or ``"pickle"``.
    categories
        Class names indexed like the output logits, when known.
    transforms
        Preprocessing callable (PIL image or tensor -> tensor (C, H, W)), when known.
    input_size
        ``(height, width)`` the model expects, when known.
    warnings
        Things the user should be told (random weights, no hooks in TorchScript, ...).
    input_shape
        Full input shape when the file records it (``torch.export`` programs), else None.
    arch_guesses
        When the architecture of a weights-only file was guessed: the ranked guesses, the
        one used first; empty otherwise.
    task
        What the model does, when known: ``"causal-lm"`` (next-token logits), ``"classifier"``,
        ``"vision"`` (an image model without a classification head), else None. (``kind``
        above says where the model came from.)
    tokenizer
        The Hugging Face tokenizer of the model folder, when it has one: ``text:`` inputs
        need it (:func:`actviz.io.input_files.open_input`).
    processor
        The Hugging Face image processor of the model folder, when it has one (``transforms``
        then applies it).
    weights_from
        Where in a checkpoint the weights were taken from, when not the top level (e.g.
        ``"['state_dict_ema'] (EMA)"``); "" otherwise.
    """

    model: nn.Module
    name: str
    source: str
    kind: str
    categories: list[str] | None = None
    transforms: Callable[..., Any] | None = None
    input_size: tuple[int, int] | None = None
    warnings: list[str] = field(default_factory=list)
    input_shape: tuple[int, ...] | None = None
    arch_guesses: tuple[ArchGuess, ...] = ()
    task: str | None = None
    tokenizer: Any | None = None
    processor: Any | None = None
    weights_from: str = ""


def resolve_device(device: str | torch.device | None) -> torch.device:
    """Check that ``device`` exists on this machine.

    Parameters
    ----------
    device
        ``"cpu"``, ``"cuda"``, ``"cuda:1"``, ``"mps"`` or a ``torch.device``; None means CPU.

    Returns
    -------
    torch.device

    Raises
    ------
    ModelLoadError
        Unknown device string, or an accelerator that is not available.
    """
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
        mps = getattr(torch.backends, "mps", None)
        if mps is None or not mps.is_available():
            raise ModelLoadError(f"device {device!r}: MPS is not available on this machine")
    return dev


def load_model(
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
) -> nn.Module:
    """Open a model and return only the module; see :func:`open_model`."""
    return open_model(
        source,
        arch=arch,
        weights=weights,
        trust=trust,
        device=device,
        guess=guess,
        device_map=device_map,
        max_memory=max_memory,
        offload_folder=offload_folder,
    ).model


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
    """Open a model from a name, code reference or file.

    Parameters
    ----------
    source
        ``"demo"``; a torchvision model name; ``"timm:NAME"`` (or a bare timm name);
        ``"file.py:Class"`` or ``"pkg.mod:factory"``; a checkpoint file (state_dict,
        training dict, Lightning ckpt, safetensors, TorchScript, torch.export ``.pt2``,
        pickled module); a Hugging Face model folder or a hub id already in the local
        cache; or an ``nn.Module``.
    arch
        Architecture for files that hold only weights: a torchvision name, ``timm:NAME``
        (or ``timm/NAME``, or a bare timm name) or a ``file.py:Class`` / ``pkg.mod:factory``
        reference. A torchvision or timm model
        gets the checkpoint's number of classes when only its classifier head differs.
    weights
        For torchvision names: ``"DEFAULT"``, a weights name, or None for random init.
    trust
        Allow files that run code when unpickled (whole pickled modules, training dicts
        holding Python objects), and Hugging Face models that ship their own code. Only for
        files from a trusted source.
    device
        Where the model goes (``"cpu"`` by default).
    guess
        For weights without ``arch``: guess the architecture from the key names and shapes
        and use it when exactly one fits (:attr:`LoadedModel.arch_guesses` holds the guesses).
    device_map, max_memory, offload_folder
        Place a model larger than one device with Hugging Face ``accelerate`` (the extra
        ``actviz[big]``; see :mod:`actviz.io.big`): ``device_map="auto"`` (or a dict of module
        name -> device, ``"cpu"`` or ``"disk"``), ``max_memory`` per device (``{0: "10GiB",
        "cpu": "30GiB"}``), and the folder for what goes to disk. Hugging Face models go
        through ``from_pretrained``; any other module is placed after it is built.
        ``device`` is then ignored.

    Returns
    -------
    LoadedModel
        The model is in eval mode on ``device``.

    Raises
    ------
    ModelLoadError
        Any failure; the message names the source and the cause.
    ArchitectureNeededError
        Weights without ``arch`` whose architecture is not certain; its ``candidates`` are
        the best guesses, to offer the user.
    UntrustedFileError
        The file needs ``trust=True`` (:class:`~actviz.io.errors.TrustNeededError`, a
        subclass, for a model folder's own code).
    """
    from actviz.io import big

    where = big.placement(device_map, max_memory, offload_folder)
    dev = resolve_device(device)
    if isinstance(source, nn.Module):
        loaded = LoadedModel(source, type(source).__name__, type(source).__name__, "module")
    else:
        src = os.fspath(source)
        with hf_models.placed(where):
            loaded = _open_source(src, arch=arch, weights=weights, trust=trust, guess=guess)
    try:
        if where is not None:
            big.dispatch(loaded.model, where)
        else:
            loaded.model.to(dev)
    except Exception as exc:  # exotic modules (TorchScript, quantized) refuse some devices
        raise ModelLoadError(
            f"{loaded.source}: cannot move the model to {dev} ({one_line(exc)})"
        ) from exc
    _set_eval(loaded)
    # Callers show .warnings themselves (CLI on stderr, GUI in its status bar); logging them
    # at WARNING too would print each one twice through logging's last-resort handler.
    for message in loaded.warnings:
        log.info("%s", message)
    return loaded


def _set_eval(loaded: LoadedModel) -> None:
    try:
        loaded.model.eval()
    except (NotImplementedError, RuntimeError) as exc:
        loaded.warnings.append(f"{loaded.name}: cannot switch to eval mode ({one_line(exc)})")


def _open_source(
    src: str, *, arch: str | None, weights: Any, trust: bool, guess: bool
) -> LoadedModel:
    if src == "demo":
        return _ignore_arch(_open_demo(), arch)
    path = Path(src)
    if path.exists():
        if path.is_dir():
            return _ignore_arch(_open_folder(path, src, trust=trust), arch)
        if path.suffix == ".py":
            classes = module_classes_in_file(path)
            hint = f" (classes in it: {', '.join(classes[:8])})" if classes else ""
            raise ModelLoadError(
                f"{src}: name the model inside the file as {src}:ClassName or "
                f"{src}:factory_function{hint}"
            )
        return _open_file(path, src, arch=arch, trust=trust, guess=guess)
    # Before code references: "timm:NAME" has the form of "package.module:name".
    timm_name = timm_models.resolve_name(src, bare=False)
    if timm_name is not None:
        return _ignore_arch(_open_timm(timm_name, src, weights), arch)
    ref = parse_code_ref(src)
    if ref is not None:
        model = build_from_code(ref)
        return _ignore_arch(LoadedModel(model, f"{ref.attr} ({ref.target})", src, "code"), arch)
    names = zoo.torchvision_names()
    lowered = src.lower()
    if lowered in names:
        return _ignore_arch(_open_torchvision(lowered, src, weights), arch)
    timm_name = timm_models.resolve_name(src)
    if timm_name is not None:
        return _ignore_arch(_open_timm(timm_name, src, weights), arch)
    if hf_models.looks_like_hub_id(src):
        return _ignore_arch(_open_hf(src, None, trust=trust), arch)
    if path.suffix.lower() in _MODEL_SUFFIXES or os.sep in src or "/" in src:
        raise ModelLoadError(f"{src}: file not found")
    if hf_models.cached_hub_folder(src) is not None:
        # A canonical hub id without an organisation (gpt2, bert-base-uncased), cached.
        return _ignore_arch(_open_hf(src, None, trust=trust), arch)
    raise ModelLoadError(unknown_name_message(src, "model"))


#: The forms a model or an architecture may be named in, for error messages.
ACCEPTED_FORMS = (
    "a torchvision name (resnet18), timm:NAME (timm:vit_tiny_patch16_224), a model folder "
    "saved with save_pretrained, file.py:ClassName or package.module:factory"
)


def unknown_name_message(name: str, what: str) -> str:
    """The one-line error for a name that is no known model, with the closest known names.

    Parameters
    ----------
    name
        What the user typed.
    what
        ``"model"`` (a source) or ``"architecture"`` (``arch=``).
    """
    lowered = name.lower()
    torchvision = zoo.torchvision_names()
    known = list(dict.fromkeys([*torchvision, *timm_models.timm_names()]))
    if what == "model":
        known.append("demo")
    close = difflib.get_close_matches(lowered, known, n=3, cutoff=0.6)
    # timm's names are typed with their prefix where torchvision has no model of that name.
    shown = [c if c in torchvision or c == "demo" else f"timm:{c}" for c in close]
    hint = f"; did you mean {', '.join(shown)}?" if shown else ""
    lead = (
        f"{name}: unknown model: not a file, 'demo', "
        if what == "model"
        else f"arch {name!r}: unknown architecture: give "
    )
    forms = ACCEPTED_FORMS
    if what == "model":
        forms = forms.replace(" or package.module:factory", ", package.module:factory")
        forms += " or a Hugging Face hub id already in the local cache (openai-community/gpt2)"
    return f"{lead}{forms}{hint}"


def _open_folder(path: Path, src: str, *, trust: bool) -> LoadedModel:
    if hf_models.is_model_folder(path):
        return _open_hf(src, path, trust=trust)
    found = sorted(p.name for p in path.iterdir() if p.suffix in _MODEL_SUFFIXES)[:5]
    hint = f" (model files in it: {', '.join(found)})" if found else ""
    raise ModelLoadError(
        f"{src}: is a folder without config.json, so not a Hugging Face model folder; "
        f"give a model file, a name or file.py:Class{hint}"
    )


def _open_hf(src: str, folder: Path | None, *, trust: bool) -> LoadedModel:
    built = hf_models.open_hf(src, folder=folder, trust=trust)
    return _from_built(
        built,
        built.name,
        src,
        "hf",
        task=built.task,
        tokenizer=built.tokenizer,
        processor=built.processor,
    )


def _from_built(built: Any, name: str, src: str, kind: str, **extra: Any) -> LoadedModel:
    """The LoadedModel of a zoo's build result (torchvision, timm, Hugging Face)."""
    return LoadedModel(
        built.model,
        name,
        src,
        kind,
        categories=built.categories,
        transforms=built.transforms,
        input_size=built.input_size,
        warnings=list(built.warnings),
        **extra,
    )


def _open_timm(name: str, src: str, weights: Any) -> LoadedModel:
    built = timm_models.build_timm(name, weights)
    suffix = built.weights_name or "random init"
    task = "classifier" if built.categories else None
    return _from_built(built, f"{name} ({suffix})", src, "timm", task=task)


def _ignore_arch(loaded: LoadedModel, arch: str | None) -> LoadedModel:
    if arch:
        loaded.warnings.append(f"arch={arch!r} ignored: {loaded.source} already defines the model")
    return loaded


def _open_demo() -> LoadedModel:
    from actviz.io import demo

    try:
        model = demo.load_demo_model()
    except (OSError, RuntimeError, ValueError) as exc:
        raise ModelLoadError(
            f"demo: the bundled demo model is unavailable ({one_line(exc)})"
        ) from exc
    return LoadedModel(
        model,
        "demo",
        "demo",
        "demo",
        categories=list(demo.DEMO_CLASSES),
        transforms=getattr(demo, "demo_transform", None),
        input_size=tuple(demo.DEMO_INPUT_SIZE),
    )


def _open_torchvision(name: str, src: str, weights: Any) -> LoadedModel:
    built = zoo.build_torchvision(name, weights)
    suffix = built.weights_name.rsplit(".", 1)[-1] if built.weights_name else "random init"
    return _from_built(built, f"{name} ({suffix})", src, "torchvision")


# --------------------------------------------------------------------------------------------
# Files
# --------------------------------------------------------------------------------------------


def _open_file(path: Path, src: str, *, arch: str | None, trust: bool, guess: bool) -> LoadedModel:
    fmt = sniff_format(path)
    if fmt == FileFormat.EMPTY:
        raise ModelLoadError(f"{src}: file is empty")
    if fmt == FileFormat.BAD_ZIP:
        raise ModelLoadError(f"{src}: damaged or truncated zip archive (cannot read its index)")
    if fmt in (FileFormat.UNKNOWN, FileFormat.ZIP_OTHER, FileFormat.NPY, FileFormat.NPZ):
        what = {
            FileFormat.NPY: "a numpy array (an input, not a model)",
            FileFormat.NPZ: "numpy arrays (an input, not a model)",
            FileFormat.ZIP_OTHER: "a zip archive of another kind",
        }.get(fmt, "unrecognised content")
        raise ModelLoadError(
            f"{src}: not a model file ({what}); expected a torch.save checkpoint, safetensors, "
            "TorchScript or torch.export .pt2 file"
        )
    if fmt == FileFormat.TORCHSCRIPT:
        return _ignore_arch(_open_torchscript(path, src), arch)
    if fmt == FileFormat.EXPORT:
        return _ignore_arch(_open_export(path, src, trust=trust), arch)
    if fmt == FileFormat.SAFETENSORS:
        return _open_safetensors(path, src, arch=arch, guess=guess)
    obj = torch_load_guarded(path, trust=trust)
    return _from_checkpoint_object(obj, path, src, arch=arch, guess=guess)


def _from_checkpoint_object(
    obj: Any, path: Path, src: str, *, arch: str | None, guess: bool
) -> LoadedModel:
    found, where = extract_weights(obj, src)
    if isinstance(found, nn.Module):
        name = f"{path.name} ({type(found).__name__})"
        if where:
            log.info("%s: model taken from %s", src, where)
        return _ignore_arch(LoadedModel(found, name, src, "pickle"), arch)
    if arch is None and isinstance(obj, dict) and isinstance(obj.get("arch"), str):
        stored = obj["arch"]
        # timm's training script records its model name there too.
        if stored.lower() in zoo.torchvision_names():
            arch = stored.lower()
        else:
            arch = timm_models.resolve_name(stored)
        if arch is not None:
            log.info("%s: using the architecture recorded in the file: %s", src, arch)
    if where:
        log.info("%s: weights taken from %s", src, where)
    loaded = _build_with_weights(found, path, src, arch=arch, kind="state_dict", guess=guess)
    if where:
        loaded.weights_from = where + (" (EMA)" if "ema" in where.lower() else "")
        if "ema" in where.lower():
            # Say it where users look: the name shows in the title, status bar and CLI.
            loaded.name = loaded.name[:-1] + ", EMA weights)"
    return loaded


def _build_with_weights(
    state_dict: dict[str, torch.Tensor],
    path: Path,
    src: str,
    *,
    arch: str | None,
    kind: str,
    guess: bool,
) -> LoadedModel:
    guesses: tuple[ArchGuess, ...] = ()
    if not arch:
        arch, guesses = _guess_arch(state_dict, src, guess=guess)
    loaded, fit = _build_arch(arch, state_dict, beside=path.parent)
    notes = apply_state_dict(loaded.model, state_dict, src, arch)
    loaded.name = f"{path.name} ({loaded.name})"  # the canonical name (timm/NAME)
    loaded.source = src
    loaded.kind = kind
    loaded.arch_guesses = guesses
    if fit is not None and fit.num_classes is not None:
        head = fit.reason.split(";")[0]
        loaded.warnings.append(f"{path.name}: its {arch} {head}, so the class names are unknown")
    if notes:
        log.info("%s: %s", src, "; ".join(notes))
    return loaded


_HOW_TO_NAME_ARCH = (
    "pass the architecture with --arch on the command line or arch= in Python "
    "(a torchvision name such as resnet18, timm:NAME, or file.py:ClassName)"
)


def _guess_arch(
    state_dict: dict[str, torch.Tensor], src: str, *, guess: bool
) -> tuple[str, tuple[ArchGuess, ...]]:
    """The architecture to use for bare weights, or ArchitectureNeededError with candidates."""
    count = f"{len(state_dict)} tensor{'s' if len(state_dict) != 1 else ''}"
    lead = f"{src}: holds only weights ({count}), not the architecture"
    if not guess:
        raise ArchitectureNeededError(f"{lead}; {_HOW_TO_NAME_ARCH}", src)
    guesses = tuple(guess_architecture(state_dict))
    best = confident_guess(guesses)
    if best is not None:
        log.info("%s: architecture guessed from the weights: %s", src, best.describe())
        return best.name, guesses
    if not guesses:
        found = "no known architecture matches its keys and shapes"
    elif guesses[0].fits:
        tied = [g.name for g in guesses if g.fits and g.score == guesses[0].score]
        found = f"these fit equally well: {', '.join(tied)}"
    else:
        found = "closest: " + ", ".join(f"{g.name} (score {g.score:.2f})" for g in guesses[:3])
    raise ArchitectureNeededError(f"{lead}; {found}; {_HOW_TO_NAME_ARCH}", src, guesses)


def _build_arch(
    arch: str, state_dict: dict[str, torch.Tensor], *, beside: Path | None = None
) -> tuple[LoadedModel, ArchGuess | None]:
    """Build ``arch`` randomly initialised; for zoo names, sized for the checkpoint's head.

    A relative ``file.py:Class`` is looked for in the working folder, then in ``beside`` (the
    checkpoint's folder). Returns the model and, for zoo names, how the weights compare with
    it.
    """
    # Before code references: "timm:NAME" has the form of "package.module:name".
    timm_name = timm_models.resolve_name(arch, bare=False)
    if timm_name is None:
        ref = parse_code_ref(arch)
        if ref is not None:
            return LoadedModel(build_from_code(_code_beside(ref, beside)), arch, arch, "code"), None
    name = arch.lower()
    names = zoo.torchvision_names()
    if timm_name is None and name not in names:
        timm_name = timm_models.resolve_name(arch)
    if timm_name is not None:
        fit = compare_architecture(state_dict, timm_name)
        built = timm_models.build_timm(
            timm_name, None, num_classes=fit.num_classes if fit else None
        )
        loaded = LoadedModel(
            built.model,
            timm_name,
            arch,
            "timm",
            categories=built.categories,
            transforms=built.transforms,
            input_size=built.input_size,
            task="classifier" if built.categories else None,
        )
        return loaded, fit
    if name in names:
        # A fine-tuned head (10 classes instead of 1000) is the one difference worth adapting.
        fit = compare_architecture(state_dict, name)
        built = zoo.build_torchvision(name, None, num_classes=fit.num_classes if fit else None)
        loaded = LoadedModel(
            built.model,
            name,
            arch,
            "torchvision",
            categories=built.categories,
            transforms=built.transforms,
            input_size=built.input_size,
        )
        return loaded, fit
    raise ModelLoadError(unknown_name_message(arch, "architecture"))


def _code_beside(ref: CodeRef, beside: Path | None) -> CodeRef:
    """``ref`` itself, or the same file name beside the checkpoint when the working folder
    has none: the window is often started from a launcher, whose working folder is home."""
    target = Path(ref.target)
    if not ref.is_file or beside is None or target.is_absolute() or target.is_file():
        return ref
    near = beside / target
    if near.is_file():
        return CodeRef(str(near), ref.attr, is_file=True)
    raise ModelLoadError(
        f"{ref.target}: file not found (looked in the working folder {Path.cwd()} and beside "
        f"the checkpoint, in {beside})"
    )


def _open_safetensors(path: Path, src: str, *, arch: str | None, guess: bool) -> LoadedModel:
    try:
        from safetensors.torch import load_file
    except ImportError as exc:
        raise ModelLoadError(
            f"{src}: reading .safetensors needs the 'safetensors' package (pip install safetensors)"
        ) from exc
    try:
        state_dict = load_file(str(path), device="cpu")
    except Exception as exc:  # safetensors raises its own SafetensorError for damaged files
        raise ModelLoadError(f"{src}: corrupt safetensors file ({one_line(exc)})") from exc
    return _build_with_weights(state_dict, path, src, arch=arch, kind="safetensors", guess=guess)


def _open_torchscript(path: Path, src: str) -> LoadedModel:
    try:
        with pywarnings.catch_warnings():
            # torch.jit is deprecated upstream, but existing files still deserve to open.
            pywarnings.simplefilter("ignore", FutureWarning)
            model = torch.jit.load(str(path), map_location="cpu")
    except Exception as exc:  # torch.jit raises RuntimeError or C++-derived errors
        raise ModelLoadError(f"{src}: corrupt TorchScript archive ({one_line(exc)})") from exc
    loaded = LoadedModel(model, f"{path.name} (TorchScript)", src, "torchscript")
    from actviz.core.capture import TORCHSCRIPT_WARNING

    # The sentence each of its captures warns too (the window's banner shows it once).
    loaded.warnings.append(TORCHSCRIPT_WARNING)
    return loaded


def _open_export(path: Path, src: str, *, trust: bool) -> LoadedModel:
    reason = export_needs_trust(path)
    if reason and not trust:
        raise UntrustedFileError(src, reason)
    try:
        program = torch.export.load(str(path))
    except Exception as exc:  # deserialisation errors come from many layers
        raise ModelLoadError(f"{src}: cannot read torch.export program ({one_line(exc)})") from exc
    try:
        # unflatten restores the original submodule hierarchy, so hooks fire per layer.
        model = torch.export.unflatten(program)
    except Exception as exc:
        raise ModelLoadError(
            f"{src}: cannot rebuild the module tree of the exported program ({one_line(exc)})"
        ) from exc
    input_shape = _export_input_shape(program)
    input_size = input_shape[-2:] if input_shape is not None and len(input_shape) == 4 else None
    loaded = LoadedModel(
        model,
        f"{path.name} (torch.export)",
        src,
        "export",
        input_size=input_size,
        input_shape=input_shape,
    )
    loaded.warnings.append(
        f"{path.name} is a torch.export program: it replays the graph recorded at export time "
        "(train/eval mode is fixed, inputs must match the exported shapes)"
    )
    return loaded


def _export_input_shape(program: Any) -> tuple[int, ...] | None:
    """Shape of the first user input of an exported program, if static."""
    try:
        user_inputs = list(program.graph_signature.user_inputs)
        if not user_inputs:
            return None
        for node in program.graph.nodes:
            if node.op == "placeholder" and node.name == user_inputs[0]:
                val = node.meta.get("val")
                return tuple(int(s) for s in val.shape)
    except Exception:  # symbolic (dynamic) sizes cannot become ints
        return None
    return None
