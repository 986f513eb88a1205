"""A report of a run that captured no layer (a TorchScript model, whose layers cannot be
hooked) says so where the layers would be, instead of an empty "Layers (0)" section under the
usual sentence about activations, an empty layer table and an empty statistics table. The
model summary's table has no empty header row."""

from __future__ import annotations

import re

import torch

import actviz
from actviz.io.export.report import write_report
from tests.helpers import ConvMean


def _section(html: str, anchor: str) -> str:
    start = html.index(f'id="{anchor}"')
    end = html.find("<section", start)
    return html[start : end if end > 0 else len(html)]


def test_report_of_a_torchscript_run(tmp_path):
    torch.manual_seed(0)
    scripted = torch.jit.script(ConvMean().eval())
    cap = actviz.capture(scripted, torch.rand(1, 3, 6, 6), ["conv"])
    assert cap.names == [] and cap.warnings
    out = tmp_path / "r.html"
    write_report(cap, out, model=scripted, model_name="scripted.pt (TorchScript)")
    html = out.read_text()
    layers = _section(html, "layers")
    assert "No layer was captured" in layers and "TorchScript" in layers
    assert "colour scale" not in layers
    stats = _section(html, "statistics")
    assert "<table" not in stats and "No layer was captured" in stats
    model = _section(html, "model")
    assert "<th>layer</th>" not in model and '<th class="l">layer</th>' not in model
    assert not re.search(r"<thead><tr>(<th( class=\"l\")?></th>)+</tr></thead>", html)


def test_a_report_with_layers_keeps_its_tables(tmp_path):
    torch.manual_seed(0)
    cap = actviz.capture(ConvMean().eval(), torch.rand(1, 3, 6, 6), ["conv"])
    out = tmp_path / "r.html"
    write_report(cap, out)
    html = out.read_text()
    assert "No layer was captured" not in html
    assert "<table" in _section(html, "statistics")
