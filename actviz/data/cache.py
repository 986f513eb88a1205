"""Where scans are saved between runs, so reopening is instant and a scan resumes or grows.

One folder per (weights fingerprint, preprocessing, data identity) under the user's cache
directory; in it, per layer (the layer is part of the key):

* ``<layer>.log``: one line per item done, in the order scanned (``D`` or ``S`` for skipped,
  the source, its signature, the reason); appended before the state is replaced;
* its running state (top-k, statistics) and how many log lines it covers, under
  ``<layer>/...`` keys of the folder's one ``state.npz``, which is written to a temporary file
  and renamed over the old one (atomic) once per batch for all layers together (a rename
  costs milliseconds on some file systems: one per layer per batch was measurable).

A killed process therefore loses at most the batch being written: a log line not yet covered by
the state is ignored on the next open. When a done item has changed (another size or time)
or vanished, or the weights changed (another key), the layer's cache is not used.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import sys
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch
from torch import nn

from actviz.data.accumulate import EMPTY_INDEX, LayerState

__all__ = ["LayerCache", "ScanStore", "cache_dir", "cache_root", "weights_fingerprint"]

_FORMAT = 1


def cache_root() -> Path:
    """``actviz/scans`` under the platform's user cache directory (``XDG_CACHE_HOME`` first)."""
    xdg = os.environ.get("XDG_CACHE_HOME")
    if xdg:
        base = Path(xdg)
    elif sys.platform == "darwin":
        base = Path.home() / "Library" / "Caches"
    elif sys.platform == "win32":
        base = Path(os.environ.get("LOCALAPPDATA", Path.home() / "AppData" / "Local"))
    else:
        base = Path.home() / ".cache"
    return base / "actviz" / "scans"


def weights_fingerprint(model: nn.Module) -> str:
    """A hash of the model's class, parameter and buffer names, shapes, dtypes and values."""
    h = hashlib.sha1(type(model).__qualname__.encode())
    with torch.no_grad():
        for name, t in model.state_dict().items():
            if not isinstance(t, torch.Tensor):
                continue
            h.update(f"{name}|{tuple(t.shape)}|{t.dtype}".encode())
            data = t.detach().cpu().contiguous()
            if data.numel():
                h.update(data.reshape(-1).view(torch.uint8).numpy().tobytes())
    return h.hexdigest()


def cache_dir(weights: str, preprocessing: str, identity: str) -> Path:
    key = hashlib.sha1(f"{_FORMAT}|{weights}|{preprocessing}|{identity}".encode()).hexdigest()
    return cache_root() / key[:24]


def _safe(layer: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.-]", "_", layer or "_model") or "_model"


@dataclass
class Loaded:
    """A layer's saved state, renumbered for the current data."""

    state: LayerState
    done: np.ndarray  # (N,) bool: items of the current data already in the state (or skipped)
    skipped: dict[int, str]  # data index -> reason
    log_of_index: np.ndarray  # (N,) int64: log line of each data index, -1 when none


