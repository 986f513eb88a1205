"""What a scan reads, as a dataset of ``(C, H, W)`` tensors preprocessed exactly as for a single
run (the same activations); an unreadable item yields ``None`` and the reason (skipped)."""

from __future__ import annotations

import contextlib
import hashlib
import os
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch import nn
from torch.utils.data import Dataset

from actviz.io import input_tensors
from actviz.io.errors import InputError
from actviz.io.input_files import _is_pil_image
from actviz.io.input_tensors import ExpectedInput, _from_image, _open_image, expected_input
from actviz.io.models.checkpoints import sniff_format

#: File suffixes a folder scan picks up (case-insensitive).
IMAGE_SUFFIXES = frozenset(
    {".png", ".jpg", ".jpeg", ".bmp", ".gif", ".tif", ".tiff", ".webp", ".ppm", ".pgm"}
)


@dataclass
class ModelSpec:
    """The module to scan and how its inputs are prepared."""

    model: nn.Module
    transforms: Callable[..., Any] | None
    expected: ExpectedInput
    size: tuple[int, int] | None
    name: str


def resolve_model(model: Any, transform: Callable[..., Any] | None = None) -> ModelSpec:
    """A module, ``LoadedModel`` or model source, opened; ``transform`` replaces preprocessing."""
    from actviz.io.models.loaded_model import LoadedModel
    from actviz.io.models.loading import open_model

    if isinstance(model, (str, os.PathLike)):
        model = open_model(model)
    if isinstance(model, LoadedModel):
        exp = expected_input(model.model, model)
        transforms = transform if transform is not None else model.transforms
        return ModelSpec(model.model, transforms, exp, model.input_size, model.name)
    if not isinstance(model, nn.Module):
        raise TypeError(
            f"model must be an nn.Module, a LoadedModel or a model source, not {type(model).__name__}"
        )
    exp = expected_input(model)
    return ModelSpec(model, transform, exp, exp.size, type(model).__name__)


def preprocessing_id(spec: ModelSpec) -> str:
    """Text that changes whenever the preprocessing does (part of the cache key)."""
    if (t := spec.transforms) is None:
        what = "none"
    else:
        kind = getattr(t, "__qualname__", None) or type(t).__qualname__
        text = repr(t)
        # Function reprs hold an address that changes every run; their name says enough.
        what = f"{getattr(t, '__module__', '')}.{kind}" + ("" if " at 0x" in text else text)
    return f"{what}|size={spec.size}|channels={spec.expected.channels}"


@dataclass
class ScanData:
    """Resolved data of a scan: per item ``sources`` and content ``signatures``, ``class_names``,
    the cache ``identity`` (None: not cacheable), the ``dataset`` (``i -> (i, tensor | None,
    reason)``) and whether items are ``files``."""

    sources: tuple[str | int, ...]
    signatures: tuple[str, ...]
    class_names: tuple[str, ...] | None
    identity: str | None
    dataset: Dataset
    files: bool


def collate(items: list[tuple[int, torch.Tensor | None, str]]) -> tuple:
    """Batch items, leaving out the unreadable ones: ``(indices, batch | None, skipped)``."""
    good = [(i, t) for i, t, _ in items if t is not None]
    skipped = [(i, reason) for i, t, reason in items if t is None]
    indices = torch.tensor([i for i, _ in good], dtype=torch.int64)
    if not good:
        return indices, None, skipped
    tensors = [t for _, t in good]
    if len(shapes := {tuple(t.shape) for t in tensors}) > 1:
        raise InputError(
            f"the preprocessing gave inputs of different shapes {sorted(shapes)}; give a "
            "transform (or a model with an input size) that makes every input the same size"
        )
    return indices, torch.stack(tensors), skipped


class _Items(Dataset):
    """Items opened and preprocessed exactly like a single run's input."""

    def __init__(
        self,
        items: Any,
        expected: ExpectedInput,
        transforms: Callable[..., Any] | None,
        size: tuple[int, int] | None,
    ) -> None:
        self.items = items
        # Workers build tensors on the CPU; the scan moves each batch to the model's device.
        self.expected = replace(expected, device=torch.device("cpu"))
        self.transforms, self.size = transforms, size

    def __len__(self) -> int:
        return len(self.items)


class ImageFiles(_Items):
    """Image files (their paths)."""

    def __getitem__(self, i: int) -> tuple[int, torch.Tensor | None, str]:
        src = self.items[i]
        try:
            img = _open_image(Path(src), src)
            loaded = _from_image(img, src, self.expected, self.transforms, self.size)
        except (InputError, OSError, ValueError) as exc:  # OSError: vanished file, permissions
            text = str(exc)  # without the path the log line holds already
            cut = text.startswith(f"{src}: ")
            return i, None, text[len(src) + 2 :] if cut else f"{type(exc).__name__}: {text}"
        return i, loaded.value[0], ""


class Samples(Dataset):
    """The samples of an ``(N, C, ...)`` tensor."""

    def __init__(self, tensor: torch.Tensor) -> None:
        self.tensor = tensor

    def __len__(self) -> int:
        return int(self.tensor.shape[0])

    def __getitem__(self, i: int) -> tuple[int, torch.Tensor | None, str]:
        return i, self.tensor[i], ""


