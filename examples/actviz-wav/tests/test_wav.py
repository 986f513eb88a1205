"""The .wav opener: exact samples, the description, and a tiny audio model run on it."""

from __future__ import annotations

import wave

import numpy as np
import pytest
import torch
from actviz_wav import plugin, read_wav
from torch import nn

import actviz

RATE = 8000


def write_wav(path, samples: np.ndarray, channels: int = 1, width: int = 2) -> None:
    """``samples`` (frames, channels) in [-1, 1] as a PCM .wav of ``width`` bytes."""
    if width == 2:
        ints = np.round(samples * 32767).astype("<i2")
    else:
        ints = np.round(samples * 127 + 128).astype("u1")
    with wave.open(str(path), "wb") as f:
        f.setnchannels(channels)
        f.setsampwidth(width)
        f.setframerate(RATE)
        f.writeframes(ints.tobytes())


class TinyAudioNet(nn.Module):
    """A waveform ``(batch, N)`` -> 3 class logits, through two strided Conv1d layers."""

    def __init__(self) -> None:
        super().__init__()
        self.conv1 = nn.Conv1d(1, 4, 9, stride=4)
        self.conv2 = nn.Conv1d(4, 8, 9, stride=4)
        self.pool = nn.AdaptiveAvgPool1d(1)
        self.fc = nn.Linear(8, 3)

    def forward(self, wave_: torch.Tensor) -> torch.Tensor:
        x = torch.relu(self.conv1(wave_.unsqueeze(1)))
        x = torch.relu(self.conv2(x))
        return self.fc(self.pool(x).flatten(1))


def test_a_stereo_16_bit_file_reads_as_its_mono_mean(tmp_path):
    t = np.arange(RATE // 2) / RATE
    left, right = 0.5 * np.sin(2 * np.pi * 440 * t), 0.25 * np.cos(2 * np.pi * 220 * t)
    path = tmp_path / "tone.wav"
    write_wav(path, np.stack([left, right], axis=1), channels=2)
    value, description = read_wav(str(path))
    assert value.shape == (1, RATE // 2) and value.dtype == torch.float32
    expected = (np.round(left * 32767) + np.round(right * 32767)) / 2 / 32768
    np.testing.assert_allclose(value[0].numpy(), expected, atol=1e-6)
    assert description == (
        "tone.wav: 2 channels averaged to mono, 8000 Hz, 0.50 s, 16-bit -> 1x4000"
    )


def test_an_8_bit_file_is_centred(tmp_path):
    path = tmp_path / "ramp.wav"
    write_wav(path, np.linspace(-1, 1, 255)[:, None], width=1)
    value, _ = read_wav(str(path))
    # Unsigned 8-bit: 128 is silence; 1 and 255 are -127/128 and 127/128.
    assert value.min() == pytest.approx(-127 / 128) and value.max() == pytest.approx(127 / 128)
    assert value[0, 127] == 0.0


def test_the_plugin_declares_one_input_opener_for_wav():
    (opener,) = plugin.contributions
    assert opener.suffixes == (".wav",) and opener.matches("/a/B.WAV")
    assert not opener.matches("b.png")


def test_a_tiny_audio_model_runs_on_the_opened_file(tmp_path):
    torch.manual_seed(0)
    path = tmp_path / "chirp.wav"
    t = np.arange(RATE) / RATE
    write_wav(path, (0.8 * np.sin(2 * np.pi * (200 + 400 * t) * t))[:, None])
    value, _ = read_wav(str(path))
    model = TinyAudioNet().eval()
    cap = actviz.capture(model, value, ["conv1", "conv2"])
    assert cap["conv1"].output.shape == (1, 4, (RATE - 9) // 4 + 1)
    assert cap["conv2"].output.shape == (1, 8, ((RATE - 9) // 4 + 1 - 9) // 4 + 1)
    with torch.no_grad():
        direct = model.conv1(value.unsqueeze(1))
    torch.testing.assert_close(cap["conv1"].output, direct)
    assert cap["conv2"].grad is not None and cap["conv2"].grad.abs().sum() > 0
