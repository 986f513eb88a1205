"""Session files (``.actviz``): an investigation saved whole and opened again exactly, as a zip
of ``manifest.json`` and ``.npz`` members, never a pickle, so opening cannot run code; a saved
model reopened (:func:`open_model_source`) once its checkpoint is checked unchanged."""

from __future__ import annotations

import base64
import json
import os
import sys
import zipfile
import zlib
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import numpy as np
import torch

from actviz.core.edit_kinds import Edit
from actviz.core.records import Capture
from actviz.io.errors import WriteError
from actviz.io.files import atomic_write
from actviz.workspace import session_codec as codec
from actviz.workspace.session_codec import (
    InputSource,
    ModelSource,
    PinState,
    SessionFileError,
    _fail,
    edits_from_json,
    edits_to_json,
)
from actviz.workspace.session_codec import file_sha256 as file_sha256
from actviz.workspace.session_codec import input_source_of as input_source_of
from actviz.workspace.session_codec import model_source_of as model_source_of
from actviz.workspace.session_codec import weights_to_keep as weights_to_keep

FORMAT_VERSION = 1  #: The format this actviz writes (and the newest it reads).
SUFFIX = ".actviz"  #: The file name suffix of session files.
_KIND = "actviz-session"
_MANIFEST = "manifest.json"
_CONCEPTS_MEMBER = "concepts.npz"  #: The member holding the dictionaries of concept edits.


@dataclass(frozen=True)
class SessionState:
    """Everything a session file holds. ``model`` and ``input`` say how to reopen them;
    ``model_weights`` is the ``state_dict()`` when reopening would give other weights; display
    settings mirror the session's; ``capture`` is the current run (shown without running);
    ``layout`` is Qt's opaque state; ``settings`` hold features' JSON."""

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


def _optional(kind: Any) -> Any:
    return lambda value: None if value is None else kind(value)


def _int_values(pages: Mapping[str, Any]) -> dict[str, int]:
    return {k: int(v) for k, v in pages.items()}


#: Manifest entries that are plain JSON: saved as they are, or (field, to, from the manifest).
_AS_IS = ("target", "colormap", "normalize", "gradcam_layer", "scan_key")
_PLAIN: tuple[tuple[str, Any, Any], ...] = (
    ("ticked", list, tuple),
    ("categories", _optional(list), _optional(tuple)),
    ("sample", int, int),
    ("input_as_list", bool, bool),
    ("channel_pages", _int_values, dict),
    ("page_channels", _int_values, dict),
    ("channel_view", _optional(dict), _optional(dict)),
    ("comparison", _optional(dict), _optional(dict)),
)


def unsaved_warnings(state: SessionState, *, pin_captures: bool = True) -> list[str]:
    """What saving ``state`` would leave out, a line each: custom edits, patches of unsaved pins."""
    return _members(state, pin_captures, measure=True)[2]


def _members(
    state: SessionState, pin_captures: bool, measure: bool = False
) -> tuple[dict[str, Any], dict[str, codec._Arrays], list[str]]:
    """Manifest, ``.npz`` members and warnings of saving ``state`` (``measure``: sizes only)."""
    # Read without an import edge back to ``actviz`` (which imports the window lazily).
    actviz_version = str(getattr(sys.modules.get("actviz"), "__version__", ""))
    members: dict[str, codec._Arrays] = {}

    def member(name: str) -> tuple[dict[str, Any], codec._Arrays]:
        """A new ``.npz`` member: its manifest section (naming it) and its arrays."""
        members[name] = codec._Arrays(measure)
        return {"member": name}, members[name]

    def capture_section(name: str, cap: Capture, label: str) -> dict[str, Any]:
        """A capture's manifest section in member ``name``; what its edits leave out is said."""
        section, store = member(name)
        data, left_out = codec._capture_to_json(cap, store, pins, dictionaries)
        warnings.extend(f"{label}: {w}" for w in left_out if w not in warnings)
        return {**section, **data}

    pins = state.pins if pin_captures else tuple(replace(p, capture=None) for p in state.pins)
    if len(set(labels := [p.label for p in pins])) != len(labels):
        raise SessionFileError("two pins have the same label; rename one before saving")
    dictionaries: list[Any] = []  # of concept edits, each kept once
    edit_rows, warnings = edits_to_json(state.edits, pins, dictionaries)
    manifest: dict[str, Any] = {
        "kind": _KIND,
        "format": FORMAT_VERSION,
        "actviz": actviz_version,
        "torch": torch.__version__,
        "model": None if state.model is None else dict(vars(state.model)),
        "input": None,
        "settings": dict(state.settings),
        **{name: getattr(state, name) for name in _AS_IS},
        **{name: save(getattr(state, name)) for name, save, _ in _PLAIN},
        "edits": edit_rows,
        "pins": [],
        "layout": None if state.layout is None else base64.b64encode(state.layout).decode(),
        "capture": None,
        "model_weights": None,
    }
    if state.input is not None:
        manifest["input"], store = member("input.npz")
        inp = state.input
        manifest["input"].update(
            vars(inp),
            value=codec._encode(inp.value, store),
            image=None if inp.image is None else codec._encode(np.asarray(inp.image), store),
            tokens=None if inp.tokens is None else list(inp.tokens),
        )
    if state.model_weights is not None:
        manifest["model_weights"], store = member("weights.npz")
        manifest["model_weights"]["tensors"] = codec._encode(dict(state.model_weights), store)
    if state.capture is not None:
        manifest["capture"] = capture_section("capture.npz", state.capture, "the current run")
    for i, pin in enumerate(pins):
        entry: dict[str, Any] = {"label": pin.label, "pinned_at": float(pin.pinned_at)}
        if pin.capture is not None:
            entry["capture"] = capture_section(f"pin{i}.npz", pin.capture, f"pin {pin.label!r}")
        manifest["pins"].append(entry)
    if dictionaries:
        manifest["concepts"], store = member(_CONCEPTS_MEMBER)
        manifest["concepts"]["dictionaries"] = [
            {"cfg": d.to_cfg(), "tensors": codec._encode(d.weights(), store)} for d in dictionaries
        ]
    return manifest, members, warnings


