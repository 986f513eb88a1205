"""The headless CLI, run as a user would: ``python -m actviz`` in a subprocess for a whole
export and its errors, ``main()`` in this process for the rest (a child imports torch again)."""

from __future__ import annotations

import json
import os
import pathlib
import subprocess
import sys

import numpy as np
import torch
from PIL import Image

from tests.core.seed_models import SeedMLP

# The checkout under test: the child imports this actviz (and tests/) from any working folder.
ROOT = pathlib.Path(__file__).resolve().parents[2]


def run(*args: str, cwd=None) -> subprocess.CompletedProcess:
    path = os.pathsep.join(p for p in (str(ROOT), os.environ.get("PYTHONPATH")) if p)
    env = dict(os.environ, ACTVIZ_OFFLINE="1", QT_QPA_PLATFORM="offscreen", PYTHONPATH=path)
    return subprocess.run(
        [sys.executable, "-m", "actviz", *args],
        capture_output=True,
        text=True,
        timeout=300,
        env=env,
        cwd=cwd,
    )


def test_export_resnet18_state_dict_with_image(tmp_path):
    torch.manual_seed(0)
    import torchvision

    model = torchvision.models.resnet18(weights=None)
    ckpt = tmp_path / "model.pt"
    torch.save({"state_dict": {f"module.{k}": v for k, v in model.state_dict().items()}}, ckpt)
    img = tmp_path / "photo.png"
    Image.new("RGB", (80, 60), (200, 30, 30)).save(img)
    out = tmp_path / "out"
    proc = run(
        "export",
        "--model",
        str(ckpt),
        "--arch",
        "resnet18",
        "--input",
        str(img),
        "--layers",
        "layer1,layer4",
        "--out",
        str(out),
        "--target",
        "tiger shark",
    )
    assert proc.returncode == 0, proc.stderr
    assert "wrote" in proc.stdout and "[1/3] writing layer1" in proc.stderr
    summary = json.loads((out / "summary.json").read_text())
    assert summary["target"]["index"] == 3 and summary["target"]["label"] == "tiger shark"
    assert summary["input_shapes"] == [1, 3, 224, 224]
    assert summary["layers"]["layer4"]["shape"] == [1, 512, 7, 7]
    # The files hold what the same model gives on the same input in this process.
    import actviz
    from actviz.display import attribution as views
    from actviz.io.input_files import open_input
    from actviz.io.models.loading import open_model

    loaded = open_model(str(ckpt), arch="resnet18")
    inp = open_input(str(img), loaded_model=loaded)
    cap = actviz.capture(loaded.model, inp.value, ["layer1", "layer4"], target=3)
    layer4 = np.load(out / "layer4.npz")
    close = {"rtol": 1e-4, "atol": 1e-6}
    np.testing.assert_allclose(layer4["output"], cap["layer4"].output.numpy(), **close)
    np.testing.assert_allclose(layer4["grad_output"], cap["layer4"].grad_output.numpy(), **close)
    np.testing.assert_allclose(
        np.load(out / "saliency.npy"), views.saliency(cap.input_grads), **close
    )
    cam = views.grad_cam(cap["layer4"].tensor, cap["layer4"].grad, size=inp.image.shape[:2])
    np.testing.assert_allclose(np.load(out / "gradcam.npy"), cam, **close)
    assert summary["attribution"]["gradcam_layer"] == "layer4"
    np.testing.assert_array_equal(np.asarray(Image.open(out / "input.png")), inp.image)
    for name in ("layer1_features.png", "layer4_grad.png", "saliency.png", "gradcam.png"):
        Image.open(out / name).verify()  # complete PNGs (their pixels: tests/io/test_export.py)


def test_info_prints_tree_with_shapes(cli):
    code, out, err = cli(
        "info", "--model", "resnet18", "--weights", "none", "--input", "random:1x3x64x64"
    )
    assert code == 0, err
    lines = out.splitlines()
    conv = next(line for line in lines if line.split()[:1] == ["conv1"])
    assert "Conv2d" in conv and "9408" in conv and "1x64x32x32" in conv
    assert any("layer1.0.relu" in line and "(2 calls)" in line for line in lines)
    assert lines[-1].startswith("68 modules, 52 leaves, 11,689,512 parameters")


def test_info_on_code_reference(tmp_path, cli, monkeypatch):
    src = tmp_path / "mlp.py"
    src.write_text("from tests.core.seed_models import SeedMLP as Net\n")
    monkeypatch.chdir(tmp_path)
    code, out, err = cli("info", "--model", f"{src}:Net")
    assert code == 0, err
    assert "fc1" in out and "Linear" in out


