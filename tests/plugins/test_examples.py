"""Both example plugins installed as a user installs them, driven in the window and by
``actviz export``: the correlation view painted for a ticked layer and exported, a .wav opened
and run through a tiny audio model."""

from __future__ import annotations

import json
import wave
from pathlib import Path

import numpy as np
import pytest
import torch
from PIL import Image

from actviz.plugins import ViewSettings, paint
from tests.plugins.nets import TinyAudioNet, TinyConvNet

RATE = 8000


def expected_pixels(maps: np.ndarray, colormap: str) -> np.ndarray:
    """The C x C correlation of ``maps`` painted as the view paints it."""
    return paint(np.corrcoef(maps.reshape(maps.shape[0], -1)), -1, 1, colormap)


def write_tone(path: Path, seconds: float = 0.5) -> np.ndarray:
    t = np.arange(int(RATE * seconds)) / RATE
    ints = np.round(0.6 * np.sin(2 * np.pi * 330 * t) * 32767).astype("<i2")
    with wave.open(str(path), "wb") as f:
        f.setnchannels(1)
        f.setsampwidth(2)
        f.setframerate(RATE)
        f.writeframes(ints.tobytes())
    return ints.astype(np.float32) / 32768


def test_the_correlation_view_is_painted_for_a_ticked_layer_and_exported(
    actviz_window, installed_examples, tmp_path
):
    torch.manual_seed(0)
    model, x = TinyConvNet().eval(), torch.randn(1, 3, 16, 16)
    win = actviz_window(model, x, ["conv1", "conv2"], plugins="installed")
    plugins = win.window.plugins
    assert {(r.name, r.status) for r in plugins.registry.records} == {
        ("correlation", "active"),
        ("wav", "active"),
    }
    win.run_and_wait()
    # The layer panel's tile menu offers the view; a real right click and click open it.
    win.context_action("conv1", 2, "Show Channel correlation")
    dock = plugins.docks[("conv1", "correlation/correlation")]
    widget = dock.widget_of_view
    win.qtbot.waitUntil(lambda: widget.isVisible() and widget.width() > 60)
    with torch.no_grad():
        maps = model.conv1(x)[0].numpy()
    colormap = ViewSettings().resolved(signed=True)  # "auto": conv outputs are signed
    expected = expected_pixels(maps, colormap)
    image = widget.grab().toImage()
    for i in range(6):
        for j in range(6):
            c = image.pixelColor(widget.cell_center(i, j))
            assert (c.red(), c.green(), c.blue()) == tuple(expected[i, j]), (i, j)
    # The view follows the session's colour map.
    win.window.host.set_view_settings(colormap="viridis")
    win.wait_idle()
    assert dock.last_data.colormap == "viridis"
    np.testing.assert_array_equal(np.asarray(widget._pixels), expected_pixels(maps, "viridis"))
    # File > Export writes it beside the panels' pictures.
    out = tmp_path / "export"
    assert win.window.exports.export_all(out, wait=True)
    png = out / "conv1_correlation.png"
    assert png in win.window.exports.last_export
    written = np.asarray(Image.open(png).convert("RGB"))
    scale = written.shape[0] // 6
    np.testing.assert_array_equal(
        written[scale // 2 :: scale, scale // 2 :: scale], expected_pixels(maps, "viridis")
    )
    summary = json.loads((out / "summary.json").read_text())
    assert "conv1_correlation.png" in summary["layers"]["conv1"]["files"]
    assert not (out / "conv2_correlation.png").exists()  # only the views open are written


def test_actviz_export_writes_the_view_and_opens_a_wav(installed_examples, tmp_path, capsys):
    from actviz.cli import main

    code = tmp_path / "nets.py"
    code.write_text(Path(__file__).with_name("nets.py").read_text())
    # Images: the correlation view of every conv layer it accepts.
    out = tmp_path / "image"
    args = ["export", "-m", f"{code}:TinyConvNet", "-i", "random:1x3x16x16", "-o", str(out)]
    assert main([*args, "-l", "conv1,conv2,fc"]) == 0
    arrays = np.load(out / "conv2.npz")
    maps = arrays["output"][0]
    written = np.asarray(Image.open(out / "conv2_correlation.png").convert("RGB"))
    scale = written.shape[0] // 8
    # The CLI's --cmap default is viridis.
    np.testing.assert_array_equal(
        written[scale // 2 :: scale, scale // 2 :: scale], expected_pixels(maps, "viridis")
    )
    assert (out / "conv1_correlation.png").is_file()
    assert not (out / "fc_correlation.png").exists()  # a Linear layer's bars: not offered
    # Audio: the .wav opener reads the input.
    wav = tmp_path / "tone.wav"
    samples = write_tone(wav)
    out = tmp_path / "audio"
    args = ["export", "-m", f"{code}:TinyAudioNet", "-i", str(wav), "-l", "conv1", "-o", str(out)]
    assert main(args) == 0
    summary = json.loads((out / "summary.json").read_text())
    assert summary["input_shapes"] == [1, samples.size]  # one waveform of N samples
    assert np.load(out / "conv1.npz")["output"].shape == (1, 4, (samples.size - 9) // 4 + 1)
    # --no-plugins: no opener reads .wav, so the built-in reader refuses it.
    assert main([*args[:-2], "-o", str(tmp_path / "none"), "--no-plugins"]) != 0
    assert "tone.wav" in capsys.readouterr().err


def test_a_wav_opens_in_the_window_and_runs_through_an_audio_model(
    actviz_window, installed_examples, tmp_path
):
    torch.manual_seed(0)
    wav = tmp_path / "tone.wav"
    samples = write_tone(wav)
    model = TinyAudioNet().eval()
    win = actviz_window(model, None, ["conv1", "conv2"], plugins="installed")
    assert win.window.files.open_input_source(str(wav), wait=True)
    inp = win.window.session.input
    assert inp.source == str(wav)  # a session keeps the file's path
    np.testing.assert_allclose(inp.value.numpy(), samples[None], atol=1e-6)
    caption = win.window.model_dock.input_preview.caption_label.text()
    assert "tone.wav: mono, 8000 Hz, 0.50 s, 16-bit -> 1x4000" in caption
    win.run_and_wait()
    layer = win.window.session.result.layers["conv1"]
    assert layer.shape == (1, 4, (samples.size - 9) // 4 + 1)
    with torch.no_grad():
        direct = model.conv1(torch.from_numpy(samples)[None, None])[0].numpy()
    np.testing.assert_allclose(layer.view.data, direct, rtol=1e-5, atol=1e-6)
    # The open-input dialog offers the plugin's suffix.
    assert win.window.files.menus.extra_input_filters == ["Plugin inputs (*.wav)"]


@pytest.mark.parametrize("suffix", [".wav"])
def test_the_examples_own_tests_pass(suffix):
    import subprocess
    import sys

    from tests.plugins.conftest import EXAMPLES

    proc = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-n", "0", "-p", "no:cacheprovider",
         "-p", "no:randomly", str(EXAMPLES / "actviz-correlation" / "tests"),
         str(EXAMPLES / "actviz-wav" / "tests")],
        capture_output=True, text=True, timeout=300, cwd=EXAMPLES.parent,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-2000:]
    assert " passed" in proc.stdout


def test_both_examples_are_installed_with_pip(installed_examples, examples_site):
    from importlib import import_module
    from importlib.metadata import distribution

    from tests.plugins.conftest import EXAMPLES

    for dist, entry in installed_examples.items():
        found = distribution(dist)
        assert found.read_text("INSTALLER").strip() == "pip"
        (point,) = [ep for ep in found.entry_points if ep.group == "actviz.plugins"]
        assert point.name == entry
        module = Path(import_module(point.module).__file__).resolve()
        # Installed into the environment (editable: the repo's sources) or into the folder.
        home = EXAMPLES / dist / "src" if examples_site is None else examples_site
        assert module.is_relative_to(home.resolve()), module


def test_a_session_keeps_the_wav_by_its_path_and_reopens_the_same_run(
    actviz_window, installed_examples, tmp_path
):
    torch.manual_seed(0)
    wav = tmp_path / "tone.wav"
    samples = write_tone(wav, seconds=0.25)
    model = TinyAudioNet().eval()
    win = actviz_window(model, None, ["conv1"], plugins="installed")
    assert win.window.files.open_input_source(str(wav), wait=True)
    win.run_and_wait()
    first = win.window.session.result.layers["conv1"].view.data.copy()
    path = tmp_path / "audio.actviz"
    win.sessions.save(path)
    win.close()
    # Sessions embed what the model was given (they open without the file, as for images)
    # and show where it came from: the .wav's path and the plugin's description.
    wav.unlink()
    other = actviz_window(model, None, ["conv1"], plugins="installed")
    other.sessions.open(path)
    other.wait_idle()
    inp = other.window.session.input
    assert inp.source == str(wav) and "tone.wav: mono, 8000 Hz, 0.25 s" in inp.description
    np.testing.assert_array_equal(inp.value.numpy(), samples[None])
    other.run_and_wait()
    np.testing.assert_array_equal(other.window.session.result.layers["conv1"].view.data, first)


def test_a_session_opens_the_plugin_views_again(actviz_window, installed_examples, tmp_path):
    torch.manual_seed(0)
    model, x = TinyConvNet().eval(), torch.randn(1, 3, 16, 16)
    win = actviz_window(model, x, ["conv1", "conv2"], plugins="installed")
    win.run_and_wait()
    win.context_action("conv2", 0, "Show Channel correlation")
    matrix = win.window.plugins.docks[("conv2", "correlation/correlation")].last_data.matrix
    path = tmp_path / "views.actviz"
    win.sessions.save(path)
    win.close()

    other = actviz_window(model, x, ["conv1", "conv2"], plugins="installed")
    other.run_and_wait()
    other.window.plugins.open_view("conv1", "correlation")  # not in the session: closed
    other.sessions.open(path)
    other.wait_idle()
    docks = other.window.plugins.docks
    assert list(docks) == [("conv2", "correlation/correlation")]
    np.testing.assert_array_equal(
        docks[("conv2", "correlation/correlation")].last_data.matrix, matrix
    )
    other.close()

    # Without the plugin the session still opens, and says which view it could not show.
    bare = actviz_window(model, x, ["conv1", "conv2"])
    bare.sessions.open(path)
    bare.wait_idle()
    (note,) = [m for m in bare.banner_messages() if "Plugin views not restored" in m]
    assert "correlation/correlation of conv2" in note
