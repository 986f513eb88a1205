"""The session file's codec: edits, captures and arrays to JSON and ``.npz`` members and back,
its error, and where a session's model and input came from (:class:`ModelSource`,
:class:`InputSource`): what reopening the model needs and its checkpoint's SHA-256."""

from __future__ import annotations

import hashlib
import io
import os
import time
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
from actviz.io.errors import ActvizError
from actviz.io.export.reproduce import EDIT_VALUES, absolute_source, edit_fields
from actviz.io.input_tensors import LoadedInput

#: An input as a session keeps it: a :class:`~actviz.io.input_tensors.LoadedInput`.
InputSource = LoadedInput
#: Edit kinds that a session file can hold (custom edits are Python callables).
_SAVED_KINDS = ("ablate", "scale", "keep", "clamp", "patch", "concept")
#: Bytes an array adds to an ``.npz`` besides its data (its .npy header and zip entry).
_NPZ_OVERHEAD = 250
#: The nested tensor structures of a record and of a capture, as saved.
_RECORD_TENSORS = ("inputs", "output", "grad_output", "grad_inputs")
_CAPTURE_TENSORS = ("output", "input_grads", "inputs")
#: A capture's plain values, saved as they are, and with the type each is saved and read as.
_CAPTURE_AS_IS = ("target_index", "target_description", "mode")
_CAPTURE_TYPED = (("warnings", list), ("nbytes", int), ("elapsed_s", float), ("gradients", bool))
#: Model kinds that come from one file whose bytes can be hashed.
_FILE_KINDS = ("state_dict", "safetensors", "torchscript", "export", "pickle")


class SessionFileError(ActvizError):
    """A session file that cannot be opened or written (one line: the file and the cause)."""


@dataclass(frozen=True)
class PinState:
    """A pinned result: its label, when it was pinned and (optionally) its capture."""

    label: str
    pinned_at: float = 0.0
    capture: Capture | None = field(default=None, repr=False, compare=False)


def edits_to_json(
    edits: Mapping[str, Sequence[Edit]],
    pins: Sequence[PinState] = (),
    dictionaries: list[Any] | None = None,
) -> tuple[list[dict[str, Any]], list[str]]:
    """``edits`` as JSON-able rows, and a warning per edit that cannot be stored: a patch edit names
    the pin whose capture is its source (none: left out, as custom edits are); a concept edit its
    dictionary's position in ``dictionaries`` (appended when new; the caller saves them)."""
    dictionaries = [] if dictionaries is None else dictionaries
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
            row: dict[str, Any] = {"layer": layer, **edit_fields(edit)}
            if edit.kind == "patch":
                pin = next((p.label for p in pins if p.capture is edit.source is not None), None)
                if pin is None:
                    warnings.append(
                        f"edit {edit.describe()!r} on layer {layer!r}: its source run is not a "
                        "pinned result saved with the session; it is left out (pin the source "
                        "run and keep its capture to save it)"
                    )
                    continue
                row["pin"] = pin
            if edit.kind == "concept":
                if not any(d is edit.concepts for d in dictionaries):
                    dictionaries.append(edit.concepts)
                row["concepts"] = next(i for i, d in enumerate(dictionaries) if d is edit.concepts)
            row["enabled"] = bool(edit.enabled)
            rows.append(row)
    return rows, warnings


