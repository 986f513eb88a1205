"""Session files (``.actviz``): an investigation saved whole and opened again exactly. No Qt.

A session file is a zip holding ``manifest.json`` (every setting, as JSON) and ``.npz``
members (every array: the embedded input, the current capture, pinned captures). It never
holds a pickle: arrays are read with ``np.load(allow_pickle=False)``, and a member that is not
the manifest or an ``.npz`` named by it is refused, so opening a session file cannot run code.

:class:`SessionState` is what the window saves and restores (the window turns its session into
one and back); :func:`save_state` writes it atomically (a temporary file renamed over the
target, so a failed save leaves the old file as it was) and :func:`load_state` reads it or
raises :class:`SessionFileError` with one line (an unknown or newer format, a damaged zip, a
pickle inside, a missing member) without changing anything. :func:`verify_model_source` tells
whether a checkpoint is still the one the session was saved with (its SHA-256).

Edits are stored as JSON (ablate, scale, keep, clamp; a patch edit names the pin whose capture
is its source run; a concept edit names a dictionary kept in the file's ``concepts.npz``, its
weights and ``cfg.json``, so it removes the same concepts when opened again, wherever the
dictionary's folder went); custom edits (Python callables) cannot be stored, and
:func:`unsaved_warnings` says so before saving.
"""

from __future__ import annotations

import base64
import hashlib
import io
import json
import os
import sys
import zipfile
import zlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import numpy as np
import torch

from actviz.core.edit_kinds import Edit
from actviz.core.records import Capture, LayerRecord
from actviz.io.errors import ActvizError, WriteError
from actviz.io.files import atomic_write

__all__ = [
    "FORMAT_VERSION",
    "SUFFIX",
    "InputSource",
    "ModelCheck",
    "ModelSource",
    "PinState",
    "SessionFileError",
    "SessionState",
    "describe_session_file",
    "edits_from_json",
    "edits_to_json",
    "file_sha256",
    "input_source_of",
    "load_state",
    "model_source_of",
    "open_model_source",
    "pin_capture_bytes",
    "save_state",
    "saved_size",
    "unsaved_warnings",
    "verify_model_source",
    "weights_to_keep",
]

#: The format this actviz writes (and the newest it reads).
FORMAT_VERSION = 1
#: The file name suffix of session files.
SUFFIX = ".actviz"
_KIND = "actviz-session"
_MANIFEST = "manifest.json"
#: Edit kinds that a session file can hold (custom edits are Python callables).
_SAVED_KINDS = ("ablate", "scale", "keep", "clamp", "patch", "concept")
#: The member holding the dictionaries of concept edits.
_CONCEPTS_MEMBER = "concepts.npz"
#: Model kinds that come from one file whose bytes can be hashed.
_FILE_KINDS = ("state_dict", "safetensors", "torchscript", "export", "pickle")


class SessionFileError(ActvizError):
    """A session file that cannot be opened or written (one line: the file and the cause)."""


# --------------------------------------------------------------------------------------------
# What a session holds
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class ModelSource:
    """How the model was opened (what :func:`actviz.io.models.open_model` took).

    Attributes
    ----------
    source
        The source string: a torchvision name, ``timm:NAME``, a Hugging Face folder or hub
        id, a checkpoint path, ``file.py:Class``, ``"demo"``.
    kind
        :attr:`actviz.io.models.LoadedModel.kind` (``"torchvision"``, ``"state_dict"``, ...).
    name
        The display name.
    arch, weights
        ``open_model``'s arguments of the same names.
    trust
        Whether the model needed ``trust=True`` when saved (opening it again asks anew).
    sha256, size
        The checkpoint file's SHA-256 and byte count when the model came from one file
        (None otherwise): :func:`verify_model_source` compares them.
    """

    source: str
    kind: str = ""
    name: str = ""
    arch: str | None = None
    weights: str | None = "DEFAULT"
    trust: bool = False
    sha256: str | None = None
    size: int | None = None

    @property
    def path(self) -> Path | None:
        """The checkpoint file, for a model that came from one (else None)."""
        return Path(self.source) if self.sha256 is not None else None


@dataclass(frozen=True)
class InputSource:
    """The input, embedded: the tensors themselves, so the session opens without the file.

    Attributes
    ----------
    value
        What the model was given: a tensor, a tuple/list of tensors or a dict of tensors.
    source
        Where it came from (a path, ``random:...``, ``text:...``): shown, not reopened.
    kind
        ``"image"``, ``"tensor"``, ``"random"``, ``"text"``.
    image
        ``(H, W, 3)`` uint8 picture for overlays, or None.
    description
        The status-bar line.
    tokens
        Token strings of a text input.
    """

    value: Any = field(repr=False)
    source: str = ""
    kind: str = "tensor"
    image: np.ndarray | None = field(default=None, repr=False)
    description: str = ""
    tokens: tuple[str, ...] | None = None

    @property
    def text(self) -> str | None:
        """The text of a ``text:`` input, else None."""
        return self.source[5:] if self.source.startswith("text:") else None


@dataclass(frozen=True)
class PinState:
    """A pinned result: its label, when it was pinned and (optionally) its capture."""

    label: str
    pinned_at: float = 0.0
    capture: Capture | None = field(default=None, repr=False, compare=False)


