"""ResNet-18 (random init): every leaf's values and gradients equal an in-place-free reference."""

from __future__ import annotations

import copy

import pytest
import torch
from torch import nn

import actviz
from actviz.core.capture import leaf_names


def reference(model: nn.Module, x: torch.Tensor, target_class: int):
    """Outputs and gradients computed the slow, obvious way: in-place disabled and a clone
    between every layer, so no tensor any hook saw is ever written to again."""
    ref = copy.deepcopy(model)
    for m in ref.modules():
        if hasattr(m, "inplace"):
            m.inplace = False
    outs: dict[str, list[torch.Tensor]] = {}
    taps: dict[str, list[torch.Tensor]] = {}
    handles = []
    names = dict(ref.named_modules())

    def pre(m, args, n):
        tap = args[0].clone()
        taps.setdefault(n, []).append(tap)
        return (tap, *args[1:])

    def post(m, args, out, n):
        outs.setdefault(n, []).append(out)
        return out.clone()

    for name in leaf_names(ref):
        mod = names[name]
        handles.append(mod.register_forward_pre_hook(lambda m, a, n=name: pre(m, a, n)))
        handles.append(mod.register_forward_hook(lambda m, a, o, n=name: post(m, a, o, n)))
    xin = x.clone().requires_grad_(True)
    out = ref(xin)
    for h in handles:
        h.remove()
    keys = [(n, i) for n, ts in outs.items() for i in range(len(ts))]
    tensors = [outs[n][i] for n, i in keys] + [taps[n][i] for n, i in keys] + [xin]
    g = torch.autograd.grad(out[:, target_class].sum(), tensors)
    k = len(keys)
    grad_out = dict(zip(keys, g[:k], strict=True))
    grad_in = dict(zip(keys, g[k : 2 * k], strict=True))
    return outs, grad_out, grad_in, g[-1]


def test_every_leaf_matches_reference(resnet, image):
    cap = actviz.capture(resnet, image, target=7)
    outs, grad_out, grads_in, input_grad = reference(resnet, image, 7)
    assert cap.target_description == "class 7"
    assert set(cap.names) == set(leaf_names(resnet)) == set(outs)
    for name in cap.names:
        calls = cap.calls(name)
        assert len(calls) == len(outs[name]), name
        for i, rec in enumerate(calls):
            assert rec.call_index == i
            assert torch.equal(rec.output, outs[name][i].detach()), name
            assert torch.allclose(rec.grad_output, grad_out[(name, i)], atol=1e-6, rtol=1e-4), name
            assert torch.allclose(rec.grad_inputs[0], grads_in[(name, i)], atol=1e-6, rtol=1e-4), (
                name
            )
    assert torch.allclose(cap.input_grads, input_grad, atol=1e-6, rtol=1e-4)


def test_bn1_keeps_negative_values(resnet, image):
    cap = actviz.capture(resnet, image, layers=["bn1", "relu"])
    assert float(cap["bn1"].output.min()) < 0  # not overwritten by the in-place ReLU after it
    assert float(cap["relu"].output.min()) == 0.0
    assert torch.equal(cap["relu"].output, cap["bn1"].output.clamp_min(0))
    assert torch.equal(cap["relu"].inputs[0], cap["bn1"].output)


def test_reused_relu_yields_one_record_per_call(resnet, image):
    cap = actviz.capture(resnet, image, layers=["layer1.0.relu", "layer1.0.bn2"])
    calls = cap.calls("layer1.0.relu")
    assert [r.call_index for r in calls] == [0, 1]
    assert cap["layer1.0.relu"] is calls[0]
    # the second call sees bn2's output plus the identity, the first bn1's
    assert not torch.equal(calls[0].output, calls[1].output)
    assert float(cap["layer1.0.bn2"].output.min()) < 0
    assert calls[1].grad_output.shape == (1, 64, 16, 16)


def test_blocks_record_the_block_output(resnet, image):
    blocks = ["layer1", "layer2.0", "layer3", "layer4.1", "avgpool", "fc"]
    cap = actviz.capture(resnet, image, layers=blocks)
    assert cap.names == blocks
    with torch.no_grad():
        x = resnet.maxpool(resnet.relu(resnet.bn1(resnet.conv1(image))))
        l1 = resnet.layer1(x)
    assert torch.allclose(cap["layer1"].output, l1, atol=1e-6)
    assert cap["layer3"].inputs[0].shape == (1, 128, 8, 8)
    assert torch.equal(cap["avgpool"].inputs[0], cap["layer4.1"].output)
    assert cap["fc"].output.shape == (1, 1000)
    assert torch.equal(cap["fc"].output, cap.output)


def test_gradients_false_is_forward_only(resnet, image):
    cap = actviz.capture(resnet, image, layers=["layer1", "fc"], gradients=False)
    assert cap["layer1"].grad_output is None and cap["layer1"].grad_inputs is None
    assert cap.input_grads is None
    full = actviz.capture(resnet, image, layers=["layer1", "fc"])
    assert torch.equal(cap["layer1"].output, full["layer1"].output)
    assert cap.target_value == pytest.approx(full.target_value)