def edits_from_json(
    rows: Sequence[Mapping[str, Any]],
    pins: Sequence[PinState] = (),
    dictionaries: Sequence[Any] = (),
) -> tuple[dict[str, tuple[Edit, ...]], list[str]]:
    """The edits of :func:`edits_to_json`'s rows, and a warning per row that cannot be made
    again; ``SessionFileError`` for a row that is not an edit."""
    by_label = {p.label: p.capture for p in pins if p.capture is not None}
    out: dict[str, list[Edit]] = {}
    warnings: list[str] = []
    for row in rows:
        try:
            kind = row["kind"]
            if kind not in _SAVED_KINDS:
                raise ValueError(f"edit kind {kind!r} cannot be in a session file")
            source = None
            if kind == "patch" and (source := by_label.get(row.get("pin"))) is None:
                warnings.append(
                    f"patch edit on layer {row['layer']!r}: its source pin "
                    f"{row.get('pin')!r} has no capture in the file; left out"
                )
                continue
            concepts = None
            if kind == "concept":
                at = row.get("concepts")
                found = isinstance(at, int) and 0 <= at < len(dictionaries)
                concepts = dictionaries[at] if found else None
                if concepts is None:
                    warnings.append(
                        f"concept edit on layer {row['layer']!r}: its dictionary is not in the "
                        "file; left out"
                    )
                    continue
            edit = Edit(
                kind,
                channels=row.get("channels"),
                source=source,
                enabled=bool(row.get("enabled", True)),
                concepts=concepts,
                **{n: row.get(n) for n in EDIT_VALUES},
            )
            out.setdefault(str(row["layer"]), []).append(edit)
        except (KeyError, TypeError, ValueError) as exc:
            raise SessionFileError(f"an edit in the session cannot be read: {exc}") from None
    return {k: tuple(v) for k, v in out.items()}, warnings


class _Arrays:
    """Arrays of one ``.npz`` member, named ``a0``, ``a1``, ... (``measure``: only sized)."""

    def __init__(self, measure: bool = False) -> None:
        self.arrays: dict[str, np.ndarray] = {}
        self.measure, self.count = measure, 0
        self.nbytes = 22  # the zip's end record

    def add(self, a: np.ndarray) -> str:
        key = f"a{self.count}"
        self.count += 1
        self.nbytes += int(a.nbytes) + _NPZ_OVERHEAD
        if not self.measure:
            # np.ascontiguousarray would make a 0-d array 1-d
            self.arrays[key] = a if a.flags.c_contiguous else a.copy(order="C")
        return key


def _encode(obj: Any, store: _Arrays) -> dict[str, Any]:
    """A nested tensor structure as JSON, its tensors put in ``store``."""
    if isinstance(obj, torch.Tensor):
        t = obj.detach().cpu()
        dtype = str(t.dtype).replace("torch.", "")
        # numpy has no bfloat16: widen it, which is exact, and narrow it again when read
        a = t.float().numpy() if t.dtype == torch.bfloat16 else t.numpy()
        return {"t": "tensor", "k": store.add(a), "dtype": dtype, "grad": bool(t.requires_grad)}
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
    if (decode := _DECODERS.get(node["t"])) is None:
        raise ValueError(f"unknown node type {node['t']!r}")
    return decode(node, arrays)


#: How each node type of :func:`_encode` is read back (``to`` keeps a tensor of the saved dtype).
_DECODERS: dict[str, Any] = {
    "tensor": lambda n, a: torch.from_numpy(np.array(a[n["k"]])).to(getattr(torch, n["dtype"])),
    "ndarray": lambda n, a: np.array(a[n["k"]]),
    "list": lambda n, a: [_decode(v, a) for v in n["items"]],
    "tuple": lambda n, a: tuple(_decode(v, a) for v in n["items"]),
    "dict": lambda n, a: {k: _decode(v, a) for k, v in n["items"]},
    "value": lambda n, a: n["v"],
    "float": lambda n, a: float(n["v"]),
    "none": lambda n, a: None,
}


def _capture_to_json(
    cap: Capture, store: _Arrays, pins: Sequence[PinState], dictionaries: list[Any]
) -> tuple[dict[str, Any], list[str]]:
    """A capture's manifest section, and what of its edits cannot be saved (a line each)."""
    records = [
        {
            "name": rec.name,
            "call": rec.call_index,
            "type": rec.module_type,
            **{k: _encode(getattr(rec, k), store) for k in _RECORD_TENSORS},
        }
        for name in cap.names
        for rec in cap.records[name]
    ]
    # The edits it ran with, as the session's own (a patch's source: a saved pin).
    edit_rows, left_out = edits_to_json(cap.edits, pins, dictionaries)
    return {
        "names": list(cap.names),
        "records": records,
        **{k: _encode(getattr(cap, k), store) for k in _CAPTURE_TENSORS},
        "target_value": None if cap.target_value is None else repr(float(cap.target_value)),
        **{k: getattr(cap, k) for k in _CAPTURE_AS_IS},
        **{k: kind(getattr(cap, k)) for k, kind in _CAPTURE_TYPED},
        "edits": edit_rows,
    }, left_out


