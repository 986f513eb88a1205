"""Pins beyond the in-memory share are parked on disk and come back bit for bit (#37)."""

from __future__ import annotations

import copy
import dataclasses
import gc
import weakref

import pytest
import torch
from torch import nn

import actviz
from actviz.core import allocator
from actviz.core.structures import iter_tensors
from actviz.display.prepare import prepare
from actviz.display.prepared import DisplaySpec
from actviz.workspace import pins
from actviz.workspace.budget import DEFAULT_MEMORY_BUDGET
from actviz.workspace.pins import PinBoard, PinRefused
from actviz.workspace.session_file import PinState, SessionState, load_state, save_state

FIELDS = ("inputs", "output", "grad_output", "grad_inputs")


class Net(nn.Module):
    """Convs with a reused ReLU (two calls), a view output (flatten) and a linear head."""

    def __init__(self, channels: int = 4) -> None:
        super().__init__()
        self.conv = nn.Conv2d(3, channels, 3, padding=1)
        self.act = nn.ReLU()
        self.conv2 = nn.Conv2d(channels, channels, 3, padding=1)
        self.pool = nn.AdaptiveAvgPool2d(2)
        self.fc = nn.Linear(4 * channels, 5)

    def forward(self, x):
        h = self.act(self.conv(x))
        h = self.act(self.conv2(h))
        return self.fc(torch.flatten(self.pool(h), 1))


def _run(seed: int, size: int = 16, channels: int = 4):
    torch.manual_seed(seed)
    model = Net(channels).eval()
    x = torch.randn(1, 3, size, size)
    cap = actviz.capture(model, x, ["conv", "act", "conv2", "fc"], target=1)
    return model, prepare(cap, DisplaySpec(layers=("conv", "act", "conv2", "fc")), model=model)


def _tensors(cap):
    out = []
    for rec in cap.all_records():
        for name in FIELDS:
            out.extend(iter_tensors(getattr(rec, name)))
    for name in ("output", "inputs", "input_grads"):
        out.extend(iter_tensors(getattr(cap, name)))
    return out


def _bits(t: torch.Tensor) -> bytes:
    return t.contiguous().view(torch.uint8).numpy().tobytes()


def test_a_parked_pin_keeps_every_tensor_bit_for_bit_and_its_identity():
    _, result = _run(0)
    cap = result.capture
    before = [(t.dtype, t.shape, t.stride(), _bits(t), t.data_ptr()) for t in _tensors(cap)]
    assert len(before) > 10
    records = cap.all_records()
    board = PinBoard(memory_share=0)  # nothing stays in memory: every pin is parked
    pin = board.pin(result, "a", budget=DEFAULT_MEMORY_BUDGET)
    assert pin.parked and pin.result is result and result.capture is cap
    assert cap.all_records() == records  # the same records, in order
    after = _tensors(cap)
    assert len(after) == len(before)
    for t, (dtype, shape, stride, bits, ptr) in zip(after, before, strict=True):
        assert (t.dtype, t.shape, t.stride()) == (dtype, shape, stride)
        assert _bits(t) == bits
        assert t.data_ptr() != ptr  # it moved to the mapping
    # The pin's memory is on disk: held bytes leave it out, the size still counts it.
    assert board.memory_bytes == 0 and board.held_bytes(result) == 0
    assert board.nbytes == cap.nbytes > 0
    # Reading after a release pages the values in again, the same.
    board.release_parked()
    assert [_bits(t) for t in _tensors(cap)] == [b[3] for b in before]
    # And a parked capture still runs the display path: the same panels' arrays.
    _, fresh = _run(0)
    again = prepare(cap, DisplaySpec(layers=("conv", "act", "conv2", "fc")))
    for name in ("conv", "conv2"):
        made, want = again.layers[name].mosaic.image, fresh.layers[name].mosaic.image
        assert made.dtype == want.dtype and made.tobytes() == want.tobytes()


def test_shared_storages_stay_shared_when_parked():
    _, result = _run(1)
    cap = result.capture
    rec = cap.records["act"][0]
    nxt = cap.records["conv2"][0]
    # The relu's output is conv2's input: one storage, kept one.
    assert rec.output.data_ptr() == nxt.inputs[0].data_ptr()
    pins.park_capture(cap)
    assert rec.output.data_ptr() == nxt.inputs[0].data_ptr()
    assert pins.park_capture(cap) is pins.parked_storage(cap)  # parked once


