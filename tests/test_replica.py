"""A model's copy for a second capture lane: same results, stale after an in-place change."""

from __future__ import annotations

import torch
import torchvision
from torch import nn

from actviz.core.capture import capture
from actviz.core.replica import ModelReplica, replica_refusal, weights_signature


def _net() -> nn.Module:
    torch.manual_seed(0)
    return nn.Sequential(nn.Conv2d(3, 4, 3), nn.BatchNorm2d(4), nn.ReLU(), nn.Flatten()).eval()


def test_the_copy_captures_exactly_what_the_model_does():
    model = torchvision.models.resnet18(weights=None).eval()
    rep = ModelReplica(model)
    rep.build()
    assert rep.usable() and rep.twin is not model and not rep.failure
    x = torch.randn(1, 3, 64, 64)
    layers = ["layer1", "layer4.1.conv2"]
    a = capture(model, x, layers)
    b = capture(rep.twin, x, layers)
    for name in layers:
        assert torch.equal(a[name].output, b[name].output)
        assert torch.equal(a[name].grad_output, b[name].grad_output)
    assert torch.equal(a.output, b.output)
    # No weight is shared: the copy's tensors are its own.
    ids = {id(p) for p in model.parameters()}
    assert not ids & {id(p) for p in rep.twin.parameters()}


def test_an_in_place_change_or_a_swapped_module_makes_the_copy_stale():
    model = _net()
    rep = ModelReplica(model)
    rep.build()
    assert rep.usable()
    before = weights_signature(model)
    capture(model, torch.randn(1, 3, 6, 6), ["0"])  # an eval capture writes nothing back
    assert weights_signature(model) == before and rep.usable()
    with torch.no_grad():
        model[0].weight.mul_(2.0)
    assert not rep.usable()

    other = ModelReplica(model)
    other.build()
    assert other.usable()
    model[0] = nn.Conv2d(3, 4, 3)
    assert not other.usable()

    # New memory under the same parameter (``.data =``, ``.to(device)``) keeps the version.
    third = ModelReplica(model)
    third.build()
    assert third.usable()
    model[1].weight.data = torch.full((4,), 3.0)
    assert not third.usable()


def test_an_uncopyable_model_is_refused_with_its_reason_not_raised():
    class Uncopyable(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.fc = nn.Linear(2, 2)

        def __deepcopy__(self, memo):
            raise TypeError("holds a file handle")

    rep = ModelReplica(Uncopyable())
    rep.build()
    assert rep.twin is None and not rep.usable()
    assert rep.failure == "TypeError: holds a file handle"


def test_refusals_name_the_reason():
    assert replica_refusal(_net()) is None
    assert replica_refusal(_net(), max_bytes=100) == "the model's weights take 0 MiB"
    scripted = torch.jit.script(_net())
    assert replica_refusal(scripted) == "a TorchScript model is not copied"