class DatasetItems(_Items):
    """Items of any dataset: a tensor, a PIL image, or a tuple/list/dict whose first is one."""

    def __getitem__(self, i: int) -> tuple[int, torch.Tensor | None, str]:
        try:
            item = self.items[i]
            if isinstance(item, dict):
                item = next(iter(item.values()))
            elif isinstance(item, (tuple, list)):
                item = item[0]
            if _is_pil_image(item):
                item = _from_image(item, f"<{i}>", self.expected, self.transforms, self.size)
                return i, item.value[0], ""
            if isinstance(item, np.ndarray):
                item = torch.from_numpy(np.ascontiguousarray(item))
            if not isinstance(item, torch.Tensor):
                return i, None, f"item is a {type(item).__name__}, not a tensor or image"
            if item.is_floating_point():
                item = item.to(self.expected.dtype)
            return i, item, ""
        except Exception as exc:  # a user dataset may raise anything for one bad item
            return i, None, f"{type(exc).__name__}: {exc}"


def _signature(path: str) -> str:
    try:
        st = os.stat(path)
    except OSError:
        return "missing"
    return f"{st.st_size}:{st.st_mtime_ns}"


def folder_images(root: Path) -> tuple[list[str], tuple[str, ...] | None]:
    """The image files under ``root`` (recursive, hidden names left out, sorted by their
    path below it) and, for an ImageFolder layout (every image one folder down), the class
    names. The one listing of an image folder: scans and live mode's frames read it."""
    files: list[tuple[str, str]] = []
    base = os.fspath(root)
    # os.path, not pathlib: listing is part of a scan's time, and pathlib parses names again.
    for dirpath, dirnames, filenames in os.walk(base):
        dirnames[:] = sorted(d for d in dirnames if not d.startswith("."))
        rel_dir = os.path.relpath(dirpath, base)
        prefix = "" if rel_dir == "." else rel_dir.replace(os.sep, "/") + "/"
        for fn in filenames:
            if not fn.startswith(".") and os.path.splitext(fn)[1].lower() in IMAGE_SUFFIXES:
                files.append((prefix + fn, os.path.join(dirpath, fn)))
    files.sort()
    # ImageFolder layout: every image one folder below the root; the folders are the classes.
    one_down = files and all(rel.count("/") == 1 for rel, _ in files)
    classes = tuple(sorted({rel.split("/", 1)[0] for rel, _ in files})) if one_down else None
    return [full for _, full in files], classes


def open_data(data: Any, spec: ModelSpec) -> ScanData:
    """Resolve ``data`` for a scan with the model ``spec``; ``InputError`` when missing or unfit."""
    exp = spec.expected
    if isinstance(data, (str, os.PathLike)):
        path = Path(data)
        src = os.fspath(data)
        if not path.exists():
            raise InputError(f"{src}: no such folder or file")
        if path.is_dir():
            files, classes = folder_images(path.resolve())
            if not files:
                raise InputError(
                    f"{src}: no images ({', '.join(sorted(IMAGE_SUFFIXES))}) in this folder"
                )
            return _files(files, classes, f"folder:{path.resolve()}", spec)
        fmt = sniff_format(path)
        if fmt not in input_tensors._TENSOR_FORMATS:
            raise InputError(
                f"{src}: give a folder of images, a list of image paths, or a .pt/.npy file of "
                "N samples"
            )
        value, word = input_tensors._read_tensor_file(path, src, fmt)
        if not isinstance(value, torch.Tensor):
            raise InputError(f"{src}: holds several tensors; a scan needs one (N, C, H, W) tensor")
        st = path.stat()
        identity = f"file:{path.resolve()}:{st.st_size}:{st.st_mtime_ns}"
        return _samples(value, src, word, identity, exp)
    if isinstance(data, np.ndarray):
        data = torch.from_numpy(np.ascontiguousarray(data))
    if isinstance(data, torch.Tensor):
        return _samples(data, "<tensor>", "tensor", None, exp)
    if isinstance(data, Dataset) or (hasattr(data, "__getitem__") and hasattr(data, "__len__")):
        if isinstance(data, (list, tuple)) and all(isinstance(p, (str, os.PathLike)) for p in data):
            if not data:
                raise InputError("the list of image paths is empty")
            files = [str(Path(p).resolve()) for p in data]
            common = os.path.commonpath(files) if len(files) > 1 else str(Path(files[0]).parent)
            return _files(files, None, f"files:{common}", spec)
        classes = getattr(data, "classes", None)
        names = tuple(str(c) for c in classes) if isinstance(classes, (list, tuple)) else None
        items = DatasetItems(data, exp, spec.transforms, spec.size)
        n = len(items)
        return ScanData(tuple(range(n)), ("",) * n, names, None, items, False)
    raise InputError(
        f"data: {type(data).__name__} is not a folder, a list of paths, a tensor or a Dataset"
    )


def _files(
    files: list[str], classes: tuple[str, ...] | None, identity: str, spec: ModelSpec
) -> ScanData:
    size = spec.size
    if spec.transforms is None and size is None:
        # No size known: the first readable image decides, so a batch has one size.
        for f in files:
            with contextlib.suppress(InputError, OSError):
                width, height = _open_image(Path(f), f).size
                size = (height, width)
                break
    dataset = ImageFiles(list(files), spec.expected, spec.transforms, size)
    signatures = tuple(_signature(f) for f in files)
    return ScanData(tuple(files), signatures, classes, identity, dataset, True)


def _samples(value: torch.Tensor, src: str, word: str, identity: str | None, exp) -> ScanData:
    t, _ = input_tensors._fit_tensor(value, src, word, exp)
    if t.ndim < 2:
        raise InputError(f"{src}: a scan needs N samples along the first dimension")
    if identity is None:
        h = hashlib.sha1(f"{tuple(t.shape)}|{t.dtype}".encode())
        h.update(t.detach().cpu().contiguous().view(torch.uint8).numpy().tobytes())
        identity = f"tensor:{h.hexdigest()[:20]}"
    n = int(t.shape[0])
    return ScanData(tuple(range(n)), ("",) * n, None, identity, Samples(t), False)
