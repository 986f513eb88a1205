"""The model is left exactly as found, also when its forward raises."""

from __future__ import annotations

import copy
import dataclasses

import pytest
import torch
import torchvision
from torch import nn

import actviz
from actviz.core.capture import CaptureCancelled, CaptureTooLarge
from tests.conftest import assert_no_hooks
from tests.core.model_state import assert_same, snapshot
from tests.core.seed_models import BufferModel, SeedMLP


@pytest.fixture
def resnet_train():
    """ResNet-18 left in train mode with a frozen stem and an existing .grad on fc."""
    torch.manual_seed(0)
    model = torchvision.models.resnet18(weights=None)
    model.train()
    model.conv1.weight.requires_grad_(False)
    model.fc.weight.grad = torch.full_like(model.fc.weight, 0.5)
    return model


@pytest.mark.parametrize("mode", ["eval", "train"])
def test_resnet_untouched(resnet_train, mode):
    before = snapshot(resnet_train)
    x = torch.randn(2, 3, 32, 32)
    x_before = x.clone()
    cap = actviz.capture(resnet_train, x, mode=mode)
    assert cap.mode == mode
    assert_same(resnet_train, before)
    assert torch.equal(x, x_before) and not x.requires_grad
    # the caller's fc.grad is not accumulated into; None stays None
    assert resnet_train.layer1[0].conv1.weight.grad is None


def test_identical_captures_identical_results(resnet_train):
    x = torch.randn(1, 3, 32, 32)
    a = actviz.capture(resnet_train, x, layers=["layer1", "layer2.0.bn1", "fc"])
    b = actviz.capture(resnet_train, x, layers=["layer1", "layer2.0.bn1", "fc"])
    for name in a.names:
        assert torch.equal(a[name].output, b[name].output)
        # 2-thread CPU reductions may differ in the last bits (1e-8 here; bit-identical with
        # one thread); accumulating into a previous run would double the values instead.
        assert torch.allclose(a[name].grad_output, b[name].grad_output, rtol=1e-4, atol=1e-6)
    assert torch.allclose(a.input_grads, b.input_grads, rtol=1e-4, atol=1e-6)


class Exploding(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.conv = nn.Conv2d(3, 4, 3)
        self.bn = nn.BatchNorm2d(4)
        self.act = nn.ReLU(inplace=True)
        self.head = nn.Linear(4, 2)

    def forward(self, x):
        self.act(self.bn(self.conv(x)))  # BatchNorm ran (and updated its stats) before the error
        raise RuntimeError("boom in forward")


def test_untouched_after_forward_raises():
    model = Exploding().train()
    before = snapshot(model)
    with pytest.raises(RuntimeError, match="boom in forward"):
        actviz.capture(model, torch.randn(2, 3, 8, 8), mode="train")
    assert_same(model, before)  # BatchNorm running stats restored too
    assert model.act.inplace
    assert not torch.nn.modules.module._global_forward_pre_hooks


def test_buffers_changed_by_forward_are_restored():
    model = BufferModel()
    before = snapshot(model)
    cap = actviz.capture(model, torch.ones(2, 3))
    assert_same(model, before)
    assert float(model.calls) == 0.0
    assert cap["lin"].output.shape == (2, 3)


def test_inside_no_grad_and_inference_mode():
    net = SeedMLP()
    x = torch.tensor([0.05, 0.1])
    with torch.no_grad():
        a = actviz.capture(net, x)
    with torch.inference_mode():
        b = actviz.capture(net, x)
    for cap in (a, b):
        assert torch.allclose(cap["fc2"].grad_output, torch.tensor([0.1868, 0.1755]), atol=1e-4)
    assert torch.is_grad_enabled()


def test_frozen_parameters_still_give_activation_gradients():
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 3))
    for p in model.parameters():
        p.requires_grad_(False)
    cap = actviz.capture(model, torch.randn(1, 4))
    assert cap["0"].grad_output is not None and cap.input_grads.shape == (1, 4)
    assert all(not p.requires_grad and p.grad is None for p in model.parameters())


