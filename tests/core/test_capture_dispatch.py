"""How capture reaches a module: a wrapped forward, or hooks where the module has hooks of its own."""

from __future__ import annotations

import torch
from torch import nn

import actviz
from tests.conftest import assert_no_hooks


def _model() -> nn.Sequential:
    torch.manual_seed(0)
    return nn.Sequential(nn.Linear(4, 4), nn.Tanh(), nn.Linear(4, 2)).eval()


def test_forward_left_as_found():
    model = _model()
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
    model = _model()
    try:
        actviz.capture(model, torch.randn(3, 5))  # wrong width: the first Linear raises
    except RuntimeError:
        pass
    assert all("forward" not in vars(m) for m in model.modules())
    assert_no_hooks(model)


def test_a_users_forward_hook_still_runs_before_the_record():
    model = _model()
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
    model = _model()
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