def _capture_from_json(d: Mapping[str, Any], arrays: Mapping[str, np.ndarray]) -> Capture:
    records: dict[str, list[LayerRecord]] = {n: [] for n in d["names"]}
    for r in d["records"]:
        records.setdefault(r["name"], []).append(
            LayerRecord(
                name=r["name"],
                call_index=int(r["call"]),
                module_type=r["type"],
                **{k: _decode(r[k], arrays) for k in _RECORD_TENSORS},
            )
        )
    return Capture(
        names=list(d["names"]),
        records=records,
        **{k: _decode(d[k], arrays) for k in _CAPTURE_TENSORS},
        target_value=None if d["target_value"] is None else float(d["target_value"]),
        **{k: d[k] for k in _CAPTURE_AS_IS},
        **{k: kind(d[k]) for k, kind in _CAPTURE_TYPED},
    )


def _fail(path: Path, why: str) -> SessionFileError:
    return SessionFileError(f"{path}: {why}")


def _read_npz(path: Path, zf: zipfile.ZipFile, member: str) -> dict[str, np.ndarray]:
    data = zf.read(member)  # load_state checked that it is there
    try:
        with np.load(io.BytesIO(data), allow_pickle=False) as npz:
            if not isinstance(npz, np.lib.npyio.NpzFile):
                raise _fail(path, f"{member} is not an .npz archive")
            out = {n: npz[n] for n in npz.files}
    except (ValueError, OSError, zipfile.BadZipFile, EOFError, zlib.error) as exc:
        if isinstance(exc, ValueError) and "pickle" in str(exc).lower():
            raise _fail(
                path,
                f"{member} holds a pickle (Python objects); session files hold only plain "
                "arrays, so it is not opened",
            ) from None
        raise _fail(path, f"damaged session file: {member}: {exc}") from None
    for key, value in out.items():
        # NpzFile hands back a member that is not .npy data as raw bytes: refuse it
        if not isinstance(value, np.ndarray) or value.dtype.hasobject:
            raise _fail(path, f"{member}: {key} is not a plain array; it is not opened")
    return out


@dataclass(frozen=True)
class ModelSource:
    """How the model was opened: the loaded model's ``source``, ``kind`` and ``name``, and
    ``open_model``'s ``arch``/``weights``/``trust`` (asked anew on reopening); a checkpoint's
    ``sha256`` and ``size`` are checked by :func:`verify_model_source`."""

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
    """The :class:`ModelSource` of a ``LoadedModel`` opened with these ``open_model`` arguments."""
    source = str(loaded.source)
    digest = size = None
    if loaded.kind in _FILE_KINDS and (path := Path(source)).is_file():
        source = str(path.resolve())
        digest, size = file_sha256(path), path.stat().st_size
    elif loaded.kind == "code":
        source = absolute_source(source, paths=False)
    return ModelSource(
        source=source,
        kind=str(loaded.kind),
        name=str(loaded.name),
        arch=absolute_source(arch, paths=False),
        weights=None if weights is None else str(weights),
        trust=bool(trust),
        sha256=digest,
        size=size,
    )


def weights_to_keep(loaded: Any) -> dict[str, torch.Tensor] | None:
    """The ``state_dict()`` a session must hold when reopening the model would give other
    weights (random init, model code: :func:`actviz.io.export.reproduce.run_source`'s rule)."""
    from actviz.io.export.reproduce import run_source

    state = run_source(loaded, None).state
    return None if state is None else dict(state)


def input_source_of(loaded: LoadedInput) -> InputSource:
    """An opened input as a session keeps it (its tokens a tuple)."""
    return replace(loaded, tokens=tuple(loaded.tokens) if loaded.tokens else None)


def _when(stamp: float) -> str:
    """``"4 Mar 09:05"``: a file's time as the window says it (local time)."""
    local = time.localtime(stamp)
    return f"{local.tm_mday} {time.strftime('%b %H:%M', local)}"
