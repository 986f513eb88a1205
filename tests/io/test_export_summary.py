"""summary.json names the input that ran: a sequence's frame (file and index) and every
perturbation with its value."""

from __future__ import annotations

import json

import torch

from actviz.core.capture import capture
from actviz.io.export import export_capture
from tests.ui.tiny_models import TinyCNN


def _cap():
    torch.manual_seed(0)
    model = TinyCNN().eval()
    x = torch.randn(1, 3, 16, 16, generator=torch.Generator().manual_seed(1))
    return capture(model, x, ["conv1"])


def test_summary_records_the_frame_and_its_perturbations(tmp_path):
    out = tmp_path / "not" / "yet"
    perturbation = {"noise": 0.2, "seed": 0, "brightness": 0.1,
                    "occlusion": {"x": 0.5, "y": 0.25, "size": 0.25}}  # fmt: skip
    written = export_capture(
        _cap(),
        out,
        input_name="frame_007.png",
        input_path="/data/clip/frame_007.png",
        frame=7,
        perturbation=perturbation,
    )
    assert written[-1] == out / "summary.json"
    summary = json.loads((out / "summary.json").read_text())
    assert summary["input"] == "frame_007.png"
    assert summary["input_path"] == "/data/clip/frame_007.png"
    assert summary["frame"] == 7
    assert summary["perturbation"] == perturbation


def test_summary_of_a_plain_input_has_no_frame_and_no_perturbation(tmp_path):
    export_capture(_cap(), tmp_path, input_name="arrow.png")
    summary = json.loads((tmp_path / "summary.json").read_text())
    assert summary["input"] == "arrow.png" and summary["input_path"] == ""
    assert summary["frame"] is None and summary["perturbation"] == {}
