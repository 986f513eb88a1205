"""Opening a model from whatever the user names (:func:`open_model`, for CLI, GUI and scripts),
tried in order: ``"demo"``, a file, a ``save_pretrained`` folder, ``"timm:NAME"``, a code
reference, a torchvision or timm name, a cached hub id. A file's format is read from its
content; bare weights get the architecture given, recorded or guessed. A model is also built
from code the user named (``path/file.py:Name``, ``pkg.module:name``: :class:`CodeRef`)."""

from __future__ import annotations

import ast
import contextlib
import difflib
import hashlib
import importlib
import importlib.util
import logging
import os
import re
import sys
import warnings as pywarnings
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
from torch import nn

from actviz.io.errors import ArchitectureNeededError, ModelLoadError, UntrustedFileError
from actviz.io.models import arch_guess, checkpoints, hf_models, zoo
from actviz.io.models.arch_guess import ArchGuess
from actviz.io.models.checkpoints import FileFormat, on_sys_path, one_line
from actviz.io.models.loaded_model import LoadedModel

log = logging.getLogger(__name__)
_MODEL_SUFFIXES = {".pt", ".pth", ".ckpt", ".bin", ".safetensors", ".pt2", ".pkl", ".tar", ".py"}
#: The zoos' builders by kind: ``build(name, weights, *, num_classes=None, src="")``.
BUILDERS = {"torchvision": zoo.build_torchvision, "timm": hf_models.build_timm}
_HOW_TO_NAME_ARCH = (
    "pass the architecture with --arch on the command line or arch= in Python "
    "(a torchvision name such as resnet18, timm:NAME, or file.py:ClassName)"
)
_DOTTED = re.compile(r"^[A-Za-z_]\w*(\.[A-Za-z_]\w*)*$")


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
        The file needs ``trust=True``."""
    from actviz.io.models import big

    where = big.placement(device_map, max_memory, offload_folder)
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
        if (path / hf_models.CONFIG_FILE).is_file():  # a save_pretrained folder
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


def resolve_named(text: str) -> tuple[str, Any] | None:
    """``("timm", "timm/NAME")``, ``("code", CodeRef)`` or ``("torchvision", name)`` for a name
    the zoos or code define, else None (the order opening by name and ``arch=`` share)."""
    # Before code references: "timm:NAME" has the form of "package.module:name".
    if (timm_name := hf_models.resolve_name(text, bare=False)) is not None:
        return "timm", timm_name
    if (ref := parse_code_ref(text)) is not None:
        return "code", ref
    if text.lower() in zoo.torchvision_names():
        return "torchvision", text.lower()
    timm_name = hf_models.resolve_name(text)
    return None if timm_name is None else ("timm", timm_name)


def unknown_name_message(name: str, what: str) -> str:
    """The one-line error for an unknown ``what`` (model or architecture), with close names."""
    torchvision = zoo.torchvision_names()
    demo = ["demo"] if what == "model" else []
    known = list(dict.fromkeys([*torchvision, *hf_models.timm_names(), *demo]))
    close = difflib.get_close_matches(name.lower(), known, n=3, cutoff=0.6)
    # timm's names are typed with their prefix where torchvision has no model of that name.
    shown = [c if c in torchvision or c == "demo" else f"timm:{c}" for c in close]
    hint = f"; did you mean {', '.join(shown)}?" if shown else ""
    forms = (
        "a torchvision name (resnet18), timm:NAME (timm:vit_tiny_patch16_224), a model folder "
        "saved with save_pretrained, file.py:ClassName"
    )
    if what == "model":
        return (
            f"{name}: unknown model: not a file, 'demo', {forms}, package.module:factory or a "
            f"Hugging Face hub id already in the local cache (openai-community/gpt2){hint}"
        )
    return f"arch {name!r}: unknown architecture: give {forms} or package.module:factory{hint}"


def open_file(path: Path, src: str, *, arch: str | None, trust: bool, guess: bool) -> LoadedModel:
    fmt = checkpoints.sniff_format(path)
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
        try:
            with pywarnings.catch_warnings():
                # torch.jit is deprecated upstream, but existing files still deserve to open.
                pywarnings.simplefilter("ignore", FutureWarning)
                model = torch.jit.load(str(path), map_location="cpu")
        except Exception as exc:  # torch.jit raises RuntimeError or C++-derived errors
            raise ModelLoadError(f"{src}: corrupt TorchScript archive ({one_line(exc)})") from exc
        from actviz.core.capture import TORCHSCRIPT_WARNING

        # The sentence each of its captures warns too (the window's banner shows it once).
        name = f"{path.name} (TorchScript)"
        return LoadedModel(model, name, src, "torchscript", warnings=[TORCHSCRIPT_WARNING])
    if fmt == FileFormat.EXPORT:
        return _open_export(path, src, trust=trust)
    kind, obj, where = "safetensors", None, ""
    if fmt == FileFormat.SAFETENSORS:
        found = checkpoints.read_safetensors(path, src)
    else:
        kind, obj = "state_dict", checkpoints.torch_load_guarded(path, trust=trust)
        found, where = checkpoints.extract_weights(obj, src)
    if isinstance(found, nn.Module):
        if where:
            log.info("%s: model taken from %s", src, where)
        return LoadedModel(found, f"{path.name} ({type(found).__name__})", src, "pickle")
    if arch is None and isinstance(obj, dict) and isinstance(obj.get("arch"), str):
        # timm's training script records its model name there too.
        named = resolve_named(obj["arch"])
        arch = named[1] if named is not None and named[0] != "code" else None
        if arch is not None:
            log.info("%s: using the architecture recorded in the file: %s", src, arch)
    if where:
        log.info("%s: weights taken from %s", src, where)
    guesses: tuple[ArchGuess, ...] = ()
    if not arch:
        arch, guesses = _guess_arch(found, src, guess=guess)
    loaded, fit = _build_arch(arch, found, beside=path.parent)
    notes = checkpoints.apply_state_dict(loaded.model, found, src, arch)
    loaded.name = f"{path.name} ({loaded.name})"
    loaded.source, loaded.kind, loaded.arch_guesses = src, kind, guesses
    if fit is not None and fit.num_classes is not None:
        head = fit.reason.split(";")[0]
        loaded.warnings.append(f"{path.name}: its {arch} {head}, so the class names are unknown")
    if notes:
        log.info("%s: %s", src, "; ".join(notes))
    if where:
        loaded.weights_from = where + (" (EMA)" if "ema" in where.lower() else "")
        if "ema" in where.lower():
            # Say it where users look: the name shows in the title, status bar and CLI.
            loaded.name = loaded.name[:-1] + ", EMA weights)"
    return loaded


def _guess_arch(
    state_dict: dict[str, torch.Tensor], src: str, *, guess: bool
) -> tuple[str, tuple[ArchGuess, ...]]:
    """The architecture to use for bare weights, or ArchitectureNeededError with candidates."""
    count = f"{len(state_dict)} tensor{'s' if len(state_dict) != 1 else ''}"
    lead = f"{src}: holds only weights ({count}), not the architecture"
    if not guess:
        raise ArchitectureNeededError(f"{lead}; {_HOW_TO_NAME_ARCH}", src)
    guesses = tuple(arch_guess.guess_architecture(state_dict))
    if (best := arch_guess.confident_guess(guesses)) is not None:
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
    """Build ``arch`` randomly initialised (zoo names sized for the head) and how weights fit."""
    if (named := resolve_named(arch)) is None:
        raise ModelLoadError(unknown_name_message(arch, "architecture"))
    kind, name = named
    if kind == "code":
        return LoadedModel(build_from_code(_code_beside(name, beside)), arch, arch, "code"), None
    # A fine-tuned head (10 classes instead of 1000) is the one difference worth adapting.
    fit = arch_guess.compare_architecture(state_dict, name)
    loaded = BUILDERS[kind](name, None, num_classes=fit.num_classes if fit else None, src=arch)
    loaded.name = name  # the canonical name (timm/NAME)
    return loaded, fit


def _code_beside(ref: CodeRef, beside: Path | None) -> CodeRef:
    """``ref``, or the same file beside the checkpoint when the working folder has none."""
    target = Path(ref.target)
    if not ref.is_file or beside is None or target.is_absolute() or target.is_file():
        return ref
    if (near := beside / target).is_file():
        return CodeRef(str(near), ref.attr, is_file=True)
    raise ModelLoadError(
        f"{ref.target}: file not found (looked in the working folder {Path.cwd()} and beside "
        f"the checkpoint, in {beside})"
    )


def _open_export(path: Path, src: str, *, trust: bool) -> LoadedModel:
    if (reason := checkpoints.export_needs_trust(path)) and not trust:
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
    input_shape = None  # the first user input's, if static
    with contextlib.suppress(Exception):  # no user input, or symbolic (dynamic) sizes
        first = list(program.graph_signature.user_inputs)[0]
        node = next(n for n in program.graph.nodes if n.op == "placeholder" and n.name == first)
        input_shape = tuple(int(s) for s in node.meta.get("val").shape)
    input_size = input_shape[-2:] if input_shape is not None and len(input_shape) == 4 else None
    note = (
        f"{path.name} is a torch.export program: it replays the graph recorded at export time "
        "(train/eval mode is fixed, inputs must match the exported shapes)"
    )
    name = f"{path.name} (torch.export)"
    return LoadedModel(
        model, name, src, "export", input_size=input_size, input_shape=input_shape, warnings=[note]
    )


@dataclass(frozen=True)
class CodeRef:
    """A parsed ``target:attr`` reference; ``is_file`` tells a .py path from a module name."""

    target: str
    attr: str
    is_file: bool

    def __str__(self) -> str:
        return f"{self.target}:{self.attr}"


def parse_code_ref(source: str) -> CodeRef | None:
    """Parse ``file.py:Name`` / ``package.module:factory``; else None."""
    target, sep, attr = source.rpartition(":")
    if not sep or not target or not _DOTTED.match(attr):
        return None
    if target.endswith(".py"):
        return CodeRef(target, attr, is_file=True)
    return CodeRef(target, attr, is_file=False) if _DOTTED.match(target) else None


def module_classes_in_file(path: str | os.PathLike[str]) -> list[str]:
    """Top-level class names of a .py file, read with ``ast`` (not run), to suggest one."""
    try:
        tree = ast.parse(Path(path).read_text(encoding="utf-8"))
    except (OSError, SyntaxError, UnicodeDecodeError, ValueError):
        return []
    return [node.name for node in tree.body if isinstance(node, ast.ClassDef)]


def _import_file(path: Path) -> Any:
    resolved = path.resolve()
    digest = hashlib.sha1(str(resolved).encode()).hexdigest()[:8]
    stem = re.sub(r"\W", "_", path.stem)
    # A private name (a user's "torch.py" shadows nothing), run afresh to see edits on reload.
    mod_name = f"_actviz_user_{stem}_{digest}"
    spec = importlib.util.spec_from_file_location(mod_name, resolved)
    if spec is None or spec.loader is None:
        raise ModelLoadError(f"{path}: cannot be imported as Python code")
    module = importlib.util.module_from_spec(spec)
    # Registered before exec so dataclasses/pickle can find the module by name.
    sys.modules[mod_name] = module
    # The file's folder goes on sys.path while it runs, so `import sibling` works.
    try:
        with on_sys_path(str(resolved.parent)):
            spec.loader.exec_module(module)
    except Exception as exc:  # the user's code may raise anything
        sys.modules.pop(mod_name, None)
        raise ModelLoadError(
            f"{path}: importing it failed ({type(exc).__name__}: {one_line(exc)})"
        ) from exc
    return module


def _import_module(name: str) -> Any:
    # Retried from the working folder (the CLI's sys.path[0] is its script folder).
    for folders in ((), (os.getcwd(),)):
        try:
            with on_sys_path(*folders):
                return importlib.import_module(name)
        except ModuleNotFoundError as exc:
            top = exc.name == name.split(".")[0] and os.getcwd() not in sys.path
            if folders or not top:
                raise ModelLoadError(f"{name}: cannot import module ({one_line(exc)})") from exc
        except Exception as exc:
            raise ModelLoadError(
                f"{name}: importing it failed ({type(exc).__name__}: {one_line(exc)})"
            ) from exc


def build_from_code(ref: CodeRef) -> nn.Module:
    """The model a code reference names: an ``nn.Module`` subclass or factory (called without
    arguments) or an instance. ``ModelLoadError`` when missing, failing, or not a module."""
    if ref.is_file:
        path = Path(ref.target)
        if not path.is_file():
            raise ModelLoadError(f"{ref.target}: file not found")
        module = _import_file(path)
    else:
        module = _import_module(ref.target)
    obj: Any = module
    for part in ref.attr.split("."):
        if not hasattr(obj, part):
            public = {n: getattr(module, n) for n in dir(module) if not n.startswith("_")}
            candidates = [
                n for n, v in public.items() if isinstance(v, type) and issubclass(v, nn.Module)
            ]
            hint = f"; it defines {', '.join(candidates[:8])}" if candidates else ""
            raise ModelLoadError(f"{ref}: {ref.target} has no attribute {part!r}{hint}")
        obj = getattr(obj, part)
    if isinstance(obj, nn.Module):
        return obj
    if not callable(obj):
        raise ModelLoadError(f"{ref}: is a {type(obj).__name__}, not a model class or factory")
    try:
        model = obj()
    except Exception as exc:  # the user's constructor may raise anything
        raise ModelLoadError(
            f"{ref}: calling {ref.attr}() with no arguments failed "
            f"({type(exc).__name__}: {one_line(exc)}); name a factory function that takes none"
        ) from exc
    if not isinstance(model, nn.Module):
        raise ModelLoadError(
            f"{ref}: {ref.attr}() returned a {type(model).__name__}, not a nn.Module"
        )
    return model
