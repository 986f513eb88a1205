"""``actviz scan``: contact sheets, scan.json, the cache, one-line errors."""

from __future__ import annotations

import json

import numpy as np
import pytest
from PIL import Image

from actviz.cli import main
from actviz.data import scan, top_views
from actviz.io.models import demo_model as demo
from actviz.io.models.loading import open_model


@pytest.fixture
def demo_folder(tmp_path):
    rng = np.random.default_rng(3)
    folder = tmp_path / "shapes"
    for i in range(16):
        cls = demo.DEMO_CLASSES[i % 8]
        (folder / cls).mkdir(parents=True, exist_ok=True)
        demo.generate_image(cls, rng).save(folder / cls / f"{i:02d}.png")
    (folder / "star" / "broken.png").write_bytes(b"\x89PNG broken")
    return folder


def test_scan_command_writes_sheets_json_and_cache(demo_folder, tmp_path, capsys):
    out = tmp_path / "out"
    args = [
        "scan",
        "--model",
        "demo",
        "--data",
        str(demo_folder),
        "--layers",
        "features.block3,fc",
        "--k",
        "4",
        "--out",
        str(out),
        "--tile",
        "32",
        "--workers",
        "0",
    ]
    assert main(args) == 0
    captured = capsys.readouterr()
    assert "scanned 16 images, 1 skipped; wrote 3 files" in captured.out
    assert "skipped" in captured.err and "broken.png" in captured.err
    assert sorted(p.name for p in out.iterdir()) == ["fc.png", "features.block3.png", "scan.json"]
    summary = json.loads((out / "scan.json").read_text())
    assert summary["count"] == 16 and summary["k"] == 4 and summary["model"] == "demo"
    assert summary["class_names"] == sorted(demo.DEMO_CLASSES)
    assert [s["source"].endswith("broken.png") for s in summary["skipped"]] == [True]
    assert summary["layers"]["fc"]["channels"] == 8
    assert len(summary["layers"]["features.block3"]["top"]) == 64
    # The sheet's first tile of channel 5 is the crop top_views gives (one crop path).
    loaded = open_model("demo")
    result = scan(loaded, demo_folder, ["features.block3", "fc"], k=4, num_workers=0)
    assert result.from_cache  # the command saved the cache
    sheet = np.asarray(Image.open(out / "fc.png").convert("RGB"))
    view = top_views(loaded, result, "fc", 0, size=32)[0]
    y, x = 30 + 6 + 14, 8 + 6
    np.testing.assert_array_equal(sheet[y : y + 32, x : x + 32], view.image)


def test_scan_command_errors_are_one_line_exit_2(tmp_path, demo_folder, capsys):
    missing = [
        "scan",
        "--model",
        "demo",
        "--data",
        str(tmp_path / "nope"),
        "--layers",
        "fc",
        "--out",
        str(tmp_path / "o"),
    ]
    assert main(missing) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err == [f"actviz: error: {tmp_path / 'nope'}: no such folder or file"]
    bad_layer = [
        "scan",
        "--model",
        "demo",
        "--data",
        str(demo_folder),
        "--layers",
        "fcc",
        "--out",
        str(tmp_path / "o"),
    ]
    assert main(bad_layer) == 2
    last = capsys.readouterr().err.strip().splitlines()[-1]
    assert last.startswith("actviz: error: unknown layer 'fcc'; did you mean 'fc'")


def test_scan_without_layers_scans_every_leaf_like_export(demo_folder, tmp_path, capsys):
    from actviz.core.capture import leaf_names

    out = tmp_path / "out"
    args = ["scan", "--model", "demo", "--data", str(demo_folder), "--k", "2"]
    args += ["--out", str(out), "--tile", "16", "--workers", "0", "--no-cache"]
    assert main(args) == 0
    leaves = leaf_names(open_model("demo").model)
    assert "every leaf module: 18 layers" in capsys.readouterr().err and len(leaves) == 18
    summary = json.loads((out / "scan.json").read_text())
    assert list(summary["layers"]) == leaves
    assert sorted(p.name for p in out.iterdir()) == sorted(
        [f"{n}.png" for n in leaves] + ["scan.json"]
    )
