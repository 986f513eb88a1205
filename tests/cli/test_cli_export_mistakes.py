"""Ordinary slips with ``actviz export`` / ``actviz report``: each ends with one line saying
what to do, before the model runs where it can.

- ``--out`` naming a file: export said ``FileExistsError: [Errno 17] File exists``; a report
  to a folder said ``IsADirectoryError: ... '/tmp/.out.x1y2.tmp' -> '/tmp/out'``.
- ``--layers`` of a TorchScript model (its layers cannot be hooked): ``KeyError: "layer
  'conv' was not captured (captured: [])"``.
"""

from __future__ import annotations

import torch

from actviz.cli import main
from tests.helpers import ConvMean


def _errors(err: str) -> list[str]:
    return [line for line in err.splitlines() if "error" in line]


def test_export_out_naming_a_file(tmp_path, capsys):
    out = tmp_path / "notes.txt"
    out.write_text("keep me")
    args = ["export", "-m", "demo", "-i", "random:1x3x64x64", "-o", str(out)]
    assert main(args) == 2
    stderr = capsys.readouterr().err
    err = _errors(stderr)
    assert len(err) == 1 and "notes.txt: is a file" in err[0] and "folder" in err[0]
    assert "Errno" not in err[0]
    assert "opening" not in stderr  # refused before the model was opened
    assert out.read_text() == "keep me"


def test_report_out_naming_a_folder(tmp_path, capsys):
    args = ["report", "-m", "demo", "-i", "random:1x3x64x64", "-o", str(tmp_path)]
    assert main(args) == 2
    stderr = capsys.readouterr().err
    err = _errors(stderr)
    assert "opening" not in stderr
    assert len(err) == 1 and "is a folder" in err[0] and "report.html" in err[0]
    assert ".tmp" not in err[0] and "Errno" not in err[0]
    assert list(tmp_path.iterdir()) == []


def test_export_layers_of_a_torchscript_model(tmp_path, capsys):
    path = tmp_path / "scripted.pt"
    torch.jit.save(torch.jit.script(ConvMean().eval()), str(path))
    args = ["export", "-m", str(path), "-i", "random:1x3x8x8", "-l", "conv"]
    assert main([*args, "-o", str(tmp_path / "out")]) == 2
    err = _errors(capsys.readouterr().err)
    assert len(err) == 1, err
    assert "'conv' was not captured" in err[0] and "TorchScript" in err[0]
    assert "KeyError" not in err[0]
    assert not (tmp_path / "out").exists()  # no empty folder left behind


def test_export_out_below_a_file(tmp_path, capsys):
    (tmp_path / "notes.txt").write_text("keep me")
    out = tmp_path / "notes.txt" / "sub"
    assert main(["export", "-m", "demo", "-i", "random:1x3x64x64", "-o", str(out)]) == 2
    err = _errors(capsys.readouterr().err)
    assert len(err) == 1 and f"{tmp_path / 'notes.txt'} is a file, not a folder" in err[0]
