"""Pins hold at most a quarter of the memory budget (#37): real captures, a clear refusal."""

from __future__ import annotations

import dataclasses
import gc
import weakref

import pytest
import torch
from torch import nn

import actviz
from actviz.core.capture import format_bytes
from actviz.display.prepare import prepare
from actviz.display.prepared import DisplaySpec
from actviz.workspace.budget import DEFAULT_MEMORY_BUDGET
from actviz.workspace.pins import PINS_SHARE, PinBoard, PinRefused, result_bytes

LAYERS = ("conv", "act", "fc")


class Net(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.conv = nn.Conv2d(3, 8, 3, padding=1)
        self.act = nn.ReLU()
        self.fc = nn.Linear(8 * 16 * 16, 5)

    def forward(self, x):
        return self.fc(torch.flatten(self.act(self.conv(x)), 1))


def _result(model: nn.Module, seed: int):
    x = torch.randn(1, 3, 16, 16, generator=torch.Generator().manual_seed(seed))
    return prepare(actviz.capture(model, x, list(LAYERS)), DisplaySpec(layers=LAYERS), model=model)


def test_pins_stop_at_a_quarter_of_the_budget_and_say_so():
    torch.manual_seed(0)
    model = Net().eval()
    first = _result(model, 0)
    size = result_bytes(first)
    assert size > 2 * first.nbytes > 32 * 1024  # activations, gradients, the panels' arrays
    budget = 4 * (3 * size + size // 2)  # room for three pins, not four
    board = PinBoard()
    refs = []
    for seed in range(12):  # a user pinning run after run
        result = first if seed == 0 else _result(model, seed)
        try:
            board.pin(result, f"run {seed}", budget=budget)
        except PinRefused as exc:
            refused = str(exc)
            refs.append(weakref.ref(result))
        del result
    assert len(board) == 3 and board.nbytes == 3 * size <= budget * PINS_SHARE
    want = f"over their {format_bytes(int(budget * PINS_SHARE))} (a quarter"
    assert want in refused and "Unpin some results or raise the budget" in refused
    gc.collect()
    assert [r() for r in refs] == [None] * 9  # the refused runs are not kept anywhere
    # Unpinning makes room again; the pinned captures are the ones pinned, values intact.
    kept = list(board)
    board.unpin(kept[0])
    again = _result(model, 0)
    assert torch.equal(again.capture["conv"].tensor, first.capture["conv"].tensor)
    board.pin(again, "again", budget=budget)
    assert [p.label for p in board] == ["run 1", "run 2", "again"]


def test_a_pin_counts_every_array_it_keeps():
    """A pin is counted at what it keeps (#37), not at its recorded outputs alone: their
    gradients, the input and output, and the panels' mosaics and gradient magnitudes."""
    torch.manual_seed(0)
    result = _result(Net().eval(), 0)
    cap = result.capture
    grads = [rec.grad.nbytes for rec in cap.all_records()]
    assert grads == [4 * 8 * 16 * 16, 4 * 8 * 16 * 16, 4 * 5]  # conv, act, fc: not in nbytes
    layers = result.layers.values()
    mosaics = sum(m.nbytes for p in layers for m in (p.mosaic, p.grad_mosaic) if m is not None)
    assert mosaics >= 2 * 2 * 8 * 16 * 16  # conv and act, values and gradients, a byte a pixel
    held = result_bytes(result)
    assert cap.nbytes + sum(grads) + mosaics <= held < 8 * cap.nbytes
    board = PinBoard()
    with pytest.raises(PinRefused):  # the outputs alone would fit in this budget four times
        board.pin(result, "run", budget=4 * (held - 1))
    board.pin(result, "run", budget=4 * held)
    assert board.nbytes == board.held_bytes(result) == held


def test_the_default_budget_leaves_pins_a_quarter():
    assert PINS_SHARE == 0.25
    board = PinBoard()

    class Big:
        nbytes = DEFAULT_MEMORY_BUDGET // 4 + 1

    with pytest.raises(PinRefused, match=r"over their 256.0 MiB \(a quarter of the 1.0 GiB"):
        board.pin(Big(), "big", budget=DEFAULT_MEMORY_BUDGET)
    assert len(board) == 0


def test_an_edited_result_counts_its_unedited_capture_too():
    """A what-if run keeps the unedited capture beside the edited one: a pin holds both, so
    both count (counted alone, edited pins held twice their share)."""
    torch.manual_seed(0)
    model = Net().eval()
    plain, other, third = _result(model, 0), _result(model, 1), _result(model, 2)
    size, capture = result_bytes(plain), plain.capture.held_bytes()
    assert result_bytes(other) == result_bytes(third) == size
    assert other.capture.held_bytes() == capture > plain.capture.nbytes
    edited = dataclasses.replace(plain, baseline=other.capture)
    board = PinBoard()
    board.pin(edited, "edited")
    assert board.nbytes == size + capture and board.held_bytes(third) == 2 * size + capture
    budget = 4 * (2 * size + capture)  # room for one more plain pin, not one more edited one
    with pytest.raises(PinRefused):
        board.pin(dataclasses.replace(other, baseline=plain.capture), "second", budget=budget)
    board.pin(other, "plain", budget=budget)
    assert board.nbytes == 2 * size + capture