@dataclass(frozen=True)
class SessionState:
    """Everything a session file holds (see the module docstring).

    Attributes
    ----------
    model, input
        How to open the model again and the embedded input (None: none was open).
    model_weights
        The model's ``state_dict()`` when opening it again gives other weights (a random
        init, model code: :attr:`actviz.io.models.LoadedModel.kind` ``"code"``), else None.
    ticked
        Ticked layers, in tree order.
    target
        The target class/token index (None: the model's default).
    categories
        The model's class names (so a report from the saved capture names classes without
        opening the model).
    colormap, normalize, gradcam_layer, sample, input_as_list
        The display settings of the same names in the window's session.
    channel_pages, page_channels
        ``{layer: first channel}`` of the mosaic pages shown and ``{layer: channels per page}``.
    channel_view
        The channel opened large: ``{"layer": str, "channel": int, ...}`` (None: none).
    edits
        ``{layer: (Edit, ...)}``; a patch edit's ``source`` is one of ``pins``' captures.
    pins
        Pinned results, oldest first.
    comparison
        The comparison set-up (JSON: which runs, tolerance, ...), as the window describes it.
    scan_key
        The cache key of the dataset scan shown (:mod:`actviz.data.cache`), or None.
    layout
        The window layout (Qt's ``saveState()`` bytes), opaque here.
    capture
        The current run's capture: opening the session shows its arrays without running.
    settings
        Any other JSON-able setting a feature keeps (its own key).
    actviz_version, torch_version, format_version
        Filled in when saved: who wrote the file.
    warnings
        What loading could not restore (filled by :func:`load_state`).
    """

    model: ModelSource | None = None
    model_weights: Mapping[str, torch.Tensor] | None = field(
        default=None, repr=False, compare=False
    )
    input: InputSource | None = None
    ticked: tuple[str, ...] = ()
    target: int | None = None
    categories: tuple[str, ...] | None = None
    colormap: str = "auto"
    normalize: str = "channel"
    gradcam_layer: str | None = None
    sample: int = 0
    input_as_list: bool = False
    channel_pages: Mapping[str, int] = field(default_factory=dict)
    page_channels: Mapping[str, int] = field(default_factory=dict)
    channel_view: Mapping[str, Any] | None = None
    edits: Mapping[str, tuple[Edit, ...]] = field(default_factory=dict)
    pins: tuple[PinState, ...] = ()
    comparison: Mapping[str, Any] | None = None
    scan_key: str | None = None
    layout: bytes | None = field(default=None, repr=False)
    capture: Capture | None = field(default=None, repr=False, compare=False)
    settings: Mapping[str, Any] = field(default_factory=dict)
    actviz_version: str = ""
    torch_version: str = ""
    format_version: int = FORMAT_VERSION
    warnings: tuple[str, ...] = ()


# --------------------------------------------------------------------------------------------
# Model and input sources
# --------------------------------------------------------------------------------------------


def file_sha256(path: str | os.PathLike[str], chunk: int = 1 << 20) -> str:
    """The SHA-256 of a file's bytes, as hex (read in chunks: checkpoints are large)."""
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        while block := fh.read(chunk):
            h.update(block)
    return h.hexdigest()


def model_source_of(
    loaded: Any, *, arch: str | None = None, weights: Any = "DEFAULT", trust: bool = False
) -> ModelSource:
    """The :class:`ModelSource` of an :class:`actviz.io.models.LoadedModel` opened with these
    ``open_model`` arguments; a model from one file gets the file's SHA-256."""
    source = str(loaded.source)
    digest = size = None
    path = Path(source)
    if loaded.kind in _FILE_KINDS and path.is_file():
        source = str(path.resolve())
        digest, size = file_sha256(path), path.stat().st_size
    elif loaded.kind == "code":
        source = _absolute_code_ref(source)
    return ModelSource(
        source=source,
        kind=str(loaded.kind),
        name=str(loaded.name),
        arch=None if arch is None else _absolute_code_ref(arch),
        weights=None if weights is None else str(weights),
        trust=bool(trust),
        sha256=digest,
        size=size,
    )


def _absolute_code_ref(text: str) -> str:
    """``"/abs/path/mynet.py:MyNet"`` for a ``"mynet.py:MyNet"`` found from the working folder
    (a session opens again from another one); anything else as it is."""
    from actviz.io.user_code import parse_code_ref

    ref = parse_code_ref(text)
    if ref is None or not ref.is_file or Path(ref.target).is_absolute():
        return text
    target = Path(ref.target)
    return f"{target.resolve()}:{ref.attr}" if target.is_file() else text


def weights_to_keep(loaded: Any) -> dict[str, torch.Tensor] | None:
    """The weights a session must hold for an opened model (``SessionState.model_weights``):
    its ``state_dict()`` when opening it again would give other weights (random init, model
    code; the rule of :func:`actviz.io.reproduce.run_source`), else None."""
    from actviz.io.reproduce import run_source

    state = run_source(loaded, None).state
    return None if state is None else dict(state)