def test_integer_inputs_and_frozen_embedding():
    torch.manual_seed(0)
    model = nn.Sequential(nn.Embedding(10, 4), nn.Flatten(), nn.Linear(12, 2))
    model[0].weight.requires_grad_(False)
    tokens = torch.tensor([[1, 2, 3]])
    cap = actviz.capture(model, tokens, target=1)
    assert cap.input_grads is None or cap.input_grads is None  # integer input: no saliency
    emb = cap["0"]
    assert emb.grad_output.shape == (1, 3, 4)
    # d out[:,1] / d embedding output = fc weight row 1 reshaped
    assert torch.allclose(emb.grad_output.reshape(-1), model[2].weight[1].detach())
    assert cap["0"].grad_inputs == (None,)


def test_scalars_vectors_and_sequences():
    torch.manual_seed(0)
    lstm = nn.LSTM(3, 5, batch_first=True)
    cap = actviz.capture(lstm, torch.randn(2, 7, 3), layers=None)
    rec = cap[""]
    out, (h, c) = rec.output
    assert out.shape == (2, 7, 5) and h.shape == (1, 2, 5)
    assert rec.grad_output[0].shape == (2, 7, 5)
    scal = actviz.capture(nn.Identity(), torch.tensor(3.0))
    assert scal.target_value == 3.0 and float(scal.input_grads) == 1.0


@dataclasses.dataclass
class Out:
    logits: torch.Tensor
    aux: torch.Tensor


class DictInputModel(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.a = nn.Linear(3, 4)
        self.b = nn.Linear(2, 4)

    def forward(self, image, meta):
        return Out(self.a(image) + self.b(meta), self.a(image).sum())


def test_dict_inputs_dataclass_output_and_targets():
    torch.manual_seed(0)
    model = DictInputModel()
    inputs = {"image": torch.randn(1, 3), "meta": torch.randn(1, 2)}
    cap = actviz.capture(model, inputs, target=2)
    assert set(cap.input_grads) == {"image", "meta"}
    assert torch.allclose(cap.input_grads["meta"], model.b.weight[2].detach()[None])
    assert len(cap.calls("a")) == 2
    picked = actviz.capture(model, inputs, target=lambda out: out.aux)
    assert picked.target_description == "custom target <lambda>(output)"
    assert torch.allclose(picked.input_grads["image"], model.a.weight.detach().sum(0)[None])
    assert picked.input_grads["meta"] is None or float(picked.input_grads["meta"].abs().sum()) == 0


def test_target_resolution_and_errors():
    net = SeedMLP()
    x2 = torch.tensor([[0.05, 0.1], [0.3, -0.2]])
    cap = actviz.capture(net, x2)
    out = net(x2).detach()
    top = out.argmax(1)
    assert cap.target_value == pytest.approx(float(out.gather(1, top[:, None]).sum()), abs=1e-6)
    assert cap.target_index == int(top[0])
    with pytest.raises(ValueError, match="out of range"):
        actviz.capture(net, x2, target=5)
    with pytest.raises(ValueError, match=r"unknown layer 'fc3'.*'fc1'"):
        actviz.capture(net, x2, layers=["fc3"])
    with pytest.raises(ValueError, match="one element"):
        actviz.capture(net, x2, target=lambda o: o)
    assert_no_hooks(net)


def test_cancel_and_memory_budget():
    torch.manual_seed(0)
    model = torchvision.models.resnet18(weights=None).eval()
    before = snapshot(model)
    calls = {"n": 0}

    def stop() -> bool:
        calls["n"] += 1
        return calls["n"] > 5

    with pytest.raises(CaptureCancelled):
        actviz.capture(model, torch.randn(1, 3, 32, 32), should_stop=stop)
    with pytest.raises(CaptureTooLarge, match="memory budget"):
        actviz.capture(model, torch.randn(1, 3, 32, 32), max_bytes=100_000)
    assert_same(model, before)


class SneakyInplace(nn.Module):
    """Modifies its input in place without an `inplace` attribute."""

    def forward(self, x):
        return x.mul_(2)


def test_custom_inplace_module_still_exact():
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(3, 3), SneakyInplace(), nn.Linear(3, 1))
    x = torch.randn(1, 3)
    cap = actviz.capture(model, x)
    ref = copy.deepcopy(model)
    h = ref[0](x)
    assert torch.allclose(cap["0"].output, h)
    assert torch.allclose(cap["1"].output, 2 * h)
    assert torch.allclose(cap["1"].inputs[0], h)  # the value it received, not what it wrote
    w = model[2].weight.detach()
    assert torch.allclose(cap["1"].grad_output, w)
    assert torch.allclose(cap["1"].grad_inputs[0], 2 * w)
    assert torch.allclose(cap["0"].grad_output, 2 * w)
    assert_no_hooks(model)


