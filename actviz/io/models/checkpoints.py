"""Reading checkpoint files safely: format sniffing (by content, not extension), guarded
unpickling (full unpickling only with ``trust=True``) and state_dict fitting."""

from __future__ import annotations

import contextlib
import io
import json
import logging
import os
import pickle
import re
import sys
import zipfile
from collections.abc import Iterable, Iterator, Mapping
from pathlib import Path
from typing import Any

import torch
from torch import nn

from actviz.io.errors import ModelLoadError, UntrustedFileError

log = logging.getLogger(__name__)
_ZIP_MAGICS = (b"PK\x03\x04", b"PK\x05\x06")
_NPY_MAGIC = b"\x93NUMPY"
# Above this a safetensors header would be implausible (the format itself caps it at 100 MB).
_SAFETENSORS_MAX_HEADER = 100_000_000
# Keys training scripts nest the weights under, most specific (EMA, as timm's loader) first.
_WEIGHT_KEYS = tuple(
    "state_dict_ema model_ema state_dict model_state_dict model_state "
    "model module net network weights".split()
)


class FileFormat:
    """Names of the file formats :func:`sniff_format` recognises."""

    EMPTY = "empty"
    TORCH_ZIP = "torch-zip"  # torch.save (>= 1.6): zip holding data.pkl + tensor storages
    TORCHSCRIPT = "torchscript"  # torch.jit.save: zip with code/ and constants.pkl
    EXPORT = "torch-export"  # torch.export.save (.pt2): zip with archive_format + models/*.json
    NPZ = "npz"  # numpy.savez: zip of .npy members
    ZIP_OTHER = "zip"  # a zip, but none of the above
    BAD_ZIP = "bad-zip"  # zip signature but unreadable (truncated, damaged)
    SAFETENSORS = "safetensors"
    NPY = "npy"
    PICKLE = "pickle"  # legacy torch.save or a plain pickle
    UNKNOWN = "unknown"


def one_line(exc: BaseException | str, limit: int = 300) -> str:
    """The first non-empty line of ``exc`` without ANSI escapes, cut to ``limit`` characters."""
    text = re.sub(r"\x1b\[[0-9;]*m", "", str(exc))
    first = next((ln.strip() for ln in text.splitlines() if ln.strip()), "")
    if not first and isinstance(exc, BaseException):
        first = type(exc).__name__
    return first if len(first) <= limit else first[: limit - 3] + "..."


@contextlib.contextmanager
def on_sys_path(*folders: str) -> Iterator[None]:
    """``folders`` first on ``sys.path`` for the block (imports of user code beside its file)."""
    sys.path[:0] = folders
    try:
        yield
    finally:
        for folder in folders:
            with contextlib.suppress(ValueError):
                sys.path.remove(folder)


def sniff_format(path: str | os.PathLike[str]) -> str:
    """A file's :class:`FileFormat`, from its first bytes (and a zip's member names)."""
    path = Path(path)
    size = path.stat().st_size
    if size == 0:
        return FileFormat.EMPTY
    with path.open("rb") as fh:
        head = fh.read(16)
    if head[:4] in _ZIP_MAGICS:
        try:
            with zipfile.ZipFile(path) as zf:
                names = zf.namelist()
        except (zipfile.BadZipFile, OSError, ValueError):
            return FileFormat.BAD_ZIP
        return _classify_zip(names)
    if head.startswith(_NPY_MAGIC):
        return FileFormat.NPY
    if _looks_like_safetensors(path, head, size):
        return FileFormat.SAFETENSORS
    # PROTO (0x80) and a protocol number (legacy torch.save: a run of protocol-2 pickles).
    if len(head) >= 2 and head[0] == 0x80 and 1 <= head[1] <= 5:
        return FileFormat.PICKLE
    return FileFormat.UNKNOWN


def _classify_zip(names: list[str]) -> str:
    if any(n.endswith("/constants.pkl") or "/code/__torch__/" in n for n in names):
        return FileFormat.TORCHSCRIPT
    if any(
        n.endswith("/archive_format") or ("/models/" in n and n.endswith(".json")) for n in names
    ):
        return FileFormat.EXPORT
    if any(n == "data.pkl" or n.endswith("/data.pkl") for n in names):
        return FileFormat.TORCH_ZIP
    if names and all(n.endswith(".npy") for n in names):
        return FileFormat.NPZ
    return FileFormat.ZIP_OTHER


