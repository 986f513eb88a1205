"""The report names the target class as the window does: "top-1 logit (class 2): cat", not
"top-1 logit (class 2)" above a table that names every class; a changed top class after edits
is named too ("dog (1) → cat (2)", not "1 → 2")."""

from __future__ import annotations

import re

import pytest
import torch
from torch import nn

import actviz
from actviz.core.edit_kinds import scale
from actviz.io.export.report import write_report

NAMES = ["ant", "dog", "cat", "eel"]


@pytest.fixture(scope="module")
def model():
    torch.manual_seed(0)
    net = nn.Sequential(nn.Linear(3, 4), nn.ReLU(), nn.Linear(4, 4)).eval()
    with torch.no_grad():
        net[0].weight.copy_(torch.eye(4, 3))
        net[0].bias.zero_()
        net[2].weight.copy_(torch.eye(4))
        net[2].bias.copy_(torch.tensor([0.0, 1.0, 0.0, 0.0]))
    return net


def _text(path) -> str:
    html = path.read_text()
    html = re.sub(r"<style.*?</style>", "", html, flags=re.S)
    return re.sub(r"\s+", " ", re.sub(r"<[^>]+>", " ", html))


def test_the_target_is_named(model, tmp_path):
    x = torch.tensor([[0.0, 0.0, 3.0]])  # class 2 ("cat") wins
    cap = actviz.capture(model, x, ["0", "2"])
    out = tmp_path / "r.html"
    write_report(cap, out, categories=NAMES, model=model)
    text = _text(out)
    assert "Target: top-1 logit (class 2): cat" in text
    assert "top-1 logit (class 2): cat · 2 layers" in text  # the subtitle


def test_a_changed_top_class_is_named(model, tmp_path):
    x = torch.tensor([[0.0, 0.0, 3.0]])
    baseline = actviz.capture(model, x, ["0", "2"])
    edited = actviz.capture(model, x, ["0", "2"], edits={"0": [scale([2], 0.0)]})
    out = tmp_path / "r.html"
    write_report(edited, out, categories=NAMES, model=model, baseline=baseline)
    text = _text(out)
    assert "The top class changed: cat (2) → dog (1)." in text
