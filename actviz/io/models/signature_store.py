"""Architecture signatures kept between sessions in the user cache: a bare state_dict's guess
builds some fifty, the same for every checkpoint while torch, torchvision and timm stay put."""

from __future__ import annotations

import contextlib
import functools
import json
import logging
import threading
from collections.abc import Mapping
from importlib import metadata
from pathlib import Path

from actviz.io.errors import WriteError
from actviz.io.files import atomic_write, user_cache_dir

log = logging.getLogger(__name__)

Shape = tuple[int, ...]


class SignatureStore:
    """Signatures (state_dict key -> shape) by name, read from ``path`` once and written back
    when grown; a file made with other ``versions`` is ignored (and replaced)."""

    def __init__(self, path: Path, versions: Mapping[str, str]) -> None:
        self.path = path
        self.versions = dict(versions)
        self._lock = threading.Lock()
        self._entries: dict[str, dict[str, list[int]]] | None = None
        self._grown = False

    def _loaded(self) -> dict[str, dict[str, list[int]]]:
        if self._entries is None:
            self._entries = {}
            try:
                data = json.loads(self.path.read_text(encoding="utf-8"))
                if data["versions"] == self.versions:
                    self._entries = dict(data["signatures"])
            except (OSError, ValueError, KeyError, TypeError) as exc:
                log.debug("no stored signatures in %s: %s", self.path, exc)
        return self._entries

    def get(self, name: str) -> dict[str, Shape] | None:
        """The stored signature of ``name`` (None: not stored)."""
        with self._lock:
            found = self._loaded().get(name)
        return None if found is None else {k: tuple(v) for k, v in found.items()}

    def put(self, name: str, shapes: Mapping[str, Shape]) -> None:
        """Keep ``name``'s signature (written by the next :meth:`save`)."""
        with self._lock:
            self._loaded()[name] = {k: list(v) for k, v in shapes.items()}
            self._grown = True

    def save(self) -> None:
        """Write the signatures when some were added (failing only costs the next session)."""
        with self._lock:
            if not self._grown:
                return
            self._grown = False
            text = json.dumps({"versions": self.versions, "signatures": self._entries})
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            with atomic_write(self.path, "w", encoding="utf-8") as fh:
                fh.write(text)
        except (OSError, WriteError) as exc:
            log.debug("could not keep the signatures in %s: %s", self.path, exc)


@functools.cache
def signature_store() -> SignatureStore:
    """The process's store, in the user cache, for the torch, torchvision and timm installed
    (their versions read without importing timm: 2 s)."""
    versions = {}
    for package in ("torch", "torchvision", "timm"):
        with contextlib.suppress(metadata.PackageNotFoundError):
            versions[package] = metadata.version(package)
    return SignatureStore(user_cache_dir() / "arch-signatures.json", versions)
