"""actviz plugin: ``.wav`` files as a mono float waveform ``(1, N)`` (an input opener)."""

from __future__ import annotations

import wave
from pathlib import Path

import numpy as np

from actviz.plugins import API_VERSION, InputOpener, Plugin

__all__ = ["plugin", "read_samples", "read_wav"]

#: Sample width in bytes -> (numpy dtype, value of full scale, offset of unsigned data).
_FORMATS = {1: ("u1", 128.0, 128.0), 2: ("<i2", 32768.0, 0.0), 4: ("<i4", 2147483648.0, 0.0)}


def read_samples(path: str) -> tuple[np.ndarray, int, int, int]:
    """``(samples (N,) float32 in [-1, 1], rate, channels, bytes per sample)`` of a PCM
    ``.wav``; channels are averaged to mono."""
    with wave.open(str(path), "rb") as f:
        channels, width, rate, frames = (
            f.getnchannels(),
            f.getsampwidth(),
            f.getframerate(),
            f.getnframes(),
        )
        raw = f.readframes(frames)
    if width == 3:  # 24-bit: widen each sample to 32 bits (low byte zero)
        b = np.frombuffer(raw, np.uint8).reshape(-1, 3)
        raw = np.concatenate([np.zeros((len(b), 1), np.uint8), b], axis=1).tobytes()
        width = 4
    if width not in _FORMATS:
        raise ValueError(f"{width * 8}-bit samples are not supported")
    dtype, scale, offset = _FORMATS[width]
    values = (np.frombuffer(raw, dtype).astype(np.float32) - offset) / scale
    mono = values.reshape(-1, channels).mean(axis=1, dtype=np.float32)
    return mono, rate, channels, f.getsampwidth()


def read_wav(path: str) -> tuple[object, str]:
    """The waveform as a ``(1, N)`` float32 tensor and a line for the Model dock."""
    import torch

    samples, rate, channels, width = read_samples(path)
    n = samples.shape[0]
    mix = "mono" if channels == 1 else f"{channels} channels averaged to mono"
    description = f"{Path(path).name}: {mix}, {rate} Hz, {n / rate:.2f} s, {width * 8}-bit -> 1x{n}"
    return torch.from_numpy(samples.copy()).unsqueeze(0), description


plugin = Plugin(
    name="actviz-wav",
    version="0.1.0",
    api_version=API_VERSION,
    contributions=[InputOpener(name="wav", suffixes=(".wav",), open=read_wav)],
)
