"""Where scans are saved between runs, so reopening is instant and a scan resumes or grows: one
folder per (weights, preprocessing, data), per layer a ``.log`` of items done, optional ``.f16``
embeddings and a checksummed two-slot state file (a killed process loses at most one batch)."""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import re
import struct
import zlib
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO, TextIO

import numpy as np
import torch
from torch import nn

from actviz.data.accumulate import EMPTY_INDEX, LayerState
from actviz.data.rows import _safe
from actviz.io.files import user_cache_dir

_FORMAT = 3
_MAGIC = b"ACTVZSCN"
_HEADER = struct.Struct("<8sIQQI")  # magic, format, sequence, payload bytes, crc32 of payload
_SLOTS = ("state.0.bin", "state.1.bin")


def cache_root() -> Path:
    """``actviz/scans`` under the platform's user cache directory (``XDG_CACHE_HOME`` first)."""
    return user_cache_dir() / "scans"


def weights_fingerprint(model: nn.Module) -> str:
    """A hash of the model's class, parameter and buffer names, shapes, dtypes and values."""
    h = hashlib.sha1(type(model).__qualname__.encode())
    with torch.no_grad():
        for name, t in model.state_dict().items():
            if not isinstance(t, torch.Tensor):
                continue
            h.update(f"{name}|{tuple(t.shape)}|{t.dtype}".encode())
            if t.is_meta:  # offloaded by accelerate: its value is in the module's hook
                t = _offloaded(model, name)
            if (data := t.detach().cpu().contiguous()).numel():
                # The buffer itself, not a bytes copy: hashlib hashes it without the GIL.
                h.update(memoryview(data.reshape(-1).view(torch.uint8).numpy()))
    return h.hexdigest()


def _offloaded(model: nn.Module, name: str) -> torch.Tensor:
    """The value of tensor ``name`` accelerate offloaded; an empty tensor when not found."""
    owner, _, leaf = name.rpartition(".")
    with contextlib.suppress(AttributeError, KeyError):
        hook = getattr(model.get_submodule(owner), "_hf_hook", None)
        if (weights := getattr(hook, "weights_map", None)) is not None:
            return weights[leaf]
    return torch.zeros(0)


def cache_dir(weights: str, preprocessing: str, identity: str) -> Path:
    key = hashlib.sha1(f"{_FORMAT}|{weights}|{preprocessing}|{identity}".encode()).hexdigest()
    return cache_root() / key[:24]


@dataclass
class Loaded:
    """A layer's saved state, renumbered for the current data."""

    state: LayerState
    done: np.ndarray  # (N,) bool: items of the current data already in the state (or skipped)
    skipped: dict[int, str]  # data index -> reason
    log_of_index: np.ndarray  # (N,) int64: log line of each data index, -1 when none
    #: (N, D) float16 pooled vectors by data index (NaN rows: none) when asked for and saved
    vectors: np.ndarray | None = None
    #: the output dimension the vectors' channels were taken from
    axis: int | None = None


class ScanStore:
    """The state file of a cache folder: every layer's arrays, under ``<layer>/`` keys."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder
        self.layers: dict[str, dict[str, np.ndarray]] = {}
        self.sequence, self._made = 0, False
        self._next = 0  # the slot the next write goes to: the one not holding the newest
        found = [(got, i) for i, name in enumerate(_SLOTS) if (got := _read_slot(folder / name))]
        if found:  # the newest slot (of two as new, the first)
            (self.sequence, flat), slot = max(found, key=lambda item: item[0][0])
            self._next = 1 - slot
            for key, value in flat.items():
                layer, _, name = key.partition("/")
                self.layers.setdefault(layer, {})[name] = value

    def get(self, layer: str) -> dict[str, np.ndarray] | None:
        return self.layers.get(_safe(layer))

    def put(self, layer: str, arrays: dict[str, np.ndarray]) -> None:
        self.layers[_safe(layer)] = dict(arrays)

    def drop(self, layer: str) -> None:
        self.layers.pop(_safe(layer), None)

    def make_folder(self) -> None:
        """Create the cache folder (once: a scan saves every batch)."""
        if not self._made:
            self.folder.mkdir(parents=True, exist_ok=True)
            self._made = True

    def write(self) -> None:
        """Write the state into the older slot, in place (no new file, no rename)."""
        self.make_folder()
        flat = {f"{layer}/{k}": v for layer, a in self.layers.items() for k, v in a.items()}
        payload = _pack(flat)
        self.sequence += 1
        header = _HEADER.pack(_MAGIC, _FORMAT, self.sequence, len(payload), zlib.crc32(payload))
        path = self.folder / _SLOTS[self._next]
        with open(path, "r+b" if path.exists() else "wb") as fh:
            fh.write(header)
            fh.write(payload)
            fh.truncate()
        self._next = 1 - self._next


def _read_slot(path: Path) -> tuple[int, dict[str, np.ndarray]] | None:
    """``(sequence, arrays)`` of a whole slot; None when missing, torn or of another format."""
    try:
        data = path.read_bytes()
        magic, fmt, sequence, size, crc = _HEADER.unpack_from(data)
        payload = memoryview(data)[_HEADER.size :]
        if magic != _MAGIC or fmt != _FORMAT or len(payload) != size or zlib.crc32(payload) != crc:
            return None
        return sequence, _unpack(payload)
    except (OSError, struct.error, ValueError, KeyError, TypeError):
        return None


def _pack(arrays: dict[str, np.ndarray]) -> bytes:
    """A JSON index, then every array's little-endian float64 or int64 bytes."""
    index, chunks, offset = [], [], 0
    for name, a in arrays.items():
        kind = "f" if a.dtype.kind == "f" else "i"
        data = np.ascontiguousarray(a, dtype="<f8" if kind == "f" else "<i8").tobytes()
        index.append([name, kind, list(a.shape), offset])
        chunks.append(data)
        offset += len(data)
    head = json.dumps(index).encode()
    return b"".join((struct.pack("<Q", len(head)), head, *chunks))