def input_source_of(loaded: Any) -> InputSource:
    """The :class:`InputSource` of an :class:`actviz.io.input_files.LoadedInput` (its tensors)."""
    tokens = getattr(loaded, "tokens", None)
    return InputSource(
        value=loaded.value,
        source=str(loaded.source),
        kind=str(loaded.kind),
        image=loaded.image,
        description=str(loaded.description),
        tokens=tuple(tokens) if tokens else None,
    )


def open_model_source(
    state: SessionState,
    path: str | os.PathLike[str] | None = None,
    *,
    trust: bool = False,
    device: str = "cpu",
) -> Any:
    """Open the session's model again: :func:`actviz.io.models.open_model` with the saved
    arguments, then the saved weights when the session holds them (a random init).

    ``path``: where the user located a checkpoint that moved. Check a checkpoint with
    :func:`verify_model_source` first. ``trust`` is the user's answer now, never the file's:
    ``ModelSource.trust`` only says the model needed it when saved (a session file from
    someone else must not open a pickle or run model code unasked). Returns the
    ``LoadedModel``; raises what ``open_model`` raises (``UntrustedFileError`` included).
    """
    from actviz.io.models import open_model

    src = state.model
    if src is None:
        raise SessionFileError("the session has no model to open")
    source = str(path) if path is not None else src.source
    loaded = open_model(source, arch=src.arch, weights=src.weights, trust=trust, device=device)
    if state.model_weights is not None:
        with torch.no_grad():
            loaded.model.load_state_dict(dict(state.model_weights))
    return loaded


@dataclass(frozen=True)
class ModelCheck:
    """What :func:`verify_model_source` found.

    Attributes
    ----------
    status
        ``"ok"`` (the same file, or nothing to check), ``"changed"`` (its SHA-256 differs:
        the window names it and lets the user continue) or ``"missing"`` (ask to locate it).
    message
        One line for the user ("" when ok).
    path
        The checkpoint file (None when the model did not come from one).
    """

    status: str
    message: str = ""
    path: Path | None = None

    @property
    def ok(self) -> bool:
        return self.status == "ok"


def verify_model_source(
    state: SessionState, path: str | os.PathLike[str] | None = None
) -> ModelCheck:
    """Check that the session's checkpoint is still the file it was saved with.

    Parameters
    ----------
    state
        A loaded session.
    path
        Where the user located the checkpoint (default: where it was when saved).
    """
    src = state.model
    if src is None or src.sha256 is None:
        return ModelCheck("ok")
    where = Path(path) if path is not None else Path(src.source)
    if not where.is_file():
        return ModelCheck(
            "missing",
            f"{where}: the session's checkpoint is not there any more",
            where,
        )
    digest = file_sha256(where)
    if digest != src.sha256:
        return ModelCheck(
            "changed",
            f"{where}: the checkpoint changed since the session was saved (modified "
            f"{_when(where.stat().st_mtime)}; SHA-256 {digest[:12]}..., saved "
            f"{src.sha256[:12]}...); its results may differ",
            where,
        )
    return ModelCheck("ok", "", where)


# --------------------------------------------------------------------------------------------
# Edits as JSON
# --------------------------------------------------------------------------------------------


def _pin_of(source: Any, pins: Sequence[PinState]) -> str | None:
    return next((p.label for p in pins if p.capture is not None and p.capture is source), None)


def unsaved_warnings(state: SessionState, *, pin_captures: bool = True) -> list[str]:
    """What saving ``state`` would leave out, one line each (shown before saving).

    Custom edits (Python callables) and patch edits whose source run is not a pinned capture
    that is saved too cannot be stored: the session's edits, and those the current run and
    the pinned runs ran with.
    """
    pins = state.pins if pin_captures else ()
    _, warnings = edits_to_json(state.edits, pins)
    runs = [("the current run", state.capture)]
    runs += [(f"pin {p.label!r}", p.capture) for p in pins]
    for label, cap in runs:
        if cap is not None:
            _, left_out = edits_to_json(cap.edits, pins)
            warnings += [f"{label}: {w}" for w in left_out if w not in warnings]
    return warnings


def edits_to_json(
    edits: Mapping[str, Sequence[Edit]],
    pins: Sequence[PinState] = (),
    dictionaries: list[Any] | None = None,
) -> tuple[list[dict[str, Any]], list[str]]:
    """``edits`` as JSON-able rows, and a warning per edit that cannot be stored.

    A patch edit is stored with the label of the pin whose capture is its source (by
    identity); without one it is left out, as custom edits are. A concept edit is stored
    with the position of its dictionary in ``dictionaries`` (appended there when new, by
    identity: the caller saves them; None: a list of this call's own).
    """
    if dictionaries is None:
        dictionaries = []
    rows: list[dict[str, Any]] = []
    warnings: list[str] = []
    for layer, items in edits.items():
        for edit in items:
            if edit.kind not in _SAVED_KINDS:
                warnings.append(
                    f"edit {edit.describe()!r} on layer {layer!r} is Python code and cannot "
                    "be saved in a session file; it is left out"
                )
                continue
            row: dict[str, Any] = {"layer": layer, "kind": edit.kind}
            if edit.kind == "patch":
                pin = _pin_of(edit.source, pins)
                if pin is None:
                    warnings.append(
                        f"edit {edit.describe()!r} on layer {layer!r}: its source run is not a "
                        "pinned result saved with the session; it is left out (pin the source "
                        "run and keep its capture to save it)"
                    )
                    continue
                row["pin"] = pin
            if edit.kind == "concept":
                found = [i for i, d in enumerate(dictionaries) if d is edit.concepts]
                if not found:
                    dictionaries.append(edit.concepts)
                row["concepts"] = found[0] if found else len(dictionaries) - 1
            row["channels"] = None if edit.channels is None else list(edit.channels)
            for name in ("factor", "min", "max", "call", "dim"):
                value = getattr(edit, name)
                if value is not None:
                    row[name] = value
            row["enabled"] = bool(edit.enabled)
            rows.append(row)
    return rows, warnings


