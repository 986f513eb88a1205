"""A session of a model opened from ``mynet.py:MyNet`` (or a checkpoint with that
architecture) opens again from another working folder.

The reference was saved as typed, relative to the folder actviz ran in; a window started
elsewhere (a launcher: home) then said "mynet.py: file not found".
"""

from __future__ import annotations

import torch

from actviz.io.models.loading import open_model
from actviz.workspace.session_file import (
    SessionState,
    load_state,
    model_source_of,
    open_model_source,
    save_state,
    weights_to_keep,
)
from tests.io.conftest import TINY_SOURCE


def test_code_model_session_opens_from_another_folder(tmp_path, monkeypatch):
    code = tmp_path / "code"
    code.mkdir()
    (code / "tinynet.py").write_text(TINY_SOURCE)
    monkeypatch.chdir(code)
    loaded = open_model("tinynet.py:TinyNet")
    src = model_source_of(loaded)
    assert src.source == f"{code / 'tinynet.py'}:TinyNet"
    path = tmp_path / "s.actviz"
    save_state(SessionState(model=src, model_weights=weights_to_keep(loaded)), path)

    monkeypatch.chdir(tmp_path)
    again = open_model_source(load_state(path))
    assert torch.equal(again.model.conv.weight, loaded.model.conv.weight)


def test_checkpoint_arch_is_kept_absolute(tmp_path, monkeypatch):
    code = tmp_path / "code"
    code.mkdir()
    (code / "tinynet.py").write_text(TINY_SOURCE)
    monkeypatch.chdir(code)
    torch.manual_seed(0)
    model = open_model("tinynet.py:TinyNet").model
    ckpt = tmp_path / "w.pt"
    torch.save(model.state_dict(), ckpt)
    loaded = open_model(ckpt, arch="tinynet.py:TinyNet")
    src = model_source_of(loaded, arch="tinynet.py:TinyNet")
    assert src.arch == f"{code / 'tinynet.py'}:TinyNet"
    monkeypatch.chdir(tmp_path)
    again = open_model_source(SessionState(model=src))
    assert torch.equal(again.model.conv.weight, model.conv.weight)
    # Names that are no files stay as they were.
    assert model_source_of(loaded, arch="resnet18").arch == "resnet18"