def _looks_like_safetensors(path: Path, head: bytes, size: int) -> bool:
    # Layout: 8-byte little-endian header length N, then N bytes of JSON, then raw data.
    if len(head) < 9:
        return False
    n = int.from_bytes(head[:8], "little")
    if n < 2 or n > min(size - 8, _SAFETENSORS_MAX_HEADER) or head[8:9] != b"{":
        return False
    with path.open("rb") as fh:
        fh.seek(8)
        raw = fh.read(n)
    try:
        header = json.loads(raw)
    except (UnicodeDecodeError, ValueError):
        return False
    return isinstance(header, dict)


def read_safetensors(
    path: Path, src: str, error: type[Exception] = ModelLoadError
) -> dict[str, torch.Tensor]:
    """A ``.safetensors`` file's tensors on the CPU; ``error`` without the package or when damaged."""
    try:
        from safetensors.torch import load_file
    except ImportError as exc:
        raise error(
            f"{src}: reading .safetensors needs the 'safetensors' package (pip install safetensors)"
        ) from exc
    try:
        return load_file(str(path), device="cpu")
    except Exception as exc:  # safetensors raises its own SafetensorError for damaged files
        raise error(f"{src}: corrupt safetensors file ({one_line(exc)})") from exc


def _unsafe_detail(exc: BaseException) -> str:
    """What the refused pickle referenced, from torch's weights_only error text."""
    if match := re.search(r"GLOBAL\s+([\w.]+)", str(exc), flags=re.IGNORECASE):
        return f"it refers to {match.group(1)}, which plain weights never need"
    return "it is a full Python pickle, not plain tensors"


def torch_load_guarded(path: str | os.PathLike[str], *, trust: bool = False) -> Any:
    """``torch.load`` a file on CPU, fully unpickling only with ``trust`` (else
    ``UntrustedFileError`` where needed); ``ModelLoadError`` when unreadable."""
    path = os.fspath(path)
    try:
        return torch.load(path, map_location="cpu", weights_only=True)
    except pickle.UnpicklingError as exc:
        # torch turns every refusal of its restricted unpickler into UnpicklingError.
        if not trust:
            raise UntrustedFileError(path, _unsafe_detail(exc)) from exc
        log.info("%s: loading with full unpickling because the user trusts it", path)
    except EOFError as exc:
        raise ModelLoadError(f"{path}: file ends too early (truncated or empty)") from exc
    except (RuntimeError, ValueError, OSError, zipfile.BadZipFile) as exc:
        raise ModelLoadError(f"{path}: corrupt or truncated checkpoint ({one_line(exc)})") from exc
    try:
        return _load_trusted(path)
    except ModelLoadError:
        raise
    except Exception as exc:  # arbitrary code ran: any error type is possible
        raise ModelLoadError(
            f"{path}: could not unpickle ({type(exc).__name__}: {one_line(exc)})"
        ) from exc


def _load_trusted(path: str) -> Any:
    """Fully unpickle ``path``, finding classes beside it and in the working folder."""
    folders = [
        f
        for f in dict.fromkeys([str(Path(path).resolve().parent), os.getcwd()])
        if f not in sys.path
    ]
    try:
        try:
            return torch.load(path, map_location="cpu", weights_only=False)
        except ModuleNotFoundError as exc:
            first = exc
        with on_sys_path(*folders):
            return torch.load(path, map_location="cpu", weights_only=False)
    except ModuleNotFoundError as exc:
        name = (exc.name or first.name or "?").split(".")[0]
        raise ModelLoadError(
            f"{path}: the pickled model needs the Python module {name!r}, which cannot be "
            f"imported; run actviz from the folder that holds {name}.py, or add that folder "
            "to PYTHONPATH"
        ) from exc
    except AttributeError as exc:  # the pickle's class is missing from its module
        match = re.search(r"attribute '([\w.]+)' on <module '([\w.]+)'", str(exc))
        cls, module = match.groups() if match else ("", "")
        text = f"{path}: could not unpickle (AttributeError: {one_line(exc)})"
        if module.endswith("__main__"):
            text = (
                f"{path}: the model's class {cls} was defined in the script that saved it "
                "(__main__), so the pickle cannot find it; save model.state_dict() instead and "
                f"open it with the architecture named (--arch yourscript.py:{cls}, or the "
                "architecture field of File > Open model)"
            )
        elif match:
            text = (
                f"{path}: the pickled model needs class {cls} from module {module!r}, which no "
                "longer has it (renamed or moved since the file was saved)"
            )
        raise ModelLoadError(text) from exc


