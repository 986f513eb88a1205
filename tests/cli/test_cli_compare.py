"""``actviz compare``: compare.json and difference PNGs, one-line errors (in process: cheap)."""

from __future__ import annotations

import json
import runpy
import sys

import numpy as np
import pytest
import torch
from PIL import Image

import actviz
from actviz.cli import main
from actviz.display.difference import DIFFERENCE_CMAP, prepare_difference
from actviz.display.prepared import DisplaySpec
from actviz.io.export.typeset import EXPORT_PAGE_CHANNELS, mosaic_rgb

TINY = """
from torch import nn


class Tiny(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(3, 4, 3)
        self.act = nn.ReLU()
        self.pool = nn.AdaptiveAvgPool2d(1)
        self.fc = nn.Linear(4, 3)

    def forward(self, x):
        return self.fc(self.pool(self.act(self.conv(x))).flatten(1))
"""


@pytest.fixture
def checkpoints(tmp_path):
    code = tmp_path / "tiny.py"
    code.write_text(TINY)
    paths = []
    for seed in (0, 1):
        model = actviz.load_model(f"{code}:Tiny")
        torch.manual_seed(seed)
        for p in model.parameters():
            p.data.normal_()
        paths.append(tmp_path / f"ckpt{seed}.pt")
        torch.save(model.state_dict(), paths[-1])
    return code, paths


def test_two_checkpoints(checkpoints, tmp_path, capsys):
    code, (a, b) = checkpoints
    out = tmp_path / "out"
    arch = f"{code}:Tiny"
    rc = main(
        ["compare", "-m", str(a), "--arch", arch, "--model-b", str(b), "-i", "random:3x3x8x8"]
        + ["-o", str(out), "--target", "2"]
    )
    printed = capsys.readouterr()
    assert rc == 0, printed.err
    assert "first divergence > 0.0001: conv" in printed.out
    data = json.loads((out / "compare.json").read_text())
    # the same figures as actviz.compare on the same runs
    x = actviz.load_input("random:3x3x8x8")
    caps = [
        actviz.capture(actviz.load_model(str(p), arch=arch), x, gradients=False) for p in (a, b)
    ]
    want = actviz.compare(*caps)
    assert [(r["name"], r["call_index"]) for r in data["layers"]] == [
        ("conv", 0),
        ("act", 0),
        ("pool", 0),
        ("fc", 0),
    ]
    for row, diff in zip(data["layers"], want.layers, strict=True):
        assert row["rel_l2"] == pytest.approx(diff.rel_l2, rel=1e-12)
        assert row["cosine"] == pytest.approx(diff.cosine, rel=1e-12)
        assert row["cka"] == pytest.approx(diff.cka, rel=1e-12)
    assert data["first_divergence"]["name"] == "conv"
    assert data["runs"]["b"] == {"model": str(b), "input": "random:3x3x8x8"}
    assert data["predictions"]["target"]["index"] == 2
    assert len(data["predictions"]["rows"]) == 3  # every class of three is in a top 5
    # the one-pixel PNG is the window's difference mosaic, painted
    spec = DisplaySpec(layers=("conv",), page_channels={"conv": EXPORT_PAGE_CHANNELS})
    mosaic = prepare_difference(caps[0], caps[1], spec)["conv"].mosaic
    raw = np.asarray(Image.open(out / "diff_conv_1x.png").convert("RGB"))
    np.testing.assert_array_equal(raw, mosaic_rgb(mosaic, DIFFERENCE_CMAP))
    assert data["files"]["conv"] == ["diff_conv.png", "diff_conv_1x.png"]
    assert data["files"]["fc"] == ["diff_fc.png"]  # bars: no mosaic
    assert {p.name for p in out.iterdir()} == {
        "compare.json",
        "reproduce.py",
        *(f for files in data["files"].values() for f in files),
    }
    # reproduce.py rebuilds both runs and their comparison (run here, in this process)
    again = tmp_path / "again"
    argv = sys.argv
    try:
        sys.argv = [str(out / "reproduce.py"), str(again)]
        runpy.run_path(str(out / "reproduce.py"), run_name="__main__")
    finally:
        sys.argv = argv
    rebuilt = json.loads((again / "compare.json").read_text())
    assert rebuilt["layers"] == data["layers"] and rebuilt["output"] == data["output"]


def test_two_inputs_of_other_sizes_skip_the_mismatched_layers(checkpoints, tmp_path, capsys):
    code, _ = checkpoints
    out = tmp_path / "out"
    rc = main(
        ["compare", "-m", f"{code}:Tiny", "-i", "random:1x3x8x8", "--input-b", "random:1x3x9x9"]
        + ["-o", str(out), "--layers", "conv,pool"]
    )
    assert rc == 0, capsys.readouterr().err
    data = json.loads((out / "compare.json").read_text())
    assert [r["name"] for r in data["layers"]] == ["pool"]
    assert data["skipped"] == [
        {"name": "conv", "call_index": 0, "reason": "shapes differ: (1, 4, 6, 6) vs (1, 4, 7, 7)"}
    ]
    assert data["layers"][0]["cka"] is None  # a batch of one
    # one model, opened once by reproduce.py, its random weights saved beside it
    script = (out / "reproduce.py").read_text()
    assert "loaded_b, model_b = loaded_a, model_a" in script
    assert (out / "reproduce_weights_a.pt").exists()
    assert not (out / "reproduce_weights_b.pt").exists()


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        ([], "nothing to compare: give --model-b"),
        (["--input-b", "random:1x3x8x8", "--layers", "cnv"], "unknown layer 'cnv'"),
        (["--input-b", "random:1x3x8x8", "--tol", "-1"], "--tol must be >= 0"),
        (["--input-b", "nope.png"], "nope.png"),
    ],
)
def test_bad_input_is_one_line_and_exit_2(checkpoints, tmp_path, capsys, extra, message):
    code, _ = checkpoints
    out = tmp_path / "out"
    rc = main(["compare", "-m", f"{code}:Tiny", "-i", "random:1x3x8x8", "-o", str(out), *extra])
    err = capsys.readouterr().err.strip().splitlines()
    assert rc == 2
    assert err[-1].startswith("actviz: error: ") and message in err[-1]
    assert not (out / "compare.json").exists()
