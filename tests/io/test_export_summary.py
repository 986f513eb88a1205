"""summary.json names the input that ran: a sequence's frame (file and index) and every
perturbation with its value."""

from __future__ import annotations

import json

import torch

from actviz.core.capture import capture
from actviz.io.export.capture_export import export_capture
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
    assert summary["frame_number"] == 8  # as the window counts it: "frame 8/N"
    assert summary["perturbation"] == perturbation


def test_summary_of_a_plain_input_has_no_frame_and_no_perturbation(tmp_path):
    export_capture(_cap(), tmp_path, input_name="arrow.png")
    summary = json.loads((tmp_path / "summary.json").read_text())
    assert summary["input"] == "arrow.png" and summary["input_path"] == ""
    assert summary["frame"] is None and summary["perturbation"] == {}
    assert summary["frame_number"] is None


def test_summary_lists_the_edits_and_says_the_prediction_is_the_edited_runs(tmp_path):
    from actviz.core.edit_kinds import ablate, scale

    torch.manual_seed(0)
    model = TinyCNN().eval()
    x = torch.randn(1, 3, 16, 16, generator=torch.Generator().manual_seed(1))
    edits = {"conv2": [ablate([0, 1, 2, 3]), scale([5], 3.0)]}
    edited = capture(model, x, ["conv1", "fc"], edits=edits)
    plain = capture(model, x, ["conv1", "fc"])
    export_capture(edited, tmp_path / "edited")
    export_capture(plain, tmp_path / "plain")
    summary = json.loads((tmp_path / "edited" / "summary.json").read_text())
    assert summary["edits"] == [
        {
            "layer": "conv2",
            "kind": "ablate",
            "edit": "ablate ch 0, 1, 2, 3",
            "channels": [0, 1, 2, 3],
        },
        {
            "layer": "conv2",
            "kind": "scale",
            "edit": "scale ch 5 x3",
            "channels": [5],
            "factor": 3.0,
        },
    ]
    assert summary["prediction_of"].startswith("the edited run")
    # Its prediction is the edited output's, not the unedited run's.
    probs = torch.softmax(edited.output[0], dim=0)
    top = summary["prediction"][0]
    assert abs(top["probability"] - float(probs[top["index"]])) < 1e-6
    assert top["index"] == int(probs.argmax())
    unedited = json.loads((tmp_path / "plain" / "summary.json").read_text())
    assert unedited["edits"] == [] and unedited["prediction_of"] == "the run without edits"
    assert unedited["prediction"] != summary["prediction"]
