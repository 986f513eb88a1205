"""Files a user picks as the input by mistake: model weights, a checkpoint, a dict of numbers.

Each was accepted as "keyword inputs" and the run then failed with the model's own
``TypeError: forward() got an unexpected keyword argument``; they are refused when opened,
with a message that says what the file holds, so the previous input stays.
"""

from __future__ import annotations

import pytest
import torch
from torch import nn

from actviz.io.errors import InputError
from actviz.io.input_files import open_input


def test_dict_of_numbers_is_refused(tmp_path, rgb_model):
    torch.save({"a": 1, "b": 2.5, "c": [1, 2, 3]}, tmp_path / "numbers.pt")
    with pytest.raises(InputError, match=r"numbers\.pt: holds a dict of a: int, b: float, c: list"):
        open_input(tmp_path / "numbers.pt", model=rgb_model)
    # Without a model too: nothing in it is a tensor.
    with pytest.raises(InputError, match=r"not tensors"):
        open_input(tmp_path / "numbers.pt")


def test_state_dict_given_as_input_says_it_is_a_model(tmp_path, rgb_model):
    torch.save(rgb_model.state_dict(), tmp_path / "weights.pth")
    with pytest.raises(InputError) as info:
        open_input(tmp_path / "weights.pth", model=rgb_model)
    text = str(info.value)
    assert text.startswith("weights.pth") or "weights.pth:" in text
    assert "holds model weights (a state_dict of 9 tensors, e.g. conv.weight, conv.bias)" in text
    assert "Open model" in text and "--model" in text
    # The message stays one readable line, not a listing of every tensor.
    assert len(text) < 400


def test_training_checkpoint_given_as_input_says_it_is_a_model(tmp_path, rgb_model):
    ckpt = {"state_dict": rgb_model.state_dict(), "epoch": 3}
    torch.save(ckpt, tmp_path / "ckpt.pth")
    with pytest.raises(InputError, match=r"ckpt\.pth: .*training checkpoint.*\['state_dict'\]"):
        open_input(tmp_path / "ckpt.pth", model=rgb_model)


def test_keywords_the_forward_does_not_take_are_refused(tmp_path, rgb_model):
    torch.save({"image": torch.zeros(1, 3, 4, 4)}, tmp_path / "kw.pt")
    with pytest.raises(InputError, match=r"kw\.pt: .*'image'.*TinyNet\.forward takes x"):
        open_input(tmp_path / "kw.pt", model=rgb_model)
    # The keyword it does take is fine.
    torch.save({"x": torch.zeros(1, 3, 4, 4)}, tmp_path / "ok.pt")
    loaded = open_input(tmp_path / "ok.pt", model=rgb_model)
    assert list(loaded.value) == ["x"]


def test_keywords_are_not_checked_for_a_forward_taking_kwargs(tmp_path):
    class Kw(nn.Module):
        def forward(self, **inputs):
            return sum(v.sum() for v in inputs.values())

    torch.save({"input_ids": torch.ones(1, 3, dtype=torch.long)}, tmp_path / "kw.pt")
    loaded = open_input(tmp_path / "kw.pt", model=Kw())
    assert torch.equal(loaded.value["input_ids"], torch.ones(1, 3, dtype=torch.long))


def test_long_dict_description_is_cut(tmp_path):
    value = {f"t{i}": torch.zeros(2) for i in range(30)}
    value["step"] = torch.tensor(3)
    torch.save(value, tmp_path / "many.pt")
    loaded = open_input(tmp_path / "many.pt")
    assert len(loaded.description) < 200
    assert "(27 more)" in loaded.description
    torch.save({"step": torch.tensor(3)}, tmp_path / "scalar.pt")
    assert open_input(tmp_path / "scalar.pt").description == "scalar.pt: {step: scalar int64}"


class _TwoInputs(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.conv = nn.Conv2d(3, 2, 3)

    def forward(self, a, b):
        return self.conv(a) + self.conv(b)


def test_npz_of_unnamed_arrays_is_positional_inputs(tmp_path):
    import numpy as np

    a = np.ones((1, 3, 5, 5), np.float32)
    b = np.zeros((1, 3, 5, 5), np.float32)
    np.savez(tmp_path / "ab.npz", a, b)  # saved as arr_0, arr_1
    loaded = open_input(tmp_path / "ab.npz", model=_TwoInputs())
    assert isinstance(loaded.value, tuple) and len(loaded.value) == 2
    assert torch.equal(loaded.value[0], torch.from_numpy(a))
    assert torch.equal(loaded.value[1], torch.from_numpy(b))


def test_more_positional_inputs_than_the_forward_takes(tmp_path, rgb_model):
    x = torch.zeros(1, 3, 4, 4)
    torch.save((x, x), tmp_path / "pair.pt")
    with pytest.raises(InputError, match=r"pair\.pt: holds 2 positional inputs, but TinyNet"):
        open_input(tmp_path / "pair.pt", model=rgb_model)
    torch.save((x,), tmp_path / "one.pt")
    with pytest.raises(InputError, match=r"one\.pt: holds 1 positional input, but _TwoInputs"):
        open_input(tmp_path / "one.pt", model=_TwoInputs())