def edits_from_json(
    rows: Sequence[Mapping[str, Any]],
    pins: Sequence[PinState] = (),
    dictionaries: Sequence[Any] = (),
) -> tuple[dict[str, tuple[Edit, ...]], list[str]]:
    """The edits of :func:`edits_to_json`'s rows (patch sources: ``pins``' captures; concept
    edits' dictionaries: ``dictionaries``), and a warning per row that cannot be made again.

    Raises
    ------
    SessionFileError
        A row that is not an edit (unknown kind, bad values).
    """
    by_label = {p.label: p.capture for p in pins if p.capture is not None}
    out: dict[str, list[Edit]] = {}
    warnings: list[str] = []
    for row in rows:
        try:
            kind = row["kind"]
            if kind not in _SAVED_KINDS:
                raise ValueError(f"edit kind {kind!r} cannot be in a session file")
            source = None
            if kind == "patch":
                source = by_label.get(row.get("pin"))
                if source is None:
                    warnings.append(
                        f"patch edit on layer {row['layer']!r}: its source pin "
                        f"{row.get('pin')!r} has no capture in the file; left out"
                    )
                    continue
            concepts = None
            if kind == "concept":
                at = row.get("concepts")
                if (
                    not isinstance(at, int)
                    or not 0 <= at < len(dictionaries)
                    or dictionaries[at] is None
                ):
                    warnings.append(
                        f"concept edit on layer {row['layer']!r}: its dictionary is not in the "
                        "file; left out"
                    )
                    continue
                concepts = dictionaries[at]
            edit = Edit(
                kind,
                channels=row.get("channels"),
                factor=row.get("factor"),
                min=row.get("min"),
                max=row.get("max"),
                source=source,
                call=row.get("call"),
                enabled=bool(row.get("enabled", True)),
                dim=row.get("dim"),
                concepts=concepts,
            )
            out.setdefault(str(row["layer"]), []).append(edit)
        except (KeyError, TypeError, ValueError) as exc:
            raise SessionFileError(f"an edit in the session cannot be read: {exc}") from None
    return {k: tuple(v) for k, v in out.items()}, warnings


# --------------------------------------------------------------------------------------------
# Arrays: nested tensors <-> JSON structure + npz members
# --------------------------------------------------------------------------------------------


#: Bytes an array adds to an ``.npz`` besides its data (its .npy header and zip entry).
_NPZ_OVERHEAD = 250


class _Arrays:
    """Arrays of one ``.npz`` member, named ``a0``, ``a1``, ...; with ``measure`` only their
    size is counted (nothing copied: the size shown before saving a large pin stays cheap)."""

    def __init__(self, measure: bool = False) -> None:
        self.arrays: dict[str, np.ndarray] = {}
        self.measure = measure
        self.count = 0
        self.nbytes = 22  # the zip's end record

    def add(self, a: np.ndarray) -> str:
        key = f"a{self.count}"
        self.count += 1
        self.nbytes += int(a.nbytes) + _NPZ_OVERHEAD
        if not self.measure:
            # np.ascontiguousarray would make a 0-d array 1-d
            self.arrays[key] = a if a.flags.c_contiguous else a.copy(order="C")
        return key

    def write(self, zf: zipfile.ZipFile, name: str) -> None:
        """Write the arrays as member ``name`` of ``zf``, streamed (no copy in memory)."""
        with zf.open(name, "w", force_zip64=True) as fh:
            np.savez(fh, **self.arrays)


def _tensor_node(t: torch.Tensor, store: _Arrays) -> dict[str, Any]:
    t = t.detach().cpu()
    dtype = str(t.dtype).replace("torch.", "")
    # numpy has no bfloat16: widen it, which is exact, and narrow it again when read
    a = t.float().numpy() if t.dtype == torch.bfloat16 else t.numpy()
    return {"t": "tensor", "k": store.add(a), "dtype": dtype, "grad": bool(t.requires_grad)}


