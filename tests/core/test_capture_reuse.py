"""What a capture keeps per model between captures (the module tree, buffer copies) follows
every change to the model, and never keeps the model alive."""

from __future__ import annotations

import gc
import struct
import weakref

import torch
from torch import nn

import actviz
from actviz.core.capture import leaf_names
from tests.conftest import assert_no_hooks


def _conv_bn_net() -> nn.Sequential:
    torch.manual_seed(0)
    return nn.Sequential(
        nn.Conv2d(3, 4, 3), nn.BatchNorm2d(4), nn.ReLU(inplace=True), nn.Conv2d(4, 2, 1)
    ).eval()


def test_a_changed_module_tree_is_seen_by_the_next_capture():
    net = _conv_bn_net()
    x = torch.randn(1, 3, 6, 6)
    assert actviz.capture(net, x).names == ["0", "1", "2", "3"]
    net[3] = nn.Sequential(nn.Conv2d(4, 2, 1), nn.Tanh())  # replaced by a container
    net.append(nn.Flatten())
    assert leaf_names(net) == ["0", "1", "2", "3.0", "3.1", "4"]
    cap = actviz.capture(net, x)
    assert cap.names == ["0", "1", "2", "3.0", "3.1", "4"]
    with torch.no_grad():
        assert torch.equal(cap["3.1"].output, torch.tanh(net[3][0](net[:3](x))))
    del net[3][1]  # removed from inside a child
    assert actviz.capture(net, x).names == ["0", "1", "2", "3.0", "4"]
    assert_no_hooks(net)


def test_kept_state_does_not_keep_the_model_alive():
    net = _conv_bn_net()
    actviz.capture(net, torch.randn(1, 3, 6, 6), mode="train")
    ref = weakref.ref(net)
    del net
    gc.collect()
    assert ref() is None


class _SignFlip(nn.Module):
    """Writes -0.0 over the +0.0 of its buffer during forward (equal as floats, not as bits)."""

    def __init__(self) -> None:
        super().__init__()
        self.register_buffer("state", torch.zeros(3))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        with torch.no_grad():
            self.state.data.mul_(-1.0)  # through .data: no version bump
        return x * 2


def _bits(t: torch.Tensor) -> bytes:
    return struct.pack(f"{t.numel()}f", *t.tolist())


def test_buffers_are_put_back_bit_for_bit():
    net = nn.Sequential(nn.Linear(3, 3), _SignFlip())
    before = _bits(net[1].state)
    for _ in range(2):  # the second capture reuses the kept copies
        actviz.capture(net, torch.randn(2, 3))
        assert _bits(net[1].state) == before  # +0.0 again, not -0.0


def test_buffers_replaced_or_resized_between_captures_are_saved_afresh():
    net = _conv_bn_net()
    x = torch.randn(2, 3, 6, 6)
    actviz.capture(net, x, mode="train")
    bn = net[1]
    bn.running_mean.data = torch.full((4,), 2.0)  # new memory under the same tensor
    bn.running_var = torch.full((4,), 3.0)  # a new tensor object
    bn.register_buffer("extra", torch.ones(2))
    saved = {k: v.clone() for k, v in net.state_dict().items()}
    cap = actviz.capture(net, x, mode="train")  # BatchNorm updates its statistics in train
    for key, value in net.state_dict().items():
        assert torch.equal(value, saved[key]), key
    assert bn.running_var is net[1].running_var and not bn.training
    assert cap["1"].output.shape == (2, 4, 4, 4)


def test_an_inplace_flag_flipped_between_captures_is_left_as_the_user_set_it():
    net = _conv_bn_net()
    x = torch.randn(1, 3, 6, 6)
    actviz.capture(net, x)
    net[2].inplace = False
    actviz.capture(net, x)
    assert net[2].inplace is False
    net[2].inplace = True
    cap = actviz.capture(net, x)
    assert net[2].inplace is True
    with torch.no_grad():
        pre = net[1](net[0](x))
    # the record before the in-place ReLU still holds its negative values
    assert torch.equal(cap["1"].output, pre) and bool((pre < 0).any())


class _Mover(nn.Module):
    """Gives its buffers new memory holding other values during forward."""

    def __init__(self) -> None:
        super().__init__()
        self.register_buffer("state", torch.arange(3.0))
        self.register_buffer("count", torch.tensor(7))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        self.state.data = torch.full((3,), -5.0)
        self.count.data = torch.tensor(0)
        return x + 1


def test_buffers_given_new_memory_during_forward_get_their_values_back():
    net = nn.Sequential(nn.Linear(3, 3), _Mover())
    state, count = net[1].state, net[1].count
    for gradients in (True, False, False):  # the last capture reuses the kept views
        actviz.capture(net, torch.randn(2, 3), gradients=gradients)
        assert net[1].state is state and net[1].count is count
        assert state.tolist() == [0.0, 1.0, 2.0] and count.item() == 7
