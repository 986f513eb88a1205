"""The session file's codec: edits, captures and arrays to JSON and ``.npz`` members and back,
and the error a damaged or unknown file raises. No Qt. (:mod:`actviz.workspace.session_file`
holds the format and :mod:`actviz.workspace.session_provenance` where the model and input came
from.)"""

from __future__ import annotations

import io
import zipfile
import zlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import torch

from actviz.core.edit_kinds import Edit
from actviz.core.records import Capture, LayerRecord
from actviz.io.errors import ActvizError

__all__ = ["PinState", "SessionFileError", "edits_from_json", "edits_to_json"]


class SessionFileError(ActvizError):
    """A session file that cannot be opened or written (one line: the file and the cause)."""


#: Edit kinds that a session file can hold (custom edits are Python callables).
_SAVED_KINDS = ("ablate", "scale", "keep", "clamp", "patch", "concept")


@dataclass(frozen=True)
class PinState:
    """A pinned result: its label, when it was pinned and (optionally) its capture."""

    label: str
    pinned_at: float = 0.0
    capture: Capture | None = field(default=None, repr=False, compare=False)


def _pin_of(source: Any, pins: Sequence[PinState]) -> str | None:
    return next((p.label for p in pins if p.capture is not None and p.capture is source), None)


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
    edits' dictionaries: ``dictionaries``), and a warning per row that cannot be made again;
    ``SessionFileError`` for a row that is not an edit (unknown kind, bad values)."""
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


#: The nested tensor structures of a record and of a capture, as saved.
_RECORD_TENSORS = ("inputs", "output", "grad_output", "grad_inputs")
_CAPTURE_TENSORS = ("output", "input_grads", "inputs")


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
                    **{k: _encode(getattr(rec, k), store) for k in _RECORD_TENSORS},
                }
            )
    return {
        "names": list(cap.names),
        "records": records,
        **{k: _encode(getattr(cap, k), store) for k in _CAPTURE_TENSORS},
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
                **{k: _decode(r[k], arrays) for k in _RECORD_TENSORS},
            )
        )
    tv = d["target_value"]
    return Capture(
        names=list(d["names"]),
        records=records,
        **{k: _decode(d[k], arrays) for k in _CAPTURE_TENSORS},
        target_value=None if tv is None else float(tv),
        target_index=d["target_index"],
        target_description=d["target_description"],
        warnings=list(d["warnings"]),
        nbytes=int(d["nbytes"]),
        elapsed_s=float(d["elapsed_s"]),
        gradients=bool(d["gradients"]),
        mode=d["mode"],
    )


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