def _unpack(payload: memoryview) -> dict[str, np.ndarray]:
    (n,) = struct.unpack_from("<Q", payload)
    index = json.loads(bytes(payload[8 : 8 + n]).decode())
    start = 8 + n
    out = {}
    for name, kind, shape, offset in index:
        size = int(np.prod(shape)) if shape else 1
        dtype = np.dtype("<f8" if kind == "f" else "<i8")
        flat = np.frombuffer(payload, dtype=dtype, count=size, offset=start + offset)
        out[name] = flat.reshape(shape).astype(dtype.newbyteorder("="))  # own, writable
    return out


class LayerCache:
    """The cache of one layer: its log file and its arrays in the folder's :class:`ScanStore`."""

    def __init__(self, store: ScanStore, layer: str) -> None:
        self.store, self.layer = store, layer
        self.log_path = store.folder / f"{_safe(layer)}.log"
        self.lines = 0  # log lines covered by the saved state
        self._log: TextIO | None = None  # kept open while a scan appends, batch after batch
        self.rows_path = store.folder / f"{_safe(layer)}.f16"
        self.rows = 0  # embedding rows in the rows file (the first ``rows`` log lines)
        self._rows: BinaryIO | None = None

    def load(
        self, k: int, sources: tuple[str | int, ...], signatures: tuple[str, ...], embeddings: bool
    ) -> Loaded | None:
        """The saved state if reusable for ``sources`` (``embeddings``: with its rows), or None."""
        if (arrays := self.store.get(self.layer)) is None or not self.log_path.exists():
            return None
        if embeddings and "embed_dim" not in arrays:
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
        skipped: dict[int, str] = {}
        log_of_index = np.full(n, -1, dtype=np.int64)
        index_of_log = np.empty(len(log), dtype=np.int64)
        for pos, line in enumerate(log):
            parts = line.rstrip("\n").split("\t")
            if len(parts) < 3:
                return None
            if (i := where.get(parts[1])) is None or signatures[i] != parts[2]:
                return None  # an item scanned before has vanished or changed: rescan
            log_of_index[i] = pos
            index_of_log[pos] = i
            if parts[0] == "S":
                skipped[i] = parts[3] if len(parts) > 3 else "unreadable"
        state = LayerState(int(arrays["k"]))
        if int(arrays["channels"]) >= 0:
            state._allocate(int(arrays["channels"]))
            refs = arrays["refs"].astype(np.int64)
            valid = refs >= 0
            indices = np.full_like(refs, EMPTY_INDEX)
            indices[valid] = index_of_log[refs[valid]]
            state.indices = indices
            for name in ("values", "locations", "mean", "m2", "positive"):
                setattr(state, name, arrays[name].astype(getattr(state, name).dtype))
            state.count = int(arrays["count"])
            state.spatial = tuple(int(s) for s in arrays["spatial"]) or None
            state.remap(np.arange(n))  # ties re-sorted by the current data order
        vectors = axis = None
        if embeddings:
            if (found := self._load_rows(arrays, lines, index_of_log, n)) is None:
                return None
            vectors, axis = found
        if extra:
            # Lines a killed run appended after its last saved state: cut them off.
            tmp = self.log_path.with_name(self.log_path.name + f".{os.getpid()}.tmp")
            with open(tmp, "w", encoding="utf-8") as fh:
                fh.writelines(log)
            os.replace(tmp, self.log_path)
        self.lines = lines
        return Loaded(state, log_of_index >= 0, skipped, log_of_index, vectors, axis)

    def _load_rows(
        self, arrays: dict[str, np.ndarray], lines: int, index_of_log: np.ndarray, n: int
    ) -> tuple[np.ndarray | None, int | None] | None:
        """The saved embedding rows by data index; None when they cannot be used."""
        dim = int(arrays["embed_dim"])
        if dim < 0:
            self.rows = 0
            return None, None
        axis = int(arrays["embed_axis"])
        size = lines * dim * 2
        try:
            with open(self.rows_path, "rb") as fh:
                data = fh.read(size)
                extra = fh.read(1)
        except OSError:
            return None
        if len(data) != size:
            return None
        if extra:
            # Rows a killed run appended after its last saved state.
            with open(self.rows_path, "r+b") as fh:
                fh.truncate(size)
        rows = np.frombuffer(data, dtype="<f2").reshape(lines, dim)
        vectors = np.full((n, dim), np.nan, dtype=np.float16)
        vectors[index_of_log] = rows
        self.rows = lines
        return vectors, axis

    def save_rows(self, rows: np.ndarray, first_line: int) -> None:
        """Append embedding ``rows`` (float16, one per log line from ``first_line`` on) to the
        rows file; lines before it that have none yet (a layer whose first images gave no
        vector) get NaN rows. Call before :meth:`save` of the state that counts these lines."""
        if self._rows is None:
            self.store.make_folder()
            mode = "r+b" if self.rows and self.rows_path.exists() else "wb"
            self._rows = open(self.rows_path, mode)  # noqa: SIM115 (see close)
            self._rows.seek(self.rows * rows.shape[1] * 2)
            self._rows.truncate()
        if first_line > self.rows:
            gap = np.full((first_line - self.rows, rows.shape[1]), np.nan, dtype="<f2")
            self._rows.write(gap.tobytes())
        self._rows.write(np.ascontiguousarray(rows, dtype="<f2").tobytes())
        self._rows.flush()
        self.rows = first_line + len(rows)

    def close(self) -> None:
        """Close the log and the rows file (a scan calls this when it ends, however it ends)."""
        for handle in (self._log, self._rows):
            if handle is not None:
                handle.close()
        self._log = self._rows = None

    def reset(self) -> None:
        """Forget what is saved (the next save starts a new log)."""
        self.close()
        self.store.drop(self.layer)
        for path in (self.log_path, self.rows_path):
            path.unlink(missing_ok=True)
        self.lines = self.rows = 0

    def save(
        self,
        state: LayerState,
        new_lines: list[str],
        log_of_index: np.ndarray,
        embedding: tuple[int, int] | None = None,
    ) -> None:
        """Append ``new_lines`` to the log and put the state in the store (written for all layers
        by :meth:`ScanStore.write`); ``embedding`` None: saved rows no longer cover the log."""
        if self._log is None:
            self.store.make_folder()
            mode = "a" if self.lines and self.log_path.exists() else "w"
            self._log = open(self.log_path, mode, encoding="utf-8")  # noqa: SIM115 (see close)
        self._log.writelines(new_lines)
        self._log.flush()  # on disk (the OS's) before the state that counts these lines
        lines = self.lines + len(new_lines)
        arrays: dict[str, np.ndarray] = {
            "format": np.array(_FORMAT),
            "k": np.array(state.k),
            "lines": np.array(lines),
            "channels": np.array(-1 if state.channels is None else state.channels),
            "count": np.array(state.count),
            "spatial": np.array(state.spatial or (), dtype=np.int64),
        }
        if embedding is not None:
            arrays.update(embed_dim=np.array(embedding[0]), embed_axis=np.array(embedding[1]))
        # Copies: the state changes in place, and the store writes every layer at each batch.
        if saved := state.arrays():
            idx = saved.pop("indices")
            refs = np.full(idx.shape, -1, dtype=np.int64)
            valid = idx != EMPTY_INDEX
            refs[valid] = log_of_index[idx[valid]]
            arrays.update(saved, refs=refs)
        self.store.put(self.layer, arrays)
        self.lines = lines


def log_line(kind: str, source: str | int, signature: str, reason: str = "") -> str:
    """One log line; tabs and newlines in a reason are replaced so lines stay one record."""
    reason = re.sub(r"[\t\r\n]+", " ", reason)
    return f"{kind}\t{source}\t{signature}\t{reason}\n"