def test_scripted_and_compiled_models_warn():
    torch.manual_seed(0)
    model = SeedMLP()
    scripted = torch.jit.script(model)
    cap = actviz.capture(scripted, torch.tensor([0.05, 0.1]), layers=["fc1"])
    assert any("TorchScript" in w for w in cap.warnings)
    assert cap.names == []
    assert torch.allclose(cap.output, torch.tensor([0.7514, 0.7729]), atol=1e-4)
    # A real torch.compile'd module (the eager backend: no compiler needed), already run
    # compiled once, as a user's would be.
    compiled = torch.compile(model, backend="eager")
    assert type(compiled).__name__ == "OptimizedModule"
    x = torch.tensor([0.05, 0.1])
    try:
        assert torch.allclose(compiled(x), torch.tensor([0.7514, 0.7729]), atol=1e-4)
        cap = actviz.capture(compiled, x, layers=["_orig_mod.fc1", "s2"], target=1)
        assert [w for w in cap.warnings if "torch.compile" in w] == [
            "torch.compile'd model: actviz runs its original eager module (same weights) so "
            "that layer hooks fire"
        ]
        # The layer hooks fired on the original module, with the article's exact numbers.
        assert cap.names == ["fc1", "s2"]
        assert torch.allclose(cap["fc1"].output, torch.tensor([0.3775, 0.3925]), atol=1e-4)
        assert torch.allclose(cap["s2"].output, torch.tensor([0.7514, 0.7729]), atol=1e-4)
        assert cap.target_value == pytest.approx(0.7729, abs=1e-4)
        assert_no_hooks(model)
        assert torch.allclose(compiled(x), cap.output)  # still runs compiled afterwards
    finally:
        torch._dynamo.reset()  # dynamo's caches are process-wide


def test_layer_that_never_runs_is_reported():
    class Skips(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.used = nn.Linear(2, 2)
            self.unused = nn.Linear(2, 2)

        def forward(self, x):
            return self.used(x)

    cap = actviz.capture(Skips(), torch.randn(1, 2))
    assert any("'unused' never ran" in w for w in cap.warnings)
    assert cap.names == ["used"]


class Toggle(nn.Module):
    """Writes into `lin`'s output after it ran, only when `write` is set."""

    def __init__(self) -> None:
        super().__init__()
        self.lin = nn.Linear(3, 3)
        self.write = False

    def forward(self, x):
        y = self.lin(x)
        if self.write:
            y.mul_(10)  # not a module: no hook sees this write
        return y.sum()


@pytest.mark.parametrize("gradients", [False, True])
def test_values_stay_exact_when_later_writes_appear(gradients):
    torch.manual_seed(0)
    model = Toggle()
    x = torch.randn(1, 3)
    expected = model.lin(x).detach()
    first = actviz.capture(model, x, gradients=gradients)
    assert torch.allclose(first["lin"].output, expected)
    model.write = True  # the uncopied reference of the first run would now go stale
    second = actviz.capture(model, x, gradients=gradients)
    assert torch.allclose(second["lin"].output, expected)
    assert second.target_value == pytest.approx(float(expected.sum() * 10), rel=1e-5)
    if gradients:
        assert torch.allclose(second["lin"].grad_output, torch.full((1, 3), 10.0))