def test_the_newest_pins_stay_in_memory_up_to_the_share():
    results = [_run(seed)[1] for seed in range(3)]
    size = results[0].capture.nbytes
    board = PinBoard(memory_share=int(size * 1.5))
    made = [board.pin(r, f"run {i}", budget=10 * size) for i, r in enumerate(results)]
    assert [p.parked for p in made] == [True, True, False]
    assert board.memory_bytes == size and board.nbytes == 3 * size
    assert board.held_bytes(results[2]) == size  # the shown newest pin, counted once
    assert pins.PINS_IN_MEMORY == 1 / 8  # the default share: an eighth of the budget


def test_parking_frees_the_memory_and_release_hands_back_what_reads_paged_in():
    # ~24 MiB of activations and gradients: far above the noise of the resident size.
    _, result = _run(2, size=256, channels=16)
    cap = result.capture
    moved = sum(t.untyped_storage().nbytes() for t in {id(t): t for t in _tensors(cap)}.values())
    assert moved > 16 * 2**20
    del result
    gc.collect()
    allocator.release_freed_memory()
    rss_before = allocator.rss_mib()
    parked = pins.park_capture(cap)
    assert parked is not None
    gc.collect()
    allocator.release_freed_memory()
    rss_parked = allocator.rss_mib()
    assert rss_before - rss_parked > 0.5 * parked.nbytes() / 2**20
    for t in _tensors(cap):
        float(t.sum())  # every page read in
    rss_read = allocator.rss_mib()
    assert rss_read - rss_parked > 0.5 * parked.nbytes() / 2**20
    assert pins.release(parked)
    assert rss_read - allocator.rss_mib() > 0.5 * parked.nbytes() / 2**20


def test_a_parked_pin_saves_and_restores_the_same(tmp_path):
    _, result = _run(3)
    cap = result.capture
    kept = copy.deepcopy(cap)  # in memory, as it was
    board = PinBoard(memory_share=0)
    board.pin(result, "parked", budget=DEFAULT_MEMORY_BUDGET)
    assert pins.parked_storage(cap) is not None and not pins.parked_storage(kept) is not None
    state = SessionState(pins=(PinState("parked", 12.0, cap),))
    path = tmp_path / "s.actviz"
    assert save_state(state, path) == []
    back = load_state(path).pins[0].capture
    for a, b in zip(_tensors(kept), _tensors(back), strict=True):
        assert a.dtype == b.dtype and a.shape == b.shape and _bits(a) == _bits(b)


def test_without_disk_space_pins_stay_in_memory_and_the_budget_refuses(monkeypatch):
    results = [_run(seed)[1] for seed in (4, 5)]
    size = results[0].capture.nbytes
    monkeypatch.setattr(pins, "DISK_RESERVE", 1 << 60)  # more than any disk has
    board = PinBoard(memory_share=0)
    first = board.pin(results[0], "a", budget=int(1.5 * size))
    assert not first.parked and board.memory_bytes == size
    with pytest.raises(
        PinRefused, match=r"in memory, over the .* memory budget \(parking on disk leaves"
    ):
        board.pin(results[1], "b", budget=int(1.5 * size))
    assert len(board) == 1


def test_release_hooks_are_called_and_forgotten_with_their_owner():
    calls = []

    class Owner:
        def release(self) -> None:
            calls.append(1)

    owner = Owner()
    allocator.release_hooks.append(weakref.WeakMethod(owner.release))
    allocator.release_freed_memory()
    assert calls == [1]
    del owner
    gc.collect()
    allocator.release_freed_memory()
    assert calls == [1]


def test_a_what_if_pins_unedited_capture_is_parked_with_it():
    _, result = _run(6)
    _, unedited = _run(7)
    what_if = dataclasses.replace(result, baseline=unedited.capture)
    bits = [_bits(t) for t in _tensors(unedited.capture)]
    board = PinBoard(memory_share=0)
    board.pin(what_if, "what if", budget=DEFAULT_MEMORY_BUDGET)
    assert (
        pins.parked_storage(result.capture) is not None
        and pins.parked_storage(unedited.capture) is not None
    )
    board.release_parked()
    assert [_bits(t) for t in _tensors(what_if.baseline)] == bits
