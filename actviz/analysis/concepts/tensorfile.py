"""The safetensors format, read and written without the ``safetensors`` package (an optional
dependency): an 8-byte header length, a JSON header and the raw little-endian bytes.
"""

from __future__ import annotations

import json
import os
import struct
from pathlib import Path

import numpy as np
import torch

_DTYPES = {
    "F64": torch.float64,
    "F32": torch.float32,
    "F16": torch.float16,
    "BF16": torch.bfloat16,
    "I64": torch.int64,
    "I32": torch.int32,
    "I16": torch.int16,
    "I8": torch.int8,
    "U8": torch.uint8,
    "BOOL": torch.bool,
}
_NAMES = {v: k for k, v in _DTYPES.items()}
# A header larger than this is not a safetensors file (the library refuses over 100 MB too).
_MAX_HEADER = 100 << 20


def write_tensors(
    path: str | os.PathLike, tensors: dict[str, torch.Tensor], metadata: dict | None = None
) -> None:
    """Write ``tensors`` (name -> tensor) to a safetensors file at ``path``."""
    header: dict = {}
    if metadata:
        header["__metadata__"] = {str(k): str(v) for k, v in metadata.items()}
    blobs: list[bytes] = []
    offset = 0
    for name in sorted(tensors):
        t = tensors[name].detach().to("cpu").contiguous()
        if t.dtype not in _NAMES:
            raise ValueError(f"cannot write {name!r}: dtype {t.dtype} has no safetensors name")
        raw = t.view(torch.uint8).numpy().tobytes() if t.numel() else b""
        header[name] = {
            "dtype": _NAMES[t.dtype],
            "shape": list(t.shape),
            "data_offsets": [offset, offset + len(raw)],
        }
        blobs.append(raw)
        offset += len(raw)
    text = json.dumps(header, separators=(",", ":")).encode()
    text += b" " * (-len(text) % 8)  # the data starts 8-byte aligned, as the library writes it
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(text)))
        f.write(text)
        for raw in blobs:
            f.write(raw)


def read_tensors(path: str | os.PathLike) -> tuple[dict[str, torch.Tensor], dict[str, str]]:
    """The tensors (CPU, stored dtype) and metadata of a safetensors file; ``ValueError`` if it is
    none.
    """
    data = Path(path).read_bytes()
    if len(data) < 8:
        raise ValueError(f"{path}: too short for a safetensors file")
    (size,) = struct.unpack("<Q", data[:8])
    if size > min(_MAX_HEADER, len(data) - 8):
        raise ValueError(f"{path}: not a safetensors file (header of {size} bytes)")
    try:
        header = json.loads(data[8 : 8 + size])
    except ValueError as exc:
        raise ValueError(f"{path}: not a safetensors file ({exc})") from None
    base = 8 + size
    metadata = header.pop("__metadata__", None) or {}
    out: dict[str, torch.Tensor] = {}
    for name, info in header.items():
        dtype = _DTYPES.get(info.get("dtype"))
        if dtype is None:
            raise ValueError(f"{path}: tensor {name!r} has an unknown dtype {info.get('dtype')!r}")
        start, end = (int(v) for v in info["data_offsets"])
        shape = [int(s) for s in info["shape"]]
        if not 0 <= start <= end <= len(data) - base:
            raise ValueError(f"{path}: tensor {name!r} lies outside the file")
        raw = np.frombuffer(data, dtype=np.uint8, count=end - start, offset=base + start)
        t = torch.from_numpy(raw.copy()).view(dtype)
        if t.numel() != int(np.prod(shape, dtype=np.int64)):
            raise ValueError(f"{path}: tensor {name!r} has {t.numel()} values for shape {shape}")
        out[name] = t.reshape(shape)
    return out, {str(k): str(v) for k, v in metadata.items()}
