"""``actviz effects`` (effects.json, a chart per layer) and the effects bench at tiny sizes."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest
import torch
from PIL import Image

import actviz
from actviz.analysis.effects.channel_effects import effects
from actviz.analysis.effects.effect_results import OPPOSES_RGB, SUPPORTS_RGB, effects_chart
from actviz.bench import effects_bench
from actviz.cli import main
from actviz.io.models.demo_model import demo_sample_tensor, demo_samples, load_demo_model

LAYERS = "features.block3,features.block4.relu"


def test_cli_writes_json_and_one_chart_per_layer(tmp_path, capsys):
    sample = demo_samples()[0]
    out = tmp_path / "out"
    code = main(
        ["effects", "--model", "demo", "--input", str(sample), "--layers", LAYERS,
         "--verify", "4", "--top", "12", "--out", str(out)]
    )  # fmt: skip
    assert code == 0
    data = json.loads((out / "effects.json").read_text())
    assert data["method"] == "exact" and data["model"] == "demo"
    assert data["target"]["name"] == sample.stem  # the demo's samples are named by class
    # The same figures as the API on the same model and input.
    x, _ = demo_sample_tensor(sample.name)
    api = effects(load_demo_model(), x, LAYERS.split(","), method="exact", channels=4)
    for layer in LAYERS.split(","):
        entry = data["layers"][layer]
        np.testing.assert_allclose(entry["estimate"], api.estimate(layer), atol=1e-6)
        assert len(entry["exact"]) == 4 and len(entry["top"]) == 12
        for c, v in entry["exact"].items():
            assert v == pytest.approx(api.exact(layer)[int(c)], abs=1e-5)
        png = out / f"effects_{layer}.png"
        with Image.open(png) as img:
            assert img.width >= 420 and img.height > 300
    printed = capsys.readouterr().out
    assert "features.block4.relu: top channels" in printed and "rank correlation" in printed


def test_cli_patch_baseline_and_errors(tmp_path, capsys):
    a, b = demo_samples()[:2]
    out = tmp_path / "patch"
    code = main(
        ["effects", "-m", "demo", "-i", str(a), "-l", "features.block4", "--baseline",
         f"input:{b}", "-o", str(out)]
    )  # fmt: skip
    assert code == 0
    data = json.loads((out / "effects.json").read_text())
    assert data["baseline"] == "patched from another run" and data["method"] == "estimate"
    assert data["layers"]["features.block4"]["exact"] == {}
    capsys.readouterr()
    assert main(["effects", "-m", "demo", "-i", str(a), "-l", "features.block4",
                 "--baseline", "mean", "-o", str(out)]) == 2  # fmt: skip
    assert "--baseline" in capsys.readouterr().err


def test_chart_colours_bars_by_sign():
    model = load_demo_model()
    x, _ = demo_sample_tensor()
    eff = effects(model, x, ["features.block3"], method="exact", channels=3)
    img = np.asarray(effects_chart(eff, "features.block3", k=10))
    signs = {r.estimate < 0 for r in eff.top("features.block3", 10)}
    for negative in (True, False):
        rgb = np.array(SUPPORTS_RGB if negative else OPPOSES_RGB)
        pixels = int((np.abs(img.astype(int) - rgb).sum(axis=2) == 0).sum())
        # The legend's square holds 100 pixels of each colour; bars add more for their sign.
        assert (pixels > 300) == (negative in signs), (negative, pixels)


def test_bench_runs_at_tiny_sizes():
    torch.manual_seed(0)
    r = effects_bench.measure(size=32, pairs=1, verified=2, batch=2)
    assert len(r["rows"]) == 3
    for key in ("effects_estimate_ratio", "effects_exact_per_channel"):
        assert math.isfinite(r[key]) and r[key] > 0
    effects_bench.print_table(r)


def test_public_name():
    assert actviz.effects is effects


def test_chart_leaves_out_channels_without_effect():
    model = load_demo_model()
    x, _ = demo_sample_tensor()
    eff = effects(model, x, ["fc"], method="estimate")
    rows = eff.top("fc", 8)
    assert sum(r.has_effect for r in rows) == 1  # the target's own score only
    img = np.asarray(effects_chart(eff, "fc", k=8)).astype(int)
    background = img[2, -2]
    # Below the plot, right of the one bar's slot: no labels of empty slots (36 px each).
    labels = img[58 + 240 + 4 : 58 + 240 + 22, 64 + 36 : 64 + 8 * 36]
    assert (np.abs(labels - background).sum(axis=2) == 0).all()