def _encode(obj: Any, store: _Arrays) -> dict[str, Any]:
    """A nested tensor structure as JSON, its tensors put in ``store``."""
    if isinstance(obj, torch.Tensor):
        return _tensor_node(obj, store)
    if isinstance(obj, np.ndarray):
        return {"t": "ndarray", "k": store.add(obj)}
    if isinstance(obj, (list, tuple)):
        kind = "list" if isinstance(obj, list) else "tuple"
        return {"t": kind, "items": [_encode(v, store) for v in obj]}
    if isinstance(obj, dict):
        return {"t": "dict", "items": [[str(k), _encode(v, store)] for k, v in obj.items()]}
    if obj is None or isinstance(obj, (bool, int, str)):
        return {"t": "value", "v": obj}
    if isinstance(obj, float):
        return {"t": "float", "v": repr(obj)}  # inf and nan survive JSON this way
    return {"t": "none", "was": type(obj).__name__}  # an object that is not data


def _decode(node: Mapping[str, Any], arrays: Mapping[str, np.ndarray]) -> Any:
    kind = node["t"]
    if kind == "tensor":
        t = torch.from_numpy(np.array(arrays[node["k"]]))
        dtype = getattr(torch, node["dtype"])
        if t.dtype != dtype:
            t = t.to(dtype)
        return t
    if kind == "ndarray":
        return np.array(arrays[node["k"]])
    if kind in ("list", "tuple"):
        items = [_decode(v, arrays) for v in node["items"]]
        return items if kind == "list" else tuple(items)
    if kind == "dict":
        return {k: _decode(v, arrays) for k, v in node["items"]}
    if kind == "value":
        return node["v"]
    if kind == "float":
        return float(node["v"])
    if kind == "none":
        return None
    raise ValueError(f"unknown node type {kind!r}")


def _float_json(v: float | None) -> Any:
    return None if v is None else repr(float(v))


def _capture_to_json(
    cap: Capture, store: _Arrays, pins: Sequence[PinState], dictionaries: list[Any]
) -> dict[str, Any]:
    records = []
    # The edits it ran with, as the session's own (a patch's source: a saved pin).
    edit_rows, _ = edits_to_json(cap.edits, pins, dictionaries)
    for name in cap.names:
        for rec in cap.records[name]:
            records.append(
                {
                    "name": rec.name,
                    "call": rec.call_index,
                    "type": rec.module_type,
                    "inputs": _encode(rec.inputs, store),
                    "output": _encode(rec.output, store),
                    "grad_output": _encode(rec.grad_output, store),
                    "grad_inputs": _encode(rec.grad_inputs, store),
                }
            )
    return {
        "names": list(cap.names),
        "records": records,
        "output": _encode(cap.output, store),
        "input_grads": _encode(cap.input_grads, store),
        "inputs": _encode(cap.inputs, store),
        "target_value": _float_json(cap.target_value),
        "target_index": cap.target_index,
        "target_description": cap.target_description,
        "warnings": list(cap.warnings),
        "nbytes": int(cap.nbytes),
        "elapsed_s": float(cap.elapsed_s),
        "gradients": bool(cap.gradients),
        "mode": cap.mode,
        "edits": edit_rows,
    }


def _capture_from_json(d: Mapping[str, Any], arrays: Mapping[str, np.ndarray]) -> Capture:
    records: dict[str, list[LayerRecord]] = {n: [] for n in d["names"]}
    for r in d["records"]:
        records.setdefault(r["name"], []).append(
            LayerRecord(
                name=r["name"],
                call_index=int(r["call"]),
                module_type=r["type"],
                inputs=_decode(r["inputs"], arrays),
                output=_decode(r["output"], arrays),
                grad_output=_decode(r["grad_output"], arrays),
                grad_inputs=_decode(r["grad_inputs"], arrays),
            )
        )
    tv = d["target_value"]
    return Capture(
        names=list(d["names"]),
        records=records,
        output=_decode(d["output"], arrays),
        input_grads=_decode(d["input_grads"], arrays),
        target_value=None if tv is None else float(tv),
        target_index=d["target_index"],
        target_description=d["target_description"],
        warnings=list(d["warnings"]),
        inputs=_decode(d["inputs"], arrays),
        nbytes=int(d["nbytes"]),
        elapsed_s=float(d["elapsed_s"]),
        gradients=bool(d["gradients"]),
        mode=d["mode"],
    )


# --------------------------------------------------------------------------------------------
# Saving
# --------------------------------------------------------------------------------------------


def _versions() -> tuple[str, str]:
    # The package is imported before any of its modules: read it without an import edge
    # back to it (the window imports this module, and ``actviz`` imports the window lazily).
    version = getattr(sys.modules.get("actviz"), "__version__", "")
    return str(version), torch.__version__


