"""Where a session's model and input came from (:class:`ModelSource`, :class:`InputSource`),
how to open that model again and whether a checkpoint is still the one saved (its SHA-256).
No Qt."""

from __future__ import annotations

import hashlib
import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

import numpy as np
import torch

from actviz.workspace.session_codec import SessionFileError

__all__ = [
    "InputSource",
    "ModelCheck",
    "ModelSource",
    "file_sha256",
    "input_source_of",
    "model_source_of",
    "open_model_source",
    "verify_model_source",
    "weights_to_keep",
]


@dataclass(frozen=True)
class ModelSource:
    """How the model was opened: ``source``, ``kind`` and ``name`` as the loaded model had them, and
    ``open_model``'s ``arch``/``weights``/``trust`` (reopening asks for trust anew). ``sha256`` and
    ``size`` of a single checkpoint file are checked by :func:`verify_model_source`.
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
    """The input, embedded (tensors themselves, so the session opens without the file): ``value``,
    its ``source`` (shown, not reopened), ``kind``, overlay ``image``, ``description`` and
    ``tokens``.
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


class SavedModel(Protocol):
    """What opening a session's model again reads (a
    :class:`~actviz.workspace.session_file.SessionState` is one)."""

    @property
    def model(self) -> ModelSource | None: ...

    @property
    def model_weights(self) -> Mapping[str, torch.Tensor] | None: ...


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
    """The :class:`ModelSource` of an :class:`actviz.io.models.loaded_model.LoadedModel` opened with
    these ``open_model`` arguments; a model from one file gets the file's SHA-256."""
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
    from actviz.io.models.user_code import parse_code_ref

    ref = parse_code_ref(text)
    if ref is None or not ref.is_file or Path(ref.target).is_absolute():
        return text
    target = Path(ref.target)
    return f"{target.resolve()}:{ref.attr}" if target.is_file() else text


def weights_to_keep(loaded: Any) -> dict[str, torch.Tensor] | None:
    """The weights a session must hold for an opened model (``SessionState.model_weights``):
    its ``state_dict()`` when opening it again would give other weights (random init, model
    code; the rule of :func:`actviz.io.export.reproduce.run_source`), else None."""
    from actviz.io.export.reproduce import run_source

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
    state: SavedModel,
    path: str | os.PathLike[str] | None = None,
    *,
    trust: bool = False,
    device: str = "cpu",
) -> Any:
    """Open the session's model again (:func:`actviz.io.models.loading.open_model` with the saved
    arguments, then any saved weights) and return the ``LoadedModel``.

    ``path``: where the user located a moved checkpoint (check it first with
    :func:`verify_model_source`). ``trust`` is the user's answer now, never the file's, so a
    session from someone else cannot open a pickle unasked. Raises what ``open_model`` raises.
    """
    from actviz.io.models.loading import open_model

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
    """What :func:`verify_model_source` found: ``status`` ``"ok"``, ``"changed"`` (SHA-256 differs)
    or ``"missing"``, a one-line ``message`` and the checkpoint ``path``.
    """

    status: str
    message: str = ""
    path: Path | None = None

    @property
    def ok(self) -> bool:
        return self.status == "ok"


def verify_model_source(
    state: SavedModel, path: str | os.PathLike[str] | None = None
) -> ModelCheck:
    """Check that the session's checkpoint (at ``path`` where the user located it; default:
    where it was when saved) is still the file it was saved with."""
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


#: Model kinds that come from one file whose bytes can be hashed.
_FILE_KINDS = ("state_dict", "safetensors", "torchscript", "export", "pickle")


def _when(stamp: float) -> str:
    """``"4 Mar 09:05"``: a file's time as the window says it (local time)."""
    import time

    local = time.localtime(stamp)
    return f"{local.tm_mday} {time.strftime('%b %H:%M', local)}"