def saved_size(state: SessionState, *, pin_captures: bool = True) -> int:
    """Bytes a session file of ``state`` takes at most (arrays uncompressed), counted without
    copying; ``pin_captures=False``: the pins without their captures."""
    manifest, members, _ = _members(state, pin_captures, measure=True)
    return len(json.dumps(manifest, indent=1).encode()) + sum(m.nbytes for m in members.values())


def pin_capture_bytes(state: SessionState) -> int:
    """Bytes the pinned captures add to the file (what the "keep captures" choice costs)."""
    return saved_size(state, pin_captures=True) - saved_size(state, pin_captures=False)


def save_state(
    state: SessionState, path: str | os.PathLike[str], *, pin_captures: bool = True
) -> list[str]:
    """Write ``state`` to ``path`` atomically (``SessionFileError`` leaves an old file as it was);
    ``pin_captures`` False saves only pin labels. Returns what was left out, one line each."""
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
            for name, store in members.items():  # streamed: no copy in memory
                with zf.open(name, "w", force_zip64=True) as fh:
                    np.savez(fh, **store.arrays)
    except WriteError as exc:
        raise SessionFileError(str(exc)) from None
    except OSError as exc:
        raise SessionFileError(f"{path}: cannot save the session ({exc})") from None
    return warnings


def describe_session_file(path: str | os.PathLike[str]) -> str:
    """Which investigation a session file holds, from its manifest alone: ``"resnet18 (random
    init) on cat.png, 2 layers ticked, saved 4 Mar 09:05"``; "" when it cannot be read."""
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
    return f"{text}, saved {codec._when(stamp)}"


def open_model_source(
    state: SessionState,
    path: str | os.PathLike[str] | None = None,
    *,
    trust: bool = False,
    device: str = "cpu",
) -> Any:
    """Open the session's model again (``open_model`` with the saved arguments, then any saved
    weights); ``path``: where the user located a moved checkpoint. ``trust`` is the user's answer
    now, never the file's, so another's session cannot open a pickle unasked."""
    from actviz.io.models.loading import open_model

    if (src := state.model) is None:
        raise SessionFileError("the session has no model to open")
    source = str(path) if path is not None else src.source
    loaded = open_model(source, arch=src.arch, weights=src.weights, trust=trust, device=device)
    if state.model_weights is not None:
        with torch.no_grad():
            loaded.model.load_state_dict(dict(state.model_weights))
    return loaded


@dataclass(frozen=True)
class ModelCheck:
    """What :func:`verify_model_source` found: ``status`` ``"ok"``, ``"changed"`` (SHA-256 differs)
    or ``"missing"``, a one-line ``message`` and the checkpoint ``path``."""

    status: str
    message: str = ""
    path: Path | None = None

    @property
    def ok(self) -> bool:
        return self.status == "ok"


