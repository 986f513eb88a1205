"""reproduce.py: written by every export, rebuilds the run and saves the same arrays."""

from __future__ import annotations

import os
import pathlib
import subprocess
import sys

import numpy as np
import torch
import torch.nn.functional as F

import actviz
from actviz.edits import ablate, clamp, custom, patch, scale
from actviz.io.export.capture_export import export_capture
from actviz.io.export.reproduce import RunSource, reproduce_script, run_source
from actviz.io.models.loading import open_model

ROOT = pathlib.Path(__file__).resolve().parents[2]

CODE = """
from torch import nn


class Twice(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(3, 4, 3, padding=1)
        self.act = nn.ReLU()
        self.mix = nn.Conv2d(4, 4, 1)
        self.fc = nn.Linear(4, 5)

    def forward(self, x):
        h = self.act(self.conv(x))
        h = self.act(self.mix(h))  # act runs twice
        return self.fc(h.mean((2, 3)))
"""


def test_export_round_trip_with_edits_random_weights_and_saved_inputs(tmp_path):
    code = tmp_path / "twice.py"
    code.write_text(CODE)
    torch.manual_seed(0)
    loaded = open_model(f"{code}:Twice")  # random init: its weights go beside the script
    x = torch.randn(2, 3, 6, 6)
    source_run = actviz.capture(loaded.model, torch.randn(2, 3, 6, 6), ["mix"])
    edits = {
        "conv": [ablate([1]), clamp(-0.5, 0.5, channels=[0, 2])],
        "act": scale([3], 2.5, call=1),
        "mix": patch(source_run, [2]),
        "fc": custom(F.relu),
    }
    cap = actviz.capture(loaded.model, x, ["conv", "act", "mix", "fc"], target=4, edits=edits)
    src = run_source(loaded, None, target=4)  # an input made in Python: its tensors are saved
    assert src.state is not None and src.model == f"{code}:Twice"
    out = tmp_path / "export"
    files = {p.name for p in export_capture(cap, out, source=src)}
    assert {"reproduce.py", "reproduce_weights.pt", "reproduce_inputs.pt"} <= files
    assert "reproduce_patch0.pt" in files
    script = (out / "reproduce.py").read_text()
    assert "from torch.nn.functional import relu as custom_fn0" in script
    assert "'act': [scale([3], 2.5, call=1)]" in script
    path = os.pathsep.join(p for p in (str(ROOT), os.environ.get("PYTHONPATH")) if p)
    proc = subprocess.run(
        [sys.executable, str(out / "reproduce.py"), str(tmp_path / "again")],
        capture_output=True,
        text=True,
        timeout=120,
        env=dict(os.environ, PYTHONPATH=path, ACTVIZ_OFFLINE="1"),
        cwd=tmp_path,
    )
    assert proc.returncode == 0, proc.stderr
    for name in ("conv", "act", "mix", "fc"):
        want = np.load(out / f"{name}.npz")
        got = np.load(tmp_path / "again" / f"{name}.npz")
        assert set(got.files) == set(want.files) and len(want.files) >= 2, name
        for key in want.files:
            np.testing.assert_allclose(got[key], want[key], rtol=1e-6, atol=1e-7, err_msg=key)
    # the edits really are in the arrays: act's second call has channel 3 scaled
    assert set(np.load(out / "act.npz").files) >= {"call0_output", "call1_output"}
    assert not np.load(out / "conv.npz")["output"][:, 1].any()


def test_script_says_what_it_cannot_rebuild():
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(3, 2))

    def twist(out):
        return out * 2

    cap = actviz.capture(model, torch.randn(1, 3), edits={"0": [twist, ablate(0, call=0)]})
    text = reproduce_script(cap, None, ["0"], files={"0": "0.npz"}, saved={"inputs": "i.pt"})
    assert "the source of model is unknown" in text and "raise SystemExit(" in text
    assert "def custom_fn0(output):" in text and "NotImplementedError" in text
    assert "the custom edit 'twist' on '0' is Python code" in text
    assert "'0': [custom(custom_fn0), ablate([0], call=0)]" in text
    compile(text, "reproduce.py", "exec")  # valid Python
    named = reproduce_script(
        cap,
        RunSource(model="resnet18", input="cat.png", target=lambda o: o.sum()),
        ["0"],
        files={},
    )
    assert "x = actviz.load_input('cat.png', loaded_model=loaded" in named
    assert "the target was a Python callable" in named and "target=None" in named


def test_cli_export_writes_the_script_with_its_sources(tmp_path, capsys):
    from actviz.cli import main

    code = tmp_path / "twice.py"
    code.write_text(CODE)
    out = tmp_path / "out"
    rc = main(["export", "-m", f"{code}:Twice", "-i", "random:1x3x6x6", "-o", str(out), "-t", "2"])
    assert rc == 0, capsys.readouterr().err
    script = (out / "reproduce.py").read_text()
    assert f"loaded = open_model('{code}:Twice', arch=None, weights='DEFAULT'" in script
    assert "x = actviz.load_input('random:1x3x6x6', loaded_model=loaded" in script
    assert "target=2," in script and "edits = {\n}" in script
    # model code builds random weights: they are saved and loaded back
    assert "model.load_state_dict(torch.load(HERE / 'reproduce_weights.pt'" in script
    saved = torch.load(out / "reproduce_weights.pt", weights_only=True)
    assert set(saved) == {
        "conv.weight",
        "conv.bias",
        "mix.weight",
        "mix.bias",
        "fc.weight",
        "fc.bias",
    }