def export_needs_trust(path: str | os.PathLike[str]) -> str:
    """Why ``torch.export.load`` would unpickle arbitrary objects from a .pt2 file ("" if not):
    its ``use_pickle`` payloads and opaque constants, checked with the restricted loader."""
    with zipfile.ZipFile(path) as zf:
        names = zf.namelist()
        configs = [n for n in names if re.search(r"/data/(weights|constants)/.*_config\.json$", n)]
        if not configs:
            # Older archive layouts keep weights as one pickled .pt file.
            return "it uses an older torch.export layout whose weights are pickled"
        for cfg_name in configs:
            folder = cfg_name.rsplit("/", 1)[0]
            try:
                config = json.loads(zf.read(cfg_name)).get("config", {})
            except (ValueError, KeyError) as exc:
                return f"its payload index {cfg_name} is unreadable ({one_line(exc)})"
            is_weights = "/data/weights/" in cfg_name
            for fqn, meta in config.items():
                payload = meta.get("path_name", "")
                if not is_weights and not payload.startswith("tensor_"):
                    # custom_obj_* / opaque_obj_* constants are Python or TorchBind objects.
                    return f"constant {fqn} is a pickled object, not a tensor"
                if not meta.get("use_pickle"):
                    continue  # raw tensor bytes: nothing to unpickle
                try:
                    data = zf.read(f"{folder}/{payload}")
                    torch.load(io.BytesIO(data), map_location="cpu", weights_only=True)
                except pickle.UnpicklingError as exc:
                    return f"{fqn}: {_unsafe_detail(exc)}"
                except (KeyError, RuntimeError, EOFError) as exc:
                    return f"{fqn} is unreadable ({one_line(exc)})"
    return ""


def _is_state_dict(obj: Any) -> bool:
    """Names to tensors, at least one (``*_extra_state`` entries may hold anything)."""
    if not isinstance(obj, Mapping) or not all(isinstance(k, str) for k in obj):
        return False
    tensors = {k for k, v in obj.items() if isinstance(v, torch.Tensor)}
    return bool(tensors) and all(k in tensors or k.endswith("_extra_state") for k in obj)


def extract_weights(obj: Any, path: str) -> tuple[nn.Module | dict[str, torch.Tensor], str]:
    """Find the module or state_dict inside a checkpoint (training dicts, Lightning): ``(found,
    where)`` with the key path (``"['state_dict']"``; "" at the top), else ``ModelLoadError``."""
    if (found := _search_weights(obj, depth=0)) is not None:
        return found
    if isinstance(obj, Mapping) and not obj:
        raise ModelLoadError(f"{path}: holds an empty dict, no model weights")
    if isinstance(obj, Mapping):
        keys = ", ".join(repr(k) for k in list(obj)[:8])
        more = ", ..." if len(obj) > 8 else ""
        raise ModelLoadError(
            f"{path}: no model weights found; top-level keys are {keys}{more} "
            f"(expected a state_dict or one of 'state_dict', 'model_state_dict', 'model')"
        )
    raise ModelLoadError(
        f"{path}: holds a {type(obj).__name__}, not a model, a state_dict or a training checkpoint"
    )