def verify_model_source(
    state: SessionState, path: str | os.PathLike[str] | None = None
) -> ModelCheck:
    """Check that the session's checkpoint (at ``path`` where the user located it; default:
    where it was when saved) is still the file it was saved with."""
    src = state.model
    if src is None or src.sha256 is None:
        return ModelCheck("ok")
    where = Path(path) if path is not None else Path(src.source)
    if not where.is_file():
        return ModelCheck(
            "missing", f"{where}: the session's checkpoint is not there any more", where
        )
    if (digest := file_sha256(where)) != src.sha256:
        return ModelCheck(
            "changed",
            f"{where}: the checkpoint changed since the session was saved (modified "
            f"{codec._when(where.stat().st_mtime)}; SHA-256 {digest[:12]}..., saved "
            f"{src.sha256[:12]}...); its results may differ",
            where,
        )
    return ModelCheck("ok", "", where)


def load_state(path: str | os.PathLike[str]) -> SessionState:
    """Read a session file; ``SessionFileError`` in one line naming the file and the cause
    (damaged, newer format, a pickle or unknown member, a missing one). Nothing is changed."""
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
    if (bad := zf.testzip()) is not None:
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
    sections = [manifest.get(n) for n in ("input", "capture", "model_weights", "concepts")]
    sections += [pin.get("capture") for pin in manifest.get("pins", [])]
    wanted = {_MANIFEST} | {section["member"] for section in sections if section is not None}
    for name in names:
        if name not in wanted:
            what = "a pickle" if name.endswith((".pkl", ".pickle", ".pt", ".pth")) else "unknown"
            raise _fail(path, f"{name} is {what} member of a session file; it is not opened")
    for name in wanted - {_MANIFEST}:
        if not name.endswith(".npz"):
            raise _fail(path, f"{name} is not an .npz member; it is not opened")
        if name not in names:
            raise _fail(path, f"damaged session file: {name} is missing")
    loaded = {name: codec._read_npz(path, zf, name) for name in wanted - {_MANIFEST}}

    def arrays_of(section: Mapping[str, Any]) -> Mapping[str, np.ndarray]:
        return loaded[section["member"]]

    def capture_of(section: Mapping[str, Any] | None) -> Capture | None:
        return None if section is None else codec._capture_from_json(section, arrays_of(section))

    try:
        model = None if manifest["model"] is None else ModelSource(**manifest["model"])
        inp = None
        if (m := manifest["input"]) is not None:
            arrays = arrays_of(m)
            inp = InputSource(
                **{k: m[k] for k in ("source", "kind", "description")},
                value=codec._decode(m["value"], arrays),
                image=None if m["image"] is None else codec._decode(m["image"], arrays),
                tokens=None if m["tokens"] is None else tuple(m["tokens"]),
            )
        section = manifest.get("model_weights")
        weights = None if section is None else codec._decode(section["tensors"], arrays_of(section))
        pins = [
            PinState(p["label"], float(p["pinned_at"]), capture_of(p.get("capture")))
            for p in manifest["pins"]
        ]
        capture = capture_of(manifest["capture"])
        warnings: list[str] = []
        dictionaries: list[Any] = []  # of the concept edits (None: one that cannot be made)
        if (section := manifest.get("concepts")) is not None:
            from actviz.analysis.concepts.dictionary import from_parts

            for i, entry in enumerate(section["dictionaries"]):
                try:
                    tensors = codec._decode(entry["tensors"], arrays_of(section))
                    dictionaries.append(from_parts(entry["cfg"], tensors))
                except (ValueError, TypeError) as exc:
                    warnings.append(f"dictionary {i} of the concept edits cannot be made: {exc}")
                    dictionaries.append(None)
        # Each capture's own edits once every pin (a patch's source) exists.
        sections = [manifest["capture"], *(p.get("capture") for p in manifest["pins"])]
        for cap, section in zip([capture, *(p.capture for p in pins)], sections, strict=True):
            if cap is not None:
                cap.edits, left_out = edits_from_json(section["edits"], pins, dictionaries)
                warnings += left_out
        edits, left_out = edits_from_json(manifest["edits"], pins, dictionaries)
        warnings += left_out
        return SessionState(
            model=model,
            model_weights=weights,
            input=inp,
            **{name: manifest[name] for name in _AS_IS},
            **{name: load(manifest[name]) for name, _, load in _PLAIN},
            edits=edits,
            pins=tuple(pins),
            layout=None if manifest["layout"] is None else base64.b64decode(manifest["layout"]),
            capture=capture,
            settings=dict(manifest.get("settings") or {}),
            actviz_version=str(manifest.get("actviz", "")),
            torch_version=str(manifest.get("torch", "")),
            format_version=version,
            warnings=tuple(warnings),
        )
    except KeyError as exc:
        raise _fail(path, f"damaged session file: {exc.args[0]!r} is missing") from None