def test_errors_are_one_line_without_traceback(tmp_path, cli):
    proc = run("info", "--model", str(tmp_path / "missing.pt"))
    assert proc.returncode == 2
    assert proc.stderr.strip().splitlines()[-1].startswith("actviz: error:")
    assert "missing.pt" in proc.stderr and "Traceback" not in proc.stderr
    # The same main() in this process (a subprocess each: 5 s of imports).
    bad = tmp_path / "bad.pt"
    bad.write_bytes(b"\x00not a checkpoint" * 10)
    out = str(tmp_path / "o")
    code, _, err = cli("export", "--model", str(bad), "--input", "random:1x3", "--out", out)
    assert code == 2 and "bad.pt" in err and "Traceback" not in err
    code, _, err = cli("--debug", "info", "--model", str(tmp_path / "missing.pt"))
    assert code == 2 and "Traceback" in err
    args = ("--weights", "none", "--input", "random:1x3x32x32", "--layers", "layer9")
    code, _, err = cli("export", "--model", "resnet18", *args, "--out", out)
    assert code == 2 and "unknown layer 'layer9'" in err
    assert err.strip().splitlines()[-1].startswith("actviz: error:")


def test_seed_mlp_export_from_pickled_module_needs_trust(tmp_path, cli):
    path = tmp_path / "whole.pt"
    torch.save(SeedMLP(), path)
    tensor = tmp_path / "x.pt"
    torch.save(torch.tensor([0.05, 0.1]), tensor)
    out = tmp_path / "o"
    code, _, err = cli("export", "--model", str(path), "--input", str(tensor), "--out", str(out))
    assert code == 2 and "--trust" in err and not out.exists()
    args = ("--model", str(path), "--input", str(tensor), "--out", str(out), "--trust")
    code, _, err = cli("export", *args)
    assert code == 0, err
    summary = json.loads((out / "summary.json").read_text())
    assert summary["layers"]["s2"]["max"] == pytest_approx(0.7729)


def pytest_approx(v: float):
    import pytest

    return pytest.approx(v, abs=1e-4)


DETECTOR_SOURCE = """
import torch
from torchvision.models.detection import fasterrcnn_mobilenet_v3_large_320_fpn


def build():
    torch.manual_seed(0)
    # random init scores ~1/91 each: a zero threshold keeps 100 detections
    return fasterrcnn_mobilenet_v3_large_320_fpn(
        weights=None, weights_backbone=None, box_score_thresh=0.0, min_size=128, max_size=128
    )
"""


def test_export_detector_takes_the_image_as_a_list_and_a_detection_target(
    tmp_path, monkeypatch, capsys
):
    (tmp_path / "det.py").write_text(DETECTOR_SOURCE)
    Image.new("RGB", (120, 90), (200, 30, 30)).save(tmp_path / "photo.png")
    common = ("--model", "det.py:build", "--input", "photo.png", "--layers", "backbone.body.16")
    proc = run("export", *common, "--out", "out", "--target", "detection 1", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert "as a list of 1 image" in proc.stderr
    summary = json.loads((tmp_path / "out" / "summary.json").read_text())
    assert summary["input_shapes"] == [[3, 90, 120]]  # one (C, H, W) image in a list
    assert summary["output_shapes"][0]["boxes"] == [100, 4]
    assert summary["target"]["description"].startswith("score of detection 1: label ")
    assert summary["target"]["index"] == int(summary["target"]["description"].split()[-1])
    assert summary["attribution"]["saliency"] == "saliency.png"
    # The mistake in this process (a second child would import torch again for one line).
    from actviz.cli import main

    monkeypatch.chdir(tmp_path)
    assert main(["export", *common, "--out", "o2", "--target", "cat"]) == 2
    err = capsys.readouterr().err
    assert "Traceback" not in err and not (tmp_path / "o2").exists()
    assert "--target: 'cat' is not a class index, and this model has no class names" in err


def test_bench_takes_its_own_options_first(monkeypatch):
    import actviz.bench.cli as bench_cli
    from actviz.cli import main

    seen = []
    monkeypatch.setattr(bench_cli, "main", lambda argv: seen.append(list(argv)) or 0)
    assert main(["bench", "--quick"]) == 0
    assert main(["bench", "ui", "--quick"]) == 0
    assert seen == [["--quick"], ["ui", "--quick"]]
