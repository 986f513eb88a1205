"""How capture reaches a module: a wrapped forward, or hooks where the module has hooks of its own."""

from __future__ import annotations

import torch
from torch import nn

import actviz
from tests.conftest import assert_no_hooks


def _mlp() -> nn.Sequential:
    torch.manual_seed(0)
    return nn.Sequential(nn.Linear(4, 4), nn.Tanh(), nn.Linear(4, 2)).eval()


def test_forward_left_as_found():
    model = _mlp()
    own = model[2].forward  # an instance attribute of its own, as accelerate sets
    model[2].forward = own
    before = {i: dict(vars(m)).get("forward") for i, m in enumerate(model)}
    cap = actviz.capture(model, torch.randn(3, 4))
    assert {i: dict(vars(m)).get("forward") for i, m in enumerate(model)} == before
    assert model[2].__dict__["forward"] is own and "forward" not in model[0].__dict__
    with torch.no_grad():
        x = cap.inputs
        assert torch.equal(cap["2"].output, model(x))
    assert_no_hooks(model)


def test_forward_left_as_found_when_forward_raises():
    model = _mlp()
    try:
        actviz.capture(model, torch.randn(3, 5))  # wrong width: the first Linear raises
    except RuntimeError:
        pass
    assert all("forward" not in vars(m) for m in model.modules())
    assert_no_hooks(model)


def test_a_users_forward_hook_still_runs_before_the_record():
    model = _mlp()
    handle = model[1].register_forward_hook(lambda _m, _a, out: out * 2)
    try:
        x = torch.randn(3, 4)
        cap = actviz.capture(model, x)
        with torch.no_grad():
            tanh = torch.tanh(model[0](x))
        # the record holds what the next layer received: the user's hook's output
        assert torch.equal(cap["1"].output, tanh * 2)
        assert torch.equal(cap["2"].inputs[0], tanh * 2)
        assert len(model[1]._forward_hooks) == 1
    finally:
        handle.remove()
    assert_no_hooks(model)


def test_a_users_pre_hook_runs_before_the_wrapped_forward():
    model = _mlp()
    handle = model[2].register_forward_pre_hook(lambda _m, args: (args[0] + 1,))
    try:
        x = torch.randn(3, 4)
        cap = actviz.capture(model, x)
        with torch.no_grad():
            expected_in = torch.tanh(model[0](x)) + 1
        assert torch.equal(cap["2"].inputs[0], expected_in)
        with torch.no_grad():
            expected_out = nn.functional.linear(expected_in, model[2].weight, model[2].bias)
        assert torch.equal(cap["2"].output, expected_out)
        assert cap["2"].grad_inputs[0] is not None
    finally:
        handle.remove()
    assert_no_hooks(model)


class IntoBiggerStorage(nn.Module):
    """Returns a tensor (not a view) living in a larger storage: its record is a copy."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        out = torch.empty(0, dtype=x.dtype)
        out.set_(torch.zeros(10, dtype=x.dtype).untyped_storage(), 0, (1, 3), (3, 1))
        return out.copy_(x)


class Doubles(nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x.mul_(2)


def test_gradient_of_a_tensor_changed_in_place_after_its_copied_record():
    torch.manual_seed(0)
    model = nn.Sequential(IntoBiggerStorage(), Doubles(), nn.Linear(3, 1)).eval()
    x = torch.randn(1, 3)
    cap = actviz.capture(model, x, ["0", "2"])
    w = model[2].weight.detach()
    assert torch.equal(cap["0"].output, x)  # the value before Doubles wrote into it
    # d out / d (the value "0" produced): through the doubling, so 2 w
    assert torch.allclose(cap["0"].grad_output, 2 * w)
    assert torch.allclose(cap["2"].grad_output, torch.ones(1, 1))
    assert_no_hooks(model)
