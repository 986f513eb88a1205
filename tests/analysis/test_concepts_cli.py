"""``actviz concepts train|show`` on a tiny folder of generated images with the demo model."""

from __future__ import annotations

import json

import numpy as np
import pytest
from PIL import Image

import actviz
from actviz.cli import main
from actviz.io.models.demo_model import generate_image

LAYER = "features.block3"


@pytest.fixture
def folder(tmp_path):
    root = tmp_path / "images"
    root.mkdir()
    rng = np.random.default_rng(0)
    for i in range(24):
        generate_image(i % 4, rng).save(root / f"im{i:02d}.png")
    return root


def test_train_then_show(folder, tmp_path, capsys):
    out = tmp_path / "dict"
    code = main(
        ["concepts", "train", "--model", "demo", "--data", str(folder), "--layer", LAYER,
         "--n", "48", "--k", "4", "--epochs", "2", "--batch-size", "256", "--out", str(out)]
    )  # fmt: skip
    assert code == 0
    captured = capsys.readouterr()
    assert "collecting: 24/24 images" in captured.err
    assert "training: epoch 2" in captured.err and "FVU" in captured.err
    assert "trained 48 concepts" in captured.out and "FVU" in captured.out
    cfg = json.loads((out / "cfg.json").read_text())
    assert (cfg["d_sae"], cfg["k"], cfg["hook_name"]) == (48, 4, LAYER)
    c = actviz.concepts.load(out)
    assert c.d_in == 64 and c.info["images"] == 24 and c.heldout_fvu < 1.0

    sheet = tmp_path / "sheet.png"
    code = main(
        ["concepts", "show", "--concepts", str(out), "--model", "demo", "--data", str(folder),
         "--top", "5", "--k", "3", "--tile", "32", "--out", str(sheet)]
    )  # fmt: skip
    assert code == 0
    captured = capsys.readouterr()
    assert "scanned 24/24 images" in captured.err
    assert "5 of 48 concepts over 24 images" in captured.out
    img = np.asarray(Image.open(sheet).convert("RGB"))
    assert img.shape[0] > 5 * 32 and img.shape[1] > 3 * 32
    # The heatmaps tint the top images red where the concepts fire.
    red = (img[..., 0].astype(int) - img[..., 1].astype(int)) > 80
    assert red.sum() > 50
    # A second show reads the concept scan from the cache.
    assert main(["concepts", "show", "--concepts", str(out), "--model", "demo", "--data",
                 str(folder), "--top", "2", "--k", "3", "--out", str(sheet)]) == 0  # fmt: skip
    assert "from the cache" in capsys.readouterr().err


def test_errors_are_one_line_and_exit_2(folder, tmp_path, capsys):
    code = main(["concepts", "train", "--model", "demo", "--data", str(folder), "--layer",
                 "features.nope", "--out", str(tmp_path / "d")])  # fmt: skip
    assert code == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err[-1].startswith("actviz: error: ") and "features.nope" in err[-1]
    code = main(["concepts", "show", "--concepts", str(tmp_path / "none"), "--model", "demo",
                 "--data", str(folder), "--out", str(tmp_path / "s.png")])  # fmt: skip
    assert code == 2
    assert "no such folder" in capsys.readouterr().err
    code = main(["concepts", "train", "--model", "demo", "--data", str(folder), "--layer",
                 LAYER, "--memory-budget", "lots", "--out", str(tmp_path / "d")])  # fmt: skip
    assert code == 2
    assert "--memory-budget" in capsys.readouterr().err
