"""The seed articles' examples, with their exact numbers."""

from __future__ import annotations

import pytest
import torch

import actviz
from tests.core.seed_models import PowLogListModel, PowLogModel, SeedMLP


def close(t: torch.Tensor, expected: list[float] | float, atol: float = 1e-4) -> bool:
    return torch.allclose(t.float(), torch.tensor(expected), atol=atol)


def test_seed_mlp_activations_and_gradients():
    net = SeedMLP()
    cap = actviz.capture(net, torch.tensor([0.05, 0.1]))
    assert cap.names == ["fc1", "s1", "fc2", "s2"]
    assert close(cap["fc1"].output, [0.3775, 0.3925])
    assert close(cap["s1"].output, [0.5933, 0.5969])
    assert close(cap["fc2"].output, [1.1059, 1.2249])
    assert close(cap["s2"].output, [0.7514, 0.7729])
    # target None on a 1-D output = sum of all elements = backward(ones)
    assert cap.target_description == "sum of all 2 output elements"
    assert cap.target_value == pytest.approx(0.7514 + 0.7729, abs=1e-4)
    assert close(cap["s2"].grad_output, [1.0, 1.0])
    assert close(cap["fc2"].grad_output, [0.1868, 0.1755])
    assert close(cap["s1"].grad_output, [0.1625, 0.1806])


def test_seed_mlp_linear_grad_inputs_are_right():
    """The deprecated register_backward_hook reports grad_input == grad_output for fc2."""
    net = SeedMLP()
    cap = actviz.capture(net, torch.tensor([0.05, 0.1]))
    fc2 = cap["fc2"]
    # d/d input of Wx+b = W^T g
    expected = fc2.grad_output @ net.fc2.weight.detach()
    assert close(fc2.grad_inputs[0], expected.tolist(), atol=1e-6)
    assert close(fc2.grad_inputs[0], [0.1625, 0.1806])
    assert not torch.allclose(fc2.grad_inputs[0], fc2.grad_output)
    # it is exactly the gradient that reaches s1's output
    assert torch.allclose(fc2.grad_inputs[0], cap["s1"].grad_output)
    fc1 = cap["fc1"]
    assert torch.allclose(fc1.grad_inputs[0], cap.input_grads, atol=1e-7)
    assert torch.allclose(fc1.grad_inputs[0], fc1.grad_output @ net.fc1.weight.detach())
    assert fc1.inputs[0].tolist() == pytest.approx([0.05, 0.1])


def test_seed_mlp_matches_full_backward_hook():
    """grad_inputs / grad_output agree with register_full_backward_hook on every layer."""
    net = SeedMLP()
    seen: dict[str, tuple] = {}
    handles = [
        mod.register_full_backward_hook(lambda m, gi, go, n=name: seen.__setitem__(n, (gi, go)))
        for name, mod in net.named_children()
    ]
    x = torch.tensor([0.05, 0.1], requires_grad=True)
    net(x).backward(torch.ones(2))
    for h in handles:
        h.remove()
    cap = actviz.capture(net, torch.tensor([0.05, 0.1]))
    for name, (gi, go) in seen.items():
        assert torch.allclose(cap[name].grad_output, go[0], atol=1e-7), name
        assert torch.allclose(cap[name].grad_inputs[0], gi[0], atol=1e-7), name


@pytest.mark.parametrize("cls", [PowLogModel])
def test_two_input_pow_log(cls):
    model = cls()
    x, q = torch.tensor(5.0), torch.tensor(3.0)
    cap = actviz.capture(model, (x, q))
    assert cap.target_value == pytest.approx(4.8283, abs=1e-4)
    assert cap.target_description == "the model's single output value"
    dx, dq = cap.input_grads
    assert float(dx) == pytest.approx(0.6, abs=1e-5)
    assert float(dq) == pytest.approx(1.6094, abs=1e-4)
    assert float(cap["powModel"].output) == pytest.approx(125.0)
    # z = log(y): dz/dy = 1/125 at the inner module's output
    assert float(cap["powModel"].grad_output) == pytest.approx(0.008, abs=1e-7)
    # grad_inputs of powModel are aligned with its two inputs (x, q)
    gx, gq = cap["powModel"].grad_inputs
    assert float(gx) == pytest.approx(0.6, abs=1e-5)
    assert float(gq) == pytest.approx(1.6094, abs=1e-4)
    assert float(cap["logModel"].grad_inputs[0]) == pytest.approx(0.008, abs=1e-7)
    # the caller's scalars are untouched
    assert not x.requires_grad and not q.requires_grad and float(x) == 5.0


def test_modules_in_a_plain_list_are_reported(no_hooks_left):
    model = PowLogListModel()
    assert list(model.named_children()) == []
    cap = actviz.capture(model, (torch.tensor(5.0), torch.tensor(3.0)))
    assert cap.target_value == pytest.approx(4.8283, abs=1e-4)
    text = "\n".join(cap.warnings)
    assert "PowModel ran during forward but is not registered" in text
    assert "LogModel ran during forward but is not registered" in text
    assert "modelList[0], a plain list" in text
    assert "nn.ModuleList" in text
    no_hooks_left(model)
    # the global module hook is gone too
    assert not torch.nn.modules.module._global_forward_pre_hooks


def test_registered_model_has_no_unregistered_warning():
    cap = actviz.capture(PowLogModel(), (torch.tensor(5.0), torch.tensor(3.0)))
    assert cap.warnings == []


def test_the_unregistered_module_check_watches_a_models_first_capture_only(monkeypatch):
    from torch.nn.modules import module as torch_module

    hooked = []
    real = torch_module.register_module_forward_pre_hook
    monkeypatch.setattr(
        torch_module, "register_module_forward_pre_hook", lambda h: hooked.append(1) or real(h)
    )
    model = PowLogListModel()
    args = (torch.tensor(5.0), torch.tensor(3.0))
    first = actviz.capture(model, args)
    assert len(hooked) == 1 and any("PowModel ran during forward" in w for w in first.warnings)
    # Same modules: no global hook (it slows every module call), the same warnings.
    again = actviz.capture(model, args)
    assert len(hooked) == 1 and again.warnings == first.warnings
    # A cancellable capture still watches (it checks for a stop between modules).
    actviz.capture(model, args, should_stop=lambda: False)
    assert len(hooked) == 2
    # Another set of modules is watched again: registering the list makes the warning go.
    model.modelList = torch.nn.ModuleList(model.modelList)
    fixed = actviz.capture(model, args)
    assert len(hooked) == 3 and fixed.warnings == []
    assert fixed.target_value == pytest.approx(first.target_value)
    assert not torch_module._global_forward_pre_hooks


def test_an_in_place_module_registered_before_the_captured_layer_cannot_overwrite_it():
    # Only in-place modules registered from the first captured one on run out of place; one
    # registered earlier that writes into a captured output is caught by the version checks.
    class ActFirst(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.act = torch.nn.ReLU(inplace=True)  # registered before conv, runs after it
            self.conv = torch.nn.Conv2d(2, 3, 3, padding=1)

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return self.act(self.conv(x)).sum(dim=(2, 3))

    torch.manual_seed(0)
    model = ActFirst().eval()
    x = torch.randn(1, 2, 5, 5)
    with torch.no_grad():
        expected = model.conv(x)
    assert (expected < 0).any()  # the ReLU would change it
    for _ in range(2):  # also once the module is known to need a copy
        cap = actviz.capture(model, x, ["conv"], target=0)
        assert torch.equal(cap["conv"].output, expected)
    assert model.act.inplace is True
