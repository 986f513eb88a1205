"""``actviz report``: from a model and input, from a session file (saved run or run again)."""

from __future__ import annotations

import re

import numpy as np
import pytest
import torch

import actviz
from actviz.cli import main
from actviz.core.edit_kinds import ablate
from actviz.io.models.loading import open_model
from actviz.workspace.session_file import (
    InputSource,
    PinState,
    SessionState,
    model_source_of,
    save_state,
    weights_to_keep,
)
from tests.io.conftest import TINY_SOURCE


@pytest.fixture()
def tiny(tmp_path):
    (tmp_path / "tiny.py").write_text(TINY_SOURCE)
    return f"{tmp_path / 'tiny.py'}:TinyNet"


def _panels(path):
    return re.findall(r'data-panel="([^"]+)"', path.read_text())


def test_report_from_model_and_input(tiny, tmp_path, capsys):
    out = tmp_path / "r.html"
    code = main(
        [
            "report",
            "-m",
            tiny,
            "--trust",
            "-i",
            "random:1x3x16x16",
            "-l",
            "conv,fc",
            "-o",
            str(out),
            "-t",
            "2",
        ]
    )
    captured = capsys.readouterr()
    assert code == 0, captured.err
    assert re.search(r"wrote .*r\.html \(\d+\.\d MiB, 7 pictures\)", captured.out)
    assert "[2/4] conv" in captured.err
    assert _panels(out) == [
        "input",
        "saliency",
        "gradcam",
        "features:conv",
        "grad:conv",
        "features:fc",
        "grad:fc",
    ]
    text = out.read_text()
    assert "class 2" in text and "TinyNet" in text


def _saved_session(tiny, tmp_path, *, with_capture: bool):
    loaded = open_model(tiny, trust=True)
    x = torch.rand(1, 3, 16, 16)
    layers = ["conv", "act", "fc"]
    edits = {"conv": (ablate([0, 1]),)}
    cap = actviz.capture(loaded.model, x, layers, target=1, edits=edits)
    other = actviz.capture(loaded.model, torch.rand(1, 3, 16, 16), layers, target=1)
    state = SessionState(
        model=model_source_of(loaded, trust=True),
        model_weights=weights_to_keep(loaded),
        input=InputSource(value=x, source="random:1x3x16x16", kind="random"),
        ticked=tuple(layers),
        target=1,
        categories=("cat", "dog", "eel", "fox"),
        colormap="magma",
        edits=edits,
        pins=(PinState("other input", 1.0, other),),
        comparison={"a": "current", "b": "other input", "tol": 1e-3},
        capture=cap if with_capture else None,
    )
    path = tmp_path / "s.actviz"
    save_state(state, path)
    return path, cap, loaded


@pytest.mark.parametrize("with_capture", [True, False])
def test_report_from_a_session(tiny, tmp_path, capsys, with_capture):
    path, cap, loaded = _saved_session(tiny, tmp_path, with_capture=with_capture)
    out = tmp_path / "r.html"
    assert main(["report", "--session", str(path), "-o", str(out)]) == 0, capsys.readouterr().err
    text = out.read_text()
    panels = _panels(out)
    for layer in ("conv", "act", "fc"):
        assert f"features:{layer}" in panels and f"grad:{layer}" in panels
    # the session's settings, class names, edits (before/after), comparison with the pin
    assert "ablate ch 0, 1" in text and "p before" in text and "dog" in text
    assert 'id="comparison"' in text and "Run A (current) against run B (other input)" in text
    # the same run: the model was reopened with its saved weights, so a rerun matches
    mean = float(cap["conv"].output.mean())
    assert f"{mean:.4g}" in text


def test_report_from_a_session_whose_checkpoint_is_missing(tmp_path, capsys):
    ckpt = tmp_path / "w.pt"
    model = torch.nn.Sequential(torch.nn.Linear(4, 3))
    torch.save(model.state_dict(), ckpt)

    class Loaded:
        source, kind, name = str(ckpt), "state_dict", "w.pt"

    cap = actviz.capture(model, torch.rand(1, 4), ["0"])
    src = model_source_of(Loaded(), arch="x.py:Net")
    ckpt.unlink()
    saved = tmp_path / "saved.actviz"
    save_state(SessionState(model=src, capture=cap, edits={"0": (ablate(0),)}), saved)
    out = tmp_path / "r.html"
    # with the run saved: the report says the checkpoint is gone and shows the saved run
    assert main(["report", "-s", str(saved), "-o", str(out)]) == 0
    text = out.read_text()
    assert "not there any more" in text
    # Said to whoever reads the report: nothing to locate, only where the arrays come from.
    assert "locate" not in text and "the report shows the saved run only" in text
    bare = tmp_path / "bare.actviz"
    save_state(SessionState(model=src, input=InputSource(value=torch.rand(1, 4))), bare)
    assert main(["report", "-s", str(bare), "-o", str(tmp_path / "x.html")]) == 2
    err = [line for line in capsys.readouterr().err.splitlines() if "error" in line]
    assert len(err) == 1 and "not there any more" in err[0] and "--model PATH" in err[0]
    assert not (tmp_path / "x.html").exists()


def test_report_errors_are_one_line(tmp_path, capsys):
    bad = tmp_path / "bad.actviz"
    bad.write_bytes(b"PK\x03\x04 not really")
    assert main(["report", "-s", str(bad), "-o", str(tmp_path / "r.html")]) == 2
    assert main(["report", "-o", str(tmp_path / "r.html")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 2
    assert "damaged session file" in err[0] and "needs --session FILE" in err[1]
    assert not (tmp_path / "r.html").exists()
    np.testing.assert_equal(list(tmp_path.iterdir()), [bad])
