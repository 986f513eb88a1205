"""Where scans are saved between runs, so reopening is instant and a scan resumes or grows.

One folder per (weights fingerprint, preprocessing, data identity) under the user's cache
directory, one pair of files per layer in it (the layer is part of the key):

* ``<layer>.log``: one line per item done, in the order scanned (``D`` or ``S`` for skipped,
  the source, its signature, the reason); appended before the state is replaced;
* ``<layer>.npz``: the layer's running state (top-k, statistics) and how many log lines it
  covers, written to a temporary file and renamed over the old one (atomic).

A killed process therefore loses at most the batch being written: a log line not yet covered by
the state is ignored on the next open. When a done item has changed (another size or time)
or vanished, or the weights changed (another key), the layer's cache is not used.
"""

from __future__ import annotations

import hashlib
import os
import re
import sys
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch
from torch import nn

from actviz.data.accumulate import EMPTY_INDEX, LayerState

__all__ = ["LayerCache", "cache_dir", "cache_root", "weights_fingerprint"]

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


class LayerCache:
    """The cache files of one layer."""

    def __init__(self, folder: Path, layer: str) -> None:
        self.folder = folder
        self.layer = layer
        self.state_path = folder / f"{_safe(layer)}.npz"
        self.log_path = folder / f"{_safe(layer)}.log"
        self.lines = 0  # log lines covered by the saved state

    def load(
        self, k: int, sources: tuple[str | int, ...], signatures: tuple[str, ...]
    ) -> Loaded | None:
        """The saved state when it can be reused for ``sources``, else None."""
        if not self.state_path.exists() or not self.log_path.exists():
            return None
        try:
            with np.load(self.state_path, allow_pickle=False) as z:
                arrays = {name: z[name] for name in z.files}
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
        for p in (self.state_path, self.log_path):
            try:
                p.unlink()
            except FileNotFoundError:
                pass
        self.lines = 0

    def save(
        self,
        state: LayerState,
        new_lines: list[str],
        log_of_index: np.ndarray,
    ) -> None:
        """Append ``new_lines`` to the log, then atomically replace the state.

        ``log_of_index`` must already give the log line of every data index the state holds.
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
        tmp = self.state_path.with_name(self.state_path.name + f".{os.getpid()}.tmp")
        with open(tmp, "wb") as fh:
            np.savez(fh, **arrays)
        os.replace(tmp, self.state_path)
        self.lines = lines


def log_line(kind: str, source: str | int, signature: str, reason: str = "") -> str:
    """One log line; tabs and newlines in a reason are replaced so lines stay one record."""
    reason = re.sub(r"[\t\r\n]+", " ", reason)
    return f"{kind}\t{source}\t{signature}\t{reason}\n"
