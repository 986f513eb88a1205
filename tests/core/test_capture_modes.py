"""Modes and buffers: TorchScript models with buffers, and the model's own train()/eval()."""

from __future__ import annotations

import copy
import warnings

import pytest
import torch
import torchvision
from torch import nn

import actviz
from tests.conftest import assert_no_hooks


def _scripted(module: nn.Module) -> torch.jit.ScriptModule:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", FutureWarning)  # torch.jit.script is deprecated
        return torch.jit.script(module)


def test_scripted_conv_bn_captures():
    torch.manual_seed(0)
    eager = nn.Sequential(nn.Conv2d(3, 4, 3), nn.BatchNorm2d(4)).eval()
    scripted = _scripted(eager)
    x = torch.randn(1, 3, 8, 8)
    cap = actviz.capture(scripted, x)
    assert torch.equal(cap.output, eager(x))
    assert cap.input_grads.shape == x.shape


@pytest.mark.parametrize("mode", ["eval", "train"])
def test_scripted_resnet_buffers_unchanged(mode):
    torch.manual_seed(0)
    eager = torchvision.models.resnet18(weights=None).eval()
    scripted = _scripted(copy.deepcopy(eager))
    before = {k: v.clone() for k, v in scripted.state_dict().items()}
    assert sum(1 for k in before if "running" in k) == 40
    x = torch.randn(2, 3, 32, 32)
    cap = actviz.capture(scripted, x, mode=mode)
    after = scripted.state_dict()
    assert all(torch.equal(v, after[k]) for k, v in before.items())
    assert not any(m.training for m in scripted.modules())
    # The capture ran in the mode asked for: the eager model in that mode gives the output.
    reference = copy.deepcopy(eager).train(mode == "train")
    assert torch.allclose(cap.output, reference(x), atol=1e-5)
    if mode == "train":
        assert not torch.allclose(cap.output, eager(x), atol=1e-3)


def test_train_and_eval_go_through_the_models_own_methods():
    calls: list[tuple[str, bool]] = []

    class Logged(nn.Linear):
        def train(self, mode: bool = True) -> Logged:
            calls.append((type(self).__name__, mode))
            return super().train(mode)

    model = nn.Sequential(Logged(3, 3), nn.ReLU()).eval()
    calls.clear()
    actviz.capture(model, torch.randn(2, 3), mode="train")
    assert calls == [("Logged", True), ("Logged", False)]
    assert not any(m.training for m in model.modules())


def test_mixed_modes_restored_per_module():
    model = nn.Sequential(nn.Linear(3, 3), nn.Dropout(0.5), nn.Sequential(nn.BatchNorm1d(3)))
    model.train()
    model[1].eval()
    model[2][0].eval()
    flags = [m.training for m in model.modules()]
    for mode in ("eval", "train"):
        actviz.capture(model, torch.randn(4, 3), mode=mode)
        assert [m.training for m in model.modules()] == flags
    assert_no_hooks(model)


def test_levit_attention_bias_cache_untouched():
    timm = pytest.importorskip("timm")
    torch.manual_seed(0)
    model = timm.create_model("levit_128s", pretrained=False)  # train mode, as created
    caches = [m for m in model.modules() if hasattr(m, "attention_bias_cache")]
    assert len(caches) == 11
    x = torch.randn(1, 3, 224, 224)
    actviz.capture(model, x, layers=[], gradients=False)  # an eval capture of a training model
    assert model.training
    # eval() filled each cache during the forward; train() on the way back cleared it, as it
    # would in the user's own loop (a stale cache would outlive the next optimiser step).
    assert [len(m.attention_bias_cache) for m in caches] == [0] * 11
    model.eval()
    with torch.no_grad():
        model(x)  # the model's eval forward fills the caches
    filled = [dict(m.attention_bias_cache) for m in caches]
    actviz.capture(model, x, layers=[], gradients=False)
    for m, before in zip(caches, filled, strict=True):  # the same tensors, untouched
        assert m.attention_bias_cache.keys() == before.keys()
        assert all(m.attention_bias_cache[k] is v for k, v in before.items())
    assert not model.training
    model.train()
    two = torch.randn(2, 3, 224, 224)  # train-mode BatchNorm needs a batch
    actviz.capture(model, two, layers=["stages.0.blocks.0.attn"], mode="train")
    assert [len(m.attention_bias_cache) for m in caches] == [0] * 11
    assert all(m.training for m in model.modules())
