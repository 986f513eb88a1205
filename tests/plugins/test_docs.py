"""docs/plugins.md's walkthrough runs: its three files written out, installed as pip would,
the view opened in the window for a ticked layer, exported, and its own test passing."""

from __future__ import annotations

import importlib
import re

import numpy as np
import tomllib
import torch

from tests.plugins.conftest import ROOT

FILE_BLOCK = re.compile(r"<!-- file: (?P<path>[^ ]+) -->\n```\w+\n(?P<body>.*?)```", re.S)


def doc_files() -> dict[str, str]:
    return {
        m["path"]: m["body"] for m in FILE_BLOCK.finditer((ROOT / "docs/plugins.md").read_text())
    }


def test_the_walkthrough_is_short():
    files = doc_files()
    assert set(files) == {
        "actviz-energy/pyproject.toml",
        "actviz-energy/actviz_energy.py",
        "actviz-energy/test_energy.py",
    }
    assert sum(body.count("\n") for body in files.values()) <= 75


def test_the_walkthrough_gives_a_working_view(actviz_window, install_plugin, tmp_path):
    for path, body in doc_files().items():
        (tmp_path / path).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / path).write_text(body)
    project = tomllib.loads((tmp_path / "actviz-energy/pyproject.toml").read_text())["project"]
    install_plugin(
        project["name"],
        project["entry-points"]["actviz.plugins"],
        tmp_path / "actviz-energy",
        project["version"],
    )
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Conv2d(3, 5, 3), torch.nn.ReLU(), torch.nn.Flatten())
    x = torch.randn(1, 3, 10, 10)
    win = actviz_window(model, x, ["0", "2"], plugins="installed")
    win.run_and_wait()
    win.context_action("0", 1, "Show Channel energy")
    dock = win.window.plugins.docks[("0", "energy/energy")]
    energy, colormap = dock.last_data
    with torch.no_grad():
        out = model[0](x)[0].abs().flatten(1).mean(1).numpy()
    np.testing.assert_allclose(energy, out / out.max(), rtol=1e-5)
    assert colormap == "viridis"  # "auto" on non-negative values: the sequential map
    assert "energy" not in [v for _, v in win.window.plugins.views_for("2")]  # Flatten: bars
    pixmap = dock.widget_of_view.pixmap()
    assert (pixmap.width(), pixmap.height()) == (24 * 5, 24)
    assert win.window.exports.export_all(tmp_path / "out", wait=True)
    assert (tmp_path / "out" / "0_energy.png").is_file()
    # The doc's own test, with this fixture.
    importlib.import_module("test_energy").test_energy_view(actviz_window)
