"""The question at start about the session kept on quit says which session it is (model,
input, layers, when), not only "actviz kept your last session when it closed. Restore it?"."""

from __future__ import annotations

import os
import time

import torch
from PySide6.QtCore import QSettings

from actviz.workspace.session_file import (
    InputSource,
    ModelSource,
    SessionState,
    describe_session_file,
    save_state,
)


def _saved_state() -> SessionState:
    return SessionState(
        model=ModelSource("resnet18", kind="torchvision", name="resnet18 (random init)"),
        input=InputSource(
            value=torch.zeros(1, 3, 4, 4),
            source="/photos/cat.png",
            kind="image",
            description="cat.png: RGB 640x480 -> 1x3x224x224",
        ),
        ticked=("layer1", "layer4"),
    )


def test_describe_session_file(tmp_path):
    path = tmp_path / "s.actviz"
    save_state(_saved_state(), path)
    stamp = time.mktime((2026, 3, 4, 9, 5, 0, 0, 0, -1))
    os.utime(path, (stamp, stamp))
    text = describe_session_file(path)
    assert text == "resnet18 (random init) on cat.png, 2 layers ticked, saved 4 Mar 09:05"
    (tmp_path / "bad.actviz").write_text("no zip")
    assert describe_session_file(tmp_path / "bad.actviz") == ""


def test_the_restore_question_names_the_session(actviz_window, tmp_path):
    settings = QSettings(str(tmp_path / "actviz.ini"), QSettings.Format.IniFormat)
    win = actviz_window(settings=settings)
    sessions = win.sessions.feature
    save_state(_saved_state(), sessions.kept.path)
    asked = []
    sessions.ask_restore = lambda _parent, text: asked.append(text) or False
    assert not sessions.offer_restore()
    assert len(asked) == 1
    assert "(resnet18 (random init) on cat.png, 2 layers ticked, saved " in asked[0]
    assert asked[0].endswith("Restore it?")