def _members(
    state: SessionState, pin_captures: bool, measure: bool = False
) -> tuple[dict[str, Any], dict[str, _Arrays], list[str]]:
    """The manifest, the ``.npz`` members' arrays and the warnings of saving ``state``; with
    ``measure``, the members count their bytes and hold no arrays."""
    actviz_version, torch_version = _versions()
    members: dict[str, _Arrays] = {}
    pins = state.pins if pin_captures else tuple(replace(p, capture=None) for p in state.pins)
    labels = [p.label for p in pins]
    if len(set(labels)) != len(labels):
        raise SessionFileError("two pins have the same label; rename one before saving")
    dictionaries: list[Any] = []  # of concept edits, each kept once
    edit_rows, _ = edits_to_json(state.edits, pins, dictionaries)
    warnings = unsaved_warnings(state, pin_captures=pin_captures)
    manifest: dict[str, Any] = {
        "kind": _KIND,
        "format": FORMAT_VERSION,
        "actviz": actviz_version,
        "torch": torch_version,
        "model": None if state.model is None else dict(vars(state.model)),
        "input": None,
        "ticked": list(state.ticked),
        "target": state.target,
        "categories": None if state.categories is None else list(state.categories),
        "colormap": state.colormap,
        "normalize": state.normalize,
        "gradcam_layer": state.gradcam_layer,
        "sample": int(state.sample),
        "input_as_list": bool(state.input_as_list),
        "channel_pages": {k: int(v) for k, v in state.channel_pages.items()},
        "page_channels": {k: int(v) for k, v in state.page_channels.items()},
        "channel_view": None if state.channel_view is None else dict(state.channel_view),
        "edits": edit_rows,
        "pins": [],
        "comparison": None if state.comparison is None else dict(state.comparison),
        "scan_key": state.scan_key,
        "layout": None if state.layout is None else base64.b64encode(state.layout).decode(),
        "capture": None,
        "model_weights": None,
        "settings": dict(state.settings),
    }
    if state.input is not None:
        store = _Arrays(measure)
        inp = state.input
        manifest["input"] = {
            "member": "input.npz",
            "value": _encode(inp.value, store),
            "image": None if inp.image is None else _encode(np.asarray(inp.image), store),
            "source": inp.source,
            "kind": inp.kind,
            "description": inp.description,
            "tokens": None if inp.tokens is None else list(inp.tokens),
        }
        members["input.npz"] = store
    if state.model_weights is not None:
        store = _Arrays(measure)
        manifest["model_weights"] = {
            "member": "weights.npz",
            "tensors": _encode(dict(state.model_weights), store),
        }
        members["weights.npz"] = store
    if state.capture is not None:
        store = _Arrays(measure)
        manifest["capture"] = {
            "member": "capture.npz",
            **_capture_to_json(state.capture, store, pins, dictionaries),
        }
        members["capture.npz"] = store
    for i, pin in enumerate(pins):
        entry: dict[str, Any] = {"label": pin.label, "pinned_at": float(pin.pinned_at)}
        if pin.capture is not None:
            store = _Arrays(measure)
            member = f"pin{i}.npz"
            entry["capture"] = {
                "member": member,
                **_capture_to_json(pin.capture, store, pins, dictionaries),
            }
            members[member] = store
        manifest["pins"].append(entry)
    if dictionaries:
        store = _Arrays(measure)
        manifest["concepts"] = {
            "member": _CONCEPTS_MEMBER,
            "dictionaries": [
                {"cfg": d.to_cfg(), "tensors": _encode(d.weights(), store)} for d in dictionaries
            ],
        }
        members[_CONCEPTS_MEMBER] = store
    return manifest, members, warnings


def saved_size(state: SessionState, *, pin_captures: bool = True) -> int:
    """Bytes a session file of ``state`` takes at most (its arrays uncompressed; the zip
    usually makes it smaller), to show before saving; counted without copying any array.
    With ``pin_captures=False`` the pins are saved without their captures."""
    manifest, members, _ = _members(state, pin_captures, measure=True)
    return len(json.dumps(manifest, indent=1).encode()) + sum(m.nbytes for m in members.values())


def pin_capture_bytes(state: SessionState) -> int:
    """Bytes the pinned captures add to the file (what the "keep captures" choice costs)."""
    return saved_size(state, pin_captures=True) - saved_size(state, pin_captures=False)


def save_state(
    state: SessionState, path: str | os.PathLike[str], *, pin_captures: bool = True
) -> list[str]:
    """Write ``state`` to the session file ``path``, atomically.

    Parameters
    ----------
    state
        What to save.
    path
        The file (``.actviz`` is the usual suffix); replaced only once the new file is
        complete.
    pin_captures
        Save the pins' captures (False: only their labels; patch edits from them are lost).

    Returns
    -------
    list of str
        What was left out (custom edits, patch edits without a saved source), one line each.

    Raises
    ------
    SessionFileError
        The file cannot be written (the old file, if any, is left as it was).
    """
    path = Path(path)
    manifest, members, warnings = _members(state, pin_captures)
    try:
        text = json.dumps(manifest, indent=1, allow_nan=False)
    except (TypeError, ValueError) as exc:
        raise SessionFileError(
            f"{path}: cannot save the session: a setting is not plain JSON data ({exc})"
        ) from None
    try:
        with (
            atomic_write(path) as fh,
            zipfile.ZipFile(fh, "w", zipfile.ZIP_DEFLATED, compresslevel=1) as zf,
        ):
            zf.writestr(_MANIFEST, text)
            for name, store in members.items():
                store.write(zf, name)
    except WriteError as exc:
        raise SessionFileError(str(exc)) from None
    except OSError as exc:
        raise SessionFileError(f"{path}: cannot save the session ({exc})") from None
    return warnings


# --------------------------------------------------------------------------------------------
# Loading
# --------------------------------------------------------------------------------------------