class ScanStore:
    """The ``state.npz`` of a cache folder: every layer's arrays, under ``<layer>/`` keys."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder
        self.path = folder / "state.npz"
        self.arrays: dict[str, np.ndarray] = {}
        try:
            with np.load(self.path, allow_pickle=False) as z:
                self.arrays = _unpack(z["index"], z["f"], z["i"])
        except (OSError, ValueError, EOFError, KeyError):  # none yet, or unreadable: afresh
            self.arrays = {}

    def get(self, layer: str) -> dict[str, np.ndarray] | None:
        prefix = f"{_safe(layer)}/"
        found = {k[len(prefix) :]: v for k, v in self.arrays.items() if k.startswith(prefix)}
        return found or None

    def put(self, layer: str, arrays: dict[str, np.ndarray]) -> None:
        self.drop(layer)
        self.arrays.update({f"{_safe(layer)}/{k}": v for k, v in arrays.items()})

    def drop(self, layer: str) -> None:
        prefix = f"{_safe(layer)}/"
        for key in [k for k in self.arrays if k.startswith(prefix)]:
            del self.arrays[key]

    def write(self) -> None:
        """Replace ``state.npz`` atomically."""
        self.folder.mkdir(parents=True, exist_ok=True)
        tmp = self.path.with_name(f"state.{os.getpid()}.tmp")
        with open(tmp, "wb") as fh:
            np.savez(fh, **_pack(self.arrays))
        os.replace(tmp, self.path)


def _pack(arrays: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    """Every array in one float64 and one int64 array plus a JSON index: three zip entries
    instead of dozens (each entry of an npz costs a fraction of a millisecond per batch)."""
    index, floats, ints = [], [], []
    offsets = {"f": 0, "i": 0}
    for name, a in arrays.items():
        kind = "f" if a.dtype.kind == "f" else "i"
        flat = a.astype(np.float64 if kind == "f" else np.int64).ravel()
        (floats if kind == "f" else ints).append(flat)
        index.append([name, kind, list(a.shape), offsets[kind]])
        offsets[kind] += flat.size
    return {
        "index": np.frombuffer(json.dumps(index).encode(), dtype=np.uint8),
        "f": np.concatenate(floats) if floats else np.zeros(0),
        "i": np.concatenate(ints) if ints else np.zeros(0, dtype=np.int64),
    }


def _unpack(index: np.ndarray, floats: np.ndarray, ints: np.ndarray) -> dict[str, np.ndarray]:
    out = {}
    for name, kind, shape, offset in json.loads(index.tobytes().decode()):
        size = int(np.prod(shape)) if shape else 1
        source = floats if kind == "f" else ints
        out[name] = source[offset : offset + size].reshape(shape)
    return out


class LayerCache:
    """The cache of one layer: its log file and its arrays in the folder's :class:`ScanStore`."""

    def __init__(self, store: ScanStore, layer: str) -> None:
        self.store = store
        self.folder = store.folder
        self.layer = layer
        self.log_path = store.folder / f"{_safe(layer)}.log"
        self.lines = 0  # log lines covered by the saved state

    def load(
        self, k: int, sources: tuple[str | int, ...], signatures: tuple[str, ...]
    ) -> Loaded | None:
        """The saved state when it can be reused for ``sources``, else None."""
        arrays = self.store.get(self.layer)
        if arrays is None or not self.log_path.exists():
            return None
        try:
            lines = int(arrays["lines"])
            with open(self.log_path, encoding="utf-8") as fh:
                log = [fh.readline() for _ in range(lines)]
                extra = fh.read(1)
        except (OSError, ValueError, KeyError):
            return None
        if int(arrays["format"]) != _FORMAT or int(arrays["k"]) < k or "" in log:
            return None
        where = {str(s): i for i, s in enumerate(sources)}
        n = len(sources)
        done = np.zeros(n, dtype=bool)
        skipped: dict[int, str] = {}
        log_of_index = np.full(n, -1, dtype=np.int64)
        index_of_log = np.empty(len(log), dtype=np.int64)
        for pos, line in enumerate(log):
            parts = line.rstrip("\n").split("\t")
            if len(parts) < 3:
                return None
            i = where.get(parts[1])
            if i is None or signatures[i] != parts[2]:
                return None  # an item scanned before has vanished or changed: rescan
            done[i] = True
            log_of_index[i] = pos
            index_of_log[pos] = i
            if parts[0] == "S":
                skipped[i] = parts[3] if len(parts) > 3 else "unreadable"
        state = LayerState(int(arrays["k"]))
        if int(arrays["channels"]) >= 0:
            state._allocate(int(arrays["channels"]))
            refs = torch.from_numpy(arrays["refs"].astype(np.int64))
            valid = refs >= 0
            indices = torch.full_like(refs, EMPTY_INDEX)
            indices[valid] = torch.from_numpy(index_of_log)[refs[valid]]
            state.values = torch.from_numpy(arrays["values"].astype(np.float64))
            state.indices = indices
            state.locations = torch.from_numpy(arrays["locations"].astype(np.int64))
            state.mean = torch.from_numpy(arrays["mean"].astype(np.float64))
            state.m2 = torch.from_numpy(arrays["m2"].astype(np.float64))
            state.positive = torch.from_numpy(arrays["positive"].astype(np.int64))
            state.count = int(arrays["count"])
            spatial = tuple(int(s) for s in arrays["spatial"])
            state.spatial = spatial if spatial else None
            state.remap(np.arange(n))  # ties re-sorted by the current data order
        if extra:
            # Lines a killed run appended after its last saved state: cut them off.
            tmp = self.log_path.with_name(self.log_path.name + f".{os.getpid()}.tmp")
            with open(tmp, "w", encoding="utf-8") as fh:
                fh.writelines(log)
            os.replace(tmp, self.log_path)
        self.lines = lines
        return Loaded(state, done, skipped, log_of_index)

    def reset(self) -> None:
        """Forget what is saved (the next save starts a new log)."""
        self.store.drop(self.layer)
        try:
            self.log_path.unlink()
        except FileNotFoundError:
            pass
        self.lines = 0

    def save(
        self,
        state: LayerState,
        new_lines: list[str],
        log_of_index: np.ndarray,
    ) -> None:
        """Append ``new_lines`` to the log and put the state in the store.

        ``log_of_index`` must already give the log line of every data index the state holds.
        The caller then writes the store (:meth:`ScanStore.write`), once for all layers.
        """
        self.folder.mkdir(parents=True, exist_ok=True)
        mode = "a" if self.lines and self.log_path.exists() else "w"
        with open(self.log_path, mode, encoding="utf-8") as fh:
            fh.writelines(new_lines)
        lines = self.lines + len(new_lines)
        arrays: dict[str, np.ndarray] = {
            "format": np.array(_FORMAT),
            "k": np.array(state.k),
            "lines": np.array(lines),
            "channels": np.array(-1 if state.channels is None else state.channels),
            "count": np.array(state.count),
            "spatial": np.array(state.spatial or (), dtype=np.int64),
        }
        if state.channels is not None:
            idx = state.indices.numpy()
            refs = np.full(idx.shape, -1, dtype=np.int64)
            valid = idx != EMPTY_INDEX
            refs[valid] = log_of_index[idx[valid]]
            arrays.update(
                values=state.values.numpy(),
                refs=refs,
                locations=state.locations.numpy(),
                mean=state.mean.numpy(),
                m2=state.m2.numpy(),
                positive=state.positive.numpy(),
            )
        self.store.put(self.layer, arrays)
        self.lines = lines


def log_line(kind: str, source: str | int, signature: str, reason: str = "") -> str:
    """One log line; tabs and newlines in a reason are replaced so lines stay one record."""
    reason = re.sub(r"[\t\r\n]+", " ", reason)
    return f"{kind}\t{source}\t{signature}\t{reason}\n"