def _search_weights(obj: Any, depth: int) -> tuple[Any, str] | None:
    if isinstance(obj, nn.Module):
        return obj, ""
    if _is_state_dict(obj):
        return dict(obj), ""
    if not isinstance(obj, Mapping) or depth >= 3:
        return None
    for key in _WEIGHT_KEYS:
        if key in obj and (inner := _search_weights(obj[key], depth + 1)) is not None:
            return inner[0], f"[{key!r}]{inner[1]}"
    return None


def drop_compile_prefix(state_dict: Mapping[str, Any]) -> tuple[dict[str, Any], list[str]]:
    """Remove torch.compile's ``_orig_mod`` segment from every key: ``(state_dict, notes)``."""
    # torch.compile's `_orig_mod` segment goes wherever it is (below a DDP/Lightning prefix too).
    cleaned = {
        ".".join(p for p in key.split(".") if p != "_orig_mod"): value
        for key, value in state_dict.items()
    }
    notes: list[str] = []
    if len(cleaned) < len(state_dict):
        notes.append("some keys collided after removing '_orig_mod.'")
    elif any("_orig_mod" in k.split(".") for k in state_dict):
        notes.append("removed torch.compile prefix '_orig_mod.'")
    return cleaned, notes


def best_prefix(keys: Iterable[str], model_keys: set[str] | frozenset[str]) -> tuple[str, int]:
    """``(prefix, matches)``: the wrapper prefix (up to three segments) whose removal lines the most
    keys up with ``model_keys``; ties go to no prefix, then the shortest."""
    keys = list(keys)
    scores: dict[str, int] = {"": sum(1 for k in keys if k in model_keys)}
    for key in keys:
        parts = key.split(".")
        for depth in range(1, min(3, len(parts) - 1) + 1):
            if ".".join(parts[depth:]) in model_keys:
                prefix = ".".join(parts[:depth]) + "."
                scores[prefix] = scores.get(prefix, 0) + 1
    best = max(scores, key=lambda p: (scores[p], p == "", -len(p)))
    if scores[best] <= scores[""]:
        best = ""
    return best, scores[best]


def shape_text(t: Any) -> str:
    """A tensor's shape as Python writes the tuple: ``(3,)``, ``(1, 3, 8, 8)``."""
    return str(tuple(int(s) for s in getattr(t, "shape", ())))


def _listing(items: list[str], limit: int = 3) -> str:
    shown = ", ".join(items[:limit])
    return shown + (f", ... ({len(items) - limit} more)" if len(items) > limit else "")


def apply_state_dict(
    model: nn.Module, state_dict: Mapping[str, torch.Tensor], path: str, arch_label: str
) -> list[str]:
    """Load fitted weights into ``model`` strictly; returns notes on stripped prefixes.
    ``ModelLoadError`` lists missing, unexpected and mis-shaped keys."""
    target = model.state_dict()
    # Strip wrapper prefixes (_orig_mod., module., model., ...) so the keys match the model's.
    fitted, notes = drop_compile_prefix(state_dict)
    best, _ = best_prefix(fitted, set(target))
    if best:
        outside = [k for k in fitted if not k.startswith(best)]
        fitted = {k[len(best) :]: v for k, v in fitted.items() if k.startswith(best)}
        notes.append(f"removed prefix {best!r}")
        if outside:
            example = ", ".join(outside[:3])
            notes.append(f"ignored {len(outside)} entries outside {best!r} (e.g. {example})")
    missing = [k for k in target if k not in fitted]
    unexpected = [k for k in fitted if k not in target]
    mismatched = [
        f"{k}: checkpoint {shape_text(fitted[k])} vs model {shape_text(target[k])}"
        for k in target
        if k in fitted and tuple(fitted[k].shape) != tuple(target[k].shape)
    ]
    named = {"shape mismatches": mismatched, "missing keys": missing, "unexpected keys": unexpected}
    if parts := [f"{len(keys)} {what} ({_listing(keys)})" for what, keys in named.items() if keys]:
        raise ModelLoadError(
            f"{path}: weights do not fit architecture {arch_label}: " + "; ".join(parts)
        )
    try:
        model.load_state_dict(fitted, strict=True)
    except RuntimeError as exc:
        raise ModelLoadError(
            f"{path}: weights do not fit architecture {arch_label}: {one_line(exc)}"
        ) from exc
    return notes