def _fail(path: Path, why: str) -> SessionFileError:
    return SessionFileError(f"{path}: {why}")


def _read_npz(path: Path, zf: zipfile.ZipFile, member: str) -> dict[str, np.ndarray]:
    try:
        data = zf.read(member)
    except KeyError:
        raise _fail(path, f"damaged session file: {member} is missing") from None
    try:
        with np.load(io.BytesIO(data), allow_pickle=False) as npz:
            if not isinstance(npz, np.lib.npyio.NpzFile):
                raise _fail(path, f"{member} is not an .npz archive")
            out = {n: npz[n] for n in npz.files}
    except SessionFileError:
        raise
    except ValueError as exc:
        if "pickle" in str(exc).lower():
            raise _fail(
                path,
                f"{member} holds a pickle (Python objects); session files hold only plain "
                "arrays, so it is not opened",
            ) from None
        raise _fail(path, f"damaged session file: {member}: {exc}") from None
    except (OSError, zipfile.BadZipFile, EOFError, zlib.error) as exc:
        raise _fail(path, f"damaged session file: {member}: {exc}") from None
    for key, value in out.items():
        # NpzFile hands back a member that is not .npy data as raw bytes: refuse it
        if not isinstance(value, np.ndarray) or value.dtype.hasobject:
            raise _fail(path, f"{member}: {key} is not a plain array; it is not opened")
    return out


def _when(stamp: float) -> str:
    """``"4 Mar 09:05"``: a file's time as the window says it (local time)."""
    import time

    local = time.localtime(stamp)
    return f"{local.tm_mday} {time.strftime('%b %H:%M', local)}"


def describe_session_file(path: str | os.PathLike[str]) -> str:
    """One line saying which investigation a session file holds, from its manifest alone
    (quick for a file of any size): ``"resnet18 (random init) on cat.png, 2 layers ticked,
    saved 4 Mar 09:05"``; "" when the file cannot be read.

    Parameters
    ----------
    path
        A session file.
    """
    path = Path(path)
    try:
        with zipfile.ZipFile(path) as zf:
            manifest = json.loads(zf.read(_MANIFEST))
        stamp = path.stat().st_mtime
    except (OSError, KeyError, ValueError, zipfile.BadZipFile):
        return ""
    if not isinstance(manifest, dict) or manifest.get("kind") != _KIND:
        return ""
    model = manifest.get("model") or {}
    text = str(model.get("name") or model.get("source") or "a model given in memory")
    inp = manifest.get("input") or {}
    source = str(inp.get("source") or "")
    shown = Path(source).name if source and not source.startswith(("random", "text:")) else ""
    shown = shown or str(inp.get("description") or "").split(":")[0]
    if shown:
        text += f" on {shown}"
    ticked = len(manifest.get("ticked") or ())
    text += f", {ticked} layer{'' if ticked == 1 else 's'} ticked"
    return f"{text}, saved {_when(stamp)}"


def load_state(path: str | os.PathLike[str]) -> SessionState:
    """Read a session file.

    Raises
    ------
    SessionFileError
        One line naming the file and the cause: not a session file, a damaged zip, a format
        newer than this actviz reads, a member that is a pickle or of an unknown type, a
        missing member. Nothing is changed either way.
    """
    path = Path(path)
    if path.is_dir():
        raise _fail(path, "is a folder, not a session file")
    if not path.is_file():
        raise _fail(path, "no such session file")
    try:
        with path.open("rb") as fh:
            head = fh.read(4)
    except OSError as exc:
        raise _fail(path, f"cannot read the session file ({exc})") from None
    if not head:
        raise _fail(path, "the file is empty (0 bytes), not a session")
    if not head.startswith(b"PK"):
        # Not "damaged": a file of another kind was picked (a session is a zip archive).
        raise _fail(path, "not an actviz session file (a session is a zip archive; this is not)")
    try:
        with zipfile.ZipFile(path) as zf:
            return _load(path, zf)
    except zipfile.BadZipFile as exc:
        raise _fail(path, f"damaged session file (not a readable zip: {exc})") from None
    except (zlib.error, EOFError, OSError) as exc:
        raise _fail(path, f"damaged session file ({type(exc).__name__}: {exc})") from None
    except (KeyError, TypeError, ValueError, AttributeError) as exc:
        raise _fail(path, f"damaged session file: {type(exc).__name__}: {exc}") from None


def _dictionaries_of(section: Any, arrays_of: Any, warnings: list[str]) -> list[Any]:
    """The dictionaries of the file's concept edits (None where one cannot be made: its
    edits are then left out with a warning)."""
    if section is None:
        return []
    from actviz.analysis.concepts.dictionary import from_parts

    out: list[Any] = []
    arrays = arrays_of(section)
    for i, entry in enumerate(section["dictionaries"]):
        try:
            out.append(from_parts(entry["cfg"], _decode(entry["tensors"], arrays)))
        except (ValueError, TypeError) as exc:
            warnings.append(f"dictionary {i} of the concept edits cannot be made: {exc}")
            out.append(None)
    return out


