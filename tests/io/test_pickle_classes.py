"""A trusted whole-model pickle whose class is not importable from where actviz runs.

``torch.save(model)`` stores the class by module name. The ``actviz`` console script's
``sys.path`` starts at its own folder, not where the user typed the command, so
``actviz info --model full.pt --trust`` beside ``mynet.py`` failed with "No module named
'mynet'"; a class defined in the training script itself (``__main__``) failed with a raw
"Can't get attribute". The file's folder and the working folder are now looked in, and what
cannot be found is explained with what to do instead.
"""

from __future__ import annotations

import sys

import pytest
import torch
from torch import nn

from actviz.io.errors import ModelLoadError
from actviz.io.models.loading import open_model

NET_SOURCE = """
from torch import nn


class PickNet(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(3, 4, 3)

    def forward(self, x):
        return self.conv(x)
"""


def _pickle_from_module(folder, monkeypatch, module_name: str = "picknet_mod"):
    """Write ``module_name``.py in ``folder``, torch.save a model of it, then forget the
    module and take the folder off sys.path, as in a fresh process started elsewhere."""
    (folder / f"{module_name}.py").write_text(NET_SOURCE)
    monkeypatch.syspath_prepend(str(folder))
    module = __import__(module_name)
    path = folder / "full.pt"
    torch.save(module.PickNet(), path)
    sys.path.remove(str(folder))
    del sys.modules[module_name]
    return path


def test_class_beside_the_file_is_found(tmp_path, monkeypatch):
    path = _pickle_from_module(tmp_path, monkeypatch)
    monkeypatch.chdir("/")
    try:
        loaded = open_model(path, trust=True)
        assert type(loaded.model).__name__ == "PickNet"
        assert str(tmp_path) not in sys.path  # the search path is put back
    finally:
        sys.modules.pop("picknet_mod", None)


def test_class_in_the_working_folder_is_found(tmp_path, monkeypatch):
    code = tmp_path / "code"
    code.mkdir()
    path = _pickle_from_module(code, monkeypatch, "picknet_cwd")
    moved = tmp_path / "elsewhere.pt"
    path.rename(moved)
    monkeypatch.chdir(code)
    try:
        loaded = open_model(moved, trust=True)
        assert type(loaded.model).__name__ == "PickNet"
    finally:
        sys.modules.pop("picknet_cwd", None)


def test_missing_module_says_what_to_do(tmp_path, monkeypatch):
    path = _pickle_from_module(tmp_path, monkeypatch, "picknet_gone")
    (tmp_path / "picknet_gone.py").unlink()
    monkeypatch.chdir("/")
    with pytest.raises(ModelLoadError) as info:
        open_model(path, trust=True)
    text = str(info.value)
    assert "needs the Python module 'picknet_gone'" in text
    assert "picknet_gone.py" in text and "PYTHONPATH" in text


def test_class_defined_in_the_training_script_says_what_to_do(tmp_path, monkeypatch):
    main = sys.modules["__main__"]

    class ScriptNet(nn.Module):
        def __init__(self):
            super().__init__()
            self.fc = nn.Linear(2, 2)

    ScriptNet.__module__ = "__main__"
    ScriptNet.__qualname__ = "ScriptNet"
    monkeypatch.setattr(main, "ScriptNet", ScriptNet, raising=False)
    path = tmp_path / "script.pt"
    torch.save(ScriptNet(), path)
    monkeypatch.delattr(main, "ScriptNet")
    with pytest.raises(ModelLoadError) as info:
        open_model(path, trust=True)
    text = str(info.value)
    assert "ScriptNet" in text and "script that saved it" in text
    assert "state_dict()" in text and "--arch" in text
