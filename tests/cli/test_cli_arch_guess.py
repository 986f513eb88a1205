"""The CLI on weights-only files given without --arch: the guess is printed and used or asked."""

from __future__ import annotations

import json

import pytest
import torch
import torchvision


@pytest.fixture
def r18_file(tmp_path):
    torch.manual_seed(0)
    path = tmp_path / "sd.pt"
    state = torchvision.models.resnet18(weights=None).state_dict()
    torch.save({f"model.{k}": v for k, v in state.items()}, path)
    return path


def test_info_without_arch_prints_and_uses_an_exact_guess(cli, r18_file, fresh_signatures):
    fresh_signatures()  # a first guess: it says so once (it builds some fifty architectures)
    code, out, err = cli("info", "--model", str(r18_file))
    assert code == 0, err
    lines = err.splitlines()
    assert lines[1] == "guessing the architecture from the weights (kept for next time) ..."
    assert lines[2] == "architectures matching the weights:"
    assert lines[3] == "  resnet18 (score 1.00: all 122 tensors match)"
    assert lines[4].startswith("  resnet34 (score 0.55: ")
    # The next session finds what this one built: no word of guessing.
    fresh_signatures()
    code, _, err = cli("info", "--model", str(r18_file))
    assert code == 0 and err.splitlines()[1] == "architectures matching the weights:"
    assert "architecture guessed: resnet18; pass --arch to choose another" in lines
    assert out.splitlines()[1].startswith("sd.pt (resnet18)")
    assert out.splitlines()[-1].startswith("68 modules, 52 leaves, 11,689,512 parameters")


def test_info_with_arch_does_not_guess(cli, r18_file):
    code, _, err = cli("info", "--model", str(r18_file), "--arch", "resnet18")
    assert code == 0, err
    assert "architecture guessed" not in err and "matching the weights" not in err


def test_info_without_a_sure_guess_lists_candidates_and_exits_2(cli, tmp_path):
    torch.manual_seed(0)
    state = torchvision.models.resnet18(weights=None).state_dict()
    state["extra_head.weight"] = torch.zeros(5, 512)
    path = tmp_path / "custom.pt"
    torch.save(state, path)
    code, out, err = cli("info", "--model", str(path))
    assert code == 2 and out == ""
    lines = [x for x in err.splitlines() if not x.startswith("guessing the architecture")]
    assert lines[1] == "architectures matching the weights:"
    assert lines[2] == "  resnet18 (score 0.97: 122 of 123 tensors match, 1 is not in the model)"
    assert lines[-1].startswith(f"actviz: error: {path}: holds only weights (123 tensors)")
    assert "closest: resnet18 (score 0.97)" in lines[-1] and "--arch" in lines[-1]


def test_export_uses_an_exact_guess(cli, r18_file, tmp_path):
    out_dir = tmp_path / "out"
    code, out, err = cli(
        "export",
        "--model",
        str(r18_file),
        "--input",
        "random:1x3x64x64",
        "--layers",
        "layer1",
        "--out",
        str(out_dir),
        "--no-gradients",
    )
    assert code == 0, err
    assert "architecture guessed: resnet18; pass --arch to choose another" in err
    assert out.startswith("wrote ")
    summary = json.loads((out_dir / "summary.json").read_text())
    assert summary["layers"]["layer1"]["shape"] == [1, 64, 16, 16]