def _load(path: Path, zf: zipfile.ZipFile) -> SessionState:
    names = zf.namelist()
    if _MANIFEST not in names:
        if any(n == "data.pkl" or n.endswith("/data.pkl") for n in names):
            raise _fail(
                path,
                "not an actviz session file: it is a PyTorch file (torch.save); open it as a "
                "model (File > Open model…, --model)",
            )
        raise _fail(path, "not an actviz session file (no manifest.json)")
    bad = zf.testzip()
    if bad is not None:
        raise _fail(path, f"damaged session file: {bad} fails its checksum")
    try:
        manifest = json.loads(zf.read(_MANIFEST))
    except (ValueError, UnicodeDecodeError) as exc:
        raise _fail(path, f"damaged session file: manifest.json is not JSON ({exc})") from None
    if not isinstance(manifest, dict) or manifest.get("kind") != _KIND:
        raise _fail(path, "not an actviz session file (its manifest is not a session's)")
    version = manifest.get("format")
    if not isinstance(version, int) or isinstance(version, bool) or version < 1:
        raise _fail(path, f"unknown session format {version!r}")
    if version > FORMAT_VERSION:
        raise _fail(
            path,
            f"made by a newer actviz ({manifest.get('actviz', '?')}, session format {version}); "
            f"this actviz reads up to format {FORMAT_VERSION}: update actviz to open it",
        )
    # Only the manifest and the .npz members it names: anything else is refused unread.
    wanted = {_MANIFEST}
    kept = ("input", "capture", "model_weights", "concepts")
    for section in (manifest.get(name) for name in kept):
        if section is not None:
            wanted.add(section["member"])
    for pin in manifest.get("pins", []):
        if pin.get("capture") is not None:
            wanted.add(pin["capture"]["member"])
    for name in names:
        if name not in wanted:
            what = "a pickle" if name.endswith((".pkl", ".pickle", ".pt", ".pth")) else "unknown"
            raise _fail(path, f"{name} is {what} member of a session file; it is not opened")
    for name in wanted - {_MANIFEST}:
        if not name.endswith(".npz"):
            raise _fail(path, f"{name} is not an .npz member; it is not opened")
        if name not in names:
            raise _fail(path, f"damaged session file: {name} is missing")
    loaded = {name: _read_npz(path, zf, name) for name in wanted - {_MANIFEST}}

    def arrays_of(section: Mapping[str, Any]) -> Mapping[str, np.ndarray]:
        return loaded[section["member"]]

    try:
        model = None if manifest["model"] is None else ModelSource(**manifest["model"])
        inp = None
        if manifest["input"] is not None:
            m = manifest["input"]
            arrays = arrays_of(m)
            inp = InputSource(
                value=_decode(m["value"], arrays),
                source=m["source"],
                kind=m["kind"],
                image=None if m["image"] is None else _decode(m["image"], arrays),
                description=m["description"],
                tokens=None if m["tokens"] is None else tuple(m["tokens"]),
            )
        weights = None
        if manifest.get("model_weights") is not None:
            section = manifest["model_weights"]
            weights = _decode(section["tensors"], arrays_of(section))
        pins = []
        for p in manifest["pins"]:
            cap = None
            if p.get("capture") is not None:
                cap = _capture_from_json(p["capture"], arrays_of(p["capture"]))
            pins.append(PinState(p["label"], float(p["pinned_at"]), cap))
        capture = None
        if manifest["capture"] is not None:
            capture = _capture_from_json(manifest["capture"], arrays_of(manifest["capture"]))
        # Each capture's own edits once every pin (a patch's source) exists.
        warnings: list[str] = []
        dictionaries = _dictionaries_of(manifest.get("concepts"), arrays_of, warnings)
        sections = [manifest["capture"], *(p.get("capture") for p in manifest["pins"])]
        for cap, section in zip([capture, *(p.capture for p in pins)], sections, strict=True):
            if cap is not None:
                cap.edits, left_out = edits_from_json(section["edits"], pins, dictionaries)
                warnings += left_out
        edits, left_out = edits_from_json(manifest["edits"], pins, dictionaries)
        warnings += left_out
        layout = manifest["layout"]
        return SessionState(
            model=model,
            model_weights=weights,
            input=inp,
            ticked=tuple(manifest["ticked"]),
            target=manifest["target"],
            categories=None if manifest["categories"] is None else tuple(manifest["categories"]),
            colormap=manifest["colormap"],
            normalize=manifest["normalize"],
            gradcam_layer=manifest["gradcam_layer"],
            sample=int(manifest["sample"]),
            input_as_list=bool(manifest["input_as_list"]),
            channel_pages=dict(manifest["channel_pages"]),
            page_channels=dict(manifest["page_channels"]),
            channel_view=manifest["channel_view"],
            edits=edits,
            pins=tuple(pins),
            comparison=manifest["comparison"],
            scan_key=manifest["scan_key"],
            layout=None if layout is None else base64.b64decode(layout),
            capture=capture,
            settings=dict(manifest.get("settings") or {}),
            actviz_version=str(manifest.get("actviz", "")),
            torch_version=str(manifest.get("torch", "")),
            format_version=version,
            warnings=tuple(warnings),
        )
    except KeyError as exc:
        raise _fail(path, f"damaged session file: {exc.args[0]!r} is missing") from None
