"""``arch="model.py:Net"`` for a checkpoint is also looked for beside the checkpoint.

The window is often started from a launcher (working folder: home); typing ``mynet.py:MyNet``
in Open model's Architecture box for ``~/runs/exp1/weights.pt`` beside ``mynet.py`` said
"mynet.py: file not found".
"""

from __future__ import annotations

import pytest
import torch

from actviz.io.errors import ModelLoadError
from actviz.io.models.loading import open_model
from tests.io.conftest import TINY_SOURCE, tiny_namespace


@pytest.fixture
def run_folder(tmp_path):
    folder = tmp_path / "runs" / "exp1"
    folder.mkdir(parents=True)
    (folder / "tinynet.py").write_text(TINY_SOURCE)
    torch.manual_seed(0)
    ref = tiny_namespace()["TinyNet"]()
    torch.save(ref.state_dict(), folder / "weights.pt")
    elsewhere = tmp_path / "home"
    elsewhere.mkdir()
    return folder, ref, elsewhere


def test_code_beside_the_checkpoint_is_found(run_folder, monkeypatch):
    folder, ref, elsewhere = run_folder
    monkeypatch.chdir(elsewhere)
    loaded = open_model(folder / "weights.pt", arch="tinynet.py:TinyNet")
    assert torch.equal(loaded.model.conv.weight, ref.conv.weight)


def test_the_working_folder_comes_first(run_folder, monkeypatch):
    folder, _ref, elsewhere = run_folder
    (elsewhere / "tinynet.py").write_text(TINY_SOURCE.replace("nn.Conv2d(3, 6", "nn.Conv2d(3, 5"))
    monkeypatch.chdir(elsewhere)
    with pytest.raises(ModelLoadError, match="do not fit"):
        open_model(folder / "weights.pt", arch="tinynet.py:TinyNet")


def test_not_found_says_where_it_looked(run_folder, monkeypatch):
    folder, _ref, elsewhere = run_folder
    monkeypatch.chdir(elsewhere)
    with pytest.raises(ModelLoadError) as info:
        open_model(folder / "weights.pt", arch="other.py:TinyNet")
    text = str(info.value)
    assert "other.py: file not found" in text
    assert str(elsewhere) in text and str(folder) in text
