"""Files that are not sessions, given to Open session: each is named for what it is.

An empty file, a text file and a checkpoint all read "damaged session file (not a readable
zip: File is not a zip file)" and a folder "no such session file", which sent the user
looking for damage or for a missing file.
"""

from __future__ import annotations

import pytest
import torch
from torch import nn

from actviz.workspace.session_file import SessionFileError, load_state


def test_empty_file(tmp_path):
    (tmp_path / "s.actviz").write_bytes(b"")
    with pytest.raises(SessionFileError, match=r"s\.actviz: the file is empty"):
        load_state(tmp_path / "s.actviz")


def test_folder(tmp_path):
    with pytest.raises(SessionFileError, match=r"is a folder, not a session file"):
        load_state(tmp_path)


def test_text_file(tmp_path):
    (tmp_path / "notes.actviz").write_text("hello")
    with pytest.raises(SessionFileError) as info:
        load_state(tmp_path / "notes.actviz")
    assert "not an actviz session file" in str(info.value)
    assert "damaged" not in str(info.value)


def test_checkpoint_says_open_it_as_a_model(tmp_path):
    torch.save(nn.Linear(2, 2).state_dict(), tmp_path / "weights.pth")
    with pytest.raises(SessionFileError) as info:
        load_state(tmp_path / "weights.pth")
    text = str(info.value)
    assert "not an actviz session file" in text
    assert "PyTorch" in text and "Open model" in text


def test_cut_zip_is_still_damaged(tmp_path):
    torch.save(nn.Linear(2, 2).state_dict(), tmp_path / "w.pth")
    data = (tmp_path / "w.pth").read_bytes()
    (tmp_path / "cut.actviz").write_bytes(data[: len(data) // 2])
    with pytest.raises(SessionFileError, match=r"damaged session file"):
        load_state(tmp_path / "cut.actviz")


def test_a_changed_checkpoint_says_when_it_changed(tmp_path):
    import os
    import time

    from actviz.workspace.session_file import ModelSource, SessionState, verify_model_source

    ckpt = tmp_path / "w.pt"
    torch.save(nn.Linear(2, 2).state_dict(), ckpt)

    class Loaded:
        source, kind, name = str(ckpt), "state_dict", "w.pt"

    from actviz.workspace.session_file import model_source_of

    src = model_source_of(Loaded(), arch="x.py:Net")
    assert isinstance(src, ModelSource)
    torch.save(nn.Linear(2, 2).state_dict(), ckpt)
    stamp = time.mktime((2026, 3, 4, 9, 5, 0, 0, 0, -1))
    os.utime(ckpt, (stamp, stamp))
    check = verify_model_source(SessionState(model=src))
    assert check.status == "changed"
    assert "(modified 4 Mar 09:05;" in check.message and "\n" not in check.message
